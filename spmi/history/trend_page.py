"""The trend page: one offline HTML file, a small chart per collection and metric (docs/history.md).

Each chart shows one collection's change against base in every recorded main run, on a time
axis (dates; hovering a point shows its time, base and diff hashes and value), with y ticks,
the fence band that decides a PR's verdict (`judge.magnitude_fence` of the runs a PR is judged
against) and the metric's rule as dashed lines; the PR's change, when given, is a square in a
slot of its own right of the runs, so that it hides no run, and the chart's caption is its verdict.
Same rules as the HTML diff explorer: no requests (inline SVG), a strict Content-Security-Policy
(no script at all, the one style by hash), every name escaped. Pure.
"""
from __future__ import annotations

import base64
import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Dict, List, Optional, Sequence, Tuple

from spmi.history import judge
from spmi.history.judge import fmt_limit, fmt_pct
from spmi.history.records import TIME_FORMAT, HistoryRecord
from spmi.reports.html_report import escape_text
from spmi.reports.significance import Significance

WIDTH, HEIGHT = 440, 220
LEFT, RIGHT_GUTTER, TOP, BOTTOM = 70, 64, 16, 40
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1.05em;margin:1.2em 0 .4em}
.multiples{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;border:1px solid #ddd;background:#fff;padding:6px}
figcaption{font-size:12px;max-width:440px;overflow-wrap:anywhere}
figcaption .name{font-weight:600}
figcaption .flagged{color:#b00020;font-weight:600}
svg{display:block}
svg text{font:11px system-ui,sans-serif;fill:#444}
.note{color:#555}"""


@dataclass(frozen=True)
class Point:
    time: str       # the run's UTC time stamp (records.TIME_FORMAT)
    label: str      # what hovering shows
    value: float    # the change in percent


@dataclass
class Series:
    """One collection and metric: its main runs (oldest first), the fence that decides, the PR."""

    collection: str
    points: List[Point]
    pr: Optional[Point] = None
    fence: Optional[float] = None       # ±limit in %, None when too few runs
    fence_runs: int = 0
    rule_pct: float = 0.0
    verdict: str = ""                   # the PR's verdict in words
    flagged: bool = False


@dataclass
class TrendGroup:
    """The runs of one summary type and target, and the PR judged against them."""

    heading: str
    records: Sequence[HistoryRecord]
    pr: Optional[HistoryRecord] = None
    notes: List[str] = field(default_factory=list)


def chart_series(records: Sequence[HistoryRecord], metric: str, pr: Optional[HistoryRecord] = None,
                 last: int = judge.DEFAULT_LAST, k: float = judge.DEFAULT_K) -> List[Series]:
    """One series per collection: the metric's change in each record (oldest first), its fence and the PR."""
    ordered = sorted(records, key=lambda r: r.time)
    verdicts = _judgements(records, pr, last, k)
    names: List[str] = []
    for record in ordered + ([pr] if pr else []):
        names.extend(c.name for c in record.collections if metric in c.totals and c.name not in names)
    series: List[Series] = []
    for name in names:
        points = [Point(record.time, _run_label(record, value), value) for record, value in _values(ordered, name, metric)]
        one = Series(name, points, rule_pct=Significance().min_pct(metric))
        verdict = verdicts.get((name, metric))
        history = verdict.history if verdict is not None else [p.value for p in reversed(points)][:last]
        if len(history) >= judge.MIN_RECORDS:
            one.fence = judge.magnitude_fence(history, judge.history_k(k, len(history))).limit
            one.fence_runs = len(history)
        if verdict is not None and pr is not None:
            one.pr = Point(pr.time, f"this change ({_hashes(pr)}): {fmt_pct(verdict.change)}", verdict.change)
            one.verdict, one.flagged = verdict.describe(), verdict.verdict.flagged
        if points or one.pr:
            series.append(one)
    return series


def _judgements(records: Sequence[HistoryRecord], pr: Optional[HistoryRecord], last: int,
                k: float) -> Dict[Tuple[str, str], judge.Judgement]:
    if pr is None:
        return {}
    return {(j.collection, j.metric): j for j in judge.judge(pr, records, last=last, k=k).judgements}


def _values(records: Sequence[HistoryRecord], name: str, metric: str) -> List[Tuple[HistoryRecord, float]]:
    found = []
    for record in records:
        collection = record.collection(name)
        change = collection.change(metric) if collection else None
        if change is not None:
            found.append((record, change))
    return found


def _hashes(record: HistoryRecord) -> str:
    return f"base {record.base_hash[:12] or '?'}, diff {record.diff_hash[:12] or '?'}"


def _when(stamp: str) -> str:
    return f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]} UTC"


def _run_label(record: HistoryRecord, value: float) -> str:
    return f"{_when(record.time)} ({_hashes(record)}): {fmt_pct(value)}"


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()


# ---------------------------------------------------------------- axes

#: the value axis covers at most this many percent either way, and at least this span
TICK_LIMIT = 1e12
MIN_TICK_SPAN = 1e-9


def nice_ticks(low: float, high: float, count: int = 5) -> List[float]:
    """Round values (1, 2 or 5 × 10^n apart) covering `low`..`high`, about `count` of them. A range
    beyond ±TICK_LIMIT % is cut there and one narrower than MIN_TICK_SPAN widened (a record's change
    may be any finite number: 10^306 % must not overflow, 10^-300 % must not underflow)."""
    low, high = (max(-TICK_LIMIT, min(TICK_LIMIT, value)) for value in (low, high))
    if not high - low >= MIN_TICK_SPAN:
        high, low = low + 1.0, low - 1.0
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks = []
    index = 0
    while first + index * step <= high + step * 1e-9:
        ticks.append(round(first + index * step, 12))
        index += 1
    if ticks[-1] < high:
        ticks.append(round(first + index * step, 12))
    return ticks


def tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 2
    return "0%" if value == 0 else f"{value:+.{decimals}f}%"


def date_ticks(stamps: Sequence[str], count: int = 4) -> List[Tuple[float, str]]:
    """(seconds, label) of up to `count` evenly spaced times over the runs; dates, with hours when
    the runs span less than three days."""
    if not stamps:
        return []
    start, end = _seconds(stamps[0]), _seconds(stamps[-1])
    if end <= start:
        return [(start, _when(stamps[0])[:16])]
    hours = end - start < 3 * 86400
    marks: List[Tuple[float, str]] = []
    for index in range(count):
        at = start + (end - start) * index / (count - 1)
        text = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M" if hours else "%Y-%m-%d")
        if not marks or marks[-1][1] != text:
            marks.append((at, text))
    return marks


# ---------------------------------------------------------------- one chart

def render_chart(metric: str, one: Series, colour: str) -> str:
    """An inline SVG: the fence band, the rule, y ticks, the time axis, the runs and the PR's slot."""
    plot_right = WIDTH - RIGHT_GUTTER
    plot_bottom = HEIGHT - BOTTOM
    values = [p.value for p in one.points] + ([one.pr.value] if one.pr else []) + [0.0]
    bounds = values + ([one.fence, -one.fence] if one.fence else []) + (
        [one.rule_pct, -one.rule_pct] if one.rule_pct else [])
    ticks = nice_ticks(min(bounds), max(bounds))
    low, high = ticks[0], ticks[-1]
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    times = [_seconds(p.time) for p in one.points]
    start, end = (min(times), max(times)) if times else (0.0, 0.0)

    def x(at: float) -> float:
        if end <= start:
            return (LEFT + plot_right) / 2
        return LEFT + 8 + (plot_right - LEFT - 16) * (at - start) / (end - start)

    def y(value: float) -> float:
        return plot_bottom - (value - low) / (high - low) * (plot_bottom - TOP)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape_text(one.collection)} {escape_text(metric)}">']
    if one.fence:
        parts.append(f'<rect class="fence" x="{LEFT}" y="{y(one.fence):.1f}" width="{WIDTH - LEFT:.1f}" '
                     f'height="{y(-one.fence) - y(one.fence):.1f}" fill="#cfe3f7" fill-opacity="0.7">'
                     f'<title>fence {escape_text(fmt_limit(one.fence))} (last {one.fence_runs} main runs): '
                     f'a change this size or larger is outside</title></rect>')
    parts.append('<g class="y-axis">')
    for value in ticks:
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{plot_right}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                     f'stroke="{"#888" if value == 0 else "#e4e4e4"}"/>'
                     f'<text class="tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">'
                     f'{escape_text(tick_label(value, step))}</text>')
    parts.append("</g>")
    if one.rule_pct and y(0.0) - y(one.rule_pct) >= 3:    # drawn where it does not merge into the zero line
        for edge in (one.rule_pct, -one.rule_pct):
            parts.append(f'<line class="rule" x1="{LEFT}" x2="{WIDTH}" y1="{y(edge):.1f}" y2="{y(edge):.1f}" '
                         f'stroke="#777" stroke-dasharray="4 3"><title>the rule: {escape_text(metric)} '
                         f'{escape_text(fmt_limit(one.rule_pct))}</title></line>')
    parts.append(f'<g class="x-axis"><line x1="{LEFT}" x2="{plot_right}" y1="{plot_bottom}" y2="{plot_bottom}" '
                 'stroke="#444"/>')
    for at, text in date_ticks([p.time for p in one.points]):
        parts.append(f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{plot_bottom}" y2="{plot_bottom + 4}" stroke="#444"/>'
                     f'<text class="tick date" x="{x(at):.1f}" y="{plot_bottom + 16}" text-anchor="middle">'
                     f'{escape_text(text)}</text>')
    parts.append("</g>")
    parts.append(f'<g class="series" data-collection="{escape_text(one.collection)}">')
    coords = [(x(at), y(p.value)) for at, p in zip(times, one.points)]
    if len(coords) > 1:
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
    for (cx, cy), point in zip(coords, one.points):
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}"><title>'
                     f'{escape_text(one.collection)}: {escape_text(point.label)}</title></circle>')
    if one.pr is not None:
        px, py = plot_right + RIGHT_GUTTER / 2, y(one.pr.value)
        stroke = "#b00020" if one.flagged else "#222"
        parts.append(f'<rect class="pr" x="{px - 6:.1f}" y="{py - 6:.1f}" width="12" height="12" fill="#fff" '
                     f'stroke="{stroke}" stroke-width="3"><title>{escape_text(one.collection)}: '
                     f'{escape_text(one.pr.label)}; {escape_text(one.verdict)}</title></rect>'
                     f'<text class="pr-label" x="{px:.1f}" y="{plot_bottom + 32}" text-anchor="middle">PR</text>')
    parts.append("</g></svg>")
    return "".join(parts)


def render_caption(metric: str, one: Series) -> str:
    fence = (f"fence {fmt_limit(one.fence)} (last {one.fence_runs} main runs)" if one.fence
             else "no fence (fewer than 3 main runs)")
    text = f'<span class="name">{escape_text(one.collection)}</span><br>{escape_text(fence)}'
    if one.pr is not None:
        mark = "FLAGGED " if one.flagged else ""
        text += (f'<br><span class="{"flagged" if one.flagged else "verdict"}">'
                 f'{escape_text(f"PR {mark}{fmt_pct(one.pr.value)}: {one.verdict}")}</span>')
    return f"<figcaption>{text}</figcaption>"


# ---------------------------------------------------------------- the page

def page_policy() -> str:
    """No script, no request of any kind; only the page's own style (by hash)."""
    digest = base64.b64encode(hashlib.sha256(STYLE.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; script-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def render_group(group: TrendGroup, last: int, k: float) -> str:
    """A group's charts under its heading (h2, if any): a section per metric, a chart per collection."""
    level = 3 if group.heading else 2
    metrics: List[str] = []
    for record in list(group.records) + ([group.pr] if group.pr else []):
        metrics.extend(m for m in record.metrics() if m not in metrics)
    runs = f"{len(group.records)} recorded main run{'s' if len(group.records) != 1 else ''}"
    marked = "; the square right of the runs is this change" if group.pr else ""
    text = (f"<h2>{escape_text(group.heading)}</h2>" if group.heading else "") + (
        f'<p class="note">{runs}{marked}. The band is the fence of the sizes of main\'s changes '
        "(a change this size or larger is outside), the dashed lines the metric's rule; hover a point for its "
        "run.</p>")
    text += "".join(f'<p class="note">{escape_text(n)}</p>' for n in group.notes)
    sections = []
    for metric in metrics:
        series = chart_series(group.records, metric, group.pr, last, k)
        figures = "".join(f'<figure class="chart-one" data-collection="{escape_text(s.collection)}">'
                          f"{render_chart(metric, s, PALETTE[i % len(PALETTE)])}{render_caption(metric, s)}</figure>"
                          for i, s in enumerate(series))
        if series:
            sections.append(f'<section class="chart" data-metric="{escape_text(metric)}">'
                            f"<h{level}>{escape_text(metric)} (change against base, per run)</h{level}>"
                            f'<div class="multiples">{figures}</div></section>')
    return text + ("".join(sections) or '<p class="note">No recorded runs.</p>')


def render_trend_pages(groups: Sequence[TrendGroup], title: str, notes: Sequence[str] = (),
                       last: int = judge.DEFAULT_LAST, k: float = judge.DEFAULT_K) -> str:
    """The whole page: each group (a type and target) under its heading."""
    body = "".join(render_group(g, last, k) for g in groups) or '<p class="note">No recorded runs.</p>'
    note_html = "".join(f'<p class="note">{escape_text(n)}</p>' for n in notes)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{page_policy()}">'
            f"<title>{escape_text(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape_text(title)}</h1>{note_html}{body}</body></html>\n")


def render_trend_page(records: Sequence[HistoryRecord], title: str, pr: Optional[HistoryRecord] = None,
                      notes: Sequence[str] = (), last: int = judge.DEFAULT_LAST, k: float = judge.DEFAULT_K) -> str:
    """The page of one type and target over `records` (any order), the PR marked when given."""
    return render_trend_pages([TrendGroup("", records, pr)], title, notes, last, k)
