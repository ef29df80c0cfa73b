"""Comparing base and diff listings for jitanalyze.py (docs/contracts.md §8.1, §8.3).

The options and result types of an analysis, and the single pass that turns each
base/diff pair of method tables (`jitanalyze_scan._Unit`) into every requested metric's
totals, counts and top lists. Only the top `--count` entries of each list are kept, so
memory does not grow with the number of files. Ties are broken with an ICU-like culture
order (`collation_key`), as jit-analyze's .NET string comparison does.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from spmi.analyzer.scan import _INSTANCES, METRICS, _decode, _metric_getter, _Unit, code_size_only


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
        return [item for _, item in self.kept()]

    def kept(self) -> List[Tuple[float, tuple]]:
        """The (primary, item) pairs kept, best first (equal keys in the order offered)."""
        self._prune()
        return self.items

    def offer_kept(self, kept: List[Tuple[float, tuple]]) -> None:
        """Offer another list's `kept()`, offered after everything offered here so far: the result
        is what offering that list's own offers here would have given."""
        for primary, item in kept:
            self.offer(primary, item)


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
    unavailable_methods: int = 0  # methods left out: only 2026 release footers, which lack this metric
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
    export: bool = False  # collect what --tsv and --json write (spmi/analyzer/export.py)
    keep_file_pairs: bool = False  # keep the keys of every compared file pair (--retain-only-top-files)
    parallelism: int = 1  # processes that read, scan and compare the file pairs (--parallelism; 1: this one only)
    #: --report-release-listings (suite extension): release listings said to be such and left out where they
    #: carry no metric; off, they are read as jit-analyze reads them (zeros where the footer has no value)
    report_release: bool = False


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
    #: keys (paths relative to the roots) of the files that differ as text, over the whole trees (§8.4)
    text_diff_keys: Set[str] = field(default_factory=set)
    release_listings: int = 0
    base_only_files: List[str] = field(default_factory=list)
    diff_only_files: List[str] = field(default_factory=list)
    method_mismatches: List[MethodMismatch] = field(default_factory=list)
    #: (base key, diff key) of every compared file pair, with `keep_file_pairs`
    file_pairs: List[Tuple[str, str]] = field(default_factory=list)
    #: what --tsv/--json write, with `export` (an `export.Exporter`)
    export: Optional[object] = None

    @property
    def exit_code(self) -> int:
        """jit-analyze's exit code: -1 per metric whose total delta is not 0."""
        return -sum(1 for s in self.summaries.values() if s.delta_total != 0)

    def top_file_keys(self, metric: str) -> Set[Tuple[str, str]]:
        """(base key, diff key) of the file pairs in `metric`'s top file lists (what
        --retain-only-top-files keeps for that metric, §8.1)."""
        s = self.summaries[metric]
        return {(f.base_key, f.diff_key) for f in s.top_file_regressions + s.top_file_improvements}


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
            frel += delta / b if b else _ratio(delta, b)
            if delta != 0:
                self._method_changed(name, base_key, delta, b, be[_INSTANCES], de[_INSTANCES])
        s.paired_methods += len(paired)
        if self.reconcile:
            for name, be in base_only:
                b = get(be)
                fbase += b
                fdelta -= b
                s.base_unique_methods += 1
                self._add_unique(True, b)
                if b != 0:
                    self._method_changed(name, base_key, self.zero - b, b, be[_INSTANCES], 0)
            for name, de in diff_only:
                d = get(de)
                fdiff += d
                fdelta += d
                s.diff_unique_methods += 1
                self._add_unique(False, d)
                if d != 0:
                    self._method_changed(name, base_key, d, self.zero, 0, de[_INSTANCES])
        self._add_totals(fbase, fdiff, fdelta, frel)
        self._file_compared(base_key, diff_key, fdelta, fbase)

    def add_single_method_file(self, base_key: str, diff_key: str, name: bytes, be: list, de: list) -> None:
        """add_file() for a file pair holding the same single method on both sides."""
        b = self.get(be)
        d = self.get(de)
        delta = d - b
        self.summary.paired_methods += 1
        self._add_totals(b, d, delta, delta / b if b else _ratio(delta, b))
        if delta != 0:
            self._method_changed(name, base_key, delta, b, be[_INSTANCES], de[_INSTANCES])
        self._file_compared(base_key, diff_key, delta, b)

    def _add_totals(self, base: float, diff: float, delta: float, relative: float) -> None:
        """One compared file pair's totals."""
        s = self.summary
        s.base_total += base
        s.diff_total += diff
        s.delta_total += delta
        s.relative_total += relative

    def _add_unique(self, in_base: bool, value: float) -> None:
        """A method on one side only (with reconciliation)."""
        if in_base:
            self.summary.base_unique_value += value
        else:
            self.summary.diff_unique_value += value

    def _file_compared(self, base_key: str, diff_key: str, delta: float, base: float) -> None:
        """Count a compared file pair as improved, regressed or unchanged by its total delta."""
        s = self.summary
        if delta < 0:
            s.files_improved += 1
            if self.collect:
                self.file_imp.offer(delta, (base_key, diff_key, delta, base))
        elif delta > 0:
            s.files_regressed += 1
            if self.collect:
                self.file_reg.offer(-delta, (base_key, diff_key, delta, base))
        else:
            s.files_unchanged += 1

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

    def _tops(self) -> List[_TopN]:
        return [self.file_reg, self.file_imp, self.meth_reg, self.meth_imp, self.meth_reg_pct, self.meth_imp_pct]

    def absorb(self, part: "MetricPart") -> None:
        """Add what a later run of pairs found (`_AddendsKept.part()`), as if its pairs came here."""
        s, p = self.summary, part.summary
        for name in _COUNTED_FIELDS:
            setattr(s, name, getattr(s, name) + getattr(p, name))
        for name, addends in part.addends.items():  # added one by one, in order: floats round per addition
            setattr(s, name, functools.reduce(operator.add, addends, getattr(s, name)))
        for top, kept in zip(self._tops(), part.tops):
            top.offer_kept(kept)

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


#: the summary's counts, which add up in any order
_COUNTED_FIELDS = ("files_improved", "files_regressed", "files_unchanged", "methods_improved", "methods_regressed",
                   "paired_methods", "unavailable_methods", "base_unique_methods", "diff_unique_methods")
#: the summary's sums: a float sum depends on the order of its additions
_SUMMED_FIELDS = ("base_total", "diff_total", "delta_total", "relative_total", "base_unique_value",
                  "diff_unique_value")


@dataclass
class MetricPart:
    """What one metric's accumulator found over a run of file pairs, to be absorbed by another."""

    summary: MetricSummary  # its counts (its sums are in `addends`)
    addends: Dict[str, List[float]]  # per summed field, every value added, in order
    tops: List[List[Tuple[float, tuple]]]  # the top lists' kept offers (`_MetricAccumulator._tops`)


class _AddendsKept(_MetricAccumulator):
    """An accumulator over part of the pairs (a worker process's chunk): it keeps its sums' addends,
    so that adding them in order after the earlier parts gives the very sums of one pass."""

    def __init__(self, metric: str, count: int, reconcile: bool) -> None:
        super().__init__(metric, count, reconcile)
        self.addends: Dict[str, List[float]] = {name: [] for name in _SUMMED_FIELDS}
        a = self.addends
        self._totals = (a["base_total"].append, a["diff_total"].append, a["delta_total"].append,
                        a["relative_total"].append)

    def _add_totals(self, base: float, diff: float, delta: float, relative: float) -> None:
        add_base, add_diff, add_delta, add_relative = self._totals
        add_base(base)
        add_diff(diff)
        add_delta(delta)
        add_relative(relative)

    def _add_unique(self, in_base: bool, value: float) -> None:
        self.addends["base_unique_value" if in_base else "diff_unique_value"].append(value)

    def part(self) -> MetricPart:
        return MetricPart(self.summary, self.addends, [top.kept() for top in self._tops()])


@dataclass
class AnalysisPart:
    """What an analysis of a run of file pairs found (`_Analysis(..., part_of_many=True)`)."""

    metrics: List[MetricPart]
    paired_files: int
    release_listings: int
    base_only_files: List[str]
    method_mismatches: List[MethodMismatch]
    file_pairs: List[Tuple[str, str]]
    export: Any  # the exporter's part (`export.Exporter.part`), or None


class _Analysis:
    """One analysis: compares each base/diff unit pair for every requested metric."""

    def __init__(self, options: AnalyzeOptions, exporter: Optional[Any] = None, part_of_many: bool = False) -> None:
        """`part_of_many`: this analysis covers a run of the pairs, and its `part()` is absorbed by
        the analysis of them all."""
        self.options = options
        kind = _AddendsKept if part_of_many else _MetricAccumulator
        self.accumulators = [kind(m, options.count, options.reconcile) for m in options.metrics]
        self.result = AnalysisResult(options, {}, export=exporter)
        self.exporter = exporter

    def compare(self, base_key: str, diff_key: str, bunit: _Unit, dunit: _Unit) -> None:
        result = self.result
        report_release = self.options.report_release
        if report_release:
            result.release_listings += bunit.release_footers + dunit.release_footers
            bt, dt = bunit.measured_methods(), dunit.measured_methods()
            if not bt and not dt and (bunit.release_footers or dunit.release_footers):
                return  # nothing but release listings: not a 0-byte file
        else:  # as jit-analyze: every group, a release footer's missing values are zeros (§8.2)
            bt, dt = bunit.methods, dunit.methods
        result.paired_files += 1
        if self.options.keep_file_pairs:
            result.file_pairs.append((base_key, diff_key))
        if self.exporter is not None:
            self.exporter.add(base_key, diff_key, bt, dt)
        if report_release and (bunit.release_methods or dunit.release_methods):
            self._compare_with_release_methods(base_key, diff_key, bt, dt)
            return
        if len(bt) == 1 and len(dt) == 1:  # the usual per-context file pair
            (name, be), = bt.items()
            de = dt.get(name)
            if de is not None:
                for acc in self.accumulators:
                    acc.add_single_method_file(base_key, diff_key, name, be, de)
                return
        self._compare_tables(self.accumulators, base_key, diff_key, bt, dt, record_mismatches=True)

    def _compare_tables(self, accumulators: List[_MetricAccumulator], base_key: str, diff_key: str,
                        bt: Dict[bytes, list], dt: Dict[bytes, list], record_mismatches: bool) -> None:
        paired = []
        base_only = []
        for name, be in bt.items():
            de = dt.get(name)
            if de is None:
                base_only.append((name, be))
            else:
                paired.append((name, be, de))
        diff_only = [(n, de) for n, de in dt.items() if n not in bt] if len(paired) != len(dt) else []
        for acc in accumulators:
            acc.add_file(base_key, diff_key, paired, base_only, diff_only)
        if record_mismatches and self.options.warn and (base_only or diff_only):
            self.result.method_mismatches.append(MethodMismatch(
                base_key, [_decode(n) for n, _ in base_only], [_decode(n) for n, _ in diff_only]))

    def _compare_with_release_methods(self, base_key: str, diff_key: str, bt: Dict[bytes, list],
                                      dt: Dict[bytes, list]) -> None:
        """A pair holding 2026 release footers (§7.5): they count for CodeSize; for any other metric a
        method whose footer on either side lacks it is left out of that metric (never counted as 0)."""
        code_size = [acc for acc in self.accumulators if acc.summary.metric == "CodeSize"]
        others = [acc for acc in self.accumulators if acc.summary.metric != "CodeSize"]
        self._compare_tables(code_size, base_key, diff_key, bt, dt, record_mismatches=True)
        if not others:
            return
        unavailable = {n for table in (bt, dt) for n, e in table.items() if code_size_only(e)}
        for acc in others:
            acc.summary.unavailable_methods += len(unavailable)
        bt_known = {n: e for n, e in bt.items() if n not in unavailable}
        dt_known = {n: e for n, e in dt.items() if n not in unavailable}
        if bt_known or dt_known:
            self._compare_tables(others, base_key, diff_key, bt_known, dt_known, record_mismatches=False)

    def part(self) -> AnalysisPart:
        """What this analysis of part of the pairs found (made with `part_of_many`)."""
        r = self.result
        return AnalysisPart([acc.part() for acc in self.accumulators],  # type: ignore[attr-defined]
                            r.paired_files, r.release_listings, r.base_only_files, r.method_mismatches,
                            r.file_pairs, None if self.exporter is None else self.exporter.part())

    def absorb(self, part: AnalysisPart) -> None:
        """Add the part found over the pairs after those compared here so far."""
        r = self.result
        r.paired_files += part.paired_files
        r.release_listings += part.release_listings
        r.base_only_files += part.base_only_files
        r.method_mismatches += part.method_mismatches
        r.file_pairs += part.file_pairs
        for acc, metric_part in zip(self.accumulators, part.metrics):
            acc.absorb(metric_part)
        if self.exporter is not None:
            self.exporter.absorb(part.export)

    def finish(self) -> AnalysisResult:
        self.result.summaries = {acc.summary.metric: acc.finish() for acc in self.accumulators}
        return self.result
