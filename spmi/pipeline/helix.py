"""The Helix project: work-item command lines as tokens rendered per host shell, the
work items planned per host queue, and the `.proj` file (docs/contracts.md §12.15). Pure.
"""
from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from spmi.base import platforms
from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline.common import Part, Partition

log = logging.getLogger("superpmi")


@dataclass(frozen=True)
class EnvRef:
    """A Helix environment variable inside a work-item command."""

    name: str


Piece = Union[str, EnvRef]
Token = Tuple[Piece, ...]
PYTHON = EnvRef("HELIX_PYTHONPATH")
PAYLOAD = EnvRef("HELIX_CORRELATION_PAYLOAD")
UPLOAD = EnvRef("HELIX_WORKITEM_UPLOAD_ROOT")


def literal(text: str) -> Token:
    return (text,)


def under(root: EnvRef, host_os: str, *parts: str) -> Token:
    """`<root>/<parts>` with the host's path separator."""
    if not parts:
        return (root,)
    sep = "\\" if host_os == platforms.WINDOWS else "/"
    return (root, sep + sep.join(parts))


_SAFE_SHELL_CHARS = re.compile(r"^[A-Za-z0-9_./=:,+@%^-]+$")


def render_token_unix(token: Token) -> str:
    """POSIX sh: variables as `${NAME}`, the token double-quoted when it needs it."""
    text = ""
    needs_quotes = False
    for piece in token:
        if isinstance(piece, EnvRef):
            text += "${" + piece.name + "}"
            needs_quotes = True
        else:
            if not _SAFE_SHELL_CHARS.match(piece or "x"):
                needs_quotes = True
            text += re.sub(r'([\\"$`])', r"\\\1", piece)
    if not token or text == "":
        return '""'
    return f'"{text}"' if needs_quotes else text


_CMD_SPECIAL = re.compile(r'[\s&|<>^(),;=!"]')


def render_token_windows(token: Token) -> str:
    """cmd.exe: variables as `%NAME%`, double quotes around tokens with specials."""
    text = ""
    needs_quotes = False
    for piece in token:
        if isinstance(piece, EnvRef):
            text += f"%{piece.name}%"
            needs_quotes = True
        else:
            if "%" in piece or '"' in piece:
                raise SuiteError(f"'{piece}' cannot be passed safely on a Windows Helix command line "
                                 "(contains % or \"); drop those characters")
            if _CMD_SPECIAL.search(piece) or piece == "":
                needs_quotes = True
            text += piece
    return f'"{text}"' if needs_quotes else text


def render_command(tokens: Sequence[Token], host_os: str) -> str:
    """The work-item command line as the Helix machine's shell reads it."""
    render = render_token_windows if host_os == platforms.WINDOWS else render_token_unix
    return " ".join(render(t) for t in tokens)


def expand_command(tokens: Sequence[Token], environ: Mapping[str, str]) -> List[str]:
    """The argument vector the shell would build (used to run work items locally)."""
    argv = []
    for token in tokens:
        text = ""
        for piece in token:
            if isinstance(piece, EnvRef):
                if piece.name not in environ:
                    raise SuiteError(f"work-item command needs ${piece.name}, which is not set")
                text += environ[piece.name]
            else:
                text += piece
        argv.append(text)
    return argv


@dataclass(frozen=True)
class CollectionArgs:
    """Collections a work item replays instead of downloading them (payload-relative)."""

    mch_files: Tuple[Token, ...] = ()


@dataclass(frozen=True)
class CollectionPlan:
    """`-mch_files` for every work item, plus per-partition ones (from a private store)."""

    common: Tuple[Token, ...] = ()
    per_partition: Tuple[Tuple[str, Tuple[Token, ...]], ...] = ()
    #: partitions spread over several work items: each work item's `-mch_files` (instead of the above)
    split: Tuple[Tuple[str, Tuple[Tuple[Token, ...], ...]], ...] = ()

    def for_partition(self, name: str) -> CollectionArgs:
        own = dict(self.per_partition).get(name, ())
        return CollectionArgs(self.common + own)

    def work_items_for(self, name: str) -> List[CollectionArgs]:
        """One `CollectionArgs` per work item of the partition (one unless it is split)."""
        parts = dict(self.split).get(name, ())
        if len(parts) > 1:
            return [CollectionArgs(tokens) for tokens in parts]
        return [self.for_partition(name)]


@dataclass(frozen=True)
class WorkItem:
    name: str
    partition: Partition
    command: Tuple[Token, ...]
    results: Tuple[str, ...]
    timeout: str = pipeline.WORK_ITEM_TIMEOUT
    part: Part = Part()


def work_item_name(partition: Partition, part: Part) -> str:
    """`linux-x64`, or `linux-x64-part2of3` for one of several work items of a target."""
    return f"{partition.name}-part{part.index}of{part.count}" if part.split else partition.name


def split_options(text: Optional[str]) -> List[str]:
    """`a=1;b=2` -> [`a=1`, `b=2`] (empty parts dropped)."""
    return [part.strip() for part in (text or "").split(";") if part.strip()]


def work_item_command(partition: Partition, host_os: str, type_name: str,
                      base_jit_options: Sequence[str] = (), diff_jit_options: Sequence[str] = (),
                      collections: CollectionArgs = CollectionArgs(), part: Part = Part(),
                      signal_args: Sequence[str] = ()) -> Tuple[Token, ...]:
    """docs/contracts.md §12.15 work-item command for one partition (`-part K/N` for one of
    several work items of a target; `signal_args`: `--noise_check` / `-significance M=P` passed on)."""
    tokens: List[Token] = [
        (PYTHON,), under(PAYLOAD, host_os, pipeline.DRIVER_SCRIPT),
        literal("-base_jit_directory"), under(PAYLOAD, host_os, pipeline.BASE_DIR),
        literal("-diff_jit_directory"), under(PAYLOAD, host_os, pipeline.DIFF_DIR),
        literal("-log_directory"), (UPLOAD,),
        literal("-arch"), literal(partition.target_arch),
        literal("-platform"), literal(partition.target_os),
        literal("-type"), literal(type_name),
        literal("-work_item_timeout"), literal(pipeline.WORK_ITEM_TIMEOUT),
    ]
    if base_jit_options:
        tokens += [literal("-base_jit_options"), literal(";".join(base_jit_options))]
    if diff_jit_options:
        tokens += [literal("-diff_jit_options"), literal(";".join(diff_jit_options))]
    if part.split:
        tokens += [literal("-part"), literal(f"{part.index}/{part.count}")]
    tokens += [literal(arg) for arg in signal_args]
    if collections.mch_files:
        tokens += [literal("-mch_files"), *collections.mch_files]
    return tuple(tokens)


def plan_work_items(host_os: str, host_arch: str, type_name: str,
                    base_jit_options: Sequence[str] = (), diff_jit_options: Sequence[str] = (),
                    collections: CollectionPlan = CollectionPlan(), signal_args: Sequence[str] = ()) -> List[WorkItem]:
    """One work item per partition of the host queue, or several for a partition the
    collection plan splits."""
    types = pipeline.expand_types(type_name)
    items = []
    for partition in pipeline.partitions_for_host(host_arch):
        per_item = collections.work_items_for(partition.name)
        for index, item_collections in enumerate(per_item, start=1):
            part = Part(index, len(per_item))
            command = work_item_command(partition, host_os, type_name, base_jit_options, diff_jit_options,
                                        item_collections, part, signal_args)
            items.append(WorkItem(name=work_item_name(partition, part), partition=partition, command=command,
                                  results=tuple(pipeline.declared_results(partition, types, part)), part=part))
    return items


def msbuild_escape(text: str) -> str:
    """Keep MSBuild from expanding, unescaping or splitting a metadata value.

    Only what MSBuild would read specially is escaped: `%XX` and `%(`, `$(`, `@(`
    and `;`, so shell variables such as `${HELIX_PYTHONPATH}` stay readable.
    """
    text = re.sub(r"%(?=[0-9A-Fa-f]{2}|\()", "%25", text)
    text = text.replace("$(", "%24(").replace("@(", "%40(")
    return text.replace(";", "%3B")


def msbuild_unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def pre_commands(host_os: str) -> str:
    """Helix machines run this before each work item: the scripts' Python requirements."""
    tokens = [(PYTHON,), literal("-m"), literal("pip"), literal("install"), literal("--quiet"),
              literal("--disable-pip-version-check"), literal("-r"),
              under(PAYLOAD, host_os, pipeline.REQUIREMENTS_FILE)]
    return render_command(tokens, host_os)


def render_proj(items: Sequence[WorkItem], host_os: str, payload_directory: str, type_name: str,
                install_requirements: bool = False) -> str:
    """The Helix project (MSBuild XML) the pipeline sends."""
    project = ET.Element("Project", {"Sdk": "Microsoft.DotNet.Helix.Sdk", "DefaultTargets": "Test"})
    project.append(ET.Comment(f" superpmi {type_name} work items; written by {pipeline.SETUP_SCRIPT} "))
    props = ET.SubElement(project, "PropertyGroup")

    def prop(name: str, value: str, only_if_unset: bool = False) -> None:
        element = ET.SubElement(props, name)
        element.text = value
        if only_if_unset:
            element.set("Condition", f"'$({name})' == ''")

    prop("CorrelationPayloadDirectory", payload_directory, only_if_unset=True)
    prop("HelixType", f"test/superpmi/{type_name}")
    prop("HelixBuild", "$(BUILD_BUILDNUMBER)", only_if_unset=True)
    prop("HelixBuild", "local", only_if_unset=True)
    prop("HelixResultsDestinationDir", "$(BUILD_SOURCESDIRECTORY)/artifacts/helixresults", only_if_unset=True)
    prop("WorkItemDirectory", "$(MSBuildThisFileDirectory)workitem", only_if_unset=True)
    prop("IncludeDotNetCli", "false")
    prop("EnableAzurePipelinesReporter", "false")
    prop("EnableXUnitReporter", "false")
    prop("FailOnWorkItemFailure", "false")
    if install_requirements:
        prop("HelixPreCommands", "$(HelixPreCommands);" + msbuild_escape(pre_commands(host_os)))
    payload_group = ET.SubElement(project, "ItemGroup")
    ET.SubElement(payload_group, "HelixCorrelationPayload", {"Include": "$(CorrelationPayloadDirectory)"})
    group = ET.SubElement(project, "ItemGroup")
    for item in items:
        element = ET.SubElement(group, "HelixWorkItem", {"Include": item.name})
        ET.SubElement(element, "PayloadDirectory").text = "$(WorkItemDirectory)"
        ET.SubElement(element, "Command").text = msbuild_escape(render_command(item.command, host_os))
        ET.SubElement(element, "Timeout").text = item.timeout
        ET.SubElement(element, "DownloadFilesFromResults").text = ";".join(item.results)
    ET.indent(project, space="  ")  # type: ignore[attr-defined]
    return ET.tostring(project, encoding="unicode") + "\n"
