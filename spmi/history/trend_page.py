"""The trend page: one offline HTML file with a line chart per metric, one series per collection (docs/history.md).

Same rules as the HTML diff explorer: no requests (the charts are inline SVG), a strict
Content-Security-Policy (no script at all, the one style by hash), every name from a
record escaped. Hovering a point shows its run (time, base and diff hashes) and value
through the SVG `<title>`; the PR's value, when given, is a marked point after the runs.
Pure.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from spmi.history.judge import fmt_pct
from spmi.history.records import HistoryRecord
from spmi.reports.html_report import escape_text

WIDTH, HEIGHT, MARGIN = 720, 240, 48
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.legend span{display:inline-block;margin-right:1.2em}
.swatch{display:inline-block;width:1.6em;height:.3em;vertical-align:middle;margin-right:.3em}
svg{border:1px solid #ddd;background:#fff}
.note{color:#555}"""


@dataclass(frozen=True)
class Point:
    label: str      # what hovering shows
    value: float    # the change in percent


@dataclass
class Series:
    collection: str
    points: List[Point]
    pr: Optional[Point] = None


def chart_series(records: Sequence[HistoryRecord], metric: str,
                 pr: Optional[HistoryRecord] = None) -> List[Series]:
    """One series per collection: the metric's change in each record, oldest first."""
    ordered = sorted(records, key=lambda r: r.time)
    names: List[str] = []
    for record in ordered + ([pr] if pr else []):
        names.extend(c.name for c in record.collections if metric in c.totals and c.name not in names)
    series: List[Series] = []
    for name in names:
        points = [Point(_run_label(record, value), value) for record, value in _values(ordered, name, metric)]
        pr_point = None
        if pr is not None:
            own = pr.collection(name)
            change = own.change(metric) if own else None
            if change is not None:
                pr_point = Point(f"this change ({_hashes(pr)}): {fmt_pct(change)}", change)
        if points or pr_point:
            series.append(Series(name, points, pr_point))
    return series


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


def _run_label(record: HistoryRecord, value: float) -> str:
    when = f"{record.time[0:4]}-{record.time[4:6]}-{record.time[6:8]} {record.time[9:11]}:{record.time[11:13]} UTC"
    return f"{when} ({_hashes(record)}): {fmt_pct(value)}"


def render_chart(metric: str, series: Sequence[Series]) -> str:
    """An inline SVG line chart of the series (x: run index, y: change in percent)."""
    runs = max((len(s.points) for s in series), default=0)
    columns = runs + (1 if any(s.pr for s in series) else 0)
    values = [p.value for s in series for p in s.points] + [s.pr.value for s in series if s.pr]
    low, high = (min(values + [0.0]), max(values + [0.0])) if values else (0.0, 0.0)
    if high - low < 1e-9:
        low, high = low - 1.0, high + 1.0

    def x(index: int) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * (index / max(columns - 1, 1))

    def y(value: float) -> float:
        return HEIGHT - MARGIN + (value - low) / (high - low) * (2 * MARGIN - HEIGHT)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape_text(metric)}">',
             f'<line x1="{MARGIN}" x2="{WIDTH - MARGIN}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#999" '
             'stroke-dasharray="4 3"/>',
             f'<text x="4" y="{y(high) + 4:.1f}" font-size="11">{escape_text(fmt_pct(high))}</text>',
             f'<text x="4" y="{y(low) + 4:.1f}" font-size="11">{escape_text(fmt_pct(low))}</text>']
    for index, one in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        offset = runs - len(one.points)
        coords = [(x(offset + i), y(p.value)) for i, p in enumerate(one.points)]
        parts.append(f'<g class="series" data-collection="{escape_text(one.collection)}">')
        if len(coords) > 1:
            path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for (cx, cy), point in zip(coords, one.points):
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}"><title>'
                         f'{escape_text(one.collection)}: {escape_text(point.label)}</title></circle>')
        if one.pr is not None:
            px, py = x(columns - 1), y(one.pr.value)
            parts.append(f'<rect class="pr" x="{px - 6:.1f}" y="{py - 6:.1f}" width="12" height="12" fill="none" '
                         f'stroke="{colour}" stroke-width="3"><title>{escape_text(one.collection)}: '
                         f'{escape_text(one.pr.label)}</title></rect>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def render_legend(series: Sequence[Series]) -> str:
    items = "".join(f'<span><svg class="swatch" width="24" height="6"><rect width="24" height="6" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"/></svg>{escape_text(s.collection)}</span>'
                    for i, s in enumerate(series))
    return f'<div class="legend">{items}</div>'


def page_policy() -> str:
    """No script, no request of any kind; only the page's own style (by hash)."""
    digest = base64.b64encode(hashlib.sha256(STYLE.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; script-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


def render_trend_page(records: Sequence[HistoryRecord], title: str, pr: Optional[HistoryRecord] = None,
                      notes: Sequence[str] = ()) -> str:
    """The whole page: a chart per metric over `records` (any order), the PR marked when given."""
    metrics: List[str] = []
    for record in list(records) + ([pr] if pr else []):
        metrics.extend(m for m in record.metrics() if m not in metrics)
    sections: Dict[str, str] = {}
    for metric in metrics:
        series = chart_series(records, metric, pr)
        if series:
            sections[metric] = (f'<section class="chart" data-metric="{escape_text(metric)}">'
                                f"<h2>{escape_text(metric)} (change against base, per run)</h2>"
                                f"{render_legend(series)}{render_chart(metric, series)}</section>")
    body = "".join(sections.values()) or '<p class="note">No recorded runs.</p>'
    note_html = "".join(f'<p class="note">{escape_text(n)}</p>' for n in notes)
    runs = f"{len(records)} recorded main run{'s' if len(records) != 1 else ''}"
    marked = "; the square marks this change" if pr else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{page_policy()}">'
            f"<title>{escape_text(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{escape_text(title)}</h1><p class=\"note\">{runs}{marked}. Hover a point for its run.</p>"
            f"{note_html}{body}</body></html>\n")
