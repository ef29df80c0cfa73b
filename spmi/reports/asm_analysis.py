"""asmdiffs after the replay: aggregation and context picking (docs/contracts.md §12.9).

Pure functions over a `details.DetailsTable`; no processes, no files.
"""
from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from heapq import nlargest, nsmallest
from itertools import compress, islice, repeat
from operator import and_, eq, gt, truediv
from typing import Container, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar, Union

from spmi.base.columns import Labels, Texts, in_order_sum, masked_sum, numbers, taken
from spmi.formats.details import CODE_BYTES, ERROR, MISS, PERFSCORE, SUCCESS, DetailsColumns, DetailsRow, DetailsTable
from spmi.reports.asm_model import IMPROVEMENT, REGRESSION, Aggregate, CollectionAggregates, DiffListStats, ExampleDiff

Number = Union[int, float]
_V = TypeVar("_V")

PICK_COUNT = 20
EXAMPLE_COUNT = 3
SMALL_DIFF_LIMIT = 50          # examples prefer 0 < |Δ bytes| < 50
SAME_PERFSCORE_LIMIT = 0.01    # |Δ PerfScore| below this counts as "same"
LISTING_TITLE_PREFIX = "; Assembly listing for method "


# ---------------------------------------------------------------- aggregation

def aggregate_table(table: DetailsTable) -> CollectionAggregates:
    """Sums of §12.9 for one collection, split MinOpts/FullOpts, plus the diff-list stats."""
    result = CollectionAggregates()
    code = table.metric_names.index(CODE_BYTES)
    perf = table.metric_names.index(PERFSCORE)
    base_code, diff_code = table.base_columns[code], table.diff_columns[code]
    base_perf, diff_perf = table.base_columns[perf], table.diff_columns[perf]
    stats = result.diff_stats
    for row in table.rows:
        agg = result.minopts if row.minopts else result.fullopts
        _count_results(agg, row.base_result, row.diff_result)
        if row.base_result != SUCCESS or row.diff_result != SUCCESS:
            continue
        i = row.position
        b_bytes, d_bytes, b_perf, d_perf = base_code[i], diff_code[i], base_perf[i], diff_perf[i]
        agg.diffed_contexts += 1
        agg.base_code_bytes += int(b_bytes)
        agg.diff_code_bytes += int(d_bytes)
        agg.base_perfscore += b_perf
        agg.diff_perfscore += d_perf
        agg.base_instructions += row.base_instructions
        agg.diff_instructions += row.diff_instructions
        agg.perfscore_log_sum += perfscore_log_ratio(b_perf, d_perf)
        if row.has_diff:
            agg.contexts_with_diffs += 1
            _count_diff(stats, int(b_bytes), int(d_bytes), b_perf, d_perf)
    return result


def _count_results(agg: Aggregate, base_result: str, diff_result: str) -> None:
    if base_result == SUCCESS:
        agg.base_successes += 1
    elif base_result == MISS:
        agg.base_misses += 1
    else:
        agg.base_failures += 1
    if diff_result == SUCCESS:
        agg.diff_successes += 1
    elif diff_result == MISS:
        agg.diff_misses += 1
    else:
        agg.diff_failures += 1


def perfscore_log_ratio(base: float, diff: float) -> float:
    """ln(max(diff,1) / max(base,1)), the summand of the relative geomean."""
    return math.log(max(diff, 1.0) / max(base, 1.0))


def _count_diff(stats: DiffListStats, b_bytes: int, d_bytes: int, b_perf: float, d_perf: float) -> None:
    stats.contexts_with_diffs += 1
    if d_bytes < b_bytes:
        stats.size_improvements += 1
        stats.bytes_improved += b_bytes - d_bytes
    elif d_bytes > b_bytes:
        stats.size_regressions += 1
        stats.bytes_regressed += d_bytes - b_bytes
    else:
        stats.size_same += 1
    base, diff = max(b_perf, 1.0), max(d_perf, 1.0)
    if abs(diff - base) < SAME_PERFSCORE_LIMIT:
        stats.perfscore_same += 1
    elif diff < base:
        stats.perfscore_improvements += 1
        stats.perfscore_improvement_log_sum += math.log(diff / base)
    else:
        stats.perfscore_regressions += 1
        stats.perfscore_regression_log_sum += math.log(diff / base)


# ---------------------------------------------------------------- one pass over a streamed CSV

#: the metric columns the diff-list rows keep (picking, examples, the HTML diff list)
DIFF_LIST_METRICS = (CODE_BYTES, PERFSCORE)


class DetailsDigest:
    """What asmdiffs keeps of a details CSV read in parts (`details.stream_details_csv`):
    the aggregates, the replay counts, running sums of every metric column, and the
    diff-list rows (code size and PerfScore only), never the other rows.

    Feeding it the parts of a table gives exactly `aggregate_table` and `diff_list` of the
    whole table: sums are accumulated in file order, as the row-by-row loop does.
    """

    def __init__(self, watched: Iterable[int] = ()) -> None:
        self.aggregates = CollectionAggregates()
        #: of the `watched` contexts (the failing ones), those that only missed data: a Miss and no
        #: Error on either side (a repro of them reproduces nothing)
        self.watched: Set[int] = set(watched)
        self.missing_only: Set[int] = set()
        #: of the `watched` contexts, which JITs failed to compile them: (base Error, diff Error)
        self.error_sides: Dict[int, Tuple[bool, bool]] = {}
        self.rows = 0
        self.base_misses = 0
        self.diff_misses = 0
        self.either_misses = 0
        #: every metric column the CSV has (none filled in): [Σ base, Σ diff] over rows where both
        #: JITs succeeded, in file order (the analyzer totals, the "Other metrics" table)
        self.metric_sums: Dict[str, List[Number]] = {}
        self._diff_list: Optional[DiffListRows] = None

    def add(self, table: DetailsTable) -> None:
        c = table.columns
        self.rows += table.row_count
        base_miss = bytes(map(eq, c.base_result, repeat(MISS)))
        diff_miss = bytes(map(eq, c.diff_result, repeat(MISS)))
        self.base_misses += base_miss.count(1)
        self.diff_misses += diff_miss.count(1)
        either_miss = bytes(map(max, base_miss, diff_miss)) if table.is_diff_layout else base_miss
        self.either_misses += either_miss.count(1)
        if self.watched:
            self._note_missing_only(table, either_miss)
            self._note_error_sides(table)
        succeeded = bytes(map(and_, map(eq, c.base_result, repeat(SUCCESS)), map(eq, c.diff_result, repeat(SUCCESS))))
        columns = _aggregated_columns(table)
        _add_metric_sums(self.metric_sums, table, succeeded)
        for agg, minopts in ((self.aggregates.minopts, True), (self.aggregates.fullopts, False)):
            in_class = bytes(map(eq, c.minopts, repeat(minopts)))
            _add_class(agg, table, in_class, bytes(map(and_, in_class, succeeded)), columns)
        with_diffs = list(compress(range(table.row_count), map(and_, succeeded, c.has_diff)))
        stats = self.aggregates.diff_stats
        base_code, diff_code, base_perf, diff_perf = columns[:4]
        for i in with_diffs:
            _count_diff(stats, int(base_code[i]), int(diff_code[i]), base_perf[i], diff_perf[i])
        if self._diff_list is None:
            self._diff_list = DiffListRows(table)
        self._diff_list.add(table, with_diffs)

    def _note_missing_only(self, table: DetailsTable, either_miss: bytes) -> None:
        c = table.columns
        for i in compress(range(table.row_count), either_miss):
            if c.context[i] in self.watched and ERROR not in (c.base_result[i], c.diff_result[i]):
                self.missing_only.add(c.context[i])

    def _note_error_sides(self, table: DetailsTable) -> None:
        c = table.columns
        for i in range(table.row_count):
            if c.context[i] in self.watched:
                self.error_sides[c.context[i]] = (c.base_result[i] == ERROR, c.diff_result[i] == ERROR)

    def diff_table(self) -> Optional[DetailsTable]:
        """The diff-list rows (both JITs succeeded, `Has diff`) ordered by context (stable: rows
        of one context in file order), as a table; None before any part came."""
        return self._diff_list.table() if self._diff_list is not None else None


class DiffListRows:
    """The diff-list rows of a CSV read in parts, kept compactly: each field and the code size
    and PerfScore columns grow part by part (`Numbers`, `Texts`, `Labels`), no row objects."""

    def __init__(self, first: DetailsTable) -> None:
        self.source = first.source
        self.is_diff_layout = first.is_diff_layout
        self.synthesized_metrics = tuple(name for name in first.synthesized_metrics if name in DIFF_LIST_METRICS)
        self.available_metrics = first.available_metrics
        self.fields: Dict[str, Sequence] = {  # type: ignore[type-arg]
            name: Texts() if name == "method_name" else Labels() if name in _LABEL_FIELDS else numbers("q", ())
            for name in _ROW_FIELDS}
        #: base and diff code size, base and diff PerfScore
        self.metrics: List[Sequence[Number]] = [numbers("q", ()), numbers("q", ()), numbers("d", ()), numbers("d", ())]

    def add(self, table: DetailsTable, positions: Sequence[int]) -> None:
        if not positions:
            return
        c = table.columns
        for name, column in self.fields.items():
            self.fields[name] = _grown(column, list(map(getattr(c, name).__getitem__, positions)), None)
        parts = (table.base_column(CODE_BYTES), table.diff_column(CODE_BYTES),
                 table.base_column(PERFSCORE), table.diff_column(PERFSCORE))
        self.metrics = [_grown(column, list(map(part.__getitem__, positions)), part)
                        for column, part in zip(self.metrics, parts)]

    def table(self) -> DetailsTable:
        """The rows as a table, ordered by context (stable); the columns are the table's from now on."""
        context = self.fields["context"]
        if any(map(gt, context, islice(context, 1, None))):  # not in context order yet
            order = array("q", sorted(range(len(context)), key=context.__getitem__))
            for name in self.fields:  # one column at a time: the old one goes before the next is copied
                self.fields[name] = taken(self.fields[name], order)
            for index, column in enumerate(self.metrics):
                self.metrics[index] = taken(column, order)
        base_code, diff_code, base_perf, diff_perf = self.metrics
        return DetailsTable(self.source, DIFF_LIST_METRICS, DetailsColumns(**self.fields), self.is_diff_layout,
                            self.synthesized_metrics, self.available_metrics, [base_code, base_perf],
                            [diff_code, diff_perf])


_ROW_FIELDS = ("context", "context_size", "method_name", "tier", "base_result", "diff_result", "minopts", "has_diff",
               "base_instructions", "diff_instructions", "line")
_LABEL_FIELDS = ("tier", "base_result", "diff_result", "minopts", "has_diff")  # a few distinct values each


def _grown(column: Sequence[_V], values: List[_V], part: Optional[Sequence[_V]]) -> Sequence[_V]:
    """`column` with `values` (taken from `part`, when given) added at its end, in place: an
    array stays one while the values are of its kind (integers fit 'q', floats come from a 'd'
    array), else the column becomes a list holding each value as it is."""
    if isinstance(column, (Texts, Labels)):
        column.extend(values)  # type: ignore[arg-type]
        return column
    if isinstance(column, array):
        if column.typecode == "d" and not (isinstance(part, array) and part.typecode == "d"):
            column = list(column)
        else:
            size = len(column)
            try:
                column.extend(values)  # type: ignore[arg-type]
                return column
            except (TypeError, OverflowError):  # a float or a 65-bit integer
                del column[size:]
                column = list(column)
    column.extend(values)  # type: ignore[attr-defined]
    return column


def _aggregated_columns(table: DetailsTable) -> Tuple[Sequence[float], ...]:
    code = table.metric_names.index(CODE_BYTES)
    perf = table.metric_names.index(PERFSCORE)
    return (table.base_columns[code], table.diff_columns[code], table.base_columns[perf], table.diff_columns[perf],
            table.columns.base_instructions, table.columns.diff_instructions)


def _add_metric_sums(sums: Dict[str, List[Number]], table: DetailsTable, succeeded: bytes) -> None:
    """One part's rows (where both JITs succeeded) into the running [Σ base, Σ diff] of every
    metric column the CSV has; the columns filled in for older layouts are left out."""
    for name, base_column, diff_column in zip(table.metric_names, table.base_columns, table.diff_columns):
        if name in table.synthesized_metrics:
            continue
        pair = sums.setdefault(name, [0, 0])
        same_so_far = diff_column is base_column and type(pair[0]) is type(pair[1]) and pair[0] == pair[1]
        pair[0] = masked_sum(base_column, succeeded, pair[0])
        pair[1] = pair[0] if same_so_far else masked_sum(diff_column, succeeded, pair[1])


def _add_class(agg: Aggregate, table: DetailsTable, in_class: bytes, succeeded: bytes,
               columns: Tuple[Sequence[float], ...]) -> None:
    """One part's rows of one class (MinOpts or FullOpts) into `agg`, in file order."""
    c = table.columns
    base_results = list(compress(c.base_result, in_class))
    diff_results = list(compress(c.diff_result, in_class))
    for side, results in (("base", base_results), ("diff", diff_results)):
        successes, misses = results.count(SUCCESS), results.count(MISS)
        setattr(agg, f"{side}_successes", getattr(agg, f"{side}_successes") + successes)
        setattr(agg, f"{side}_misses", getattr(agg, f"{side}_misses") + misses)
        setattr(agg, f"{side}_failures", getattr(agg, f"{side}_failures") + len(results) - successes - misses)
    count = succeeded.count(1)
    if not count:
        return
    base_code, diff_code, base_perf, diff_perf, base_instr, diff_instr = (list(compress(column, succeeded))
                                                                          for column in columns)
    agg.diffed_contexts += count
    agg.base_code_bytes = int(in_order_sum(base_code, agg.base_code_bytes))  # code sizes are whole bytes
    agg.diff_code_bytes = int(in_order_sum(diff_code, agg.diff_code_bytes))
    agg.base_perfscore = in_order_sum(base_perf, agg.base_perfscore)
    agg.diff_perfscore = in_order_sum(diff_perf, agg.diff_perfscore)
    agg.base_instructions = int(in_order_sum(base_instr, agg.base_instructions))
    agg.diff_instructions = int(in_order_sum(diff_instr, agg.diff_instructions))
    ratios = map(truediv, map(max, diff_perf, repeat(1.0)), map(max, base_perf, repeat(1.0)))
    agg.perfscore_log_sum = in_order_sum(map(math.log, ratios), agg.perfscore_log_sum)
    agg.contexts_with_diffs += sum(compress(c.has_diff, succeeded))


# ---------------------------------------------------------------- context picking

@dataclass
class ContextPick:
    """Contexts to disassemble (sorted, unique) and the example rows among them.

    `metric` is the metric the picks were ranked by (None: every diff-list row).
    """

    contexts: List[int]
    improvement_examples: List[DetailsRow] = field(default_factory=list)
    regression_examples: List[DetailsRow] = field(default_factory=list)
    metric: Optional[str] = None
    # more candidates per side (listed too), so that examples touching code can be preferred
    spare_improvements: List[DetailsRow] = field(default_factory=list)
    spare_regressions: List[DetailsRow] = field(default_factory=list)
    largest_improvement: Optional[DetailsRow] = None   # most negative Δ code bytes
    largest_regression: Optional[DetailsRow] = None    # most positive Δ code bytes

    @property
    def examples(self) -> List[DetailsRow]:
        return self.improvement_examples + self.regression_examples


def diff_positions(table: DetailsTable) -> Sequence[int]:
    """Positions of the rows where both JITs succeeded and a difference was found, ordered by
    context (stable), read column-wise: no row objects are made, and rows already in context
    order (the kept diff list) are not sorted again."""
    c = table.columns
    succeeded = map(and_, map(eq, c.base_result, repeat(SUCCESS)), map(eq, c.diff_result, repeat(SUCCESS)))
    positions = array("q", compress(range(table.row_count), map(and_, map(bool, c.has_diff), succeeded)))
    contexts = map(c.context.__getitem__, positions)
    if any(map(gt, contexts, map(c.context.__getitem__, islice(positions, 1, None)))):
        positions = array("q", sorted(positions, key=c.context.__getitem__))
    return positions


def diff_list(table: DetailsTable) -> List[DetailsRow]:
    """Rows where both JITs succeeded and a difference was found, ordered by context (stable)."""
    return [table.row(position) for position in diff_positions(table)]


def relative_change(base: float, diff: float) -> float:
    """(diff - base) / base; 0 when base is 0."""
    return (diff - base) / base if base != 0 else 0.0


def pick_metric(metrics: Optional[Sequence[str]]) -> Optional[str]:
    """The ranking metric for `-metrics`: code bytes by default, PerfScore for exactly
    `-metrics PerfScore`, None (take every diff) for anything else."""
    chosen = list(metrics or [])
    if not chosen:
        return CODE_BYTES
    if chosen == [PERFSCORE]:
        return PERFSCORE
    return None


def pick_contexts(table: DetailsTable, metrics: Optional[Sequence[str]] = None,
                  count: int = PICK_COUNT, example_count: int = EXAMPLE_COUNT) -> ContextPick:
    """Which contexts get `.dasm` listings, and the examples (§12.9).

    Ties keep diff-list order (ascending context), also for the "most positive"
    picks; an empty method name never blocks another example. Works on positions in the
    table's columns; only the example rows become `DetailsRow`s.
    """
    diffs = diff_positions(table)
    context = table.columns.context
    metric = pick_metric(metrics)
    if metric is None:
        return ContextPick(sorted({context[p] for p in diffs}), metric=None)
    base, diff = table.base_column(metric), table.diff_column(metric)
    base_code, diff_code = table.base_column(CODE_BYTES), table.diff_column(CODE_BYTES)
    size = table.columns.context_size.__getitem__

    def delta(p: int) -> float:
        return diff[p] - base[p]

    def relative(p: int) -> float:
        return relative_change(base[p], diff[p])

    def code_change(p: int) -> float:
        return diff_code[p] - base_code[p]

    unchanged = [p for p in diffs if base_code[p] == diff_code[p]]
    # nsmallest/nlargest are sorted(...)[:count] (reverse=True for nlargest), ties included
    ranked = (nsmallest(count, diffs, key=size), nsmallest(count, diffs, key=delta), nlargest(count, diffs, key=delta),
              nsmallest(count, diffs, key=relative), nlargest(count, diffs, key=relative),
              nsmallest(count, unchanged, key=size))
    chosen: Set[int] = {context[p] for positions in ranked for p in positions}

    by_relative = sorted(diffs, key=relative)  # then (stably) the small size diffs first
    ordered = sorted(by_relative, key=lambda p: not 0 < abs(code_change(p)) < SMALL_DIFF_LIMIT)

    def rows(positions: Iterable[int]) -> Iterator[DetailsRow]:
        return map(table.row, positions)

    improvements = take_examples(rows(ordered), example_count, set())
    regressions = take_examples(rows(reversed(ordered)), example_count, {row.context for row in improvements})
    taken = {row.context for row in improvements + regressions}
    spare_improvements = take_examples(rows(ordered), example_count, taken)
    spare_regressions = take_examples(rows(reversed(ordered)), example_count,
                                      taken | {row.context for row in spare_improvements})
    largest = min(diffs, key=code_change, default=None), max(diffs, key=code_change, default=None)
    largest_improvement = table.row(largest[0]) if largest[0] is not None and code_change(largest[0]) < 0 else None
    largest_regression = table.row(largest[1]) if largest[1] is not None and code_change(largest[1]) > 0 else None
    extremes = [row for row in (largest_improvement, largest_regression) if row is not None]
    chosen.update(row.context for row in improvements + regressions + spare_improvements + spare_regressions + extremes)
    return ContextPick(sorted(chosen), improvements, regressions, metric, spare_improvements, spare_regressions,
                       largest_improvement, largest_regression)


def touches_code(diff_text: str) -> bool:
    """Whether a listing diff changes a line other than the `;` header, locals and footer comments."""
    for line in diff_text.splitlines():
        if line[:1] in ("+", "-") and not line.startswith(("+++", "---")):
            content = line[1:].strip()
            if content and not content.startswith(";"):
                return True
    return False


def choose_examples(candidates: Sequence[Tuple[DetailsRow, bool]], wanted: int,
                    required: Optional[DetailsRow] = None) -> List[DetailsRow]:
    """`wanted` examples from candidates in preference order, each with "its diff touches code":
    `required` (the largest change) first, then those touching code, then the rest."""
    chosen: List[DetailsRow] = [required] if required is not None else []
    ordered = [row for row, code in candidates if code] + [row for row, code in candidates if not code]
    for row in ordered:
        if len(chosen) >= wanted:
            break
        if all(row.context != other.context for other in chosen):
            chosen.append(row)
    return chosen


def take_examples(rows: Iterable[DetailsRow], wanted: int, taken_contexts: Set[int]) -> List[DetailsRow]:
    """The first `wanted` rows with a method name not yet taken and a context not yet chosen."""
    names: Set[str] = set()
    contexts = set(taken_contexts)
    picked: List[DetailsRow] = []
    for row in rows:
        if len(picked) == wanted:
            break
        if row.context in contexts or (row.method_name and row.method_name in names):
            continue
        picked.append(row)
        contexts.add(row.context)
        names.add(row.method_name)
    return picked


@dataclass(frozen=True)
class AssertHits:
    """One assert's contexts and hits; `base`/`diff` are None when some hit cannot be attributed."""

    contexts: int
    hits: int
    base: Optional[int] = None
    diff: Optional[int] = None


def attribute_assert_hits(contexts: Sequence[int], error_sides: Mapping[int, Tuple[bool, bool]]) -> AssertHits:
    """Split the hits of one assert (one context number per assert line of a two-JIT run) by JIT.

    A context with two hits asserted in both JITs; a context with one hit is the base's or the
    diff's when only that JIT's compile was an Error in the details CSV. When one hit cannot be
    placed (both JITs failed), the split is unknown."""
    per_context = Counter(contexts)
    base = diff = 0
    for context, hits in per_context.items():
        if hits >= 2:
            base, diff = base + 1, diff + hits - 1
            continue
        sides = error_sides.get(context)
        if sides == (True, False):
            base += 1
        elif sides == (False, True):
            diff += 1
        else:
            return AssertHits(len(per_context), len(contexts))
    return AssertHits(len(per_context), len(contexts), base, diff)


def without_missing(contexts: Sequence[int], missing_only: Container[int]) -> List[int]:
    """`contexts` minus those that only missed data (`DetailsDigest.missing_only`)."""
    return [c for c in contexts if c not in missing_only]


# ---------------------------------------------------------------- analyzer totals (§8.8)

#: jit-analyze metric -> the details CSV columns whose sum has the same meaning (§3.2.5, §8.8).
ANALYZER_METRIC_COLUMNS: Dict[str, Tuple[str, ...]] = {
    "CodeSize": (CODE_BYTES,),
    "PerfScore": (PERFSCORE,),
    "AllocSize": ("AllocatedHotCodeBytes", "AllocatedColdCodeBytes"),
}


def _column_sums(sums: Mapping[str, Sequence[Number]], columns: Sequence[str]) -> Optional[Tuple[float, float]]:
    """Σ base and Σ diff of `columns` (from a digest's `metric_sums`); None when a column is absent."""
    if any(c not in sums for c in columns):
        return None
    base: float = 0
    diff: float = 0
    for column in columns:
        base += sums[column][0]
        diff += sums[column][1]
    return base, diff


def metric_totals(sums: Mapping[str, Sequence[Number]]) -> Dict[str, List[float]]:
    """[Σ base, Σ diff] of every metric column the CSV has (none filled in), over rows where both
    JITs succeeded, in column order (`sums`: `DetailsDigest.metric_sums`), as the summary keeps them."""
    return {metric: [pair[0], pair[1]] for metric, pair in sums.items()}


def analyzer_totals(sums: Mapping[str, Sequence[Number]], metrics: Sequence[str]) -> Dict[str, Tuple[float, float]]:
    """(Σ base, Σ diff) per requested jit-analyze metric that the CSV carries, over contexts where
    both JITs succeeded (`sums`: `DetailsDigest.metric_sums`, summed while the CSV streamed by):
    CodeSize ← ActualCodeBytes, PerfScore ← PerfScore, AllocSize ← allocated hot + cold code bytes,
    ExtraAllocBytes = AllocSize − CodeSize (docs/contracts.md §8.8)."""
    totals: Dict[str, Tuple[float, float]] = {}
    for metric in metrics:
        if metric == "ExtraAllocBytes":
            alloc = _column_sums(sums, ANALYZER_METRIC_COLUMNS["AllocSize"])
            code = _column_sums(sums, ANALYZER_METRIC_COLUMNS["CodeSize"])
            if alloc is not None and code is not None:
                totals[metric] = (alloc[0] - code[0], alloc[1] - code[1])
            continue
        columns = ANALYZER_METRIC_COLUMNS.get(metric)
        found = _column_sums(sums, columns) if columns else None
        if found is not None:
            totals[metric] = found
    return totals


# ---------------------------------------------------------------- examples

def listing_title(first_line: str) -> Optional[str]:
    """Text after `; Assembly listing for method ` on a listing's first line (None if absent)."""
    line = first_line.rstrip("\r\n")
    if not line.startswith(LISTING_TITLE_PREFIX):
        return None
    return line[len(LISTING_TITLE_PREFIX):]


def example_from_row(row: DetailsRow, kind: str, title: Optional[str], diff_text: str,
                     repro_command: str = "", code_changed: bool = True) -> ExampleDiff:
    """An `ExampleDiff` for a picked row; without a listing title the CSV method name is used."""
    if kind not in (IMPROVEMENT, REGRESSION):
        raise ValueError(f"example kind must be '{IMPROVEMENT}' or '{REGRESSION}', not '{kind}'")
    name = title if title is not None else (row.method_name or "(unknown method)")
    return ExampleDiff(context=row.context, kind=kind, title=name,
                       base_bytes=int(row.base(CODE_BYTES)), diff_bytes=int(row.diff(CODE_BYTES)),
                       base_perfscore=float(row.base(PERFSCORE)), diff_perfscore=float(row.diff(PERFSCORE)),
                       diff_text=diff_text, repro_command=repro_command, touches_code=code_changed)


__all__ = [
    "aggregate_table", "ANALYZER_METRIC_COLUMNS", "analyzer_totals", "choose_examples", "ContextPick",
    "DetailsDigest", "diff_list", "diff_positions", "EXAMPLE_COUNT", "example_from_row", "listing_title", "metric_totals", "perfscore_log_ratio", "pick_contexts", "PICK_COUNT",
    "pick_metric", "relative_change", "take_examples", "touches_code", "without_missing",
]
