"""What the superpmi-asmdiffs pipeline's pieces agree on (docs/contracts.md §12.15, §12.16).

The Helix partitions of each host queue, the diff types a work item can run,
the names of the files a work item leaves for upload, the placeholders for
files it could not produce and the payload layout. The setup script, the
work-item driver and the summarize script all import this module (it ships in
the correlation payload like every other top-level script), so a name is
defined exactly once. Everything here is pure.
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from spmi.base import config, platforms, schema

HOST_ARCHES = ("x64", "x86")

DRIVER_SCRIPT = "superpmi_asmdiffs.py"
SETUP_SCRIPT = "superpmi_asmdiffs_setup.py"
SUMMARIZE_SCRIPT = "superpmi_asmdiffs_summarize.py"
SUPERPMI_SCRIPT = "superpmi.py"
REQUIREMENTS_FILE = "requirements.txt"
PACKAGE_DIR = "spmi"  # the library package the scripts import; the payload carries it whole
PIPELINE_MODULE = "spmi/pipeline/common.py"

PROJ_FILE_NAME = "superpmi-asmdiffs.proj"
WORK_ITEM_TIMEOUT = "2:00:00"
#: Kept free at the end of a work item for summaries, the zip and the upload.
WORK_ITEM_MARGIN_MIN_SECONDS = 120.0
WORK_ITEM_MARGIN_FRACTION = 0.1


def parse_duration(text: str) -> float:
    """`H:MM:SS`, `MM:SS` or plain seconds -> seconds; ValueError saying what is wrong (to follow the
    value in a message: "is not a duration; ...", "must be ...") when it is not a positive duration
    of at most 30 days."""
    parts = text.strip().split(":")
    if len(parts) > 3 or not all(parts):
        raise ValueError(NOT_A_DURATION)
    seconds = 0.0
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            raise ValueError(NOT_A_DURATION) from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(NOT_A_DURATION)
        seconds = seconds * 60 + value
    if not seconds > 0:
        raise ValueError("must be positive (more than 0 seconds)")
    if seconds > config.MAX_SECONDS:
        raise ValueError(f"must be at most {config.MAX_SECONDS:,} seconds (30 days)")
    return seconds


NOT_A_DURATION = "is not a duration; use H:MM:SS or seconds"


def work_item_budget(timeout_seconds: float) -> float:
    """The seconds a work item may spend replaying: its timeout minus a margin for what comes after."""
    margin = max(WORK_ITEM_MARGIN_MIN_SECONDS, timeout_seconds * WORK_ITEM_MARGIN_FRACTION)
    return max(timeout_seconds - margin, timeout_seconds / 2)

# Payload layout (relative to the correlation payload root).
BASE_DIR = "base"
DIFF_DIR = "diff"
JIT_ANALYZE_DIR = "jit-analyze"
GIT_DIR = "git"
GIT_CMD_DIR = "git/cmd"
PIN_DIR = "pin"                      # the PIN package: pin[.exe], clrjit_inscount_<arch>/<pintool>
BASELINE_INFO_FILE = "base/baseline.json"
LOCAL_COLLECTIONS_DIR = "collections"
SPMI_LOCATION = "artifacts/spmi"

EMPTY_PLACEHOLDER = "<empty>"
NODIFF_FILE = "nodiff.txt"
NODIFF_TEXT = "No diffs found!"


@dataclass(frozen=True)
class Partition:
    """One Helix work item: a target the host's cross JITs generate code for."""

    name: str
    target_os: str
    target_arch: str

    @property
    def host_arch(self) -> str:
        """x64 for 64-bit targets, x86 for the rest (docs/contracts.md §12.15)."""
        return work_item_host_arch(self.target_arch)

    def jit_name(self, host_os: str) -> str:
        """The force-cross JIT name the work item uses (docs/contracts.md §6.1)."""
        return platforms.jit_file_name(host_os, self.host_arch, self.target_os, self.target_arch,
                                       force_cross=True)

    @property
    def label(self) -> str:
        """`<os>_<arch>`, the suffix of every result file of this partition."""
        return f"{self.target_os}_{self.target_arch}"


PARTITIONS: Dict[str, Tuple[Partition, ...]] = {
    "x64": (
        Partition("win-x64", platforms.WINDOWS, "x64"),
        Partition("win-arm64", platforms.WINDOWS, "arm64"),
        Partition("linux-x64", platforms.LINUX, "x64"),
        Partition("linux-arm64", platforms.LINUX, "arm64"),
        Partition("osx-arm64", platforms.OSX, "arm64"),
    ),
    "x86": (
        Partition("win-x86", platforms.WINDOWS, "x86"),
        Partition("linux-arm", platforms.LINUX, "arm"),
    ),
}


def work_item_host_arch(target_arch: str) -> str:
    return "x64" if target_arch.endswith("64") else "x86"


def partitions_for_host(host_arch: str) -> Tuple[Partition, ...]:
    try:
        return PARTITIONS[host_arch]
    except KeyError:
        raise ValueError(f"no Helix partitions for host arch '{host_arch}'; use one of {', '.join(HOST_ARCHES)}") from None


def partition_for_target(target_os: str, target_arch: str) -> Optional[Partition]:
    for partitions in PARTITIONS.values():
        for partition in partitions:
            if partition.target_os == target_os and partition.target_arch == target_arch:
                return partition
    return None


def required_jit_names(host_os: str, host_arch: str) -> List[str]:
    """Every JIT file the host's work items load, sorted and unique."""
    return sorted({p.jit_name(host_os) for p in partitions_for_host(host_arch)})


# ---------------------------------------------------------------- diff types

@dataclass(frozen=True)
class DiffType:
    """A kind of diff a work item runs; tpdiff and memdiff slot in as rows."""

    name: str            # the superpmi.py subcommand and the result-file infix
    flavour: str         # JIT build flavour in base/<flavour>, diff/<flavour>
    spmi_prefix: str     # superpmi.py writes <spmi_prefix>_summary[.N].json|md
    order: int           # 1_, 2_, 3_ prefix of the overall summary (tab order)
    title: str           # overall summary heading, `{platform}`/`{arch}` filled in
    intro: str           # sentence under the heading ('' for none)
    nothing_found: str   # what the overall summary says when no platform had results
    wants_dasm_zip: bool
    uses_pin: bool = False   # runs under PIN: the payload carries the PIN package
    gate_exit: int = 0       # superpmi.py exit code meaning "a gate was crossed" (0: no gate)
    html_report: bool = False  # superpmi.py writes <spmi_prefix>_report[.N].html beside the summary


DIFF_TYPES: Dict[str, DiffType] = {
    "asmdiffs": DiffType("asmdiffs", "checked", "diff", 1, "ASM diffs generated on {platform} {arch}", "",
                         "No asmdiffs found", True, html_report=True),
    "tpdiff": DiffType("tpdiff", "release", "tpdiff", 2, "Throughput impact on {platform} {arch}",
                       "The following shows the impact on throughput in terms of number of instructions executed "
                       "inside the JIT. Negative percentages/lower numbers are better.",
                       "No throughput diffs found", False, uses_pin=True),
    "memdiff": DiffType("memdiff", "release", "memdiff", 3, "Memory impact on {platform} {arch}",
                        "The following shows the impact on memory in terms of bytes allocated by the JIT. "
                        "Negative percentages/lower numbers are better.",
                        "No memory diffs found", False, gate_exit=2),
    "metricdiff": DiffType("metricdiff", "release", "metricdiff", 3, "JIT metric impact on {platform} {arch}",
                           "The following shows the impact on every metric the JIT reports (sums over the "
                           "contexts both JITs compiled); for most metrics lower numbers are better.",
                           "No metric diffs found", False),
}
#: what `-type all` runs, in pipeline (tab) order; metricdiff is asked for by name
ALL_TYPES = ("asmdiffs", "tpdiff", "memdiff")


def signal_args(noise_check: bool, significance: Sequence[Tuple[str, float]], include_noise: bool = False) -> List[str]:
    """`--noise_check`, `-significance METRIC=PCT` and `--include_noise` as passed from setup to the work
    item and on to the diff commands (asmdiffs takes `-significance` and `--include_noise`, the metric
    diffs `--noise_check` and `-significance`)."""
    argv = ["--noise_check"] if noise_check else []
    if include_noise:
        argv.append("--include_noise")
    for metric, pct in significance:
        argv += ["-significance", f"{metric}={pct:g}"]
    return argv


def add_signal_options(parser: "argparse.ArgumentParser") -> None:
    """The pipeline scripts' `--noise_check` and `-significance` (the same as the diff commands')."""
    parser.add_argument("--noise_check", action="store_true",
                        help="tpdiff/memdiff/metricdiff also replay the base JIT as both sides (A/A) and flag only "
                             "changes beyond 3 times the spread it measures (costs one more replay per collection)")
    parser.add_argument("-significance", action=config.SignificanceOverrides, type=config.significance_override,
                        default=[],
                        metavar="METRIC=PCT", help="minimum meaningful change of METRIC in %% for every diff "
                                                   "(repeatable; see superpmi.py tpdiff -h)")
    parser.add_argument("--include_noise", action="store_true",
                        help="asmdiffs examples keep the diffs of known noise (see superpmi.py asmdiffs -h)")
TYPE_CHOICES = ("asmdiffs", "tpdiff", "memdiff", "metricdiff", "all")


def expand_types(type_name: str) -> List[DiffType]:
    """`all` means every type, in pipeline order."""
    if type_name == "all":
        return [DIFF_TYPES[name] for name in ALL_TYPES]
    try:
        return [DIFF_TYPES[type_name]]
    except KeyError:
        raise ValueError(f"unknown diff type '{type_name}'; use one of {', '.join(TYPE_CHOICES)}") from None


def flavours_for(types: Sequence[DiffType]) -> List[str]:
    return sorted({t.flavour for t in types})


def pin_files(host_os: str, host_arch: str) -> List[str]:
    """What a work item of that host arch needs of the PIN package, relative to the payload."""
    return [f"{PIN_DIR}/{platforms.exe_name('pin', host_os)}",
            f"{PIN_DIR}/clrjit_inscount_{host_arch}/{platforms.pintool_file_name(host_os)}"]


def step_type(step_name: str) -> Optional[str]:
    """The diff type a driver step belongs to (`memdiff markdown` -> memdiff); None for shared
    steps such as `download`, which every type depends on."""
    head = step_name.split(" ", 1)[0]
    return head if head in DIFF_TYPES else None


# ---------------------------------------------------------------- work items per target

#: `-work_items_per_target auto`: about this many bytes of collections per work item.
AUTO_BYTES_PER_WORK_ITEM = 2 * 1024 ** 3
#: `-work_items_per_target auto` never gives a target more work items than this.
AUTO_MAX_WORK_ITEMS = 8
#: No target is spread over more work items than this (setup refuses more; the summarize step
#: does not read result files whose names claim more).
MAX_WORK_ITEMS_PER_TARGET = 64


@dataclass(frozen=True)
class Part:
    """Which of a target's work items this is (`index` of `count`, from 1)."""

    index: int = 1
    count: int = 1

    @property
    def split(self) -> bool:
        return self.count > 1

    @property
    def suffix(self) -> str:
        """`.part2of3` in the names of a split target's result files ('' when not split)."""
        return f".part{self.index}of{self.count}" if self.split else ""

    @property
    def label(self) -> str:
        return f"part {self.index} of {self.count}"

    @staticmethod
    def parse(text: str) -> "Part":
        """`K/N` (1 <= K <= N)."""
        match = re.match(r"^\s*(\d+)\s*/\s*(\d+)\s*$", text or "")
        if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise ValueError(f"'{text}' is not a part K/N with 1 <= K <= N")
        return Part(int(match.group(1)), int(match.group(2)))


def plan_parts(sizes: Sequence[Tuple[str, int]], count: int) -> List[List[str]]:
    """Split collections (name, bytes; in processing order) over at most `count` work items
    so that they finish at about the same time: the largest first, each to the work item
    with the fewest bytes so far (ties: the fewest collections, then the lower one; so sizes
    that are unknown, 0, spread evenly). Each work item keeps the processing
    order; none is empty. Pure."""
    if count < 1:
        raise ValueError("a target needs at least one work item")
    count = min(count, len(sizes)) or 1
    loads = [0] * count
    members = [0] * count
    owner: Dict[int, int] = {}
    for position in sorted(range(len(sizes)), key=lambda p: (-max(0, sizes[p][1]), p)):
        part = min(range(count), key=lambda k: (loads[k], members[k], k))
        owner[position] = part
        loads[part] += max(0, sizes[position][1])
        members[part] += 1
    parts: List[List[str]] = [[] for _ in range(count)]
    for position, (name, _) in enumerate(sizes):
        parts[owner[position]].append(name)
    return [part for part in parts if part] or [[]]


def auto_part_count(sizes: Sequence[Tuple[str, int]], bytes_per_item: int = AUTO_BYTES_PER_WORK_ITEM,
                    limit: int = AUTO_MAX_WORK_ITEMS) -> int:
    """Work items for a target from its collections' sizes: one per `bytes_per_item`
    (rounded up), at most `limit` and at most one per collection. Pure."""
    total = sum(max(0, size) for _, size in sizes)
    wanted = -(-total // max(1, bytes_per_item))
    return max(1, min(wanted, limit, len(sizes)))


# ---------------------------------------------------------------- result files

# A target split over several work items: every result file name carries `Part.suffix`
# before its extension (`superpmi_asmdiffs_summary_linux_x64.part2of3.json`).

def summary_md_name(type_name: str, target_os: str, target_arch: str, part: Part = Part()) -> str:
    return f"superpmi_{type_name}_summary_{target_os}_{target_arch}{part.suffix}.md"


def summary_json_name(type_name: str, target_os: str, target_arch: str, part: Part = Part()) -> str:
    return f"superpmi_{type_name}_summary_{target_os}_{target_arch}{part.suffix}.json"


def status_name(target_os: str, target_arch: str, part: Part = Part()) -> str:
    """The driver's record of its steps, exit codes and baseline (suite extension)."""
    return f"superpmi_status_{target_os}_{target_arch}{part.suffix}.json"


def download_log_name(target_os: str, target_arch: str, part: Part = Part()) -> str:
    return f"superpmi_download_{target_os}_{target_arch}{part.suffix}.log"


def type_log_name(type_name: str, target_os: str, target_arch: str, part: Part = Part()) -> str:
    return f"superpmi_{type_name}_{target_os}_{target_arch}{part.suffix}.log"


def dasm_zip_name(target_os: str, target_arch: str, part: Part = Part()) -> str:
    return f"Asmdiffs_{target_os}_{target_arch}{part.suffix}.zip"


def html_report_name(type_name: str, target_os: str, target_arch: str, part: Part = Part()) -> str:
    """The HTML diff explorer of a work item (suite extension)."""
    return f"superpmi_{type_name}_report_{target_os}_{target_arch}{part.suffix}.html"


def azdo_results_artifact(partition: Partition) -> str:
    """The AzDO pipeline artifact holding a partition's result files."""
    return f"SuperPMI_Asmdiffs_{partition.target_os}_{partition.target_arch}"


def github_results_artifact(host_arch: str, partition: Partition) -> str:
    """The GitHub workflow artifact holding a partition's result files (its upload folder)."""
    return f"results-{host_arch}-{partition.name}"


def declared_results(partition: Partition, types: Sequence[DiffType], part: Part = Part()) -> List[str]:
    """The files a work item MUST leave in its upload root (Helix downloads them)."""
    os_name, arch = partition.target_os, partition.target_arch
    names = [download_log_name(os_name, arch, part), status_name(os_name, arch, part)]
    for diff_type in types:
        names += [type_log_name(diff_type.name, os_name, arch, part),
                  summary_md_name(diff_type.name, os_name, arch, part),
                  summary_json_name(diff_type.name, os_name, arch, part)]
        if diff_type.html_report:
            names.append(html_report_name(diff_type.name, os_name, arch, part))
    if any(t.wants_dasm_zip for t in types):
        names.append(dasm_zip_name(os_name, arch, part))
    return names


def overall_summary_name(type_name: str, platform: str, arch: str, short: bool = False) -> str:
    """`1_overall_asmdiffs_summary_windows_x64.md` (prefix orders the AzDO tabs)."""
    diff_type = DIFF_TYPES[type_name]
    kind = "short_summary" if short else "summary"
    return f"{diff_type.order}_overall_{type_name}_{kind}_{platform}_{arch}.md"


_OVERALL_NAME_RE = re.compile(r"^[0-9]_overall_(asmdiffs|tpdiff|memdiff|metricdiff)_(short_summary|summary)_"
                               r"([a-z]+)_([a-z0-9]+)\.md$")


@dataclass(frozen=True)
class OverallName:
    type_name: str
    short: bool
    platform: str
    arch: str


def parse_overall_summary_name(file_name: str) -> Optional[OverallName]:
    """The parts of an `overall_summary_name` (None for any other name)."""
    match = _OVERALL_NAME_RE.match(file_name)
    if not match or match.group(1) not in DIFF_TYPES:
        return None
    name = OverallName(match.group(1), match.group(2) == "short_summary", match.group(3), match.group(4))
    if overall_summary_name(name.type_name, name.platform, name.arch, name.short) != file_name:
        return None
    return name


_PART_RE = r"(?:\.part(\d+)of(\d+))?"
_RESULT_NAME_RE = re.compile(r"^superpmi_(asmdiffs|tpdiff|memdiff|metricdiff)_summary_(.*)_(.*?)" + _PART_RE
                             + r"\.(md|json)$", re.IGNORECASE)
_REPORT_NAME_RE = re.compile(r"^superpmi_(asmdiffs|tpdiff|memdiff)_report_(.*)_(.*?)" + _PART_RE + r"\.html$",
                             re.IGNORECASE)
_STATUS_NAME_RE = re.compile(r"^superpmi_status_(.*)_(.*?)" + _PART_RE + r"\.json$", re.IGNORECASE)


@dataclass(frozen=True)
class ResultName:
    type_name: str
    target_os: str
    target_arch: str
    extension: str
    part: Part = Part()


def _part_of(index: Optional[str], count: Optional[str]) -> Optional[Part]:
    if index is None:
        return Part()
    try:
        return Part.parse(f"{index}/{count}")
    except ValueError:
        return None


def parse_result_name(file_name: str) -> Optional[ResultName]:
    """Read a result file name case-insensitively (Helix may keep `Linux`, `OSX`)."""
    match = _RESULT_NAME_RE.match(file_name)
    if not match or "_short_" in file_name.lower():
        return None
    part = _part_of(match.group(4), match.group(5))
    if part is None:
        return None
    return ResultName(match.group(1).lower(), normalize_os_label(match.group(2)), match.group(3).lower(),
                      match.group(6).lower(), part)


def parse_report_name(file_name: str) -> Optional[ResultName]:
    """Read an HTML report's file name (as `parse_result_name`)."""
    match = _REPORT_NAME_RE.match(file_name)
    if not match:
        return None
    part = _part_of(match.group(4), match.group(5))
    if part is None:
        return None
    return ResultName(match.group(1).lower(), normalize_os_label(match.group(2)), match.group(3).lower(), "html",
                      part)


def parse_status_name(file_name: str) -> Optional[Tuple[str, str]]:
    parsed = parse_status_name_part(file_name)
    return parsed[:2] if parsed is not None else None  # type: ignore[return-value]


def parse_status_name_part(file_name: str) -> Optional[Tuple[str, str, Part]]:
    """(os, arch, part) of a status file name."""
    match = _STATUS_NAME_RE.match(file_name)
    if not match:
        return None
    part = _part_of(match.group(3), match.group(4))
    if part is None:
        return None
    return normalize_os_label(match.group(1)), match.group(2).lower(), part


def normalize_os_label(text: str) -> str:
    return platforms.normalize_os(text) or text.lower()


def is_placeholder(text: str) -> bool:
    return text.startswith(EMPTY_PLACEHOLDER)


# ---------------------------------------------------------------- the status document

#: Result files larger than this are not read (a work item writes far less).
MAX_RESULT_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class StatusStep:
    """One step of a work item as its status document records it (the driver's StepResult)."""

    name: str = "?"
    exit_code: Optional[int] = None
    ok: bool = True
    log: str = ""
    problems: List[str] = field(default_factory=list)
    gate: bool = False   # failed because a gate was crossed (memdiff exit code 2)


@dataclass
class WorkItemStatus:
    """The parts of `superpmi_status_<os>_<arch>.json` the summary reads; other keys are ignored."""

    ok: bool = False
    steps: List[StatusStep] = field(default_factory=list)
    repro: Dict[str, str] = field(default_factory=dict)

    @staticmethod
    def from_bytes(data: bytes) -> "WorkItemStatus":
        """The status from the file's bytes; `schema.SchemaError` says what is wrong."""
        return schema.build(WorkItemStatus, schema.parse_json(data, MAX_RESULT_FILE_BYTES))
