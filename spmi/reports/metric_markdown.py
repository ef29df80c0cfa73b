"""Rendering tpdiff and memdiff results: console lines, markdown summaries, the memory gate.

All functions are pure (a `MetricDiffRun` in, text out). Layouts follow
docs/contracts.md §12.11 (tpdiff) and §12.12 (memdiff) with the §12.10 building blocks:
`C()` colour, `N()` thousands separators, `P()` signed percentage, `D()` details section.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from spmi.base.untrusted import console_line, escape_html_inline, escape_md_code, escape_md_inline
from spmi.reports import significance as signal
from spmi.reports.metric_model import (
    BYTES_ALLOCATED,
    CLASSES,
    ROWS,
    TPDIFF_MIN_EXAMPLE_DELTA,
    CollectionResult,
    Example,
    MetricDiffRun,
    Number,
    Totals,
    build_warnings,
    is_significant,
    pct_change,
    top_improvements,
    top_regressions,
)

LOWER, HIGHER, NEUTRAL = "lower", "higher", "neutral"
DirectionOf = Callable[[str], str]
GATE_ROWS = ("Overall", "FullOpts")
DEFAULT_THRESHOLD = 25.0


# ---------------------------------------------------------------- building blocks (§12.10)

def color(name: str, text: str) -> str:
    """`C(c,t)`."""
    return f'<span style="color:{name}">{text}</span>'


def fmt_int(value: Number) -> str:
    """`N(x)`: integer with `,` thousands separators."""
    return f"{int(value):,d}"


def fmt_value(value: Number, kind: str = "int") -> str:
    """Ints as `N(x)`, floats with 2 decimals (and separators)."""
    if kind == "float" or isinstance(value, float):
        return f"{float(value):,.2f}"
    return fmt_int(value)


def fmt_pct(pct: float, decimals: int = 2, direction: str = LOWER) -> str:
    """`P(p)`: `+` when positive, k decimals (more when a real change would show as zero:
    `significance.fmt_change`), `%`; ±∞ for a zero base.

    Red when the change is bad for the metric's direction, green when good;
    neutral metrics are not coloured. Zero is never coloured.
    """
    text = signal.fmt_change(pct, decimals)
    if pct == 0 or direction == NEUTRAL:
        return text
    worse = pct > 0 if direction != HIGHER else pct < 0
    return color("red" if worse else "green", text)


def details_section(title: str, body: str) -> str:
    """`D(title){body}`."""
    return f'\n<details>\n<summary>{title}</summary>\n<div style="margin-left:1em">\n\n{body}\n\n</div></details>\n'


def options_lines(base_options: Sequence[str], diff_options: Sequence[str]) -> str:
    """`Base JIT options: a;b` / `Diff JIT options: …`, each followed by an empty line, when given."""
    text = ""
    if base_options:
        text += f"Base JIT options: {escape_md_inline(';'.join(base_options))}\n\n"
    if diff_options:
        text += f"Diff JIT options: {escape_md_inline(';'.join(diff_options))}\n\n"
    return text


def range_title(label: str, pcts: Sequence[float], direction: str = LOWER) -> str:
    """`<label> (P(x))` when min and max format alike, else `<label> (P(min) to P(max))`."""
    low = fmt_pct(min(pcts), direction=direction)
    high = fmt_pct(max(pcts), direction=direction)
    label = escape_html_inline(label)
    return f"{label} ({low})" if low == high else f"{label} ({low} to {high})"


# ---------------------------------------------------------------- console

def tpdiff_console_lines(collection: CollectionResult, metric: str) -> List[str]:
    totals = collection.total(metric)
    delta = totals.diff - totals.base
    ratio = delta / totals.base if totals.base else 0.0
    return [f"Total instructions executed by base: {totals.base}",
            f"Total instructions executed by diff: {totals.diff}",
            f"Total instructions executed delta: {delta} ({ratio:.2%} of base)"]


def memdiff_console_lines(collection: CollectionResult) -> List[str]:
    """`  <metric>: base=<v>, diff=<v>, delta=<v> (<p>)` per metric (Overall)."""
    lines = []
    for metric in collection.metrics:
        totals = collection.total(metric)
        kind = collection.kinds.get(metric, "int")
        delta = totals.diff - totals.base
        line = (f"  {metric}: base={fmt_value(totals.base, kind)}, diff={fmt_value(totals.diff, kind)}, "
                f"delta={fmt_value(delta, kind)}")
        if totals.base != 0:
            line += f" ({delta / totals.base:.2%})"
        lines.append(line)
    return lines


# ---------------------------------------------------------------- shared sections

def failure_lines(run: MetricDiffRun) -> str:
    text = ""
    for failure in run.failures:
        text += f"{color('red', 'Replay failed:')} {escape_md_inline(failure.name)}: {escape_md_inline(failure.reason)}\n\n"
    return text


def noise_failures_text(failed: int) -> str:
    """How many contexts the A/A replay failed, for its line (none listed: a crashed worker's are missing)."""
    if not failed:
        return "no failed context is in its details (a worker that crashed leaves its contexts out)"
    return f"{failed:,} context{'s' if failed != 1 else ''} failed in it"


def noise_check_line(collections: Sequence[CollectionResult]) -> str:
    """The collections whose A/A replay failed contexts or did not end cleanly, in one line ('' when none):
    their noise floors come from fewer contexts, or (no data) they were judged by the rule alone."""
    parts = []
    for collection in collections:
        if not collection.noise_failed and not collection.noise_problem:
            continue
        name = escape_md_inline(collection.name)
        problem = escape_md_inline(collection.noise_problem or "failed contexts")
        if not collection.noise:
            parts.append(f"{name}: the A/A replay produced no data ({problem}), so it was judged by the rule alone")
            continue
        parts.append(f"{name}: the A/A replay ended with {problem}; {noise_failures_text(collection.noise_failed)}, "
                     "so its noise floor comes from the contexts that compiled")
    return f"Noise check incomplete: {'; '.join(parts)}." if parts else ""


def significance_lines(run: MetricDiffRun, metrics: Sequence[str]) -> str:
    """The one line stating the significance rule the summary applied (reports/significance), and the one
    naming the collections whose A/A replay failed contexts (`--noise_check`)."""
    incomplete = noise_check_line(run.collections)
    return signal.rule_line(signal.run_significance(run), metrics) + "\n\n" + (incomplete + "\n\n" if incomplete else "")


def within_noise_section(run: MetricDiffRun, metrics: Sequence[str], rows: Sequence[str]) -> str:
    """`D(Changes within noise (N))`: every change not flagged, with the reason, collapsed."""
    quiet = signal.quiet_changes(run, metrics, rows)
    if not quiet:
        return ""
    body = "|Collection|Metric|Row|PDIFF|Why not flagged|\n|---|---|---|--:|---|\n"
    for change in quiet:
        body += (f"|{escape_md_inline(change.collection)}|{escape_md_inline(change.metric)}|{change.row}|"
                 f"{fmt_pct(change.pct, direction=NEUTRAL)}|{change.why}|\n")
    return details_section(f"Changes within noise ({len(quiet)})", body)


def example_table(examples: Sequence[Example], kind: str, direction: str = LOWER) -> str:
    lines = ["|Collection|Context|Base|Diff|PDIFF|Method full name|", "|---|--:|--:|--:|--:|---|"]
    for example in examples:
        lines.append(f"|{escape_md_inline(example.collection)}|{example.context}|{fmt_value(example.base, kind)}|"
                     f"{fmt_value(example.diff, kind)}|{fmt_pct(example.pct, direction=direction)}|"
                     f"{escape_md_inline(example.method)}|")
    return "\n".join(lines) + "\n"


def repro_line(run: MetricDiffRun) -> str:
    if not run.repro:
        return ""
    return (f"\nTo reproduce a context, run in Core_Root (N = Context, <collection> = its .mch file): "
            f"{escape_md_code(run.repro)}\n")


def _all_examples(run: MetricDiffRun) -> List[Example]:
    return [example for collection in run.collections for example in collection.examples]


def _metric_kind(run: MetricDiffRun, metric: str) -> str:
    kinds = {c.kinds.get(metric, "int") for c in run.collections if c.has_metric(metric)}
    return "float" if "float" in kinds else "int"


# ---------------------------------------------------------------- tpdiff (§12.11)

def tpdiff_warning_block(run: MetricDiffRun) -> str:
    text = ""
    for kind, message in build_warnings(run.base_build, run.diff_build):
        text += f"{color('red', 'Warning:')} {escape_md_inline(message)}\n\n"
        if kind == "compiler" and run.base_build is not None and run.diff_build is not None:
            text += f"Base JIT's compiler: {escape_md_inline(run.base_build.compiler)}\n\n"
            text += f"Diff JIT's compiler: {escape_md_inline(run.diff_build.compiler)}\n\n"
    return text


def _row_significant(run: MetricDiffRun, metric: str, row: str) -> List[CollectionResult]:
    return [c for c in run.collections if signal.flagged(run, c, metric, row)]


def tpdiff_any_significant(run: MetricDiffRun) -> bool:
    return any(_row_significant(run, run.focus, row) for row in ROWS)


def tpdiff_pivot(run: MetricDiffRun, row: str) -> str:
    significant = _row_significant(run, run.focus, row)
    if not significant:
        return ""
    title = range_title(row, [c.total(run.focus, row).pct for c in significant])  # the collections shown
    body = "|Collection|PDIFF|\n|---|--:|\n"
    body += "".join(f"|{escape_md_inline(c.name)}|{fmt_pct(c.total(run.focus, row).pct)}"
                    f"{signal.floor_note(run, c, run.focus, row)}|\n" for c in significant)
    return details_section(title, body)


def top_tables(run: MetricDiffRun, by_delta: bool, delta_label: str, direction: str = LOWER) -> str:
    """Top regressions/improvements per class (FullOpts, then MinOpts).

    For a higher-is-better metric a regression is a decrease.
    """
    examples = _all_examples(run)
    kind = _metric_kind(run, run.focus)
    worse, better = (top_improvements, top_regressions) if direction == HIGHER else \
        (top_regressions, top_improvements)
    orders = ("pct", "delta") if by_delta else ("pct",)
    text = ""
    for row_class in CLASSES:
        for what, pick in (("regressions", worse), ("improvements", better)):
            for by in orders:
                chosen = pick(examples, row_class, by)
                if chosen:
                    label = "PDIFF %" if by == "pct" else delta_label
                    text += details_section(f"Top method {what} ({row_class}, by {label})",
                                            example_table(chosen, kind, direction))
    return text


def tpdiff_details(run: MetricDiffRun) -> str:
    body = ""
    for label, row in (("All", "Overall"), ("MinOpts", "MinOpts"), ("FullOpts", "FullOpts")):
        body += f"{label} contexts:\n\n"
        body += "|Collection|Base # instructions|Diff # instructions|PDIFF|\n|---|--:|--:|--:|\n"
        for c in run.collections:
            totals = c.total(run.focus, row)
            body += f"|{escape_md_inline(c.name)}|{fmt_int(totals.base)}|{fmt_int(totals.diff)}|{fmt_pct(totals.pct)}|\n"
        body += "\n"
    return details_section("Details", body)


def render_tpdiff(run: MetricDiffRun, long: bool, target: str = "") -> str:
    """`tpdiff_summary.md` (long) or `tpdiff_short_summary.md` (short)."""
    text = verdict_line(run, target) + "\n\n" + failure_lines(run)
    header = tpdiff_warning_block(run) + options_lines(run.base_jit_options, run.diff_jit_options)
    header += significance_lines(run, [run.focus])
    if tpdiff_any_significant(run):
        text += header + "".join(tpdiff_pivot(run, row) for row in ROWS)
        if long:
            examples = top_tables(run, by_delta=False, delta_label="")
            text += examples + (repro_line(run) if examples else "")
    elif long:
        text += header + "No significant throughput differences found\n"
    else:
        return ""
    if long:
        text += within_noise_section(run, [run.focus], ROWS) + tpdiff_details(run)
    return text


# ---------------------------------------------------------------- memory gate

@dataclass(frozen=True)
class GateBreach:
    """A collection row whose BytesAllocated growth reached the memory gate."""

    collection: str
    row: str
    pct: float


def gate_breaches(run: MetricDiffRun, threshold: Optional[float]) -> List[GateBreach]:
    """Collections whose Overall or FullOpts BytesAllocated PDIFF (as shown, 2 decimals) ≥ threshold."""
    if not threshold:
        return []
    breaches = []
    for collection in run.collections:
        if not collection.has_metric(BYTES_ALLOCATED):
            continue
        for row in GATE_ROWS:
            pct = collection.total(BYTES_ALLOCATED, row).pct
            shown = pct if math.isinf(pct) else round(pct, 2)
            if shown >= threshold and signal.flagged(run, collection, BYTES_ALLOCATED, row):
                breaches.append(GateBreach(collection.name, row, pct))
    return breaches


def fmt_threshold(threshold: float) -> str:
    return f"{threshold:g}"


def gate_headline(breaches: Sequence[GateBreach], threshold: float) -> str:
    """The red first line of a memdiff summary whose gate failed."""
    parts = "; ".join(f"{b.collection} {b.row} {fmt_pct(b.pct, direction=NEUTRAL)}" for b in breaches)
    text = (f"Memory gate failed: {BYTES_ALLOCATED} grew by at least {fmt_threshold(threshold)}% in: "
            f"{escape_md_inline(parts)}")
    return color("red", text) + "\n\n"


def gate_rule(threshold: Optional[float]) -> str:
    if not threshold:
        return "Memory gate: disabled (-memdiff_threshold 0).\n\n"
    return (f"Memory gate: memdiff fails (exit code 2) when the {BYTES_ALLOCATED} PDIFF of any collection's "
            f"Overall or FullOpts row is at least +{fmt_threshold(threshold)}% and the growth is significant "
            f"(-memdiff_threshold {fmt_threshold(threshold)}; 0 disables).\n\n")


# ---------------------------------------------------------------- memdiff (§12.12)

def memdiff_significant_metrics(run: MetricDiffRun, direction_of: DirectionOf) -> List[str]:
    return [m for m in run.directional_metrics(direction_of)
            if any(signal.flagged(run, c, m) for c in run.collections)]


def memdiff_pivot(run: MetricDiffRun, metric: str, direction: str) -> str:
    present = [c for c in run.collections if c.has_metric(metric)]
    significant = [c for c in present if signal.flagged(run, c, metric)]
    kind = _metric_kind(run, metric)
    title = range_title(metric, [c.total(metric).pct for c in significant or present], direction)  # those shown
    body = "|Collection|Base|Diff|PDIFF|\n|---|--:|--:|--:|\n"
    for c in significant:
        totals = c.total(metric)
        body += (f"|{escape_md_inline(c.name)}|{fmt_value(totals.base, kind)}|{fmt_value(totals.diff, kind)}|"
                 f"{fmt_pct(totals.pct, direction=direction)}{signal.floor_note(run, c, metric)}|\n")
    return details_section(title, body)


def _value_row(name: str, totals: Totals, kind: str, direction: str, extra: str = "") -> str:
    return (f"|{name}|{extra}{fmt_value(totals.base, kind)}|{fmt_value(totals.diff, kind)}|"
            f"{fmt_pct(totals.pct, direction=direction)}|\n")


def memdiff_details(run: MetricDiffRun, direction_of: DirectionOf) -> str:
    focus, kind = run.focus, _metric_kind(run, run.focus)
    direction = direction_of(focus)
    body = ""
    for label, row in (("All", "Overall"), ("MinOpts", "MinOpts"), ("FullOpts", "FullOpts")):
        body += f"{label} contexts ({focus}):\n\n|Collection|Base|Diff|PDIFF|\n|---|--:|--:|--:|\n"
        body += "".join(_value_row(escape_md_inline(c.name), c.total(focus, row), kind, direction)
                        for c in run.collections if c.has_metric(focus))
        body += "\n"
    other_rows = ""
    for c in run.collections:
        for metric in c.metrics:
            totals = c.total(metric)
            metric_direction = direction_of(metric)
            if metric == focus or (metric_direction == NEUTRAL and totals.base == totals.diff):
                continue
            other_rows += _value_row(escape_md_inline(c.name), totals, c.kinds.get(metric, "int"), metric_direction,
                                     f"{escape_md_inline(metric)}|")
    if other_rows:
        body += "Other metrics (all contexts):\n\n|Collection|Metric|Base|Diff|PDIFF|\n|---|---|--:|--:|--:|\n"
        body += other_rows + "\n"
    body += ("Context information:\n\n"
             "|Collection|Diffed contexts|MinOpts|FullOpts|Missed, base|Missed, diff|Failed, base|Failed, diff|\n"
             "|---|--:|--:|--:|--:|--:|--:|--:|\n")
    for c in run.collections:
        body += (f"|{escape_md_inline(c.name)}|{fmt_int(c.contexts['Overall'])}|{fmt_int(c.contexts['MinOpts'])}|"
                 f"{fmt_int(c.contexts['FullOpts'])}|{fmt_int(c.base_counts.misses)}|"
                 f"{fmt_int(c.diff_counts.misses)}|{fmt_int(c.base_counts.failures)}|"
                 f"{fmt_int(c.diff_counts.failures)}|\n")
    return details_section("Details", body)


def render_memdiff(run: MetricDiffRun, long: bool, direction_of: DirectionOf, target: str = "") -> str:
    """`memdiff_summary.md` (long) or `memdiff_short_summary.md` (short)."""
    breaches = gate_breaches(run, run.threshold)
    significant = memdiff_significant_metrics(run, direction_of)
    if not long and not significant and not breaches:
        return ""
    text = verdict_line(run, target) + "\n\n"
    text += gate_headline(breaches, run.threshold or 0) if breaches else ""
    text += failure_lines(run)
    text += options_lines(run.base_jit_options, run.diff_jit_options)
    if run.focus == BYTES_ALLOCATED or any(c.has_metric(BYTES_ALLOCATED) for c in run.collections):
        text += gate_rule(run.threshold)
    text += significance_lines(run, run.directional_metrics(direction_of))
    for metric in significant:
        text += memdiff_pivot(run, metric, direction_of(metric))
    if long:
        if not significant:
            text += "No significant memory differences found\n"
        text += within_noise_section(run, run.directional_metrics(direction_of), ("Overall",))
        examples = top_tables(run, by_delta=True, delta_label="absolute delta",
                              direction=direction_of(run.focus))
        text += examples + (repro_line(run) if examples else "")
        text += memdiff_details(run, direction_of)
    return text


# ---------------------------------------------------------------- the verdict line

MAX_VERDICT_METRICS = 4


def _judged(run: MetricDiffRun) -> Tuple[List[str], Sequence[str]]:
    """The metrics a summary judges and the rows it judges them in (as the summary's tables do)."""
    if run.kind == "tpdiff":
        return [run.focus], ROWS
    if run.kind == "metricdiff":
        return run.all_metrics(), ("Overall",)
    return run.directional_metrics(signal.direction), ("Overall",)


def _run_total(run: MetricDiffRun, metric: str) -> Totals:
    present = [c.total(metric) for c in run.collections if c.has_metric(metric)]
    return Totals(sum(t.base for t in present), sum(t.diff for t in present))


def _verdict_of(run: MetricDiffRun, metric: str, rows: Sequence[str]) -> str:
    """`significant` (`in k of n collections` when not in all of several), `within noise` or `unchanged`."""
    present = [c for c in run.collections if c.has_metric(metric)]
    flagged = [c for c in present if any(signal.flagged(run, c, metric, row) for row in rows)]
    if flagged:
        where = "" if len(flagged) == len(present) else f" in {len(flagged)} of {len(present)} collections"
        return "significant" + where
    quiet = any(signal.verdict(run, c, metric, row).quiet_change for c in present for row in rows)
    return "within noise" if quiet else "unchanged"


def run_target(run: MetricDiffRun) -> str:
    """`<os> <arch>` of the run's target as its summary records it ('' for a summary written before
    summaries carried it)."""
    return f"{run.target_os} {run.target_arch}".strip()


def verdict_line(run: MetricDiffRun, target: str = "", markdown: bool = True) -> str:
    """The one line a reviewer acts on (docs/signal.md §6): `<kind> <target>: <metric> <total change>
    (<verdict>[; gate …]); <failures>`; metricdiff names its significant metrics instead. The change
    is coloured by the metric's direction (markdown only); the verdict is its own word, not a colour."""
    name = escape_md_inline if markdown else console_line
    paint = color if markdown else (lambda _colour, text: text)

    def change(metric: str) -> str:
        pct = _run_total(run, metric).pct
        return fmt_pct(pct, direction=signal.direction(metric)) if markdown else signal.fmt_change(pct)

    head = name(f"{run.kind} {target or run_target(run)}".strip())
    metrics, rows = _judged(run)
    if run.kind == "metricdiff":
        significant = [m for m in metrics if _verdict_of(run, m, rows).startswith("significant")]
        shown = ", ".join(f"{name(m)} {change(m)}" for m in significant[:MAX_VERDICT_METRICS])
        more = ", …" if len(significant) > MAX_VERDICT_METRICS else ""
        body = (f"{len(significant)} of {len(metrics)} metrics changed significantly ({shown}{more})" if significant
                else f"no significant change in {len(metrics)} metrics")
    elif any(c.has_metric(run.focus) for c in run.collections):
        body = f"{name(run.focus)} {change(run.focus)} ({_verdict_of(run, run.focus, rows)}{_gate_note(run, paint)})"
    else:
        body = f"no {name(run.focus)} data"
    failures = len(run.failures)
    trouble = paint("red", f"{failures} replay failure{'s' if failures != 1 else ''}") if failures else "no failures"
    return f"{head}: {body}; {trouble}"


def _gate_note(run: MetricDiffRun, paint: Callable[[str, str], str]) -> str:
    if run.kind != "memdiff" or run.focus != BYTES_ALLOCATED or run.threshold is None:
        return ""
    if not run.threshold:
        return "; gate disabled"
    reached = sorted({b.collection for b in gate_breaches(run, run.threshold)})
    limit = fmt_threshold(run.threshold)
    if not reached:
        return f"; gate {limit}% not reached"
    return "; " + paint("red", f"gate {limit}% reached in {len(reached)} collection{'s' if len(reached) != 1 else ''}")


# ---------------------------------------------------------------- overall pages (several platforms)

SIGNIFICANCE_RULE = ("A change is significant when it reaches its metric's minimum meaningful change (with "
                     "--noise_check: and exceeds the noise floor measured by an A/A replay); each platform's tables "
                     "below list only significant collections.")
HEADLINE_LABELS = {"instructions": "instructions executed in the JIT", BYTES_ALLOCATED: "bytes allocated by the JIT"}


def headline_rows(runs: Sequence[Tuple[str, MetricDiffRun]]) -> List[Tuple[str, CollectionResult, Totals]]:
    """(platform, collection, Overall totals of the run's focus metric), largest absolute PDIFF first."""
    rows = [(platform, c, c.total(run.focus)) for platform, run in runs for c in run.collections
            if run.focus and c.has_metric(run.focus)]
    return sorted(rows, key=lambda r: (-abs(r[2].pct), -abs(r[2].diff - r[2].base), r[0], r[1].name))


def headline_table(runs: Sequence[Tuple[str, MetricDiffRun]], direction_of: DirectionOf) -> str:
    """Every platform and collection in one table, never collapsed: the focus metric's base, diff,
    delta and PDIFF (Overall), sorted by absolute change, then the significance rule."""
    rows = headline_rows(runs)
    if not rows:
        return ""
    focus = next(run.focus for _, run in runs if run.focus)
    direction = direction_of(focus) if focus != "instructions" else LOWER
    kind = "float" if any(c.kinds.get(focus) == "float" for _, c, _ in rows) else "int"
    text = (f"**{escape_md_inline(HEADLINE_LABELS.get(focus, focus))}, by platform and collection** (Overall, largest absolute change "
            "first):\n\n|Platform|Collection|Base|Diff|Delta|PDIFF|\n|---|---|--:|--:|--:|--:|\n")
    for platform, collection, totals in rows:
        delta = totals.diff - totals.base
        sign = "+" if delta > 0 else ""
        text += (f"|{escape_md_inline(platform)}|{escape_md_inline(collection.name)}|{fmt_value(totals.base, kind)}|"
                 f"{fmt_value(totals.diff, kind)}|{sign}{fmt_value(delta, kind)}|"
                 f"{fmt_pct(totals.pct, direction=direction)}|\n")
    return text + "\n" + SIGNIFICANCE_RULE + "\n\n"


# ---------------------------------------------------------------- metricdiff (§12.12a)

def metricdiff_significant_metrics(run: MetricDiffRun) -> List[str]:
    """Every metric (first-seen order) that is significant in some collection."""
    return [m for m in run.all_metrics() if any(signal.flagged(run, c, m) for c in run.collections)]


def metrics_without_diffs(run: MetricDiffRun) -> str:
    """The long file's `D(Metrics with no diffs)`: the metrics no collection changed significantly."""
    significant = set(metricdiff_significant_metrics(run))
    quiet = [m for m in run.all_metrics() if m not in significant]
    if not quiet:
        return ""
    return details_section("Metrics with no diffs", escape_md_inline(", ".join(quiet)))


def render_metricdiff(run: MetricDiffRun, long: bool, direction_of: DirectionOf, target: str = "") -> str:
    """`metricdiff_summary.md` (long) or `metricdiff_short_summary.md` (short)."""
    significant = metricdiff_significant_metrics(run)
    if not long and not significant:
        return ""
    text = verdict_line(run, target) + "\n\n" + failure_lines(run)
    text += options_lines(run.base_jit_options, run.diff_jit_options)
    text += significance_lines(run, run.all_metrics())
    for metric in significant:
        text += memdiff_pivot(run, metric, direction_of(metric))
    if long:
        if not significant:
            text += "No significant metric differences found\n"
        text += within_noise_section(run, run.all_metrics(), ("Overall",))
        text += metrics_without_diffs(run)
        if run.focus and any(c.has_metric(run.focus) for c in run.collections):
            examples = top_tables(run, by_delta=True, delta_label="absolute delta",
                                  direction=direction_of(run.focus))
            text += examples + (repro_line(run) if examples else "")
            text += memdiff_details(run, direction_of)
    return text


def render(run: MetricDiffRun, long: bool, direction_of: DirectionOf, target: str = "") -> str:
    """A summary of any kind; `target` (`<os> <arch>`, when known) names it in the verdict line."""
    if run.kind == "tpdiff":
        return render_tpdiff(run, long, target)
    if run.kind == "metricdiff":
        return render_metricdiff(run, long, direction_of, target)
    return render_memdiff(run, long, direction_of, target)


__all__ = ["verdict_line", "headline_table", "headline_rows", "SIGNIFICANCE_RULE", "render_metricdiff", "color", "fmt_int", "fmt_value", "fmt_pct", "details_section", "options_lines", "range_title",
           "tpdiff_console_lines", "memdiff_console_lines", "render_tpdiff", "render_memdiff", "render",
           "gate_breaches", "gate_headline", "gate_rule", "GateBreach", "is_significant", "pct_change",
           "TPDIFF_MIN_EXAMPLE_DELTA", "DEFAULT_THRESHOLD"]
