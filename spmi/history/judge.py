"""A PR's change judged against main's history of changes (docs/history.md). Pure.

For each collection and metric, the main runs' changes (diff against base, in percent)
are what ordinary work on main produces. The PR's change is judged in this order:

1. the metric's significance rule (docs/signal.md): a change it does not flag (unchanged,
   or below the metric's minimum) is never flagged by history;
2. with fewer than `min_records` comparable main runs, the rule decides;
3. otherwise the *size* of the change meets the fence of the sizes of main's changes,
   `|change| >= Q3 + k*IQR` of `|main change|` (inclusive quartiles; the boundary itself
   is outside). The spread is never less than a step between two levels that several main
   runs repeat (discrete noise such as PIN's two levels makes the quartiles coincide);
   k widens for short histories (`history_k`) to keep a no-change run's chance of being
   flagged near 1% (`bench/history_fence.py` measures it);
4. a fence of zero width (most main runs did not move at all) says nothing: the rule decides.

Records of another JIT-EE version, or in which the collection had another size, are
skipped and counted.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

from spmi.history.records import HistoryRecord, relative_change
from spmi.reports.significance import Significance, fmt_rule_pct

DEFAULT_LAST = 30
DEFAULT_K = 3.0
MIN_RECORDS = 3


class Verdict(Enum):
    WITHIN = "within the usual range"
    FLAGGED = "outside the usual range"
    BELOW_RULE = "within noise"
    FIXED_SIGNIFICANT = "significant by the rule"

    @property
    def flagged(self) -> bool:
        return self in (Verdict.FLAGGED, Verdict.FIXED_SIGNIFICANT)


@dataclass(frozen=True)
class Fence:
    """The sizes main's changes reach: a change with `|change| >= limit` is outside (limit 0: no width)."""

    limit: float

    @property
    def zero_width(self) -> bool:
        return self.limit <= 0

    def outside(self, change: float) -> bool:
        return abs(change) >= self.limit

    def excess(self, change: float) -> float:
        """How far (in percentage points) the change's size lies beyond the fence; 0 inside."""
        return max(0.0, abs(change) - self.limit)


@dataclass
class Judgement:
    """One collection and metric of the PR: its change and what history says of it."""

    collection: str
    metric: str
    change: float
    verdict: Verdict
    history: List[float] = field(default_factory=list)  # the main runs' changes used, newest first
    fence: Optional[Fence] = None
    rule_pct: float = 0.0       # the metric's minimum meaningful change (docs/signal.md)

    def describe(self) -> str:
        """What decided, e.g. `outside the usual range by 2.12 pp (fence ±0.38%, last 4 main runs)`."""
        runs = f"last {len(self.history)} main run{'s' if len(self.history) != 1 else ''}"
        rule = f"{self.metric} {fmt_rule_pct(self.rule_pct)}"
        if self.verdict is Verdict.BELOW_RULE:
            return f"{self.verdict.value}: below the rule ({rule})"
        if self.fence is None:
            return (f"{self.verdict.value} ({rule}); only {len(self.history)} comparable main "
                    f"run{'s' if len(self.history) != 1 else ''} (need {MIN_RECORDS})")
        if self.verdict is Verdict.FIXED_SIGNIFICANT:
            return f"{self.verdict.value} ({rule}); the fence of the {runs} has no width (main did not move)"
        fence = f"fence {fmt_limit(self.fence.limit)}, {runs}"
        if self.verdict is Verdict.FLAGGED:
            return f"{self.verdict.value} by {fmt_points(self.fence.excess(self.change))} ({fence})"
        return f"{self.verdict.value} ({fence})"


@dataclass
class HistoryJudgement:
    """Every judgement of one PR record, plus what was skipped and why (reason -> count)."""

    judgements: List[Judgement] = field(default_factory=list)
    skipped: Dict[str, int] = field(default_factory=dict)
    records_used: int = 0

    @property
    def flagged(self) -> List[Judgement]:
        return [j for j in self.judgements if j.verdict.flagged]


def _digits(value: float) -> int:
    """Decimals that show two significant digits of `value` (at least 2, at most 8)."""
    return min(8, max(2, 1 - math.floor(math.log10(abs(value)))))


def fmt_pct(value: float) -> str:
    """`+0.52%`, `-0.0052%`, `+0.0000010%`: a change that is not zero never prints as zero."""
    if value == 0:
        return "0.00%"
    if abs(value) < 1e-8:
        return f"{'+' if value > 0 else '-'}<0.00000001%"
    return f"{value:+.{_digits(value)}f}%"


def fmt_limit(limit: float) -> str:
    """A fence as a size either way: `±0.08%`."""
    return "±0.00%" if limit <= 0 else f"±{limit:.{_digits(limit)}f}%"


def fmt_points(points: float) -> str:
    """A distance between two percentages: `0.02 pp`."""
    return "0.00 pp" if points <= 0 else f"{points:.{_digits(points)}f} pp"


#: (fewer records than this, factor on k): the fence of a short history is wider, calibrated with
#: bench/history_fence.py so that heavier-tailed (Laplace) noise is flagged in at most 1% of no-change runs
SMALL_HISTORY_FACTORS = ((6, 8.0), (8, 4.0), (12, 8.0 / 3.0), (20, 2.0))
#: the factor from 20 runs on
LONG_HISTORY_FACTOR = 5.0 / 3.0


def history_k(k: float, records: int) -> float:
    """`k` for a history of `records` main runs: x8 below 6 runs, x4 below 8, x8/3 below 12, x2 below 20, else x5/3."""
    for below, factor in SMALL_HISTORY_FACTORS:
        if records < below:
            return k * factor
    return k * LONG_HISTORY_FACTOR


def repeated_step(magnitudes: Sequence[float]) -> float:
    """The smallest step up to a level that two main runs or more repeat (0 counts as a level); 0 if none.

    Distinct values never repeat, so only ties (discrete noise) give a step; for distinct values the
    interquartile range is never smaller than the smallest step anyway."""
    counts = Counter(magnitudes)
    levels = sorted(set(magnitudes) | {0.0})
    return min((upper - lower for lower, upper in zip(levels, levels[1:]) if counts[upper] >= 2), default=0.0)


def magnitude_fence(changes: Sequence[float], k: float) -> Fence:
    """`Q3 + k*spread` of the sizes of `changes` (inclusive quartiles; two changes or more), the spread
    being the interquartile range or, when larger, the step of a repeated level."""
    magnitudes = sorted(abs(c) for c in changes)
    q1, _, q3 = statistics.quantiles(magnitudes, n=4, method="inclusive")
    return Fence(q3 + k * max(q3 - q1, repeated_step(magnitudes)))


def comparable_records(pr: HistoryRecord, records: Sequence[HistoryRecord],
                       last: int = DEFAULT_LAST) -> Tuple[List[HistoryRecord], Dict[str, int]]:
    """The newest `last` records of the PR's type and target with its JIT-EE version; skips counted."""
    skipped: Dict[str, int] = {}
    kept: List[HistoryRecord] = []
    for record in sorted(records, key=lambda r: r.time, reverse=True):
        if (record.summary_type, record.platform) != (pr.summary_type, pr.platform):
            continue
        if pr.jit_ee_version and record.jit_ee_version and record.jit_ee_version.lower() != pr.jit_ee_version.lower():
            skipped["another JIT-EE version"] = skipped.get("another JIT-EE version", 0) + 1
            continue
        if len(kept) < last:
            kept.append(record)
    return kept, skipped


def judge(pr: HistoryRecord, records: Sequence[HistoryRecord], last: int = DEFAULT_LAST, k: float = DEFAULT_K,
          rules: Optional[Significance] = None, min_records: int = MIN_RECORDS) -> HistoryJudgement:
    """Each of the PR's collections and metrics against the comparable main records."""
    rules = rules or Significance()
    kept, skipped = comparable_records(pr, records, last)
    result = HistoryJudgement(skipped=dict(skipped), records_used=len(kept))
    for collection in pr.collections:
        sized = []
        for record in kept:
            past = record.collection(collection.name)
            if past is None:
                continue
            if past.contexts != collection.contexts:
                result.skipped["the collection had another size"] = result.skipped.get(
                    "the collection had another size", 0) + 1
                continue
            sized.append(past)
        for metric, (base, diff) in collection.totals.items():
            change = collection.change(metric)
            if change is None:
                continue
            history = [c for c in (past.change(metric) for past in sized) if c is not None]
            verdict, fence = judge_change(metric, base, diff, history, k, rules, min_records)
            result.judgements.append(Judgement(collection.name, metric, change, verdict, history, fence,
                                               rules.min_pct(metric)))
    return result


def judge_change(metric: str, base: float, diff: float, history: Sequence[float], k: float = DEFAULT_K,
                 rules: Optional[Significance] = None,
                 min_records: int = MIN_RECORDS) -> Tuple[Verdict, Optional[Fence]]:
    """One total `base` -> `diff` against main's changes `history` (in %): the verdict and the fence used."""
    rules = rules or Significance()
    if not rules.judge(metric, base, diff).flagged:
        return Verdict.BELOW_RULE, None
    if len(history) < min_records:
        return Verdict.FIXED_SIGNIFICANT, None
    fence = magnitude_fence(history, history_k(k, len(history)))
    change = relative_change(base, diff)
    if fence.zero_width or change is None:
        return Verdict.FIXED_SIGNIFICANT, fence
    return (Verdict.FLAGGED if fence.outside(change) else Verdict.WITHIN), fence
