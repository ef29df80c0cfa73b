"""Reading one `.dasm` listing for jitanalyze.py (docs/contracts.md §7, §8.2).

The metrics a listing holds (`METRICS`), the per-method accumulator list the scan fills,
the regular expressions that pick out the lines jit-analyze reads, and `_Unit`, which
folds those lines into method groups, from whole bytes or streamed in chunks.
`parse_dasm` turns one listing into `MethodMetrics` objects.

Design: each file is scanned with one compiled regular expression over its bytes, which
picks out the only lines the analysis reads (`; Assembly listing for method`,
`; Total bytes of code`, `; Variable debug info:`) and splits the current checked-JIT
footer in the same pass. Anything unusual on such a line falls back to the exact
per-field regexes of §8.2.
"""
from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

# ------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MetricInfo:
    """How jit-analyze names and prints one metric (§8.4)."""

    name: str
    display_name: str
    unit: str
    value_format: str  # "int": integer, "f2": two decimals, "double": shortest round-trip


METRICS: Dict[str, MetricInfo] = {
    m.name: m
    for m in (
        MetricInfo("CodeSize", "Code Size", "byte", "int"),
        MetricInfo("PrologSize", "Prolog Size", "byte", "int"),
        MetricInfo("PerfScore", "Perf Score", "PerfScoreUnit", "f2"),
        MetricInfo("InstrCount", "Instruction Count", "Instruction", "int"),
        MetricInfo("AllocSize", "Allocation Size", "byte", "int"),
        MetricInfo("ExtraAllocBytes", "Extra Allocation Size", "byte", "int"),
        MetricInfo("DebugClauseCount", "Debug Clause Count", "Clause", "int"),
        MetricInfo("DebugVarCount", "Debug Variable Count", "Variable", "int"),
        MetricInfo("SpillCount", "Spill Count", "Count", "int"),
        MetricInfo("SpillWeight", "Spill Weighted", "Count", "double"),
        MetricInfo("ResolutionCount", "Resolution Count", "Count", "int"),
        MetricInfo("ResolutionWeight", "Resolution Weighted", "Count", "double"),
    )
}

# Slots of the per-method accumulator list (kept as a plain list for speed).
_CODE, _PROLOG, _PERF, _INSTR, _ALLOC, _DCLAUSE, _DVAR, _SPILL, _SPILLWT, _RES, _RESWT = range(11)
_INSTANCES = 11  # lines of the group that do not match the code/prolog pattern
_DATALINES = 12  # lines of the group that do match it (a footer with metrics)
_RELEASE = 13  # 2026 release footers of the group (`; Total bytes of code N for method M`): code size only

_METRIC_SLOT = {
    "CodeSize": _CODE,
    "PrologSize": _PROLOG,
    "PerfScore": _PERF,
    "InstrCount": _INSTR,
    "AllocSize": _ALLOC,
    "DebugClauseCount": _DCLAUSE,
    "DebugVarCount": _DVAR,
    "SpillCount": _SPILL,
    "SpillWeight": _SPILLWT,
    "ResolutionCount": _RES,
    "ResolutionWeight": _RESWT,
}


def _new_entry() -> list:
    return [0, 0, 0.0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0, 0, 0]


def code_size_only(entry: list) -> bool:
    """A method whose only footers are 2026 release footers: CodeSize is all it has (§7.5)."""
    return entry[_RELEASE] > 0 and entry[_DATALINES] == 0


def has_metric(entry: list, metric: str) -> bool:
    """Whether the method carries `metric` (a 2026 release footer carries only CodeSize, §7.5)."""
    return metric == "CodeSize" or not code_size_only(entry)


def _metric_getter(metric: str) -> Callable[[list], float]:
    if metric == "ExtraAllocBytes":
        return lambda e: e[_ALLOC] - e[_CODE]
    return operator.itemgetter(_METRIC_SLOT[metric])


# ------------------------------------------------------------------------- parsing

_BOM = b"\xef\xbb\xbf"

# One scan finds every line jit-analyze reads (the line itself, up to its line end). A
# checked footer (§7.4) is then split by `_FOOTER_RE`; a line it does not cover falls back
# to the exact patterns below.
_LINE_RE = re.compile(rb"\n(; (?:Assembly listing for method|Total bytes of code|Variable debug info:).*)")
_FOOTER_RE = re.compile(
    rb"; Total bytes of code ([0-9]+), prolog size ([0-9]+), PerfScore ([0-9]+(?:\.[0-9]+)?),"
    rb" instruction count ([0-9]+), allocated bytes for code ([0-9]+)"
)

# The exact per-field patterns of §8.2, used for any line the fast path does not cover.
_NAME_RE = re.compile(rb"for method (.*)$")
_DATA_RE = re.compile(rb"code ([0-9]{1,}), prolog size ([0-9]{1,})")
_PERF_RE = re.compile(rb"(PerfScore|perf score) ([0-9]+(\.[0-9]+)?)")
_INSTR_RE = re.compile(rb"instruction count ([0-9]{1,})")
_ALLOC_RE = re.compile(rb"allocated bytes for code ([0-9]{1,})")
_DEBUG_RE = re.compile(rb"Variable debug info: ([0-9]{1,}) live range\(s\), ([0-9]{1,}) var\(s\)")
_SPILL_RE = re.compile(rb"SpillCount ([0-9]+) SpillCountWt ([0-9]+\.[0-9]+)")
_RES_RE = re.compile(rb"ResolutionMovs ([0-9]+) ResolutionMovsWt ([0-9]+\.[0-9]+)")

# If none of these occurs in a header's name, every field pattern above yields 0 for it.
_HEADER_TRIGGER_RE = re.compile(
    rb"code [0-9]|PerfScore [0-9]|perf score [0-9]|instruction count [0-9]"
    rb"|Variable debug info: [0-9]|SpillCount [0-9]|ResolutionMovs [0-9]"
)
# The fixed part of a fast-path footer already holds the first match of the other fields.
_FOOTER_TRIGGER_RE = re.compile(rb"Variable debug info: [0-9]|SpillCount [0-9]|ResolutionMovs [0-9]")
# Every trigger ends in a space and a digit: text without one matches none (the cheaper test, first).
_SPACE_DIGIT_RE = re.compile(rb" [0-9]")
_FOR_METHOD = b"for method "
_HEADER_PREFIX = b"; Assembly listing for method"
_HEADER_NAME_AT = len(_HEADER_PREFIX) + 1  # the name follows `method ` (a space)
_READ_PREFIXES = (_HEADER_PREFIX, b"; Total bytes of code", b"; Variable debug info:")
_TOTAL_PREFIX = b"; Total bytes of code"
# The 2026 release footer (§7.5): code size and method name, no prolog size.
_RELEASE_CODE_RE = re.compile(rb"^; Total bytes of code ([0-9]+).* for method ")


# The §8.2 field patterns after code/prolog: (pattern, ((slot, group, conversion), ...)).
_FIELD_RULES: Tuple[Tuple["re.Pattern[bytes]", Tuple[Tuple[int, int, Callable[[bytes], float]], ...]], ...] = (
    (_PERF_RE, ((_PERF, 2, float),)),
    (_INSTR_RE, ((_INSTR, 1, int),)),
    (_ALLOC_RE, ((_ALLOC, 1, int),)),
    (_DEBUG_RE, ((_DCLAUSE, 1, int), (_DVAR, 2, int))),
    (_SPILL_RE, ((_SPILL, 1, int), (_SPILLWT, 2, float))),
    (_RES_RE, ((_RES, 1, int), (_RESWT, 2, float))),
)


def _parse_line_exactly(line: bytes) -> Tuple[bytes, list, bool]:
    """Apply the §8.2 patterns to one line: (name, values, matches code/prolog pattern)."""
    values = _new_entry()
    m = _NAME_RE.search(line)
    name = m.group(1) if m else b""
    data = _DATA_RE.search(line)
    if data:
        values[_CODE] = int(data.group(1))
        values[_PROLOG] = int(data.group(2))
    for pattern, fields in _FIELD_RULES:
        m = pattern.search(line)
        if m:
            for slot, group, convert in fields:
                values[slot] = convert(m.group(group))
    return name, values, data is not None


def _lines_read(lines: List[bytes], data: bytes) -> List[bytes]:
    """The lines found in `data`, each cut at its first CR (a line ends at CR, LF or CR LF)."""
    if b"\r" not in data:
        return lines
    return [line.split(b"\r", 1)[0] for line in lines]


class _Unit:
    """Methods of one input unit (a file, or all files of a side with --concat-files).

    `methods` maps the name key (bytes after `for method `) to an accumulator list; a
    header and its footer, and repeated names, fold into one entry (§8.2).
    """

    __slots__ = ("methods", "release_footers", "release_methods")

    def __init__(self) -> None:
        self.methods: Dict[bytes, list] = {}
        self.release_footers = 0  # bare `; Total bytes of code N` footers (count for nothing)
        self.release_methods = 0  # 2026 release footers (count for CodeSize only)

    def feed(self, data: bytes, starts_input: bool) -> None:
        """Read one whole file; `starts_input` = its first line is line 0 of the unit."""
        if data.startswith(_BOM):
            data = data[3:]
        # The scan finds lines after a line end; the first line, when it is one jit-analyze
        # reads, is the unit's line 0 if the file starts the unit (not an instance, §8.2).
        lines = _LINE_RE.findall(data)
        line0 = False
        if data.startswith(_READ_PREFIXES):
            end = data.find(b"\n")
            lines.insert(0, data if end < 0 else data[:end])
            line0 = starts_input
        self._consume(_lines_read(lines, data), line0)

    def feed_stream(self, fd: int, starts_input: bool, chunk_size: int, hasher=None) -> None:
        """Read a large file from its start in `chunk_size` reads split at line ends (bounded memory)."""
        carry = b""
        first = True
        while True:
            chunk = os.read(fd, chunk_size)
            if hasher is not None and chunk:
                hasher.update(chunk)
            if not chunk:
                segment, carry = carry, b""
            else:
                buf = carry + chunk
                cut = buf.rfind(b"\n")
                if cut <= 0:
                    carry = buf
                    continue
                segment, carry = buf[:cut], buf[cut:]
            if first:
                self.feed(segment, starts_input)
                first = False
            elif segment:
                self._consume(_lines_read(_LINE_RE.findall(segment), segment), line0=False)
            if not chunk:
                return

    def _consume(self, lines: Iterable[bytes], line0: bool) -> None:
        """Fold the lines jit-analyze reads (each without its line end) into method groups."""
        methods = self.methods
        for line in lines:
            kind = line[2]
            if kind == 65:  # "A": a header; its name is the group's key unless it holds a field (§8.2)
                if len(line) > _HEADER_NAME_AT and line[_HEADER_NAME_AT - 1] == 32 and (
                        not _SPACE_DIGIT_RE.search(line, _HEADER_NAME_AT)
                        or not _HEADER_TRIGGER_RE.search(line, _HEADER_NAME_AT)):
                    name = line[_HEADER_NAME_AT:]
                    entry = methods.get(name)
                    if entry is None:
                        entry = methods[name] = _new_entry()
                    if not line0:
                        entry[_INSTANCES] += 1
                    line0 = False
                    continue
            elif kind == 84:  # "T": a current checked footer (§7.4) unless more fields follow
                footer = _FOOTER_RE.match(line)
                if footer is not None:
                    rest = footer.end()
                    if not _SPACE_DIGIT_RE.search(line, rest) or not _FOOTER_TRIGGER_RE.search(line, rest):
                        k = line.find(_FOR_METHOD, rest)
                        name = line[k + 11:] if k >= 0 else b""
                        entry = methods.get(name)
                        if entry is None:
                            entry = methods[name] = _new_entry()
                        code, prolog, perf, instr, alloc = footer.groups()
                        entry[_CODE] += int(code)
                        entry[_PROLOG] += int(prolog)
                        entry[_PERF] += float(perf)
                        entry[_INSTR] += int(instr)
                        entry[_ALLOC] += int(alloc)
                        entry[_DATALINES] += 1
                        line0 = False
                        continue
            self._consume_exactly(line, line0)
            line0 = False

    def _consume_exactly(self, line: bytes, line0: bool) -> None:
        name, values, is_data = _parse_line_exactly(line)
        release = None
        if not is_data and line.startswith(_TOTAL_PREFIX):
            release = _RELEASE_CODE_RE.match(line)
            if release is None:
                self.release_footers += 1
            else:
                self.release_methods += 1
                values[_CODE] += int(release.group(1))
        entry = self.methods.get(name)
        if entry is None:
            entry = self.methods[name] = _new_entry()
        for i in range(_INSTANCES):
            entry[i] += values[i]
        if is_data:
            entry[_DATALINES] += 1
        elif release is not None:
            entry[_RELEASE] += 1
        elif not line0:
            entry[_INSTANCES] += 1

    def measured_methods(self) -> Dict[bytes, list]:
        """The methods to compare. Without release footers this is every group, exactly as
        jit-analyze has it; with them, groups that no footer with metrics reached (the
        release listings' headers and the nameless release footers) are left out."""
        if not self.release_footers:
            return self.methods
        return {name: e for name, e in self.methods.items() if e[_DATALINES] or e[_RELEASE]}


@dataclass
class MethodMetrics:
    """One method (name group) of a listing, as jit-analyze sums it (§8.2)."""

    name: str
    code_size: int = 0
    prolog_size: int = 0
    perf_score: float = 0.0
    instr_count: int = 0
    alloc_size: int = 0
    debug_clause_count: int = 0
    debug_var_count: int = 0
    spill_count: int = 0
    spill_weight: float = 0.0
    resolution_count: int = 0
    resolution_weight: float = 0.0
    instances: int = 0
    has_metrics: bool = False
    code_size_only: bool = False  # only 2026 release footers: the other metrics are unavailable (§7.5)

    @property
    def extra_alloc_bytes(self) -> int:
        return self.alloc_size - self.code_size

    def value(self, metric: str) -> Optional[float]:
        """The metric's value; None when the listing does not carry it (a 2026 release footer, §7.5)."""
        if metric not in METRICS:
            raise KeyError(metric)
        entry = self._as_entry()
        return _metric_getter(metric)(entry) if has_metric(entry, metric) else None

    def _as_entry(self) -> list:
        return [self.code_size, self.prolog_size, self.perf_score, self.instr_count, self.alloc_size,
                self.debug_clause_count, self.debug_var_count, self.spill_count, self.spill_weight,
                self.resolution_count, self.resolution_weight, self.instances, int(self.has_metrics),
                int(self.code_size_only)]


@dataclass
class ParsedListing:
    """The methods of one listing file."""

    methods: Dict[str, MethodMetrics]
    release_listings: int  # footers without metrics (`; Total bytes of code N`)


def _decode(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def _to_method_metrics(name: bytes, e: list) -> MethodMetrics:
    return MethodMetrics(_decode(name), e[_CODE], e[_PROLOG], e[_PERF], e[_INSTR], e[_ALLOC], e[_DCLAUSE],
                         e[_DVAR], e[_SPILL], e[_SPILLWT], e[_RES], e[_RESWT], e[_INSTANCES], e[_DATALINES] > 0,
                         code_size_only(e))


def parse_dasm(text: Union[str, bytes], raw: bool = False) -> ParsedListing:
    """Parse one listing file (pure): methods with metrics and the release-listing count.

    `raw=True` keeps every name group exactly as jit-analyze has it, including the
    0-byte groups that release listings produce.
    """
    unit = _Unit()
    unit.feed(text.encode("utf-8") if isinstance(text, str) else bytes(text), starts_input=True)
    groups = unit.methods if raw else unit.measured_methods()
    methods = {_decode(n): _to_method_metrics(n, e) for n, e in groups.items()}
    return ParsedListing(methods, unit.release_footers)


def parse_dasm_text(text: Union[str, bytes]) -> Dict[str, MethodMetrics]:
    """Methods of one listing keyed by jit-analyze's name key (incl. ` (<tier>)`)."""
    return parse_dasm(text).methods
