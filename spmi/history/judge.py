"""A PR's change judged against main's history of changes (docs/history.md). Pure.

For each collection and metric, the main runs' changes (diff against base, in percent)
are the spread that ordinary work on main produces. A PR's change is flagged when it
lies beyond the interquartile fence of that spread, `Q1 - k*IQR` .. `Q3 + k*IQR`
(k = 3, as compile-time trackers use). A short history estimates the spread poorly, so
the fence widens below 10 records (`small_history_k`) to keep a no-change run's chance of
being flagged near 1% (`bench/history_fence.py` measures it). Records of another JIT-EE version, or in which
the collection had another size, are skipped and counted; with fewer than
`min_records` left the verdict falls back to the per-metric significance rule (docs/signal.md).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from spmi.history.records import HistoryRecord
from spmi.reports.significance import Significance

DEFAULT_LAST = 30
DEFAULT_K = 3.0
MIN_RECORDS = 3

#: (metric, base, diff) -> significant; the rule used when history is too short
FixedRule = Callable[[str, float, float], bool]


class Verdict(Enum):
    WITHIN = "within the usual range"
    FLAGGED = "outside the usual range"
    FIXED_SIGNIFICANT = "significant (fixed rule)"
    FIXED_NOT_SIGNIFICANT = "not significant (fixed rule)"

    @property
    def flagged(self) -> bool:
        return self in (Verdict.FLAGGED, Verdict.FIXED_SIGNIFICANT)


@dataclass(frozen=True)
class Fence:
    low: float
    high: float

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass
class Judgement:
    """One collection and metric of the PR: its change and what history says of it."""

    collection: str
    metric: str
    change: float
    verdict: Verdict
    history: List[float] = field(default_factory=list)  # the main runs' changes used, newest first
    fence: Optional[Fence] = None

    def describe(self) -> str:
        """`within the usual range (last 30 main runs: -0.03% … +0.02%)` and the like."""
        if self.fence is None:
            return (f"{self.verdict.value}; only {len(self.history)} comparable main "
                    f"run{'s' if len(self.history) != 1 else ''} (need {MIN_RECORDS})")
        spread = f"last {len(self.history)} main runs: {fmt_pct(min(self.history))} … {fmt_pct(max(self.history))}"
        return f"{self.verdict.value} ({spread})"


@dataclass
class HistoryJudgement:
    """Every judgement of one PR record, plus what was skipped and why (reason -> count)."""

    judgements: List[Judgement] = field(default_factory=list)
    skipped: Dict[str, int] = field(default_factory=dict)
    records_used: int = 0

    @property
    def flagged(self) -> List[Judgement]:
        return [j for j in self.judgements if j.verdict.flagged]


def fmt_pct(value: float) -> str:
    return f"{value:+.2f}%" if abs(value) >= 0.01 or value == 0 else f"{value:+.4f}%"


#: (fewer records than this, factor on k): the fence of a short history is wider
SMALL_HISTORY_FACTORS = ((7, 10.0 / 3.0), (10, 2.0))


def small_history_k(k: float, records: int) -> float:
    """`k` for a history of `records` main runs: x10/3 below 7 runs, x2 below 10, as is from 10 on."""
    for below, factor in SMALL_HISTORY_FACTORS:
        if records < below:
            return k * factor
    return k


def iqr_fence(values: Sequence[float], k: float = DEFAULT_K) -> Fence:
    """`Q1 - k*IQR` .. `Q3 + k*IQR` of `values` (inclusive quartiles; two values or more)."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    spread = q3 - q1
    return Fence(q1 - k * spread, q3 + k * spread)


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
          fixed_rule: Optional[FixedRule] = None, min_records: int = MIN_RECORDS) -> HistoryJudgement:
    """Each of the PR's collections and metrics against the comparable main records."""
    rule = fixed_rule or _default_fixed_rule
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
            result.judgements.append(_judge_one(collection.name, metric, base, diff, change, history, k, rule,
                                                min_records))
    return result


def _judge_one(collection: str, metric: str, base: float, diff: float, change: float, history: List[float],
               k: float, rule: FixedRule, min_records: int) -> Judgement:
    if len(history) < min_records:
        verdict = Verdict.FIXED_SIGNIFICANT if rule(metric, base, diff) else Verdict.FIXED_NOT_SIGNIFICANT
        return Judgement(collection, metric, change, verdict, history)
    fence = iqr_fence(history, small_history_k(k, len(history)))
    verdict = Verdict.WITHIN if fence.holds(change) else Verdict.FLAGGED
    return Judgement(collection, metric, change, verdict, history, fence)


def _default_fixed_rule(metric: str, base: float, diff: float) -> bool:
    """The per-metric significance rule (docs/signal.md)."""
    return Significance().judge(metric, base, diff).flagged
