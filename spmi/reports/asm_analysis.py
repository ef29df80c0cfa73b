"""asmdiffs after the replay: aggregation and context picking (docs/contracts.md §12.9).

Pure functions over a `details.DetailsTable`; no processes, no files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Set

from spmi.formats.details import CODE_BYTES, MISS, PERFSCORE, SUCCESS, DetailsRow, DetailsTable
from spmi.reports.asm_model import IMPROVEMENT, REGRESSION, Aggregate, CollectionAggregates, DiffListStats, ExampleDiff

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
        agg.base_code_bytes += b_bytes
        agg.diff_code_bytes += d_bytes
        agg.base_perfscore += b_perf
        agg.diff_perfscore += d_perf
        agg.base_instructions += row.base_instructions
        agg.diff_instructions += row.diff_instructions
        agg.perfscore_log_sum += perfscore_log_ratio(b_perf, d_perf)
        if row.has_diff:
            agg.contexts_with_diffs += 1
            _count_diff(stats, b_bytes, d_bytes, b_perf, d_perf)
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

    @property
    def examples(self) -> List[DetailsRow]:
        return self.improvement_examples + self.regression_examples


def diff_list(table: DetailsTable) -> List[DetailsRow]:
    """Rows where both JITs succeeded and a difference was found, ordered by context (stable)."""
    rows = [row for row in table.rows if row.has_diff and row.both_succeeded]
    return sorted(rows, key=lambda row: row.context)


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
    picks; an empty method name never blocks another example.
    """
    diffs = diff_list(table)
    metric = pick_metric(metrics)
    if metric is None:
        return ContextPick(sorted({row.context for row in diffs}), metric=None)

    def delta(row: DetailsRow) -> float:
        return row.diff(metric) - row.base(metric)

    def relative(row: DetailsRow) -> float:
        return relative_change(row.base(metric), row.diff(metric))

    chosen: Set[int] = set()
    chosen.update(row.context for row in sorted(diffs, key=lambda row: row.context_size)[:count])
    chosen.update(row.context for row in sorted(diffs, key=delta)[:count])
    chosen.update(row.context for row in sorted(diffs, key=delta, reverse=True)[:count])
    chosen.update(row.context for row in sorted(diffs, key=relative)[:count])
    chosen.update(row.context for row in sorted(diffs, key=relative, reverse=True)[:count])
    unchanged = [row for row in diffs if row.base(CODE_BYTES) == row.diff(CODE_BYTES)]
    chosen.update(row.context for row in sorted(unchanged, key=lambda row: row.context_size)[:count])

    ordered = example_order(diffs, relative)
    improvements = take_examples(ordered, example_count, set())
    regressions = take_examples(reversed(ordered), example_count, {row.context for row in improvements})
    chosen.update(row.context for row in improvements + regressions)
    return ContextPick(sorted(chosen), improvements, regressions, metric)


def is_small_size_diff(row: DetailsRow) -> bool:
    return 0 < abs(row.diff(CODE_BYTES) - row.base(CODE_BYTES)) < SMALL_DIFF_LIMIT


def example_order(diffs: Sequence[DetailsRow], relative) -> List[DetailsRow]:  # type: ignore[no-untyped-def]
    """By relative change ascending, then (stably) the small size diffs first."""
    by_relative = sorted(diffs, key=relative)
    return sorted(by_relative, key=lambda row: not is_small_size_diff(row))


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


# ---------------------------------------------------------------- examples

def listing_title(first_line: str) -> Optional[str]:
    """Text after `; Assembly listing for method ` on a listing's first line (None if absent)."""
    line = first_line.rstrip("\r\n")
    if not line.startswith(LISTING_TITLE_PREFIX):
        return None
    return line[len(LISTING_TITLE_PREFIX):]


def example_from_row(row: DetailsRow, kind: str, title: Optional[str], diff_text: str,
                     repro_command: str = "") -> ExampleDiff:
    """An `ExampleDiff` for a picked row; without a listing title the CSV method name is used."""
    if kind not in (IMPROVEMENT, REGRESSION):
        raise ValueError(f"example kind must be '{IMPROVEMENT}' or '{REGRESSION}', not '{kind}'")
    name = title if title is not None else (row.method_name or "(unknown method)")
    return ExampleDiff(context=row.context, kind=kind, title=name,
                       base_bytes=int(row.base(CODE_BYTES)), diff_bytes=int(row.diff(CODE_BYTES)),
                       base_perfscore=float(row.base(PERFSCORE)), diff_perfscore=float(row.diff(PERFSCORE)),
                       diff_text=diff_text, repro_command=repro_command)


__all__ = [
    "ContextPick", "EXAMPLE_COUNT", "PICK_COUNT", "aggregate_table", "diff_list", "example_from_row",
    "example_order", "is_small_size_diff", "listing_title", "perfscore_log_ratio", "pick_contexts",
    "pick_metric", "relative_change", "take_examples",
]
