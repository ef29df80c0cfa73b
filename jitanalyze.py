#!/usr/bin/env python3
"""Built-in equivalent of jit-analyze (CONTRACTS.md §8).

Compares two trees of JIT disassembly listings (`.dasm`) and prints, per metric, the same
report jit-analyze prints: totals, the top file and method regressions/improvements and
the final counts; `--md` also writes the markdown form asmdiffs embeds in its summary.

asmdiffs uses this module when the real `jit-analyze` is not on PATH::

    result = analyze(Path(base_dir), Path(diff_dir), AnalyzeOptions(metrics=["CodeSize"]))
    print(render_console(result))
    Path("summary.md").write_text(render_markdown(result), encoding="utf-8")

or simply ``run_cli([...jit-analyze arguments...])``.

Design:
* Input is read one file (or one base/diff file pair) at a time; each file is scanned with
  one compiled regular expression over its bytes, which picks out the only lines the
  analysis reads (`; Assembly listing for method`, `; Total bytes of code`,
  `; Variable debug info:`) and splits the current checked-JIT footer in the same pass.
  Anything unusual on such a line falls back to the exact per-field regexes of §8.2.
* All requested metrics are computed in a single pass. Only the per-file method tables
  and the top `--count` entries of each list are kept, so memory does not grow with the
  number of files (apart from the sorted list of base file names).
* Rendering and number formatting are pure functions (§8.4-§8.6).

Extensions beyond jit-analyze (none of them changes the output of a run that does not
use them):
* `--override-total-base-metric CodeSize=123` (per metric, repeatable); a bare number
  still applies to every requested metric.
* `--md-per-metric DIR` writes `DIR/<Metric>.md` for each metric.
* Release-JIT listings (`; Total bytes of code N` without prolog size, §7.5) are not
  turned into 0-byte methods: their methods are left out and every report says
  `No metrics: <n> release JIT listing(s) ...` before the totals.
"""
from __future__ import annotations

import argparse
import dataclasses
import decimal
import fnmatch
import hashlib
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]

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
    return [0, 0, 0.0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0, 0]


def _metric_getter(metric: str) -> Callable[[list], float]:
    if metric == "ExtraAllocBytes":
        return lambda e: e[_ALLOC] - e[_CODE]
    slot = _METRIC_SLOT[metric]
    return lambda e: e[slot]


# ------------------------------------------------------------------------- parsing

_BOM = b"\xef\xbb\xbf"
_STREAM_CHUNK = 4 << 20  # read size for files above _WHOLE_FILE_LIMIT

# One scan finds every line jit-analyze reads. Group 1 is the whole line; group 2 the
# header's method name; groups 3-8 split the current checked footer (§7.4).
_SCAN_RE = re.compile(
    rb"\n(; (?:"
    rb"Assembly listing for method(?: ([^\r\n]*))?"
    rb"|Total bytes of code(?: ([0-9]+), prolog size ([0-9]+), PerfScore ([0-9]+(?:\.[0-9]+)?),"
    rb" instruction count ([0-9]+), allocated bytes for code ([0-9]+)([^\r\n]*))?"
    rb"|Variable debug info:"
    rb")[^\r\n]*)"
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
_FOR_METHOD = b"for method "
_READ_PREFIXES = (b"; Assembly listing for method", b"; Total bytes of code", b"; Variable debug info:")
_TOTAL_PREFIX = b"; Total bytes of code"


def _parse_line_exactly(line: bytes) -> Tuple[bytes, list, bool]:
    """Apply the §8.2 patterns to one line: (name, values, matches code/prolog pattern)."""
    values = _new_entry()
    m = _NAME_RE.search(line)
    name = m.group(1) if m else b""
    data = _DATA_RE.search(line)
    if data:
        values[_CODE] = int(data.group(1))
        values[_PROLOG] = int(data.group(2))
    m = _PERF_RE.search(line)
    if m:
        values[_PERF] = float(m.group(2))
    m = _INSTR_RE.search(line)
    if m:
        values[_INSTR] = int(m.group(1))
    m = _ALLOC_RE.search(line)
    if m:
        values[_ALLOC] = int(m.group(1))
    m = _DEBUG_RE.search(line)
    if m:
        values[_DCLAUSE] = int(m.group(1))
        values[_DVAR] = int(m.group(2))
    m = _SPILL_RE.search(line)
    if m:
        values[_SPILL] = int(m.group(1))
        values[_SPILLWT] = float(m.group(2))
    m = _RES_RE.search(line)
    if m:
        values[_RES] = int(m.group(1))
        values[_RESWT] = float(m.group(2))
    return name, values, data is not None


class _Unit:
    """Methods of one input unit (a file, or all files of a side with --concat-files).

    `methods` maps the name key (bytes after `for method `) to an accumulator list; a
    header and its footer, and repeated names, fold into one entry (§8.2).
    """

    __slots__ = ("methods", "release_footers")

    def __init__(self) -> None:
        self.methods: Dict[bytes, list] = {}
        self.release_footers = 0

    def feed(self, data: bytes, starts_input: bool) -> None:
        """Read one whole file; `starts_input` = its first line is line 0 of the unit."""
        if data.startswith(_BOM):
            data = data[3:]
        # The scan expects a line end before each line; when the first line is one the
        # scan picks up, it is the first row and does not count as an instance (§8.2).
        line0 = starts_input and data.startswith(_READ_PREFIXES)
        self._consume(_SCAN_RE.findall(b"\n" + data), line0)

    def feed_stream(self, fd: int, starts_input: bool, hasher=None) -> None:
        """Read a large file from its start in chunks split at line ends (bounded memory)."""
        chunk_size = _STREAM_CHUNK
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
                self._consume(_SCAN_RE.findall(segment), line0=False)
            if not chunk:
                return

    def _consume(self, rows: Iterable[tuple], line0: bool) -> None:
        methods = self.methods
        for line, hname, code, prolog, perf, instr, alloc, rest in rows:
            kind = line[2]
            if kind == 65 and hname and not _HEADER_TRIGGER_RE.search(hname):  # "A": header line
                entry = methods.get(hname)
                if entry is None:
                    entry = methods[hname] = _new_entry()
                if not line0:
                    entry[_INSTANCES] += 1
            elif code and not _FOOTER_TRIGGER_RE.search(rest):  # current checked footer
                k = rest.find(_FOR_METHOD)
                name = rest[k + 11:] if k >= 0 else b""
                entry = methods.get(name)
                if entry is None:
                    entry = methods[name] = _new_entry()
                entry[_CODE] += int(code)
                entry[_PROLOG] += int(prolog)
                entry[_PERF] += float(perf)
                entry[_INSTR] += int(instr)
                entry[_ALLOC] += int(alloc)
                entry[_DATALINES] += 1
            else:
                self._consume_exactly(line, line0)
            line0 = False

    def _consume_exactly(self, line: bytes, line0: bool) -> None:
        name, values, is_data = _parse_line_exactly(line)
        if not is_data and line.startswith(_TOTAL_PREFIX):
            self.release_footers += 1
        entry = self.methods.get(name)
        if entry is None:
            entry = self.methods[name] = _new_entry()
        for i in range(_INSTANCES):
            entry[i] += values[i]
        if is_data:
            entry[_DATALINES] += 1
        elif not line0:
            entry[_INSTANCES] += 1

    def measured_methods(self) -> Dict[bytes, list]:
        """The methods to compare. Without release footers this is every group, exactly as
        jit-analyze has it; with them, groups that no footer with metrics reached (the
        release listings' headers and the nameless release footers) are left out."""
        if not self.release_footers:
            return self.methods
        return {name: e for name, e in self.methods.items() if e[_DATALINES]}


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

    @property
    def extra_alloc_bytes(self) -> int:
        return self.alloc_size - self.code_size

    def value(self, metric: str) -> float:
        if metric not in METRICS:
            raise KeyError(metric)
        return _metric_getter(metric)(self._as_entry())

    def _as_entry(self) -> list:
        return [self.code_size, self.prolog_size, self.perf_score, self.instr_count, self.alloc_size,
                self.debug_clause_count, self.debug_var_count, self.spill_count, self.spill_weight,
                self.resolution_count, self.resolution_weight, self.instances, int(self.has_metrics)]


@dataclass
class ParsedListing:
    """The methods of one listing file."""

    methods: Dict[str, MethodMetrics]
    release_listings: int  # footers without metrics (`; Total bytes of code N`)


def _decode(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def _to_method_metrics(name: bytes, e: list) -> MethodMetrics:
    return MethodMetrics(_decode(name), e[_CODE], e[_PROLOG], e[_PERF], e[_INSTR], e[_ALLOC], e[_DCLAUSE],
                         e[_DVAR], e[_SPILL], e[_SPILLWT], e[_RES], e[_RESWT], e[_INSTANCES], e[_DATALINES] > 0)


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


# -------------------------------------------------------------- number formatting
# The texts .NET produces (§8.6): invariant culture for the total percentage, en-US for
# the per-file/per-method percentages; non-finite values print as the culture's symbol.

_DEC_CONTEXT = decimal.Context(prec=1200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_TWO_PLACES = decimal.Decimal("0.01")


def _round2(x: float, scale_by_100: bool = False) -> decimal.Decimal:
    """x (×100) rounded to 2 decimals, half away from zero, on the exact double value."""
    d = decimal.Decimal(x)
    if scale_by_100:
        d = _DEC_CONTEXT.multiply(d, 100)
    return d.quantize(_TWO_PLACES, rounding=decimal.ROUND_HALF_UP, context=_DEC_CONTEXT)


def _non_finite(x: float, invariant: bool = False) -> Optional[str]:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        if invariant:
            return "Infinity" if x > 0 else "-Infinity"
        return "\u221e" if x > 0 else "-\u221e"
    return None


def format_round_trip(x: float) -> str:
    """Shortest round-trip text of a double, as .NET prints it (`86033549`, `1E+15`)."""
    x = float(x)
    special = _non_finite(x)
    if special is not None:
        return special
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    digits = all_digits.lstrip("0")
    point = len(int_part) + (int(exp_text) if exp_text else 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    if not digits:
        return sign + "0"
    if point > max(len(digits), 15) or point < -3:
        exponent = point - 1
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return "%s%sE%s%02d" % (sign, body, "+" if exponent >= 0 else "-", abs(exponent))
    if point <= 0:
        return sign + "0." + "0" * (-point) + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def format_fixed2(x: float) -> str:
    """Two decimals, no grouping (`F2` / `0.00`): `-364.58`, `-0.00`."""
    special = _non_finite(float(x))
    return special if special is not None else "{:.2f}".format(_round2(float(x)))


def format_percent_invariant(f: float) -> str:
    """`P_inv`: `-0.39 %` (space before %, grouping from 1,000)."""
    special = _non_finite(float(f), invariant=True)
    return special if special is not None else "{:,.2f} %".format(_round2(float(f), True))


def format_percent_current(f: float) -> str:
    """`P_cur` (en-US): `-26.13%`, `1,900.00%`."""
    special = _non_finite(float(f))
    return special if special is not None else "{:,.2f}%".format(_round2(float(f), True))


def format_value(metric: str, x: float) -> str:
    """`V`: a metric value as jit-analyze prints it."""
    if METRICS[metric].value_format == "f2":
        return format_fixed2(x)
    return format_round_trip(float(x))


def _ratio(num: float, den: float) -> float:
    """IEEE division (base 0 gives NaN or ±infinity, §8.3)."""
    if den == 0:
        if num == 0 or math.isnan(num):
            return math.nan
        return math.copysign(math.inf, num) * math.copysign(1.0, den)
    return num / den


# ------------------------------------------------------------------ tie ordering
# jit-analyze breaks ties with .NET's culture-aware string order (en-US on CI). This key
# follows the ICU root order for ASCII: controls and spaces, then punctuation and symbols
# in ICU's sequence, digits, then letters case-insensitively (lower case first on a tie),
# finally ordinal order. Non-ASCII characters sort after ASCII by code point.
_ICU_ASCII_ORDER = (
    "".join(chr(c) for c in range(0, 9)) + "".join(chr(c) for c in range(14, 32)) + "\x7f"
    + "\t\n\x0b\x0c\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789"
)


def _build_collation_tables() -> Tuple[Dict[int, str], Dict[int, str]]:
    primary: Dict[int, str] = {}
    for weight, ch in enumerate(_ICU_ASCII_ORDER, start=1):
        primary[ord(ch)] = chr(weight)
    base = len(_ICU_ASCII_ORDER) + 1
    tertiary: Dict[int, str] = {}
    for i in range(26):
        lower, upper = ord("a") + i, ord("A") + i
        primary[lower] = primary[upper] = chr(base + i)
        tertiary[lower], tertiary[upper] = "\x01", "\x02"
    return primary, tertiary


_PRIMARY_TABLE, _TERTIARY_TABLE = _build_collation_tables()


def collation_key(text: str) -> Tuple[str, str, str]:
    """Sort key approximating the culture-aware comparison jit-analyze uses for ties."""
    return text.translate(_PRIMARY_TABLE), text.translate(_TERTIARY_TABLE), text


class _TopN:
    """The first `n` offers in (primary, tie key) order, keeping O(n) items."""

    def __init__(self, n: int, tie_key: Callable[[tuple], tuple]) -> None:
        self.n = n
        self.tie_key = tie_key
        self.items: List[tuple] = []
        self.threshold: Optional[float] = None
        self.limit = max(4 * n, 256)

    def offer(self, primary: float, item: tuple) -> None:
        if self.n <= 0 or (self.threshold is not None and primary > self.threshold):
            return
        self.items.append((primary, item))
        if len(self.items) >= self.limit:
            self._prune()

    def _prune(self) -> None:
        tie_key = self.tie_key
        self.items.sort(key=lambda pi: (pi[0], tie_key(pi[1])))
        del self.items[self.n:]
        if self.items and len(self.items) == self.n:
            self.threshold = self.items[-1][0]

    def result(self) -> List[tuple]:
        self._prune()
        return [item for _, item in self.items]


# ------------------------------------------------------------------ results


@dataclass
class FileEntry:
    """A file pair in the per-file tables."""

    base_key: str
    diff_key: str
    delta: float
    base: float


@dataclass
class MethodEntry:
    """A method in the per-method tables."""

    file_key: str  # the base file's key
    name: str
    delta: float
    base: float
    base_instances: int
    diff_instances: int


@dataclass
class MetricSummary:
    """Everything one metric's report needs (§8.3)."""

    metric: str
    base_total: float = 0
    diff_total: float = 0
    delta_total: float = 0  # sum of the files' deltas
    relative_total: float = 0.0  # sum of the files' relative deltas
    files_improved: int = 0
    files_regressed: int = 0
    files_unchanged: int = 0
    methods_improved: int = 0
    methods_regressed: int = 0
    paired_methods: int = 0
    base_unique_methods: int = 0
    base_unique_value: float = 0
    diff_unique_methods: int = 0
    diff_unique_value: float = 0
    top_file_regressions: List[FileEntry] = field(default_factory=list)
    top_file_improvements: List[FileEntry] = field(default_factory=list)
    top_method_regressions: List[MethodEntry] = field(default_factory=list)
    top_method_improvements: List[MethodEntry] = field(default_factory=list)
    top_method_regressions_by_percentage: List[MethodEntry] = field(default_factory=list)
    top_method_improvements_by_percentage: List[MethodEntry] = field(default_factory=list)

    @property
    def unchanged_methods(self) -> int:
        return self.paired_methods - (self.methods_improved + self.methods_regressed)

    @property
    def changed_files(self) -> int:
        return self.files_improved + self.files_regressed

    @property
    def changed_methods(self) -> int:
        return self.methods_improved + self.methods_regressed


@dataclass
class AnalyzeOptions:
    """The jit-analyze options that shape the analysis and its text (§8.1)."""

    metrics: List[str] = field(default_factory=lambda: ["CodeSize"])
    recursive: bool = False
    file_extension: str = ".dasm"
    file_filter: Optional[str] = None
    count: int = 20
    reconcile: bool = True
    concat_files: bool = False
    skip_text_diff: bool = False
    note: Optional[str] = None
    override_base: Dict[str, float] = field(default_factory=dict)  # metric -> printed total
    override_diff: Dict[str, float] = field(default_factory=dict)
    is_diffs_only: bool = False
    is_subset_of_diffs: bool = False
    warn: bool = False  # collect files/methods present on one side only


@dataclass
class MethodMismatch:
    """Methods found in only one listing of a file pair."""

    base_key: str
    only_in_base: List[str]
    only_in_diff: List[str]


@dataclass
class AnalysisResult:
    """Everything an analysis found, per metric."""

    options: AnalyzeOptions
    summaries: Dict[str, MetricSummary]
    paired_files: int = 0
    text_diff_files: int = 0
    release_listings: int = 0
    base_only_files: List[str] = field(default_factory=list)
    diff_only_files: List[str] = field(default_factory=list)
    method_mismatches: List[MethodMismatch] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """jit-analyze's exit code: -1 per metric whose total delta is not 0."""
        return -sum(1 for s in self.summaries.values() if s.delta_total != 0)

    def top_file_keys(self) -> Set[str]:
        """Keys of every file named in a top list of any metric."""
        keys: Set[str] = set()
        for s in self.summaries.values():
            for f in s.top_file_regressions + s.top_file_improvements:
                keys.add(f.diff_key)
            for m in (s.top_method_regressions + s.top_method_improvements
                      + s.top_method_regressions_by_percentage + s.top_method_improvements_by_percentage):
                keys.add(m.file_key)
        return keys


class AnalyzeUsageError(ValueError):
    """Invalid options (jit-analyze's validation errors: stderr, exit 1)."""


class AnalyzeInputError(OSError):
    """A missing or unreadable input (jit-analyze prints it on stdout and exits 0)."""


# ------------------------------------------------------------------ comparison


def _file_tie(item: tuple) -> tuple:
    return collation_key(item[1])  # diff key


def _method_tie(item: tuple) -> tuple:
    return collation_key(_decode(item[0])), collation_key(item[1])


class _MetricAccumulator:
    """Streaming per-metric totals, counts and top lists."""

    def __init__(self, metric: str, count: int, reconcile: bool) -> None:
        self.summary = MetricSummary(metric)
        self.get = _metric_getter(metric)
        self.reconcile = reconcile
        zero = 0.0 if METRICS[metric].value_format != "int" else 0
        s = self.summary
        s.base_total = s.diff_total = s.delta_total = zero
        s.base_unique_value = s.diff_unique_value = zero
        self.zero = zero
        self.file_reg = _TopN(count, _file_tie)
        self.file_imp = _TopN(count, _file_tie)
        self.meth_reg = _TopN(count, _method_tie)
        self.meth_imp = _TopN(count, _method_tie)
        self.meth_reg_pct = _TopN(count, _method_tie)
        self.meth_imp_pct = _TopN(count, _method_tie)
        self.collect = count > 0

    def add_file(self, base_key: str, diff_key: str, paired: list, base_only: list, diff_only: list) -> None:
        get, s = self.get, self.summary
        fbase = fdiff = fdelta = self.zero
        frel = 0.0
        for name, be, de in paired:
            b = get(be)
            d = get(de)
            delta = d - b
            fbase += b
            fdiff += d
            fdelta += delta
            frel += _ratio(delta, b)
            if delta != 0:
                self._method_changed(name, base_key, delta, b, be[_INSTANCES], de[_INSTANCES])
        s.paired_methods += len(paired)
        if self.reconcile:
            for name, be in base_only:
                b = get(be)
                fbase += b
                fdelta -= b
                s.base_unique_methods += 1
                s.base_unique_value += b
                if b != 0:
                    self._method_changed(name, base_key, self.zero - b, b, be[_INSTANCES], 0)
            for name, de in diff_only:
                d = get(de)
                fdiff += d
                fdelta += d
                s.diff_unique_methods += 1
                s.diff_unique_value += d
                if d != 0:
                    self._method_changed(name, base_key, d, self.zero, 0, de[_INSTANCES])
        s.base_total += fbase
        s.diff_total += fdiff
        s.delta_total += fdelta
        s.relative_total += frel
        if fdelta < 0:
            s.files_improved += 1
            if self.collect:
                self.file_imp.offer(fdelta, (base_key, diff_key, fdelta, fbase))
        elif fdelta > 0:
            s.files_regressed += 1
            if self.collect:
                self.file_reg.offer(-fdelta, (base_key, diff_key, fdelta, fbase))
        else:
            s.files_unchanged += 1

    def add_single_method_file(self, base_key: str, diff_key: str, name: bytes, be: list, de: list) -> None:
        """add_file() for a file pair holding the same single method on both sides."""
        s = self.summary
        b = self.get(be)
        d = self.get(de)
        delta = d - b
        s.paired_methods += 1
        s.base_total += b
        s.diff_total += d
        s.delta_total += delta
        s.relative_total += delta / b if b else _ratio(delta, b)
        if not delta:
            s.files_unchanged += 1
            return
        self._method_changed(name, base_key, delta, b, be[_INSTANCES], de[_INSTANCES])
        if delta < 0:
            s.files_improved += 1
            if self.collect:
                self.file_imp.offer(delta, (base_key, diff_key, delta, b))
        else:
            s.files_regressed += 1
            if self.collect:
                self.file_reg.offer(-delta, (base_key, diff_key, delta, b))

    def _method_changed(self, name: bytes, key: str, delta: float, base: float, bcount: int, dcount: int) -> None:
        s = self.summary
        if delta > 0:
            s.methods_regressed += 1
        else:
            s.methods_improved += 1
        if not self.collect:
            return
        ratio = _ratio(delta, base)
        item = (name, key, delta, base, bcount, dcount)
        if delta > 0:
            self.meth_reg.offer(-delta, item)
            self.meth_reg_pct.offer(-ratio, item)
        else:
            self.meth_imp.offer(delta, item)
            self.meth_imp_pct.offer(ratio, item)

    def finish(self) -> MetricSummary:
        s = self.summary
        files = lambda top: [FileEntry(*t) for t in top.result()]  # noqa: E731
        methods = lambda top: [MethodEntry(t[1], _decode(t[0]), *t[2:]) for t in top.result()]  # noqa: E731
        s.top_file_regressions = files(self.file_reg)
        s.top_file_improvements = files(self.file_imp)
        s.top_method_regressions = methods(self.meth_reg)
        s.top_method_improvements = methods(self.meth_imp)
        s.top_method_regressions_by_percentage = methods(self.meth_reg_pct)
        s.top_method_improvements_by_percentage = methods(self.meth_imp_pct)
        return s


# ------------------------------------------------------------------ reading input

_WHOLE_FILE_LIMIT = 16 << 20  # larger files are read in chunks
_READ_SIZE = 1 << 16
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def _list_files(root: str, extension: str, file_filter: Optional[str], recursive: bool) -> List[str]:
    """Keys (paths relative to root) of the files matching `<filter or *><ext>`, sorted."""
    pattern = (file_filter or "*") + extension
    flags = re.IGNORECASE if os.name == "nt" else 0
    matcher = re.compile(fnmatch.translate(pattern), flags).match
    keys: List[str] = []
    if recursive:
        for dirpath, _dirs, names in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            prefix = "" if rel == os.curdir else rel + os.sep
            keys.extend(prefix + n for n in names if matcher(n))
    else:
        with os.scandir(root) as entries:
            keys.extend(e.name for e in entries if matcher(e.name) and e.is_file())
    keys.sort()
    return keys


def _open_if_file(path: str) -> Optional[int]:
    """A read-only descriptor, or None when there is no such file."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except PermissionError:
        if os.path.isdir(path):
            return None
        raise


def _read_whole(fd: int) -> Optional[bytes]:
    """The whole file if it is at most _WHOLE_FILE_LIMIT bytes, else None."""
    first = os.read(fd, _READ_SIZE)
    if not first:
        return first
    parts = [first]
    total = len(first)
    while True:
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            return first if len(parts) == 1 else b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > _WHOLE_FILE_LIMIT:
            return None


def _feed_read(unit: _Unit, fd: int, data: Optional[bytes], starts_input: bool, need_digest: bool) -> Optional[bytes]:
    """Feed a file that `_read_whole` gave as `data` (None: too large to keep, so it is
    streamed from its start); returns the streamed file's digest when `need_digest`."""
    if data is not None:
        unit.feed(data, starts_input)
        return None
    hasher = hashlib.blake2b() if need_digest else None
    os.lseek(fd, 0, os.SEEK_SET)
    unit.feed_stream(fd, starts_input, hasher)
    return hasher.digest() if hasher is not None else None


def _feed_pair(bunit: _Unit, bfd: int, bstart: bool, dunit: _Unit, dfd: int, dstart: bool, need_text: bool) -> bool:
    """Feed a base/diff file pair; returns whether their bytes differ (if need_text).

    The textual-diff count is computed here by comparing bytes instead of running
    `git diff --no-index` as jit-analyze does; the count is the same for the paired files.
    Files too large to keep in memory are compared by size and a streamed digest.
    """
    bdata, ddata = _read_whole(bfd), _read_whole(dfd)
    bdigest = _feed_read(bunit, bfd, bdata, bstart, need_text)
    ddigest = _feed_read(dunit, dfd, ddata, dstart, need_text)
    return need_text and _differ(bdata, bdigest, ddata, ddigest)


def _differ(bdata: Optional[bytes], bdigest: Optional[bytes], ddata: Optional[bytes], ddigest: Optional[bytes]) -> bool:
    """Whether two files differ, from their bytes or (when too large to keep) streamed digests."""
    if bdata is not None and ddata is not None:
        return bdata != ddata
    if bdata is None and ddata is None:
        return bdigest != ddigest
    return True  # one fits in memory, the other does not: the sizes differ


def _pair_units(bfd: int, dfd: int, need_text: bool) -> Tuple[_Unit, _Unit, bool]:
    """A base/diff file pair, each file its own input: (base unit, diff unit, bytes differ).
    Identical files (most of a full listing dump) are parsed once and share one unit."""
    bdata, ddata = _read_whole(bfd), _read_whole(dfd)
    if bdata is not None and bdata == ddata:
        unit = _Unit()
        unit.feed(bdata, True)
        return unit, unit, False
    bunit, dunit = _Unit(), _Unit()
    bdigest = _feed_read(bunit, bfd, bdata, True, need_text)
    ddigest = _feed_read(dunit, dfd, ddata, True, need_text)
    return bunit, dunit, need_text and _differ(bdata, bdigest, ddata, ddigest)


class _Analysis:
    def __init__(self, options: AnalyzeOptions) -> None:
        self.options = options
        self.accumulators = [_MetricAccumulator(m, options.count, options.reconcile) for m in options.metrics]
        self.result = AnalysisResult(options, {})

    def compare(self, base_key: str, diff_key: str, bunit: _Unit, dunit: _Unit) -> None:
        result = self.result
        result.release_listings += bunit.release_footers + dunit.release_footers
        bt = bunit.measured_methods()
        dt = dunit.measured_methods()
        if not bt and not dt and (bunit.release_footers or dunit.release_footers):
            return  # nothing but release listings: not a 0-byte file
        result.paired_files += 1
        if len(bt) == 1 and len(dt) == 1:  # the usual per-context file pair
            (name, be), = bt.items()
            de = dt.get(name)
            if de is not None:
                for acc in self.accumulators:
                    acc.add_single_method_file(base_key, diff_key, name, be, de)
                return
        paired = []
        base_only = []
        for name, be in bt.items():
            de = dt.get(name)
            if de is None:
                base_only.append((name, be))
            else:
                paired.append((name, be, de))
        diff_only = [(n, de) for n, de in dt.items() if n not in bt] if len(paired) != len(dt) else []
        for acc in self.accumulators:
            acc.add_file(base_key, diff_key, paired, base_only, diff_only)
        if self.options.warn and (base_only or diff_only):
            result.method_mismatches.append(MethodMismatch(
                base_key, [_decode(n) for n, _ in base_only], [_decode(n) for n, _ in diff_only]))

    def finish(self) -> AnalysisResult:
        self.result.summaries = {acc.summary.metric: acc.finish() for acc in self.accumulators}
        return self.result


def validate_options(options: AnalyzeOptions) -> None:
    """Raise AnalyzeUsageError with jit-analyze's messages for invalid options."""
    messages = [f"Unknown metric '{m}'. Available metrics: {', '.join(METRICS)}"
                for m in options.metrics if m not in METRICS]
    if not options.metrics:
        messages.append("At least one metric is required")
    if set(options.override_base) != set(options.override_diff):
        messages.append("override-total-base-metric and override-total-diff-metric must either both be "
                        "specified or both not be specified")
    if options.count < 0:
        messages.append("Count (--count) must not be negative")
    if messages:
        raise AnalyzeUsageError("\n".join(messages))


def _existing_kind(path: str) -> str:
    if os.path.isdir(path):
        return "dir"
    if os.path.isfile(path):
        return "file"
    raise AnalyzeInputError(f"Could not find file '{os.path.abspath(path)}'.")


def _unit_key(path: str) -> str:
    return os.path.basename(os.path.normpath(path))


def analyze(base: PathLike, diff: PathLike, options: Optional[AnalyzeOptions] = None) -> AnalysisResult:
    """Compare the base and diff listings (files or directories) for every requested metric."""
    options = dataclasses.replace(options or AnalyzeOptions())
    options.metrics = list(dict.fromkeys(options.metrics))
    validate_options(options)
    base, diff = os.fspath(base), os.fspath(diff)
    base_kind, diff_kind = _existing_kind(base), _existing_kind(diff)
    run = _Analysis(options)
    try:
        if options.concat_files or (base_kind == "file" and diff_kind == "file"):
            _analyze_as_one_pair(run, base, base_kind, diff, diff_kind)
        else:
            _analyze_by_key(run, base, base_kind, diff, diff_kind)
    except OSError as e:
        if isinstance(e, AnalyzeInputError):
            raise
        raise AnalyzeInputError(f"{e.strerror or e}: '{e.filename}'" if e.filename else str(e)) from e
    return run.finish()


def _side_files(path: str, kind: str, options: AnalyzeOptions) -> Tuple[str, List[str]]:
    if kind == "file":
        return os.path.dirname(path) or os.curdir, [os.path.basename(path)]
    return path, _list_files(path, options.file_extension, options.file_filter, options.recursive)


def _analyze_by_key(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str) -> None:
    options, result = run.options, run.result
    need_text = not options.skip_text_diff
    base_root, base_keys = _side_files(base, base_kind, options)
    diff_root, diff_keys = _side_files(diff, diff_kind, options) if diff_kind == "file" else (diff, None)
    base_prefix, diff_prefix = os.path.join(base_root, ""), os.path.join(diff_root, "")
    for key in base_keys:
        dfd = None if diff_keys is not None and key not in diff_keys else _open_if_file(diff_prefix + key)
        if dfd is None:
            if options.warn:
                result.base_only_files.append(key)
            continue
        try:
            bfd = os.open(base_prefix + key, _OPEN_FLAGS)
            try:
                bunit, dunit, differ = _pair_units(bfd, dfd, need_text)
            finally:
                os.close(bfd)
        finally:
            os.close(dfd)
        if differ:
            result.text_diff_files += 1
        run.compare(key, key, bunit, dunit)
    if options.warn:
        if diff_keys is None:
            diff_keys = _list_files(diff, options.file_extension, options.file_filter, options.recursive)
        base_set = set(base_keys)
        result.diff_only_files = [k for k in diff_keys if k not in base_set]


def _feed_path(unit: _Unit, path: str, starts_input: bool) -> None:
    fd = os.open(path, _OPEN_FLAGS)
    try:
        _feed_read(unit, fd, _read_whole(fd), starts_input, False)
    finally:
        os.close(fd)


def _analyze_as_one_pair(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str) -> None:
    """Single files on both sides, or --concat-files: one unit per side."""
    options, result = run.options, run.result
    need_text = not options.skip_text_diff
    base_root, base_keys = _side_files(base, base_kind, options)
    diff_root, diff_keys = _side_files(diff, diff_kind, options)
    bunit, dunit = _Unit(), _Unit()
    if base_kind == "file" and diff_kind == "file":
        pairs: List[Tuple[Optional[str], Optional[str]]] = [(base_keys[0], diff_keys[0])]
    else:
        pairs = _merge_keys(base_keys, diff_keys)
    base_started = diff_started = False
    for bkey, dkey in pairs:
        if bkey is not None and dkey is not None:
            bfd = os.open(os.path.join(base_root, bkey), _OPEN_FLAGS)
            try:
                dfd = os.open(os.path.join(diff_root, dkey), _OPEN_FLAGS)
                try:
                    if _feed_pair(bunit, bfd, not base_started, dunit, dfd, not diff_started, need_text):
                        result.text_diff_files += 1
                finally:
                    os.close(dfd)
            finally:
                os.close(bfd)
            base_started = diff_started = True
        elif bkey is not None:
            _feed_path(bunit, os.path.join(base_root, bkey), not base_started)
            base_started = True
            if options.warn:
                result.base_only_files.append(bkey)
        elif dkey is not None:
            _feed_path(dunit, os.path.join(diff_root, dkey), not diff_started)
            diff_started = True
            if options.warn:
                result.diff_only_files.append(dkey)
    run.compare(_unit_key(base), _unit_key(diff), bunit, dunit)


def _merge_keys(base_keys: List[str], diff_keys: List[str]) -> List[Tuple[Optional[str], Optional[str]]]:
    """Sorted union of both key lists, paired where a key is on both sides."""
    out: List[Tuple[Optional[str], Optional[str]]] = []
    i = j = 0
    while i < len(base_keys) or j < len(diff_keys):
        b = base_keys[i] if i < len(base_keys) else None
        d = diff_keys[j] if j < len(diff_keys) else None
        if b is not None and (d is None or b < d):
            out.append((b, None))
            i += 1
        elif d is not None and (b is None or d < b):
            out.append((None, d))
            j += 1
        else:
            out.append((b, d))
            i += 1
            j += 1
    return out


# ------------------------------------------------------------------ rendering

_MARKER = object()  # where console output has an empty line and markdown the <details> fence
_DETAILS_OPEN = "```\n<details>\n\n<summary>Detail diffs</summary>\n\n```\n"
_SEPARATOR = "-" * 80


def _release_line(count: int) -> str:
    return (f"No metrics: {count} release JIT listing(s) (footer has no prolog size/PerfScore); "
            "use a checked JIT.")


def _totals_lines(result: AnalysisResult, s: MetricSummary, units: str) -> List[str]:
    metric, options = s.metric, result.options
    if metric in options.override_base:
        ob, od = float(options.override_base[metric]), float(options.override_diff[metric])
        return [f"Total {units} of base: {format_round_trip(ob)} (overridden on cmd)",
                f"Total {units} of diff: {format_round_trip(od)} (overridden on cmd)",
                f"Total {units} of delta: {format_round_trip(od - ob)} "
                f"({format_percent_invariant(_ratio(od - ob, ob))} of base)"]
    if s.base_total != 0:
        delta = s.diff_total - s.base_total
        lines = [f"Total {units} of base: {format_round_trip(s.base_total)}",
                 f"Total {units} of diff: {format_round_trip(s.diff_total)}",
                 f"Total {units} of delta: {format_value(metric, delta)} "
                 f"({format_percent_invariant(_ratio(delta, s.base_total))} of base)"]
        if s.relative_total != 0:
            lines.append(f"Total relative delta: {format_fixed2(s.relative_total)}")
        return lines
    return [f"Warning: the base metric is 0, the diff metric is {format_value(metric, s.diff_total)}, "
            "have you used a release version?"]


def _verdict_lines(s: MetricSummary) -> List[str]:
    lines = []
    if s.delta_total != 0:
        lines.append("    diff is an improvement." if s.delta_total < 0 else "    diff is a regression.")
    if s.relative_total != 0:  # NaN counts as non-zero and, not being < 0, as a regression
        lines.append("    relative diff is an improvement." if s.relative_total < 0
                     else "    relative diff is a regression.")
    return lines


def _reconciliation_lines(s: MetricSummary, unit: str) -> List[str]:
    if s.base_unique_methods + s.diff_unique_methods == 0:
        return []
    net = s.diff_unique_value - s.base_unique_value
    return ["",
            f"Total {unit} diff includes {format_round_trip(net)} {unit}s from reconciling methods",
            f"\tBase had {s.base_unique_methods:>4} unique methods, "
            f"{format_round_trip(s.base_unique_value):>8} unique {unit}s",
            f"\tDiff had {s.diff_unique_methods:>4} unique methods, "
            f"{format_round_trip(s.diff_unique_value):>8} unique {unit}s"]


def _file_lines(title: str, metric: str, entries: List[FileEntry]) -> List[str]:
    if not entries:
        return []
    return ["", title] + [
        f"    {format_value(metric, f.delta):>8} : {f.diff_key} "
        f"({format_percent_current(_ratio(f.delta, f.base))} of base)" for f in entries]


def _instances_suffix(m: MethodEntry) -> str:
    if m.base_instances == m.diff_instances:
        return f" ({m.base_instances} methods)" if m.base_instances > 1 else ""
    return f" ({m.base_instances} base, {m.diff_instances} diff methods)"


def _method_lines(title: str, metric: str, entries: List[MethodEntry]) -> List[str]:
    if not entries:
        return []
    return ["", title] + [
        f"    {format_value(metric, m.delta):>8} ({format_percent_current(_ratio(m.delta, m.base)):>6} of base)"
        f" : {m.file_key} - {m.name}{_instances_suffix(m)}" for m in entries]


def _report_lines(result: AnalysisResult, metric: str) -> list:
    """The report of one metric as lines; `_MARKER` stands for the marker line (§8.4)."""
    options, s, info = result.options, result.summaries[metric], METRICS[metric]
    unit, units = info.unit, info.unit + "s"
    lines: list = []
    if options.note is not None:
        lines += ["", options.note]
    heading = f"Summary of {info.display_name} diffs:"
    if options.file_filter:
        heading += f" (using filter '{options.file_filter}')"
    lines += ["", heading, "(Lower is better)", ""]
    if result.release_listings:
        lines.append(_release_line(result.release_listings))
    lines += _totals_lines(result, s, units)
    lines += _verdict_lines(s)
    lines.append(_MARKER)
    if options.reconcile:
        lines += _reconciliation_lines(s, unit)
    if options.count == 0:
        return lines
    lines += _file_lines(f"Top file regressions ({units}):", metric, s.top_file_regressions)
    lines += _file_lines(f"Top file improvements ({units}):", metric, s.top_file_improvements)
    lines += ["", f"{s.changed_files} total files with {info.display_name} differences "
                  f"({s.files_improved} improved, {s.files_regressed} regressed), {s.files_unchanged} unchanged."]
    lines += _method_lines(f"Top method regressions ({units}):", metric, s.top_method_regressions)
    lines += _method_lines(f"Top method improvements ({units}):", metric, s.top_method_improvements)
    lines += _method_lines("Top method regressions (percentages):", metric, s.top_method_regressions_by_percentage)
    lines += _method_lines("Top method improvements (percentages):", metric,
                           s.top_method_improvements_by_percentage)
    if not options.is_subset_of_diffs:
        counts = (f"{s.changed_methods} total methods with {info.display_name} differences "
                  f"({s.methods_improved} improved, {s.methods_regressed} regressed)")
        lines += ["", counts + "." if options.is_diffs_only else f"{counts}, {s.unchanged_methods} unchanged."]
    return lines


def render_text(result: AnalysisResult, metric: str) -> str:
    """Console form of one metric's report: marker line empty, then 80 `-`."""
    text = "".join(("" if line is _MARKER else line) + "\n" for line in _report_lines(result, metric))
    return text + _SEPARATOR + "\n"


def render_console(result: AnalysisResult) -> str:
    """Everything jit-analyze prints on stdout for the reports, metric by metric."""
    parts = []
    for metric in result.summaries:
        if result.text_diff_files and not result.options.skip_text_diff:
            parts.append(f"Found {result.text_diff_files} files with textual diffs.\n")
        parts.append(render_text(result, metric))
    return "".join(parts)


def render_markdown(result: AnalysisResult, metrics: Optional[Sequence[str]] = None) -> str:
    """The `--md` file (§8.5) for the given metrics (default: all, in order)."""
    parts = []
    for metric in (metrics if metrics is not None else list(result.summaries)):
        body = "".join((_DETAILS_OPEN if line is _MARKER else line) + "\n"
                       for line in _report_lines(result, metric))
        parts.append("```\n" + body + "\n```\n\n</details>\n\n" + _SEPARATOR + "\n\n")
    return "".join(parts)


def render_warnings(result: AnalysisResult) -> str:
    """`--warn`: files and methods present on one side only."""
    lines: List[str] = []
    for side, other, keys in (("base", "diff", result.base_only_files), ("diff", "base", result.diff_only_files)):
        if keys:
            lines += ["", f"Warning: {len(keys)} files in {side} but not in {other}.", "",
                      f"Only in {side} files:"] + keys
    for mm in result.method_mismatches:
        if mm.only_in_base:
            lines += ["Mismatch: methods in base not in diff in", f" {mm.base_key}:"]
            lines += [f"    {n}" for n in mm.only_in_base]
        if mm.only_in_diff:
            lines += ["Mismatch: methods in diff not in base in", f" {mm.base_key}:"]
            lines += [f"    {n}" for n in mm.only_in_diff]
    return "".join(line + "\n" for line in lines)


# ------------------------------------------------------------------ output files


def write_text_atomically(path: PathLike, text: str) -> None:
    """UTF-8 with LF line ends, written to a temp name in the same folder then renamed."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".~" + os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_markdown_per_metric(result: AnalysisResult, folder: PathLike) -> List[str]:
    """`<folder>/<Metric>.md` for every metric of the result; returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for metric in result.summaries:
        path = os.path.join(os.fspath(folder), metric + ".md")
        write_text_atomically(path, render_markdown(result, [metric]))
        paths.append(path)
    return paths


def retain_only_top_files(result: AnalysisResult, base: PathLike, diff: PathLike) -> int:
    """Delete every listing (both trees) whose key is in no top list; returns the count.

    Only directories compared file by file are touched (not --concat-files or single files).
    """
    options = result.options
    base, diff = os.fspath(base), os.fspath(diff)
    if options.concat_files or not (os.path.isdir(base) and os.path.isdir(diff)):
        return 0
    keep = result.top_file_keys()
    deleted = 0
    for root in (base, diff):
        for key in _list_files(root, options.file_extension, options.file_filter, options.recursive):
            if key not in keep:
                os.remove(os.path.join(root, key))
                deleted += 1
    return deleted


# ------------------------------------------------------------------ command line

_HELP_EPILOG = """\
Output: one report per metric on stdout (as jit-analyze prints it), preceded by
"Found N files with textual diffs." when paired files differ byte-wise.

Exit code (as jit-analyze): the sum over the requested metrics of -1 for each metric
whose total delta is not 0 (0 = no diffs; on Unix -1 is seen as 255, -2 as 254).
Invalid options: "Error: ..." on stderr, exit 1. A missing input path:
"Error: ..." on stdout, exit 0 (as jit-analyze).

Extensions beyond jit-analyze:
  --override-total-base-metric METRIC=VALUE (and the diff form) override one metric's
      printed totals; repeatable. A bare VALUE applies to every requested metric.
  --md-per-metric DIR writes DIR/<Metric>.md (one markdown summary per metric).
  Release-JIT listings (footer "; Total bytes of code N" without prolog size) are not
      counted as 0-byte methods; each report then says
      "No metrics: <n> release JIT listing(s) (...); use a checked JIT."

Differences from jit-analyze: --tsv/--json are not supported; textual diffs are counted
by comparing paired files' bytes (no git); ties in the top lists are broken by name
(an ICU-like culture order) and then file key; repeated -m values are reported once.
"""


class _UsageError(Exception):
    pass


class _ParserExit(Exception):
    def __init__(self, status: int, message: Optional[str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)

    def exit(self, status: int = 0, message: Optional[str] = None) -> None:  # type: ignore[override]
        raise _ParserExit(status, message)

    def print_help(self, file: Optional[IO[str]] = None) -> None:
        raise _ParserExit(0, self.format_help())


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jitanalyze.py", allow_abbrev=False, epilog=_HELP_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Compare base and diff JIT disassembly (.dasm) listings; "
                            "a built-in equivalent of jit-analyze.")
    p.add_argument("-b", "--base", help="base file or directory (required)")
    p.add_argument("-d", "--diff", help="diff file or directory (required)")
    p.add_argument("-r", "--recursive", action="store_true", help="search directories recursively")
    p.add_argument("--file-extension", "--fileExtension", "--ext", dest="file_extension", default=".dasm",
                   help="files considered are *EXT (default .dasm)")
    p.add_argument("-c", "--count", default="20", help="entries per top list; 0 prints only the totals (default 20)")
    p.add_argument("-w", "--warn", action="store_true", help="list files and methods present on one side only")
    p.add_argument("-m", "--metrics", action="append", default=[], metavar="METRIC",
                   help="repeatable or comma list, exact case: " + ", ".join(METRICS) + " (default CodeSize)")
    p.add_argument("--note", help="extra first line of each report")
    p.add_argument("--no-reconcile", "--noreconcile", dest="no_reconcile", action="store_true",
                   help="do not count methods present on one side only")
    p.add_argument("--md", help="also write the reports as markdown to this file")
    p.add_argument("--md-per-metric", metavar="DIR", help="also write DIR/<Metric>.md per metric (extension)")
    p.add_argument("--filter", help="file-name pattern, joined with the extension")
    p.add_argument("--skip-text-diff", "--skiptextdiff", dest="skip_text_diff", action="store_true",
                   help="do not count files with textual diffs")
    p.add_argument("--retain-only-top-files", "--retainOnlyTopFiles", dest="retain_only_top_files",
                   action="store_true", help="delete every listing not named in a top list")
    p.add_argument("--override-total-base-metric", action="append", default=[], metavar="[METRIC=]VALUE",
                   help="printed base total; both or neither of the two overrides")
    p.add_argument("--override-total-diff-metric", action="append", default=[], metavar="[METRIC=]VALUE",
                   help="printed diff total")
    p.add_argument("--is-diffs-only", action="store_true", help="inputs hold only contexts with diffs")
    p.add_argument("--is-subset-of-diffs", action="store_true", help="inputs are a subset of the diffs")
    p.add_argument("--concat-files", action="store_true",
                   help="treat all base files as one unit and all diff files as another")
    return p


_NUMBER_RE = re.compile(r"^\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")


def _parse_double(text: str, option: str) -> float:
    if not _NUMBER_RE.match(text):
        raise _UsageError(f"Invalid value '{text}' for --{option} (expected a number or <Metric>=<number>)")
    return float(text)


def _parse_overrides(values: List[str], option: str, messages: List[str]) -> Tuple[Optional[float], Dict[str, float]]:
    bare: Optional[float] = None
    per_metric: Dict[str, float] = {}
    for value in values:
        metric, sep, number = value.partition("=")
        if not sep:
            bare = _parse_double(value, option)
        elif metric.strip() not in METRICS:
            messages.append(f"Unknown metric '{metric.strip()}'. Available metrics: {', '.join(METRICS)}")
        else:
            per_metric[metric.strip()] = _parse_double(number, option)
    return bare, per_metric


def options_from_args(args: argparse.Namespace) -> Tuple[AnalyzeOptions, List[str]]:
    """Options plus the list of validation messages (empty when valid)."""
    messages: List[str] = []
    if not args.base:
        messages.append("Base path (--base) is required")
    if not args.diff:
        messages.append("Diff path (--diff) is required")
    metrics = [m.strip() for value in args.metrics for m in value.split(",") if m.strip()] or ["CodeSize"]
    metrics = list(dict.fromkeys(metrics))
    messages += [f"Unknown metric '{m}'. Available metrics: {', '.join(METRICS)}" for m in metrics if m not in METRICS]
    try:
        count = int(args.count)
    except ValueError:
        count = -1
    if count < 0:
        messages.append(f"Count (--count) must be a non-negative integer, not '{args.count}'")
    base_bare, base_each = _parse_overrides(args.override_total_base_metric, "override-total-base-metric", messages)
    diff_bare, diff_each = _parse_overrides(args.override_total_diff_metric, "override-total-diff-metric", messages)
    override_base: Dict[str, float] = {}
    override_diff: Dict[str, float] = {}
    for m in metrics:
        b, d = base_each.get(m, base_bare), diff_each.get(m, diff_bare)
        if b is not None and d is not None:
            override_base[m], override_diff[m] = b, d
        elif (b is None) != (d is None):
            messages.append("override-total-base-metric and override-total-diff-metric must either both be "
                            "specified or both not be specified")
            break
    options = AnalyzeOptions(
        metrics=metrics, recursive=args.recursive, file_extension=args.file_extension,
        file_filter=args.filter, count=max(count, 0), reconcile=not args.no_reconcile,
        concat_files=args.concat_files, skip_text_diff=args.skip_text_diff, note=args.note,
        override_base=override_base, override_diff=override_diff, is_diffs_only=args.is_diffs_only,
        is_subset_of_diffs=args.is_subset_of_diffs, warn=args.warn)
    return options, messages


def _write(stream: IO[str], text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def run_cli(argv: Optional[Sequence[str]] = None, stdout: Optional[IO[str]] = None,
            stderr: Optional[IO[str]] = None) -> int:
    """Run like the jit-analyze command line; returns its exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        options, messages = options_from_args(args)
    except _ParserExit as e:
        if e.message:
            _write(out if e.status == 0 else err, e.message)
        return e.status
    except _UsageError as e:
        _write(err, f"Error: {e}\n")
        return 1
    if messages:
        _write(err, "Error: " + "\n".join(messages) + "\n")
        return 1
    try:
        result = analyze(args.base, args.diff, options)
    except AnalyzeUsageError as e:
        _write(err, f"Error: {e}\n")
        return 1
    except AnalyzeInputError as e:
        _write(out, f"Error: {e}\n")
        return 0
    if options.warn:
        _write(out, render_warnings(result))
    _write(out, render_console(result))
    try:
        if args.md:
            write_text_atomically(args.md, render_markdown(result))
        if args.md_per_metric:
            write_markdown_per_metric(result, args.md_per_metric)
    except OSError as e:
        _write(err, f"Error: cannot write markdown: {e}\n")
        return 1
    if args.retain_only_top_files:
        try:
            deleted = retain_only_top_files(result, args.base, args.diff)
        except OSError as e:
            _write(err, f"Error: cannot delete listings: {e}\n")
            return 1
        _write(out, f"Deleted {deleted} .dasm files.\n")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(run_cli())
