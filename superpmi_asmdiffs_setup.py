#!/usr/bin/env python3
"""Stage the superpmi-asmdiffs Helix payload and work items (docs/contracts.md §12.15).

    python superpmi_asmdiffs_setup.py -product_directory P -host_arch x64|x86 -payload_directory OUT
        [-base_jit_directory B] [-release_product_directory PR -release_base_jit_directory BR]
        [-jit_analyze_directory J] [-git_directory G] [-pin_directory PIN] [-type asmdiffs|tpdiff|memdiff|all]
        [-mch_files M ... | -private_store S] [--run_locally]

Builds the correlation payload in OUT (the suite's scripts, superpmi/mcs with what they
load beside them, the host's cross JITs in diff/<flavour>/, the baseline JITs in
base/<flavour>/ (checked for asmdiffs, release for tpdiff/memdiff), the PIN package in
pin/ for tpdiff, optional jit-analyze/ and git/), checks that every work item finds what
it needs, writes the Helix project (one work item per target partition of the host) and
prints the AzDO variables the pipeline passes on. `--run_locally` then runs every work
item the way Helix would (own clean directory, only the payload and the HELIX_* variables)
and the summarize script, so a developer sees locally what CI shows.

The payload is self-contained: work items read nothing outside it. In particular the
PIN package is staged here on the build agent, from -pin_directory or else downloaded
once from the storage account (`pintools/1.0/<host_os>.zip|.tar.gz`, docs/contracts.md §10.1), and
work items pass `-pin_path <payload>/pin`, so Helix machines never fetch PIN themselves
(one download per pipeline instead of one per work item, and every target measured
with the same PIN).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from spmi.base import cioutput, fsutil, logs, platforms, runner
from spmi.base.config import ArgumentParser
from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline.common import DiffType, Partition

log = logging.getLogger("superpmi")

SCRIPT_DIR = Path(__file__).resolve().parent

# ---------------------------------------------------------------- command tokens (pure)


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


# ---------------------------------------------------------------- planning (pure)


@dataclass(frozen=True)
class CollectionArgs:
    """Collections a work item replays instead of downloading them (payload-relative)."""

    mch_files: Tuple[Token, ...] = ()


@dataclass(frozen=True)
class CollectionPlan:
    """`-mch_files` for every work item, plus per-partition ones (from a private store)."""

    common: Tuple[Token, ...] = ()
    per_partition: Tuple[Tuple[str, Tuple[Token, ...]], ...] = ()

    def for_partition(self, name: str) -> CollectionArgs:
        own = dict(self.per_partition).get(name, ())
        return CollectionArgs(self.common + own)


@dataclass(frozen=True)
class WorkItem:
    name: str
    partition: Partition
    command: Tuple[Token, ...]
    results: Tuple[str, ...]
    timeout: str = pipeline.WORK_ITEM_TIMEOUT


def split_options(text: Optional[str]) -> List[str]:
    """`a=1;b=2` -> [`a=1`, `b=2`] (empty parts dropped)."""
    return [part.strip() for part in (text or "").split(";") if part.strip()]


def work_item_command(partition: Partition, host_os: str, type_name: str,
                      base_jit_options: Sequence[str] = (), diff_jit_options: Sequence[str] = (),
                      collections: CollectionArgs = CollectionArgs()) -> Tuple[Token, ...]:
    """docs/contracts.md §12.15 work-item command for one partition."""
    tokens: List[Token] = [
        (PYTHON,), under(PAYLOAD, host_os, pipeline.DRIVER_SCRIPT),
        literal("-base_jit_directory"), under(PAYLOAD, host_os, pipeline.BASE_DIR),
        literal("-diff_jit_directory"), under(PAYLOAD, host_os, pipeline.DIFF_DIR),
        literal("-log_directory"), (UPLOAD,),
        literal("-arch"), literal(partition.target_arch),
        literal("-platform"), literal(partition.target_os),
        literal("-type"), literal(type_name),
    ]
    if base_jit_options:
        tokens += [literal("-base_jit_options"), literal(";".join(base_jit_options))]
    if diff_jit_options:
        tokens += [literal("-diff_jit_options"), literal(";".join(diff_jit_options))]
    if collections.mch_files:
        tokens += [literal("-mch_files"), *collections.mch_files]
    return tuple(tokens)


def plan_work_items(host_os: str, host_arch: str, type_name: str,
                    base_jit_options: Sequence[str] = (), diff_jit_options: Sequence[str] = (),
                    collections: CollectionPlan = CollectionPlan()) -> List[WorkItem]:
    """One work item per partition of the host queue."""
    types = pipeline.expand_types(type_name)
    items = []
    for partition in pipeline.partitions_for_host(host_arch):
        command = work_item_command(partition, host_os, type_name, base_jit_options, diff_jit_options,
                                    collections.for_partition(partition.name))
        items.append(WorkItem(name=partition.name, partition=partition, command=command,
                              results=tuple(pipeline.declared_results(partition, types))))
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


# ---------------------------------------------------------------- payload contents


@dataclass(frozen=True)
class Need:
    """One file a work item needs, relative to the payload root."""

    path: str
    what: str


def jit_pattern_matches(file_name: str, host_os: str) -> bool:
    """`[lib]clrjit_*.<ext>`: the cross JITs a product directory holds."""
    prefix = platforms.shared_lib_prefix(host_os) + "clrjit_"
    return file_name.startswith(prefix) and file_name.endswith(platforms.shared_lib_suffix(host_os))


def work_item_needs(partition: Partition, host_os: str, types: Sequence[DiffType]) -> List[Need]:
    """Everything a work item reads from the payload (pure); the tools' own libraries are
    whatever the product directory holds beside them and are copied as they are."""
    needs = [Need(pipeline.DRIVER_SCRIPT, "work-item driver"), Need(pipeline.SUPERPMI_SCRIPT, "superpmi.py"),
             Need(pipeline.PIPELINE_MODULE, "pipeline module"),
             Need(platforms.exe_name("superpmi", host_os), "superpmi tool"),
             Need(platforms.exe_name("mcs", host_os), "mcs tool")]
    jit = partition.jit_name(host_os)
    for flavour in pipeline.flavours_for(types):
        needs.append(Need(f"{pipeline.BASE_DIR}/{flavour}/{jit}", f"{flavour} baseline JIT"))
        needs.append(Need(f"{pipeline.DIFF_DIR}/{flavour}/{jit}", f"{flavour} diff JIT"))
    if any(t.uses_pin for t in types):
        pin, pintool = pipeline.pin_files(host_os, partition.host_arch)
        needs += [Need(pin, "PIN"), Need(pintool, f"{partition.host_arch} pintool")]
    return needs


def missing_needs(payload: Path, items: Sequence[WorkItem], host_os: str, types: Sequence[DiffType],
                  required_modules: Sequence[str] = ()) -> Dict[str, List[Need]]:
    """Per work item, what it needs that the payload lacks."""
    missing: Dict[str, List[Need]] = {}
    for item in items:
        needs = work_item_needs(item.partition, host_os, types)
        needs += [Need(name, "suite script") for name in required_modules]
        lacking = [need for need in needs if not (payload / need.path).is_file()]
        if lacking:
            missing[item.name] = lacking
    return missing


def describe_missing(missing: Mapping[str, List[Need]]) -> str:
    by_path: Dict[str, Tuple[Need, List[str]]] = {}
    for item_name, needs in missing.items():
        for need in needs:
            by_path.setdefault(need.path, (need, []))[1].append(item_name)
    parts = [f"{need.path} ({need.what}; needed by {', '.join(names)})" for need, names in by_path.values()]
    return "the payload lacks " + "; ".join(parts)


# ---------------------------------------------------------------- staging (I/O)


@dataclass
class StageOptions:
    source_directory: Path
    product_directory: Path
    payload: Path
    host_os: str
    host_arch: str
    types: List[DiffType]
    release_product_directory: Optional[Path] = None
    base_jit_directory: Optional[Path] = None
    release_base_jit_directory: Optional[Path] = None
    base_git_hash: Optional[str] = None
    runtime_repo: Optional[Path] = None
    storage_url: Optional[str] = None
    jit_analyze_directory: Optional[Path] = None
    git_directory: Optional[Path] = None
    pin_directory: Optional[Path] = None
    mch_files: List[str] = field(default_factory=list)
    private_stores: List[Path] = field(default_factory=list)
    jit_ee_version: Optional[str] = None


def copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)


def suite_scripts(source_directory: Path) -> List[Path]:
    """The entry scripts and every module of the `spmi` package, relative to `source_directory`."""
    scripts = [p for p in source_directory.glob("*.py") if p.is_file()]
    package = [p for p in (source_directory / pipeline.PACKAGE_DIR).rglob("*.py") if p.is_file()]
    return sorted(p.relative_to(source_directory) for p in scripts + package)


def tool_files(product_directory: Path, host_os: str) -> List[Path]:
    """superpmi, mcs and the disassembler library they load from Core_Root."""
    names = [platforms.exe_name("superpmi", host_os), platforms.exe_name("mcs", host_os)]
    coredistools = platforms.shared_lib_prefix(host_os) + "coredistools" + platforms.shared_lib_suffix(host_os)
    found = [product_directory / n for n in names if (product_directory / n).is_file()]
    if (product_directory / coredistools).is_file():
        found.append(product_directory / coredistools)
    return found


def tool_support_directories(product_directory: Path, host_os: str) -> List[Path]:
    """Directories superpmi/mcs load code from beside themselves (e.g. a stand-in's `lib/`);
    the payload needs them, since a work item sees nothing outside it."""
    return [d for d in (product_directory / "lib",) if d.is_dir()]


def copy_jits(source: Path, target: Path, host_os: str, what: str) -> List[str]:
    if not source.is_dir():
        raise SuiteError(f"{what} '{source}' is not a directory")
    names = sorted(p.name for p in source.iterdir() if p.is_file() and jit_pattern_matches(p.name, host_os))
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        copy_file(source / name, target / name)
    log.info("Copied %d JIT(s) from %s to %s", len(names), source, target)
    return names


def prepare_payload_directory(payload: Path, clean: bool) -> None:
    if payload.exists() and not payload.is_dir():
        raise SuiteError(f"-payload_directory '{payload}' is a file; pass a directory")
    if payload.is_dir() and any(payload.iterdir()):
        if not clean:
            raise SuiteError(f"-payload_directory '{payload}' is not empty; pass a new or empty directory, "
                             "or --clean to empty it first")
        if not (payload / pipeline.DRIVER_SCRIPT).is_file():
            raise SuiteError(f"-payload_directory '{payload}' is not empty and holds no earlier payload "
                             f"({pipeline.DRIVER_SCRIPT} missing); refusing to empty it with --clean")
        log.info("Emptying %s", payload)
        shutil.rmtree(payload)
    payload.mkdir(parents=True, exist_ok=True)


def stage_collections(options: StageOptions) -> CollectionPlan:
    """Copy local collections into the payload so work items need nothing outside it.

    `-mch_files` go to every work item. A private store is split by target: each
    partition replays `<store>/<guid>/<os>/<arch>/` as its `-mch_files` (no download
    then); a partition the store has nothing for downloads its collections as usual.
    """
    root = options.payload / pipeline.LOCAL_COLLECTIONS_DIR
    common: List[Token] = []
    for index, spec in enumerate(options.mch_files):
        if platforms.is_url(spec):
            common.append(literal(spec))
            continue
        source = Path(spec).resolve()
        if not source.exists():
            raise SuiteError(f"-mch_files '{spec}' does not exist")
        relative = ["mch_files", str(index), source.name]
        target = root.joinpath(*relative)
        if source.is_dir():
            copy_tree(source, target)
        else:
            copy_file(source, target)
            companion = source.with_name(source.name + ".mct")
            if companion.is_file():
                copy_file(companion, target.with_name(companion.name))
        common.append(under(PAYLOAD, options.host_os, pipeline.LOCAL_COLLECTIONS_DIR, *relative))
    per_partition: List[Tuple[str, Tuple[Token, ...]]] = []
    if options.private_stores:
        guid = options.jit_ee_version or jit_ee_version_of(options.product_directory, options.host_os,
                                                            options.private_stores)
        for partition in pipeline.partitions_for_host(options.host_arch):
            tokens: List[Token] = []
            for index, store in enumerate(options.private_stores):
                source = store / guid / partition.target_os / partition.target_arch
                if not source.is_dir():
                    continue
                relative = [f"private_store_{index}", guid, partition.target_os, partition.target_arch]
                copy_tree(source, root.joinpath(*relative))
                tokens.append(under(PAYLOAD, options.host_os, pipeline.LOCAL_COLLECTIONS_DIR, *relative))
            if tokens:
                per_partition.append((partition.name, tuple(tokens)))
            else:
                log.warning("Warning: no %s collections for %s/%s in the private store(s); work item %s "
                            "downloads them", guid, partition.target_os, partition.target_arch, partition.name)
    return CollectionPlan(tuple(common), tuple(per_partition))


def jit_ee_version_of(product_directory: Path, host_os: str, stores: Sequence[Path]) -> str:
    """`mcs -printJITEEVersion`, else the one GUID directory the stores hold."""
    mcs = product_directory / platforms.exe_name("mcs", host_os)
    if mcs.is_file():
        result = runner.run([mcs, "-printJITEEVersion"])
        guid = result.stdout.strip().lower()
        if result.code == 0 and guid:
            return guid
    guids = sorted({d.name for store in stores if store.is_dir() for d in store.iterdir() if d.is_dir()})
    if len(guids) == 1:
        return guids[0]
    raise SuiteError("cannot tell which JIT-EE version's collections to take from the private store "
                     f"(mcs gave none; the store holds {', '.join(guids) or 'nothing'}); pass -jit_ee_version")


def stage_payload(options: StageOptions) -> Dict[str, Optional[str]]:
    """Fill the payload directory; returns the baseline hash per flavour (None if unknown)."""
    payload = options.payload
    for script in suite_scripts(options.source_directory):
        copy_file(options.source_directory / script, payload / script)
    requirements = options.source_directory / pipeline.REQUIREMENTS_FILE
    if requirements.is_file():
        copy_file(requirements, payload / requirements.name)
    tools = tool_files(options.product_directory, options.host_os)
    for tool in tools:
        copy_file(tool, payload / tool.name)
    for support in tool_support_directories(options.product_directory, options.host_os):
        copy_tree(support, payload / support.name)
    flavours = pipeline.flavours_for(options.types)
    diff_sources = {"checked": options.product_directory, "release": options.release_product_directory}
    for flavour in flavours:
        source = diff_sources[flavour]
        if source is None:
            raise SuiteError(f"{flavour} diff JITs are needed for {'/'.join(t.name for t in options.types)}; "
                             "pass -release_product_directory")
        copy_jits(source, payload / pipeline.DIFF_DIR / flavour, options.host_os,
                  "-product_directory" if flavour == "checked" else "-release_product_directory")
    hashes: Dict[str, Optional[str]] = {}
    base_sources = {"checked": options.base_jit_directory, "release": options.release_base_jit_directory}
    for flavour in flavours:
        target = payload / pipeline.BASE_DIR / flavour
        source = base_sources[flavour]
        if source is not None:
            copy_jits(source, target, options.host_os,
                      "-base_jit_directory" if flavour == "checked" else "-release_base_jit_directory")
            hashes[flavour] = options.base_git_hash
        else:
            hashes[flavour] = download_baseline(options, flavour, target)
    if options.jit_analyze_directory is not None:
        copy_tree(options.jit_analyze_directory, payload / pipeline.JIT_ANALYZE_DIR)
    if options.git_directory is not None:
        copy_tree(options.git_directory, payload / pipeline.GIT_DIR)
    if any(t.uses_pin for t in options.types):
        stage_pin(options, payload / pipeline.PIN_DIR)
    fsutil.atomic_write_text(payload / pipeline.BASELINE_INFO_FILE,
                              json.dumps({"version": 1, "hashes": hashes}, indent=2) + "\n")
    return hashes


def stage_pin(options: StageOptions, target: Path) -> None:
    """The PIN package into the payload: `-pin_directory`, else downloaded from storage here."""
    if options.pin_directory is not None:
        copy_tree(options.pin_directory, target)
        log.info("Copied the PIN package from %s to %s", options.pin_directory, target)
        return
    import tempfile

    from spmi.tools import pintools
    with tempfile.TemporaryDirectory(prefix="spmi-pin-") as scratch:
        downloaded = Path(scratch) / "pin"
        pintools.download_package(downloaded, options.host_os, options.storage_url, show_progress=False)
        copy_tree(downloaded, target)
    log.info("Downloaded the PIN package (%s) to %s", pintools.archive_blob_name(options.host_os), target)


def download_baseline(options: StageOptions, flavour: str, target: Path) -> str:
    """Fetch main, then `jitrollingbuild.py download` the first candidate that has the JITs."""
    from spmi.sources import baseline, git_utils
    repo = options.runtime_repo
    if options.base_git_hash is None:
        if repo is None:
            raise SuiteError("no -base_jit_directory and no git work tree to find a baseline from; "
                             "pass -base_jit_directory, -base_git_hash or -runtime_repo")
        try:
            git_utils.fetch_main(repo)
        except SuiteError as exc:
            log.warning("Warning: %s; using the history already fetched", exc)
    start = baseline.baseline_candidates(repo, None, options.base_git_hash)
    required = pipeline.required_jit_names(options.host_os, options.host_arch)
    target.mkdir(parents=True, exist_ok=True)
    for index, candidate in enumerate(start.candidates):
        argv = [sys.executable, str(options.source_directory / "jitrollingbuild.py"), "download",
                "-git_hash", candidate, "-arch", options.host_arch, "-host_os", options.host_os,
                "-build_type", flavour.capitalize(), "-target_dir", str(target)]
        if options.storage_url:
            argv += ["-storage_url", options.storage_url]
        result = runner.run(argv, cwd=repo)
        if result.code != 0:
            raise SuiteError(f"'{runner.format_command(argv)}' failed with exit code {result.code}: "
                             f"{_last_line(result.stdout + result.stderr)}")
        if all((target / name).is_file() for name in required):
            if index > 0:
                log.warning("Warning: the baseline found is not built with the first git hash with JIT code "
                            "changes; there may be extraneous diffs")
            log.info("Baseline %s JITs from %s", flavour, candidate)
            return candidate
    raise SuiteError(f"No baseline JIT found: no {flavour} rolling build with {', '.join(required)} for "
                     f"{options.host_os}/{options.host_arch} among {', '.join(start.candidates)}; "
                     "pass -base_jit_directory")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def validate_payload(payload: Path, items: Sequence[WorkItem], host_os: str, types: Sequence[DiffType],
                     source_directory: Path) -> None:
    modules = [p.as_posix() for p in suite_scripts(source_directory)]
    missing = missing_needs(payload, items, host_os, types, modules)
    if missing:
        raise SuiteError(describe_missing(missing))


# ---------------------------------------------------------------- AzDO variables


def helix_source_prefix(environ: Mapping[str, str]) -> str:
    reason = environ.get("BUILD_REASON", "")
    return "pr" if reason == "PullRequest" else "ci"


def default_creator(environ: Mapping[str, str]) -> str:
    return environ.get("BUILD_REQUESTEDFOR") or environ.get("USER") or environ.get("USERNAME") or "superpmi"


def pipeline_variables(payload: Path, host_arch: str, creator: str, source_prefix: str) -> List[Tuple[str, str]]:
    return [("CorrelationPayloadDirectory", str(payload)), ("Architecture", host_arch),
            ("Creator", creator), ("HelixSourcePrefix", source_prefix)]


def print_variables(variables: Sequence[Tuple[str, str]]) -> None:
    for name, value in variables:
        print(f"{name} -> {value}")
        print(cioutput.azdo_set_variable(name, value), flush=True)


# ---------------------------------------------------------------- local run


@dataclass
class LocalResult:
    item: WorkItem
    exit_code: int
    directory: Path
    missing_results: List[str]


# Variables a Helix machine would not have; a local work item must not see them.
_DROPPED_ENV_PREFIXES = ("HELIX_", "GITHUB_", "SYSTEM_", "BUILD_", "AGENT_")
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "SUPERPMI_CACHE_DIRECTORY",
                "SUPERPMI_PRIVATE_STORE", "TF_BUILD", "VIRTUAL_ENV")


def work_item_environment(base_env: Mapping[str, str], helix: Mapping[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in base_env.items()
           if k not in _DROPPED_ENV and not k.startswith(_DROPPED_ENV_PREFIXES)}
    env.update(helix)
    return env


def helix_variables(item: WorkItem, directory: Path, payload: Path, python: str, correlation_id: str) -> Dict[str, str]:
    return {
        "HELIX_CORRELATION_PAYLOAD": str(payload),
        "HELIX_WORKITEM_UPLOAD_ROOT": str(directory / "upload"),
        "HELIX_PYTHONPATH": python,
        "HELIX_WORKITEM_PAYLOAD": str(directory / "work"),
        "HELIX_WORKITEM_ROOT": str(directory / "work"),
        "HELIX_CORRELATION_ID": correlation_id,
        "HELIX_WORKITEM_ID": str(uuid.uuid4()),
        "HELIX_WORKITEM_FRIENDLYNAME": item.name,
        "HELIX_DUMP_FOLDER": str(directory / "dumps"),
        "HELIX_CURRENT_LOG": str(directory / "console.log"),
    }


def run_work_item_locally(item: WorkItem, payload: Path, root: Path, python: str, correlation_id: str,
                          base_env: Mapping[str, str]) -> LocalResult:
    """Run one work item as Helix would: a fresh directory with its own payload copy."""
    directory = root / item.name
    if directory.exists():
        shutil.rmtree(directory)
    item_payload = directory / "payload"
    shutil.copytree(payload, item_payload, symlinks=True)
    for sub in ("upload", "work", "dumps"):
        (directory / sub).mkdir(parents=True)
    helix = helix_variables(item, directory, item_payload, python, correlation_id)
    env = work_item_environment(base_env, helix)
    argv = expand_command(item.command, env)
    console = directory / "console.log"
    with console.open("wb") as out:
        out.write(("+ " + runner.format_command(argv) + "\n").encode("utf-8"))
        out.flush()
        try:
            proc = subprocess.run(argv, cwd=str(directory / "work"), env=env, stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=_timeout_seconds(item.timeout))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            out.write(f"\nwork item timed out after {item.timeout}\n".encode("utf-8"))
            code = 1
    upload = directory / "upload"
    missing = [name for name in item.results if not (upload / name).is_file()]
    return LocalResult(item, code, directory, missing)


def _timeout_seconds(text: str) -> int:
    hours, minutes, seconds = (int(part) for part in text.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def collect_results(results: Sequence[LocalResult], destination: Path) -> None:
    """What the agent's Helix step downloads: the declared files, per work item."""
    for result in results:
        target = destination / result.item.name
        target.mkdir(parents=True, exist_ok=True)
        for name in result.item.results:
            source = result.directory / "upload" / name
            if source.is_file():
                copy_file(source, target / name)


def run_locally(items: Sequence[WorkItem], payload: Path, local_dir: Path, host_os: str, host_arch: str,
                type_name: str, source_directory: Path, parallelism: int) -> int:
    """All work items, then the summarize script; exit 1 when anything failed."""
    work_root = local_dir / "workitems"
    results_dir = local_dir / "helixresults"
    for stale in (work_root, results_dir):
        if stale.exists():
            shutil.rmtree(stale)
    work_root.mkdir(parents=True)
    correlation_id = str(uuid.uuid4())
    log.info("Running %d work item(s) locally in %s", len(items), work_root)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallelism)) as pool:
        futures = [pool.submit(run_work_item_locally, item, payload, work_root, sys.executable, correlation_id,
                               dict(os.environ)) for item in items]
        results = [f.result() for f in futures]
    status = 0
    for result in results:
        state = "passed" if result.exit_code == 0 else f"failed (exit code {result.exit_code})"
        log.info("Work item %s %s; console log %s", result.item.name, state, result.directory / "console.log")
        if result.exit_code != 0:
            status = 1
        if result.missing_results:
            status = 1
            log.error("Error: work item %s did not leave %s (Helix would fail the download)",
                      result.item.name, ", ".join(result.missing_results))
    collect_results(results, results_dir)
    argv = [sys.executable, str(source_directory / pipeline.SUMMARIZE_SCRIPT), "-diff_summary_dir",
            str(results_dir), "-arch", host_arch, "-platform", host_os, "-type", type_name]
    sys.stdout.flush()
    code = subprocess.run(argv, stdin=subprocess.DEVNULL).returncode
    if code != 0:
        status = 1
        log.error("Error: summarize -type %s exited with %d", type_name, code)
    for diff_type in pipeline.expand_types(type_name):
        summary = results_dir / pipeline.overall_summary_name(diff_type.name, host_os, host_arch)
        log.info("Overall %s summary: %s", diff_type.name, summary)
    return status


# ---------------------------------------------------------------- command line


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=pipeline.SETUP_SCRIPT, description=__doc__.splitlines()[0])
    parser.add_argument("-source_directory", default=str(SCRIPT_DIR),
                        help="directory holding the suite's scripts (default: this script's)")
    parser.add_argument("-product_directory", required=True,
                        help="built product: superpmi, mcs and the checked cross JITs")
    parser.add_argument("-release_product_directory", help="release cross JITs (tpdiff, memdiff)")
    parser.add_argument("-host_arch", choices=pipeline.HOST_ARCHES, help="Helix host queue arch (default: this machine's)")
    parser.add_argument("-host_os", help="OS of the Helix machines (default: this machine's)")
    parser.add_argument("-payload_directory", required=True, help="correlation payload to create")
    parser.add_argument("-base_jit_directory", help="checked baseline JITs (default: rolling build download)")
    parser.add_argument("-release_base_jit_directory", help="release baseline JITs (default: rolling build download)")
    parser.add_argument("-base_git_hash", help="commit the baseline JITs were built from (recorded; downloaded "
                                               "when no baseline directory is given)")
    parser.add_argument("-runtime_repo", help="dotnet/runtime clone for baseline discovery (default: the git work tree here)")
    parser.add_argument("-storage_url", help="storage account for rolling builds (default: the public account)")
    parser.add_argument("-jit_analyze_directory", help="self-contained jit-analyze to ship as jit-analyze/")
    parser.add_argument("-git_directory", help="portable git to ship as git/ (Windows)")
    parser.add_argument("-pin_directory",
                        help="PIN package (pin and clrjit_inscount_<arch>/) to ship as pin/ for tpdiff "
                             "(default: download pintools/1.0/<host_os> from the storage account)")
    parser.add_argument("-type", default="asmdiffs", choices=pipeline.TYPE_CHOICES, help="what work items run")
    parser.add_argument("-base_jit_options", help="';'-separated key=value options for the baseline JIT")
    parser.add_argument("-diff_jit_options", help="';'-separated key=value options for the diff JIT")
    parser.add_argument("-mch_files", nargs="+",
                        help="collections every work item replays instead of downloading (copied into the payload)")
    parser.add_argument("-private_store", action="append",
                        help="collection store laid out <guid>/<os>/<arch>/; each work item replays its target's "
                             "collections from it instead of downloading (copied into the payload)")
    parser.add_argument("-jit_ee_version", help="JIT-EE GUID selecting collections in -private_store "
                                                "(default: mcs -printJITEEVersion)")
    parser.add_argument("-helix_directory", help="where the .proj goes (default: <payload>_helix)")
    parser.add_argument("-creator", help="Helix Creator (default: $BUILD_REQUESTEDFOR or the user)")
    parser.add_argument("-source_prefix", help="Helix source prefix (default: pr for PR builds, else ci)")
    parser.add_argument("--clean", action="store_true", help="empty an existing payload directory first")
    parser.add_argument("--run_locally", action="store_true",
                        help="then run every work item here as Helix would, and summarize")
    parser.add_argument("-local_directory", help="where --run_locally works (default: <payload>_local)")
    parser.add_argument("-parallelism", type=int, default=min(4, os.cpu_count() or 1),
                        help="work items run at once with --run_locally")
    parser.add_argument("-log_level", default="info", help="console level (default: info)")
    return parser


def resolve_host(args: argparse.Namespace) -> Tuple[str, str]:
    host_os = platforms.detect_host_os() if not args.host_os else platforms.normalize_os(args.host_os)
    if host_os is None:
        raise SuiteError(f"-host_os '{args.host_os}' is not an OS; use windows, linux or osx")
    host_arch = args.host_arch
    if host_arch is None:
        detected = platforms.arch_from_machine(__import__("platform").machine())
        if detected not in pipeline.HOST_ARCHES:
            raise SuiteError("cannot pick a Helix host queue for this machine; pass -host_arch x64 or x86")
        host_arch = detected
    return host_os, host_arch


def existing_dir(value: Optional[str], flag: str) -> Optional[Path]:
    if value is None:
        return None
    path = Path(value).resolve()
    if not path.is_dir():
        raise SuiteError(f"{flag} '{value}' is not a directory")
    return path


def used_dir(value: Optional[str], flag: str, used: bool) -> Optional[Path]:
    """`existing_dir` for an option the chosen types use; others are ignored, so a pipeline
    can pass every directory whatever -type it runs."""
    if not used:
        if value is not None:
            log.debug("Ignoring %s: -type does not use it", flag)
        return None
    return existing_dir(value, flag)


def run(args: argparse.Namespace) -> int:
    logs.setup_logging(logs.parse_log_level(args.log_level), None)
    host_os, host_arch = resolve_host(args)
    types = pipeline.expand_types(args.type)
    flavours = pipeline.flavours_for(types)
    checked, release, pin = "checked" in flavours, "release" in flavours, any(t.uses_pin for t in types)
    source = existing_dir(args.source_directory, "-source_directory")
    assert source is not None
    if not (source / pipeline.DRIVER_SCRIPT).is_file():
        raise SuiteError(f"-source_directory '{source}' does not hold {pipeline.DRIVER_SCRIPT}")
    payload = Path(args.payload_directory).resolve()
    runtime_repo = existing_dir(args.runtime_repo, "-runtime_repo")
    downloads_baseline = ((checked and args.base_jit_directory is None)
                          or (release and args.release_base_jit_directory is None))
    if runtime_repo is None and downloads_baseline:
        from spmi.base import config
        runtime_repo = config.find_git_work_tree(Path.cwd())
    options = StageOptions(
        source_directory=source,
        product_directory=existing_dir(args.product_directory, "-product_directory"),  # type: ignore[arg-type]
        payload=payload, host_os=host_os, host_arch=host_arch, types=types,
        release_product_directory=used_dir(args.release_product_directory, "-release_product_directory", release),
        base_jit_directory=used_dir(args.base_jit_directory, "-base_jit_directory", checked),
        release_base_jit_directory=used_dir(args.release_base_jit_directory, "-release_base_jit_directory", release),
        base_git_hash=args.base_git_hash, runtime_repo=runtime_repo, storage_url=args.storage_url,
        jit_analyze_directory=existing_dir(args.jit_analyze_directory, "-jit_analyze_directory"),
        git_directory=existing_dir(args.git_directory, "-git_directory"),
        pin_directory=used_dir(args.pin_directory, "-pin_directory", pin),
        mch_files=list(args.mch_files or []),
        private_stores=[Path(s).resolve() for s in (args.private_store or [])],
        jit_ee_version=args.jit_ee_version.lower() if args.jit_ee_version else None)
    base_options, diff_options = split_options(args.base_jit_options), split_options(args.diff_jit_options)
    prepare_payload_directory(payload, args.clean)
    collections = stage_collections(options)
    hashes = stage_payload(options)
    items = plan_work_items(host_os, host_arch, args.type, base_options, diff_options, collections)
    validate_payload(payload, items, host_os, types, source)
    helix_dir = Path(args.helix_directory).resolve() if args.helix_directory else payload.with_name(payload.name + "_helix")
    (helix_dir / "workitem").mkdir(parents=True, exist_ok=True)
    proj = helix_dir / pipeline.PROJ_FILE_NAME
    install = (payload / pipeline.REQUIREMENTS_FILE).is_file()
    fsutil.atomic_write_text(proj, render_proj(items, host_os, str(payload), args.type, install))
    log.info("Payload %s ready for %d work item(s) (%s); baseline %s", payload, len(items),
             ", ".join(i.name for i in items), ", ".join(f"{k}: {v or 'unknown'}" for k, v in hashes.items()))
    log.info("Helix project %s", proj)
    environ = dict(os.environ)
    print_variables(pipeline_variables(payload, host_arch, args.creator or default_creator(environ),
                                       args.source_prefix or helix_source_prefix(environ)))
    if not args.run_locally:
        return 0
    local_dir = Path(args.local_directory).resolve() if args.local_directory else payload.with_name(payload.name + "_local")
    return run_locally(items, payload, local_dir, host_os, host_arch, args.type, source, args.parallelism)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return logs.run_guarded(pipeline.SETUP_SCRIPT, lambda: run(args), errors_to_stderr=True)


if __name__ == "__main__":
    sys.exit(main())
