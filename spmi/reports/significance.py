"""When a metric change is significant: the one table of rules, the A/A noise floor, the verdicts.

Pure functions (docs/contracts.md §12.12b). A change of a collection's total (one metric, one
row: Overall, MinOpts or FullOpts) is *significant* when

1. its relative change reaches the metric's minimum meaningful change (`RULES`, overridable
   per run with `-significance METRIC=PCT`; 0 means any change), and
2. with the A/A calibration (`--noise_check`), it also exceeds k × the spread the base JIT
   replayed as both sides shows for that collection, metric and row (the *noise floor*).

A change that fails either test is *within noise*; summaries list those collapsed, with
their count. tpdiff, memdiff, metricdiff and asmdiffs' "Other metrics" table all ask here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from itertools import compress
from operator import and_, gt, mul, sub
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spmi.base.columns import in_order_sum
from spmi.base.errors import SuiteError
from spmi.base.untrusted import escape_md_inline
from spmi.formats import details
from spmi.reports.metric_model import (
    INSTRUCTIONS,
    ROWS,
    CollectionResult,
    MetricDiffRun,
    Number,
    metric_columns,
    pct_change,
    success_mask,
)

LOWER, HIGHER, NEUTRAL = details.LOWER_IS_BETTER, details.HIGHER_IS_BETTER, details.NEUTRAL
ANY_CHANGE = 0.0
#: minimum meaningful relative change in %, per metric (docs/contracts.md §12.12b)
RULES: Dict[str, float] = {
    INSTRUCTIONS: 0.005,            # PIN counts of the JIT alone vary about this much run to run
    "ActualCodeBytes": ANY_CHANGE,  # code is deterministic: every byte is a real change
    "AllocatedHotCodeBytes": ANY_CHANGE,
    "AllocatedColdCodeBytes": ANY_CHANGE,
    "ReadOnlyDataBytes": ANY_CHANGE,
    "GCInfoBytes": ANY_CHANGE,
    "PerfScore": 0.01,              # a double summed over many methods: below this is rounding
    "BytesAllocated": 1.0,          # arena growth under 1% is not worth a reviewer's time
}
#: every other metric (counters such as CseCount, InlineCount, loops)
OTHER_METRICS_RULE = 0.1
#: the metric names the suite itself knows (its rules, and the metrics with a direction), for spelling
#: checks only: the metrics of a run are those its details CSV reports (docs/contracts.md §3.2.6)
NAMED_METRICS = frozenset(RULES) | details.DIRECTED_METRICS


def _same_but_case(name: str, known: Iterable[str]) -> Optional[str]:
    """The known name `name` matches when case is ignored, if it is not itself known."""
    return next((k for k in sorted(known) if k.lower() == name.lower() and k != name), None)


def check_override_names(overrides: Sequence[Tuple[str, float]]) -> None:
    """Refuse, before a run, an override naming a metric the suite knows in another case (`Instructions`):
    metric names are case-sensitive, and the override would apply to nothing."""
    for name, pct in overrides:
        known = _same_but_case(name, NAMED_METRICS)
        if known is not None:
            raise SuiteError(f"-significance {name}={pct:g}: no metric is named '{name}' (names are "
                             f"case-sensitive); did you mean '{known}'?")


def unmatched_overrides(overrides: Mapping[str, float], metrics: Sequence[str]) -> List[str]:
    """One warning line per override that names none of the run's `metrics` (nor a metric of the suite's
    rules, which a command of another kind would judge): it applied to nothing."""
    lines = []
    for name, pct in overrides.items():
        if name in metrics or name in NAMED_METRICS:
            continue
        near = _same_but_case(name, metrics)
        hint = f"; did you mean '{near}'?" if near else ""
        listed = ", ".join(metrics) if metrics else "none"
        lines.append(f"-significance {name}={pct:g} applied to nothing: no metric '{name}' in this run{hint} "
                     f"(its metrics: {listed})")
    return lines


def direction(metric: str) -> str:
    """lower/higher is better, or neutral (`instructions`: lower)."""
    return LOWER if metric == INSTRUCTIONS else details.metric_direction(metric)


class Verdict(Enum):
    UNCHANGED = "unchanged"
    BELOW_RULE = "below the rule"
    WITHIN_NOISE = "within the noise floor"
    SIGNIFICANT = "significant"

    @property
    def flagged(self) -> bool:
        return self is Verdict.SIGNIFICANT

    @property
    def quiet_change(self) -> bool:
        """Changed, but not enough to be flagged."""
        return self in (Verdict.BELOW_RULE, Verdict.WITHIN_NOISE)


@dataclass(frozen=True)
class Significance:
    """The rules a run applies: overrides of `RULES`, and k when the A/A calibration ran."""

    overrides: Mapping[str, float] = field(default_factory=dict)
    noise_k: Optional[float] = None

    def min_pct(self, metric: str) -> float:
        if metric in self.overrides:
            return float(self.overrides[metric])
        return RULES.get(metric, OTHER_METRICS_RULE)

    def judge(self, metric: str, base: Number, diff: Number, spread: Optional[float] = None) -> Verdict:
        return judge(base, diff, self.min_pct(metric), spread, self.noise_k)


def judge(base: Number, diff: Number, min_pct: float, spread: Optional[float] = None,
          noise_k: Optional[float] = None) -> Verdict:
    """The verdict on one total: unchanged, below the rule, within k × spread, or significant.

    `spread` (in %) is the A/A spread; None (or no `noise_k`) skips the noise test."""
    if base == diff:
        return Verdict.UNCHANGED
    change = abs(pct_change(base, diff))
    if min_pct > 0 and not change >= min_pct:
        return Verdict.BELOW_RULE
    if spread is not None and noise_k is not None and not change > noise_k * spread:
        return Verdict.WITHIN_NOISE
    return Verdict.SIGNIFICANT


def fmt_rule_pct(pct: float) -> str:
    return "any change" if pct == 0 else f"{pct:g}%"


#: the most decimals a change is shown with; a smaller change reads `+<0.0001%`
MAX_CHANGE_DECIMALS = 4


def fmt_change(pct: float, decimals: int = 2) -> str:
    """A signed relative change (in %) that never reads as zero when it is not: `decimals` places,
    more (two significant digits, at most `MAX_CHANGE_DECIMALS`) when those would show only zeros,
    `+<0.0001%` below that; `0.00%` only for no change, `+∞`/`-∞` from a zero base."""
    if math.isinf(pct):
        return "+∞" if pct > 0 else "-∞"
    if pct == 0:
        return f"{0.0:.{decimals}f}%"
    sign, magnitude = ("+" if pct > 0 else "-"), abs(pct)
    text = f"{magnitude:.{decimals}f}"
    if float(text) == 0:
        smallest = 10.0 ** -MAX_CHANGE_DECIMALS
        if magnitude < smallest:
            return f"{sign}<{smallest:.{MAX_CHANGE_DECIMALS}f}%"
        text = f"{magnitude:.{min(MAX_CHANGE_DECIMALS, 1 - math.floor(math.log10(magnitude)))}f}"
    return f"{sign}{text}%"


def floor_definition(noise_k: float) -> str:
    """What the noise floor is, in one sentence (docs/signal.md §2)."""
    return (f"Noise floor: {noise_k:g} × the larger of the A/A replay's change of the same total and its pooled "
            "per-context spread (the A/A replay runs the base JIT as both sides; per collection, metric and row).")


def rule_line(significance: Significance, metrics: Sequence[str],
              name: Callable[[object], str] = escape_md_inline) -> str:
    """The one summary line saying which rule decided significance (metrics grouped by minimum) and,
    with the A/A calibration, what the noise floor is. `name` makes a metric name (untrusted: it comes
    from a details CSV or a JSON summary) safe where the line lands: markdown by default."""
    groups: Dict[float, List[str]] = {}
    for metric in metrics:
        groups.setdefault(significance.min_pct(metric), []).append(metric)
    rules = "; ".join(f"{', '.join(name(m) for m in names)} {fmt_rule_pct(pct)}" for pct, names in groups.items())
    text = f"Significance: a change is flagged when it reaches its metric's minimum ({rules or 'none'})"
    if significance.noise_k is None:
        return text + "; smaller changes count as within noise."
    return text + " and exceeds its noise floor; other changes count as within noise. " + \
        floor_definition(significance.noise_k)


# ---------------------------------------------------------------- a run's verdicts

def run_significance(run: MetricDiffRun) -> Significance:
    return Significance(dict(run.significance), run.noise_k)


def spread_of(collection: CollectionResult, metric: str, row: str) -> Optional[float]:
    """The A/A spread (in %) measured for this collection, metric and row; None when not measured."""
    return collection.noise.get(metric, {}).get(row)


def verdict(run: MetricDiffRun, collection: CollectionResult, metric: str, row: str = "Overall") -> Verdict:
    if not collection.has_metric(metric):
        return Verdict.UNCHANGED
    totals = collection.total(metric, row)
    spread = spread_of(collection, metric, row) if run.noise_k is not None else None
    return run_significance(run).judge(metric, totals.base, totals.diff, spread)


def flagged(run: MetricDiffRun, collection: CollectionResult, metric: str, row: str = "Overall") -> bool:
    return verdict(run, collection, metric, row).flagged


def noise_floor(run: MetricDiffRun, collection: CollectionResult, metric: str, row: str = "Overall") -> Optional[float]:
    """k × the A/A spread, in %, when the calibration ran for this collection."""
    spread = spread_of(collection, metric, row)
    if run.noise_k is None or spread is None:
        return None
    return run.noise_k * spread


def fmt_floor(floor: float) -> str:
    """`±0.004%`: two significant digits below 1%, at least two decimals, no trailing zeros after those."""
    if floor <= 0 or not floor < INFINITE_SPREAD:
        return "±0.00%" if floor <= 0 else "±∞"
    decimals = max(2, 1 - math.floor(math.log10(floor)))
    text = f"{floor:.{decimals}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction[:2] + fraction[2:].rstrip("0")
    return f"±{whole}.{fraction}%"


def floor_note(run: MetricDiffRun, collection: CollectionResult, metric: str, row: str = "Overall") -> str:
    """` (noise floor ±0.004%)` after a flagged change, when the calibration ran."""
    floor = noise_floor(run, collection, metric, row)
    return "" if floor is None else f" (noise floor {fmt_floor(floor)})"


@dataclass(frozen=True)
class QuietChange:
    """A change that was not flagged, and why."""

    collection: str
    metric: str
    row: str
    pct: float
    verdict: Verdict
    floor: Optional[float]
    minimum: float = 0.0

    @property
    def why(self) -> str:
        """Which rule held the change back: the rule's minimum for one below it (and the floor it
        exceeded, when one was measured), the floor for one within it."""
        if self.verdict is Verdict.WITHIN_NOISE and self.floor is not None:
            return f"within the noise floor ({fmt_floor(self.floor)})"
        text = f"below the rule (minimum {fmt_rule_pct(self.minimum)})"
        if self.floor is not None:
            side = "above" if abs(self.pct) > self.floor else "within"
            text += f"; {side} the noise floor {fmt_floor(self.floor)}"
        return text


def quiet_changes(run: MetricDiffRun, metrics: Sequence[str], rows: Sequence[str] = ROWS) -> List[QuietChange]:
    """Every change of these metrics that stayed within noise, collection by collection."""
    rules = run_significance(run)
    found = []
    for metric in metrics:
        for collection in run.collections:
            for row in rows:
                if not collection.has_metric(metric):
                    continue
                judged = verdict(run, collection, metric, row)
                if judged.quiet_change:
                    found.append(QuietChange(collection.name, metric, row, collection.total(metric, row).pct,
                                             judged, noise_floor(run, collection, metric, row),
                                             rules.min_pct(metric)))
    return found


# ---------------------------------------------------------------- the A/A spread

@dataclass
class SpreadSums:
    """What one A/A total needs: the base sum, the sum of changes, the sum of squared bases, and
    the sum of squared relative changes with the number of contexts they come from (base > 0)."""

    base: float = 0.0
    delta: float = 0.0
    base_squares: float = 0.0
    relative_squares: float = 0.0
    count: int = 0

    def plus(self, other: "SpreadSums") -> "SpreadSums":
        return SpreadSums(self.base + other.base, self.delta + other.delta, self.base_squares + other.base_squares,
                          self.relative_squares + other.relative_squares, self.count + other.count)


def aa_spread_pct(sums: SpreadSums) -> float:
    """The spread (in %) an A/A replay shows for one total: the larger of the total's own change and
    the standard deviation per-context noise gives a total, σ = r·√Σb²/Σb, where r² is the mean
    squared relative change of a context (every context's noise level estimated from all of them)."""
    if sums.base == 0:
        return 0.0 if sums.delta == 0 else math.inf
    own = abs(sums.delta) / abs(sums.base)
    pooled = math.sqrt(sums.relative_squares / sums.count) * math.sqrt(sums.base_squares) / abs(sums.base) \
        if sums.count else 0.0
    return max(own, pooled) * 100.0


class SpreadDigest:
    """What the A/A replay's details CSV says about noise, read in parts (`details.stream_details_csv`):
    per metric and row (MinOpts, FullOpts) the `SpreadSums` over rows where both sides succeeded.
    `metrics` None: every metric the file reports."""

    def __init__(self, metrics: Optional[Sequence[str]]) -> None:
        self.metrics: Optional[List[str]] = list(metrics) if metrics is not None else None
        self.sums: Dict[str, Dict[str, SpreadSums]] = {}
        self.failed = 0  # rows where a side did not succeed: contexts the A/A replay failed

    def add(self, table: Any) -> None:
        if self.metrics is None:
            self.metrics = [m for m in table.metric_names if m not in table.synthesized_metrics]
        columns = table.columns
        succeeded = success_mask(columns)
        self.failed += len(succeeded) - sum(succeeded)
        masks = {"MinOpts": bytes(map(and_, succeeded, columns.minopts)),
                 "FullOpts": bytes(map(gt, succeeded, columns.minopts))}
        for metric in self.metrics:
            if metric != INSTRUCTIONS and metric not in table.metric_names:
                continue
            base_values, diff_values = metric_columns(table, metric)
            for row, mask in masks.items():
                bases = list(compress(base_values, mask))
                deltas = list(map(sub, compress(diff_values, mask), bases))
                positive = [(b, d) for b, d in zip(bases, deltas) if b > 0]
                part = SpreadSums(float(in_order_sum(bases)), float(in_order_sum(deltas)),
                                  float(in_order_sum(map(mul, bases, bases))),
                                  float(in_order_sum((d / b) ** 2 for b, d in positive)), len(positive))
                rows = self.sums.setdefault(metric, {})
                rows[row] = rows.get(row, SpreadSums()).plus(part)

    def spreads(self) -> Dict[str, Dict[str, float]]:
        """metric -> row (Overall, MinOpts, FullOpts) -> spread in %."""
        result: Dict[str, Dict[str, float]] = {}
        for metric, rows in self.sums.items():
            minopts, fullopts = rows.get("MinOpts", SpreadSums()), rows.get("FullOpts", SpreadSums())
            result[metric] = {"Overall": aa_spread_pct(minopts.plus(fullopts)), "MinOpts": aa_spread_pct(minopts),
                              "FullOpts": aa_spread_pct(fullopts)}
        return result


#: how a JSON summary holds an infinite spread (an A/A change from a zero base); shown as ±∞
INFINITE_SPREAD = 1e300


def finite_spreads(spreads: Mapping[str, Mapping[str, float]]) -> Dict[str, Dict[str, float]]:
    """Spreads safe for a JSON summary (an infinite spread becomes `INFINITE_SPREAD`)."""
    return {metric: {row: (value if math.isfinite(value) else INFINITE_SPREAD) for row, value in rows.items()}
            for metric, rows in spreads.items()}

