"""Metric diffs (tpdiff, memdiff): aggregation, significance and the summary model.

Everything here is pure: rows of superpmi's details CSV go in, per-collection
totals (Overall / MinOpts / FullOpts for every metric), the example contexts a
summary shows and a JSON-ready `MetricDiffRun` come out (docs/contracts.md §12.11–§12.13).

tpdiff is the metric diff of the `instructions` column (counted by PIN);
memdiff diffs every discovered metric and focuses on `BytesAllocated`; metricdiff
(§12.12a) diffs every discovered metric with no focus of its own.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass, field
from itertools import compress, repeat
from operator import and_, eq, gt, le, lt, mul, neg, not_, sub, truediv, truth
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spmi.base import schema
from spmi.base.columns import Number, masked_sum

try:
    from typing import Protocol
except ImportError:  # pragma: no cover - Python < 3.8
    Protocol = object  # type: ignore[assignment]


ROWS = ("Overall", "MinOpts", "FullOpts")
CLASSES = ("FullOpts", "MinOpts")  # per-context example classes, in summary order
INSTRUCTIONS = "instructions"
BYTES_ALLOCATED = "BytesAllocated"
SUCCESS, MISS, ERROR = "Success", "Miss", "Error"
TOP_COUNT = 20
#: tpdiff example rows need at least this many instructions of change (§12.11)
TPDIFF_MIN_EXAMPLE_DELTA = 50
SUMMARY_VERSION = 1
TPDIFF, MEMDIFF, METRICDIFF = "tpdiff", "memdiff", "metricdiff"


# ---------------------------------------------------------------- input rows

class DiffRow(Protocol):
    """One row of a diff-mode details CSV (`details.DetailsRow` is one)."""

    context: int
    method_name: str
    minopts: bool
    base_result: str
    diff_result: str
    base_instructions: int
    diff_instructions: int

    def base(self, metric: str) -> Number: ...

    def diff(self, metric: str) -> Number: ...


def row_values(row: DiffRow, metric: str) -> Tuple[Number, Number]:
    """(base, diff) of a metric; `instructions` is the PIN count column pair."""
    if metric == INSTRUCTIONS:
        return row.base_instructions, row.diff_instructions
    return row.base(metric), row.diff(metric)


def both_success(row: DiffRow) -> bool:
    return row.base_result == SUCCESS and row.diff_result == SUCCESS


def row_class(row: DiffRow) -> str:
    return "MinOpts" if row.minopts else "FullOpts"


# ---------------------------------------------------------------- arithmetic

def pct_change(base: Number, diff: Number) -> float:
    """(diff-base)/base×100; base 0 gives ±∞ when diff differs, else 0."""
    if base == 0:
        if diff == 0:
            return 0.0
        return math.inf if diff > 0 else -math.inf
    return (diff - base) / abs(base) * 100.0


def is_significant(base: Number, diff: Number) -> bool:
    """Upstream's rule (§12.11): the percentage rounded (Python `round`) to 2 decimals is not 0;
    base 0 is significant exactly when diff is not 0. The suite's summaries judge by
    `reports/significance` instead (§12.12b)."""
    if base == 0:
        return diff != 0
    return round((diff - base) / abs(base) * 100.0, 2) != 0


# ---------------------------------------------------------------- aggregates

@dataclass
class Totals:
    """Base and diff sums of a metric."""

    base: Number = 0
    diff: Number = 0

    @property
    def pct(self) -> float:
        return pct_change(self.base, self.diff)


@dataclass
class SideCounts:
    """Replay results of one JIT: successes, misses, failures."""

    successes: int = 0
    misses: int = 0
    failures: int = 0

    def add(self, result: str) -> None:
        if result == SUCCESS:
            self.successes += 1
        elif result == MISS:
            self.misses += 1
        else:
            self.failures += 1

    @property
    def total(self) -> int:
        return self.successes + self.misses + self.failures


@dataclass
class Example:
    """One context shown in the per-method tables."""

    collection: str
    context: int
    method: str
    row_class: str
    base: Number
    diff: Number

    def __post_init__(self) -> None:
        # ranking reads these many times; they are not fields (not in the JSON)
        self._delta = self.diff - self.base
        self._pct = pct_change(self.base, self.diff)

    @property
    def delta(self) -> Number:
        return self._delta

    @property
    def pct(self) -> float:
        return self._pct


@dataclass
class CollectionResult:
    """Aggregates of one collection: metric -> row -> totals, plus counts and examples."""

    name: str
    metrics: List[str]
    kinds: Dict[str, str]
    totals: Dict[str, Dict[str, Totals]]
    contexts: Dict[str, int]
    base_counts: SideCounts
    diff_counts: SideCounts
    examples: List[Example] = field(default_factory=list)
    #: the A/A spread (in %) per metric and row, when `--noise_check` measured it (reports/significance)
    noise: Dict[str, Dict[str, float]] = field(default_factory=dict)
    #: contexts the A/A replay failed to compile (its details CSV), and how it ended when not cleanly
    #: (superpmi's verdict, e.g. "Compilation failures"); the summary's significance line names both
    noise_failed: int = 0
    noise_problem: str = ""

    def total(self, metric: str, row: str = "Overall") -> Totals:
        return self.totals[metric][row]

    def has_metric(self, metric: str) -> bool:
        return metric in self.totals


class DiffColumns(Protocol):
    """The per-row fields of a diff-mode details table, column-wise (`details.DetailsColumns`)."""

    @property
    def context(self) -> Sequence[int]: ...

    @property
    def method_name(self) -> Sequence[str]: ...

    @property
    def minopts(self) -> Sequence[bool]: ...

    @property
    def base_result(self) -> Sequence[str]: ...

    @property
    def diff_result(self) -> Sequence[str]: ...

    @property
    def base_instructions(self) -> Sequence[int]: ...

    @property
    def diff_instructions(self) -> Sequence[int]: ...


class DiffTable(Protocol):
    """A diff-mode details table held column-wise (`details.DetailsTable` is one)."""

    @property
    def columns(self) -> DiffColumns: ...

    def base_column(self, metric: str) -> Sequence[Number]: ...

    def diff_column(self, metric: str) -> Sequence[Number]: ...


def aggregate(name: str, rows: Sequence[DiffRow], metrics: Sequence[str], focus: str,
              min_example_delta: Number = 0) -> CollectionResult:
    """Sum every metric over rows where both JITs succeeded, split MinOpts/FullOpts."""
    return aggregate_table(name, RowTable(rows), metrics, focus, min_example_delta)


def aggregate_table(name: str, table: DiffTable, metrics: Sequence[str], focus: str,
                    min_example_delta: Number = 0) -> CollectionResult:
    """`aggregate` over a table's columns: sums through row masks, no per-row objects."""
    columns = table.columns
    succeeded = success_mask(columns)
    masks = {"MinOpts": bytes(map(and_, succeeded, columns.minopts)),
             "FullOpts": bytes(map(gt, succeeded, columns.minopts))}  # succeeded and not MinOpts
    totals: Dict[str, Dict[str, Totals]] = {}
    kinds: Dict[str, str] = {}
    for metric in metrics:
        base_values, diff_values = metric_columns(table, metric)
        by_class = {class_name: _masked_totals(base_values, diff_values, mask) for class_name, mask in masks.items()}
        minopts, fullopts = by_class["MinOpts"], by_class["FullOpts"]
        totals[metric] = {"Overall": Totals(minopts.base + fullopts.base, minopts.diff + fullopts.diff),
                          "MinOpts": minopts, "FullOpts": fullopts}
        kinds[metric] = "float" if any(isinstance(v, float) for v in (minopts.base, minopts.diff,
                                                                       fullopts.base, fullopts.diff)) else "int"
    contexts = {class_name: mask.count(1) for class_name, mask in masks.items()}
    contexts["Overall"] = contexts["MinOpts"] + contexts["FullOpts"]
    examples = _select_examples(name, table, focus, succeeded, min_example_delta, TOP_COUNT)
    return CollectionResult(name, list(metrics), kinds, totals, contexts, side_counts(columns.base_result),
                            side_counts(columns.diff_result), examples)


def _masked_totals(base_values: Sequence[Number], diff_values: Sequence[Number], mask: bytes) -> Totals:
    base_sum = masked_sum(base_values, mask)
    return Totals(base_sum, base_sum if diff_values is base_values else masked_sum(diff_values, mask))


def success_mask(columns: DiffColumns) -> bytes:
    """1 for each row where both JITs succeeded, else 0."""
    return bytes(map(and_, map(eq, columns.base_result, repeat(SUCCESS)),
                     map(eq, columns.diff_result, repeat(SUCCESS))))


def side_counts(results: Sequence[str]) -> SideCounts:
    successes, misses = results.count(SUCCESS), results.count(MISS)
    return SideCounts(successes, misses, len(results) - successes - misses)


def metric_columns(table: DiffTable, metric: str) -> Tuple[Sequence[Number], Sequence[Number]]:
    """(base values, diff values) of a metric; `instructions` is the PIN count column pair."""
    if metric == INSTRUCTIONS:
        return table.columns.base_instructions, table.columns.diff_instructions
    return table.base_column(metric), table.diff_column(metric)


@dataclass
class _RowColumns:
    """The `DiffColumns` of a list of rows."""

    context: List[int]
    method_name: List[str]
    minopts: List[bool]
    base_result: List[str]
    diff_result: List[str]
    base_instructions: List[int]
    diff_instructions: List[int]


class RowTable:
    """Rows seen as a `DiffTable`."""

    def __init__(self, rows: Sequence[DiffRow]) -> None:
        self.rows = rows
        self.columns = _RowColumns([r.context for r in rows], [r.method_name for r in rows],
                                   [r.minopts for r in rows], [r.base_result for r in rows],
                                   [r.diff_result for r in rows], [r.base_instructions for r in rows],
                                   [r.diff_instructions for r in rows])

    def base_column(self, metric: str) -> List[Number]:
        return [row.base(metric) for row in self.rows]

    def diff_column(self, metric: str) -> List[Number]:
        return [row.diff(metric) for row in self.rows]


# ---------------------------------------------------------------- examples

def example_candidates(name: str, rows: Iterable[DiffRow], metric: str, min_delta: Number) -> List[Example]:
    """Rows kept for examples: both `Success`, base > 0, |diff-base| >= min_delta (and ≠ 0)."""
    found: List[Example] = []
    for row in rows:
        if not both_success(row):
            continue
        base_value, diff_value = row_values(row, metric)
        delta = diff_value - base_value
        if base_value <= 0 or delta == 0 or abs(delta) < min_delta:
            continue
        found.append(Example(name, row.context, row.method_name, row_class(row), base_value, diff_value))
    return found


# Rank keys: smaller ranks first; ties broken by collection, then context.
def _worse_by_pct(e: Example) -> Tuple[Any, ...]:
    return (-e.pct, -e.delta, e.collection, e.context)


def _worse_by_delta(e: Example) -> Tuple[Any, ...]:
    return (-e.delta, -e.pct, e.collection, e.context)


def _better_by_pct(e: Example) -> Tuple[Any, ...]:
    return (e.pct, e.delta, e.collection, e.context)


def _better_by_delta(e: Example) -> Tuple[Any, ...]:
    return (e.delta, e.pct, e.collection, e.context)


def top_regressions(examples: Iterable[Example], row_class: str, by: str = "pct",
                    count: int = TOP_COUNT) -> List[Example]:
    """Largest growth first (by PDIFF % or by absolute delta); growth only."""
    chosen = [e for e in examples if e.row_class == row_class and e.delta > 0]
    return heapq.nsmallest(count, chosen, key=_worse_by_pct if by == "pct" else _worse_by_delta)


def top_improvements(examples: Iterable[Example], row_class: str, by: str = "pct",
                     count: int = TOP_COUNT) -> List[Example]:
    """Largest reduction first (most negative PDIFF % or delta); reductions only."""
    chosen = [e for e in examples if e.row_class == row_class and e.delta < 0]
    return heapq.nsmallest(count, chosen, key=_better_by_pct if by == "pct" else _better_by_delta)


def select_examples(name: str, rows: Sequence[DiffRow], metric: str, min_delta: Number,
                    count: int = TOP_COUNT) -> List[Example]:
    """The union of every top list a summary can show (per class: growth and reduction, by PDIFF %
    and by delta), so that top lists over merged summaries stay exact.

    Same selection as `top_regressions`/`top_improvements` over `example_candidates`.
    """
    table = RowTable(rows)
    return _select_examples(name, table, metric, success_mask(table.columns), min_delta, count)


def _select_examples(name: str, table: DiffTable, metric: str, succeeded: bytes, min_delta: Number,
                     count: int) -> List[Example]:
    """`select_examples` over the rows marked in `succeeded`, a column at a time: only the
    chosen rows become `Example`s (large collections change most rows)."""
    columns = table.columns
    base_values, diff_values = metric_columns(table, metric)
    deltas = list(map(sub, diff_values, base_values))
    kept = _example_mask(succeeded, base_values, deltas, min_delta)
    chosen: Dict[int, None] = {}  # row positions, in the order first picked
    for minopts in (True, False):
        in_class = list(compress(range(len(kept)), map(and_, kept, map(eq, columns.minopts, repeat(minopts)))))
        growth = list(map(gt, map(deltas.__getitem__, in_class), repeat(0)))
        for positions, grew in ((list(compress(in_class, growth)), True),
                                (list(compress(in_class, map(not_, growth))), False)):
            for position in _ranked(positions, deltas, base_values, columns.context, grew, count):
                chosen.setdefault(position)
    ordered = sorted(chosen, key=columns.context.__getitem__)
    return [Example(name, columns.context[p], columns.method_name[p], "MinOpts" if columns.minopts[p] else "FullOpts",
                    base_values[p], diff_values[p]) for p in ordered]


def _example_mask(succeeded: bytes, base_values: Sequence[Number], deltas: Sequence[Number],
                  min_delta: Number) -> bytes:
    """Rows that may be examples: both succeeded, base > 0, a change of at least `min_delta`."""
    kept = map(and_, succeeded, map(not_, map(le, base_values, repeat(0))))
    kept = map(and_, kept, map(truth, deltas))
    if min_delta:
        kept = map(and_, kept, map(not_, map(lt, map(abs, deltas), repeat(min_delta))))
    return bytes(kept)


def _ranked(positions: List[int], deltas: Sequence[Number], base_values: Sequence[Number],
            contexts: Sequence[int], grew: bool, count: int) -> List[int]:
    """The top `count` of `positions` by PDIFF %, then the top `count` by delta: largest growth
    (or reduction) first, ties by the other measure, then context, then row order."""
    changes = list(map(deltas.__getitem__, positions))
    pcts = list(map(mul, map(truediv, changes, map(base_values.__getitem__, positions)), repeat(100.0)))
    if grew:
        changes, pcts = list(map(neg, changes)), list(map(neg, pcts))
    ids = list(map(contexts.__getitem__, positions))
    order = range(len(positions))
    picked: List[int] = []
    for keys in (list(zip(pcts, changes, ids, order)), list(zip(changes, pcts, ids, order))):
        picked += [positions[key[-1]] for key in heapq.nsmallest(count, keys)]
    return picked


# ---------------------------------------------------------------- one pass over a streamed CSV

#: A ranked example candidate: (rank key, tie key, context, row number), then what an
#: `Example` needs: (method name, MinOpts, base value, diff value).
_Candidate = Tuple[Tuple[Number, Number, int, int], Tuple[str, bool, Number, Number]]


class MetricDigest:
    """What tpdiff/memdiff keep of a details CSV read in parts (`details.stream_details_csv`):
    running totals and counts, and per top list only its `count` best candidates so far
    (the best of all rows are always among the best of the parts), never the other rows.

    `result()` equals `aggregate_table` over the whole table (sums run left to right over
    the rows in file order, as one `sum` over the column does). `metrics` None: every
    metric the file reports (`metric_names` less the `synthesized_metrics`).
    """

    def __init__(self, name: str, metrics: Optional[Sequence[str]], focus: str, min_example_delta: Number = 0,
                 count: int = TOP_COUNT) -> None:
        self.name = name
        self.metrics: Optional[List[str]] = list(metrics) if metrics is not None else None
        self.focus = focus
        self.min_example_delta = min_example_delta
        self.count = count
        self.rows = 0
        self.base_misses = self.diff_misses = self.either_misses = 0
        self.base_counts, self.diff_counts = SideCounts(), SideCounts()
        self.contexts = {"MinOpts": 0, "FullOpts": 0}
        self.sums: Dict[str, Dict[str, List[Number]]] = {}
        self.any_succeeded = False
        self.focus_nonzero = {"base": False, "diff": False}  # among rows where both succeeded
        self._tops: Dict[Tuple[bool, bool, int], List[_Candidate]] = {}

    def add(self, table: Any) -> None:
        if self.metrics is None:
            self.metrics = [m for m in table.metric_names if m not in table.synthesized_metrics]
        columns = table.columns
        base_misses, diff_misses, either = table.miss_counts()
        self.base_misses += base_misses
        self.diff_misses += diff_misses
        self.either_misses += either
        succeeded = success_mask(columns)
        masks = {"MinOpts": bytes(map(and_, succeeded, columns.minopts)),
                 "FullOpts": bytes(map(gt, succeeded, columns.minopts))}
        for metric in self.metrics:
            if metric != INSTRUCTIONS and metric not in table.metric_names:
                continue
            base_values, diff_values = metric_columns(table, metric)
            sums = self.sums.setdefault(metric, {"MinOpts": [0, 0], "FullOpts": [0, 0]})
            for class_name, mask in masks.items():
                pair = sums[class_name]
                same_so_far = diff_values is base_values and type(pair[0]) is type(pair[1]) and pair[0] == pair[1]
                pair[0] = masked_sum(base_values, mask, pair[0])
                pair[1] = pair[0] if same_so_far else masked_sum(diff_values, mask, pair[1])
        for class_name, mask in masks.items():
            self.contexts[class_name] += mask.count(1)
        for counts, results in ((self.base_counts, columns.base_result), (self.diff_counts, columns.diff_result)):
            part = side_counts(results)
            counts.successes += part.successes
            counts.misses += part.misses
            counts.failures += part.failures
        self._note_focus(table, succeeded)
        self._add_candidates(table, succeeded)
        self.rows += len(columns.context)

    def _note_focus(self, table: Any, succeeded: bytes) -> None:
        if not any(succeeded):
            return
        self.any_succeeded = True
        if self.focus != INSTRUCTIONS and self.focus not in table.metric_names:
            return
        base_values, diff_values = metric_columns(table, self.focus)
        for side, values in (("base", base_values), ("diff", diff_values)):
            if not self.focus_nonzero[side] and any(compress(values, succeeded)):
                self.focus_nonzero[side] = True

    def _add_candidates(self, table: Any, succeeded: bytes) -> None:
        """The part's best candidates of every top list, merged into the lists so far."""
        if self.focus != INSTRUCTIONS and self.focus not in table.metric_names:
            return
        columns = table.columns
        base_values, diff_values = metric_columns(table, self.focus)
        deltas = list(map(sub, diff_values, base_values))
        kept = _example_mask(succeeded, base_values, deltas, self.min_example_delta)
        for minopts in (True, False):
            in_class = list(compress(range(len(kept)), map(and_, kept, map(eq, columns.minopts, repeat(minopts)))))
            growth = list(map(gt, map(deltas.__getitem__, in_class), repeat(0)))
            for positions, grew in ((list(compress(in_class, growth)), True),
                                    (list(compress(in_class, map(not_, growth))), False)):
                if not positions:
                    continue
                for measure, keys in enumerate(_rank_keys(positions, deltas, base_values, columns.context, grew,
                                                          self.rows)):
                    best = heapq.nsmallest(self.count, keys)
                    found = [(key, (columns.method_name[key[3] - self.rows], minopts,
                                    base_values[key[3] - self.rows], diff_values[key[3] - self.rows]))
                             for key in best]
                    slot = (minopts, grew, measure)
                    self._tops[slot] = heapq.nsmallest(self.count, self._tops.get(slot, []) + found)

    def result(self) -> CollectionResult:
        metrics = self.metrics or []
        totals: Dict[str, Dict[str, Totals]] = {}
        kinds: Dict[str, str] = {}
        for metric in metrics:
            sums = self.sums.get(metric, {"MinOpts": [0, 0], "FullOpts": [0, 0]})
            minopts, fullopts = Totals(*sums["MinOpts"]), Totals(*sums["FullOpts"])
            totals[metric] = {"Overall": Totals(minopts.base + fullopts.base, minopts.diff + fullopts.diff),
                              "MinOpts": minopts, "FullOpts": fullopts}
            kinds[metric] = "float" if any(isinstance(v, float) for v in (minopts.base, minopts.diff,
                                                                           fullopts.base, fullopts.diff)) else "int"
        contexts = dict(self.contexts)
        contexts["Overall"] = contexts["MinOpts"] + contexts["FullOpts"]
        return CollectionResult(self.name, list(metrics), kinds, totals, contexts,
                                SideCounts(self.base_counts.successes, self.base_counts.misses,
                                           self.base_counts.failures),
                                SideCounts(self.diff_counts.successes, self.diff_counts.misses,
                                           self.diff_counts.failures),
                                self._examples())

    def _examples(self) -> List[Example]:
        """The union of the top lists, in the order `_select_examples` picks them, sorted by context."""
        chosen: Dict[int, Tuple[int, Tuple[str, bool, Number, Number]]] = {}
        for minopts in (True, False):
            for grew in (True, False):
                for measure in (0, 1):
                    for key, payload in self._tops.get((minopts, grew, measure), []):
                        chosen.setdefault(key[3], (key[2], payload))
        ordered = sorted(chosen.values(), key=lambda item: item[0])
        return [Example(self.name, context, method, "MinOpts" if minopts else "FullOpts", base, diff)
                for context, (method, minopts, base, diff) in ordered]


def _rank_keys(positions: List[int], deltas: Sequence[Number], base_values: Sequence[Number],
               contexts: Sequence[int], grew: bool, offset: int) -> Tuple[List[Tuple[Number, Number, int, int]], ...]:
    """The keys `_ranked` orders `positions` by (by PDIFF %, then by delta), with the row
    number (`offset` + position) as the last key."""
    changes = list(map(deltas.__getitem__, positions))
    pcts = list(map(mul, map(truediv, changes, map(base_values.__getitem__, positions)), repeat(100.0)))
    if grew:
        changes, pcts = list(map(neg, changes)), list(map(neg, pcts))
    ids = list(map(contexts.__getitem__, positions))
    rows = [offset + position for position in positions]
    return list(zip(pcts, changes, ids, rows)), list(zip(changes, pcts, ids, rows))


# ---------------------------------------------------------------- build strings

@dataclass
class BuildRecord:
    """What a JIT's build string says (§6.6), as kept in a summary; `decoded` False when not found."""

    decoded: bool
    compiler: str = ""
    native_pgo: bool = False
    text: str = ""


def build_warnings(base: Optional[BuildRecord], diff: Optional[BuildRecord]) -> List[Tuple[str, str]]:
    """(kind, text) warnings about the JIT builds; text has no markdown colour."""
    warnings: List[Tuple[str, str]] = []
    if base is None or diff is None:
        return warnings
    if base.decoded and diff.decoded and base.compiler != diff.compiler:
        warnings.append(("compiler", "Different compilers used for base and diff JITs. Results may be misleading."))
    for label, info in (("Base", base), ("Diff", diff)):
        if info.decoded and info.native_pgo:
            warnings.append(("pgo", f"{label} JIT was compiled with native PGO. Results may be misleading. "
                                    "Specify -p:NoPgoOptimize=true when building."))
    for label, info in (("base", base), ("diff", diff)):
        if not info.decoded:
            warnings.append(("decode", f"Could not decode {label} JIT build string"))
    return warnings


# ---------------------------------------------------------------- the run

@dataclass
class CollectionFailure:
    """A collection whose replay left no data, and why."""

    name: str
    reason: str


@dataclass
class MetricDiffRun:
    """Everything a tpdiff/memdiff summary needs; serialised as the JSON summary."""

    kind: str
    focus: str
    #: the target the run replayed for, like asmdiffs' summaries ('' in summaries written before)
    target_os: str = ""
    target_arch: str = ""
    base_jit_options: List[str] = field(default_factory=list)
    diff_jit_options: List[str] = field(default_factory=list)
    base_build: Optional[BuildRecord] = None
    diff_build: Optional[BuildRecord] = None
    collections: List[CollectionResult] = field(default_factory=list)
    failures: List[CollectionFailure] = field(default_factory=list)
    threshold: Optional[float] = None
    repro: str = ""
    version: int = SUMMARY_VERSION
    #: `-significance` overrides (metric -> minimum %), and k when `--noise_check` ran (reports/significance)
    significance: Dict[str, float] = field(default_factory=dict)
    noise_k: Optional[float] = None

    def directional_metrics(self, direction_of) -> List[str]:  # type: ignore[no-untyped-def]
        """Focus metric first, then every other metric with a direction, in CSV order."""
        ordered: List[str] = []
        for collection in self.collections:
            for metric in collection.metrics:
                if metric not in ordered:
                    ordered.append(metric)
        rest = [m for m in ordered if m != self.focus and direction_of(m) != "neutral"]
        return ([self.focus] if any(c.has_metric(self.focus) for c in self.collections) else []) + rest

    def all_metrics(self) -> List[str]:
        ordered: List[str] = []
        for collection in self.collections:
            for metric in collection.metrics:
                if metric not in ordered:
                    ordered.append(metric)
        return ordered


# ---------------------------------------------------------------- JSON

def run_to_json(run: MetricDiffRun) -> Dict[str, Any]:
    data = asdict(run)
    data["summary_type"] = run.kind
    return data


def run_from_json(data: Mapping[str, Any]) -> MetricDiffRun:
    """Inverse of `run_to_json`, every field checked (`base/schema`); ValueError naming the field
    on a summary of another shape."""
    version = data.get("version")
    if not schema.is_version(version, SUMMARY_VERSION):
        shown = version if type(version) is int else schema.kind_name(version)
        raise ValueError(f"summary version {shown} is not supported (expected {SUMMARY_VERSION})")
    try:
        run = schema.build(MetricDiffRun, dict(data))
    except schema.SchemaError as exc:
        raise ValueError(f"not a metric diff summary ({exc})") from None
    problem = shape_problem(run)
    if problem:
        raise ValueError(f"not a metric diff summary ({problem})")
    return run


#: the most contexts an A/A replay can have failed (a count beyond it is not one)
MAX_NOISE_FAILED = 10 ** 12


def shape_problem(run: MetricDiffRun) -> str:
    """What a run read from elsewhere lacks that the summaries read ('' when nothing): a known kind,
    every row of every metric, tpdiff's focus in every collection, positive k, no negative floor."""
    if run.kind not in (TPDIFF, MEMDIFF, METRICDIFF):
        return f"kind: '{run.kind[:40]}' is not {TPDIFF}, {MEMDIFF} or {METRICDIFF}"
    for index, collection in enumerate(run.collections):
        problem = _collection_problem(collection)
        if not problem and run.kind == TPDIFF and not collection.has_metric(run.focus):
            problem = f"totals: no totals of the focus metric '{run.focus[:200]}'"
        if problem:
            return f"collections[{index}].{problem}"
    if run.noise_k is not None and not run.noise_k > 0:
        return f"noise_k: {run.noise_k:g} is not a positive number"
    negative = next((metric for metric, pct in run.significance.items() if pct < 0), None)
    return f"significance.{negative[:200]}: a negative percentage" if negative is not None else ""


def _collection_problem(collection: CollectionResult) -> str:
    absent = next((metric for metric in collection.metrics if metric not in collection.totals), None)
    if absent is not None:
        return f"metrics: '{absent[:200]}' has no totals"
    for metric, rows in collection.totals.items():
        missing = [row for row in ROWS if row not in rows]
        if missing:
            return f"totals.{metric[:200]}: no {missing[0]} row"
    missing = [row for row in ROWS if row not in collection.contexts]
    if missing:
        return f"contexts: no {missing[0]} count"
    for metric, spreads in collection.noise.items():
        if any(value < 0 for value in spreads.values()):
            return f"noise.{metric[:200]}: a negative spread"
    if not 0 <= collection.noise_failed <= MAX_NOISE_FAILED:
        return f"noise_failed: a count of contexts must be a whole number from 0 to 10^12, not {collection.noise_failed}"
    return ""


def merge_runs(runs: Sequence[MetricDiffRun]) -> MetricDiffRun:
    """One run from several (e.g. one per Helix work item): collections sorted by name.

    Options, build information, threshold and repro text come from the first
    summary that has them; every summary must be of the same kind and focus.
    """
    if not runs:
        raise ValueError("no summaries to merge")
    first = runs[0]
    for other in runs[1:]:
        if other.kind != first.kind:
            raise ValueError(f"cannot merge a {other.kind} summary with a {first.kind} summary")
        if other.focus != first.focus:
            raise ValueError(f"cannot merge summaries of metric {other.focus} and {first.focus}")
    merged = MetricDiffRun(kind=first.kind, focus=first.focus, target_os=first.target_os,
                           target_arch=first.target_arch)
    merged.base_jit_options = next((r.base_jit_options for r in runs if r.base_jit_options), [])
    merged.diff_jit_options = next((r.diff_jit_options for r in runs if r.diff_jit_options), [])
    merged.base_build = next((r.base_build for r in runs if r.base_build is not None), None)
    merged.diff_build = next((r.diff_build for r in runs if r.diff_build is not None), None)
    merged.threshold = next((r.threshold for r in runs if r.threshold is not None), None)
    merged.repro = next((r.repro for r in runs if r.repro), "")
    merged.significance = next((r.significance for r in runs if r.significance), {})
    merged.noise_k = next((r.noise_k for r in runs if r.noise_k is not None), None)
    merged.collections = sorted((c for r in runs for c in r.collections), key=lambda c: c.name)
    merged.failures = sorted((f for r in runs for f in r.failures), key=lambda f: f.name)
    return merged
