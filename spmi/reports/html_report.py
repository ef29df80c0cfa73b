"""The asmdiffs HTML diff explorer: one offline, self-contained `diff_report.html`.

Pure rendering: the caller fills an `HtmlReport` (header facts, per-collection
counts, failures, a row per context with diffs, and `Listing`s for the contexts
whose `.dasm` files were written, docs/contracts.md §7, §12.9-§12.10) and calls
`render_html` (one string) or `write_html` (streams the file, written
temp-name-then-rename). The rows are a `DiffRowTable`: a collection's `DiffRows`
columns are shared as they are (no object per row), or `DiffRow`s are added one by one.

The page needs nothing from outside: CSS and script are inline and allowed by a
strict Content-Security-Policy (hashes, `default-src 'none'`). Everything from
outside the suite (method names, assert texts, listings, paths; docs/contracts.md
§12.20) reaches the page either HTML-escaped in the static parts or inside
`<script type="application/json">` blocks with `<`, `>`, `&`, U+2028 and U+2029
escaped, and the script only ever puts it into the page with `textContent`.

The row table is stored column-wise (method names deduplicated) and drawn by the
script with virtual scrolling, so 200,000 rows stay responsive. Unified diffs are
computed here with `difflib` (hunks of opcodes; the script draws them from the
two listings); pictures (histograms, top improvements/regressions) are SVG made
here.
"""
from __future__ import annotations

import base64
import bisect
import difflib
import hashlib
import heapq
import html
import json
import math
import operator
import os
import re
import sys
from array import array
from dataclasses import dataclass, field
from itertools import chain, groupby, repeat
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union, overload

from spmi.base import fsutil
from spmi.base.columns import in_order_sum
from spmi.formats import details
from spmi.reports.asm_model import DiffRows, RunFacts
from spmi.reports.significance import fmt_change

ASSETS = Path(__file__).resolve().parent / "html_assets"

# Per-row arrays are written this many values at a time by the streaming writer.
_CHUNK = 4096
# Lines of context around each change in the unified diff.
DIFF_CONTEXT_LINES = 3
# Histogram bins per side of zero; top improvements/regressions shown per collection.
HISTOGRAM_BINS_PER_SIDE = 16
TOP_COUNT = 10

IMPROVEMENT = "improvement"
REGRESSION = "regression"
SAME = "same"


# ---------------------------------------------------------------- input records

@dataclass
class ReportHeader(RunFacts):
    """Facts about the run shown at the top (all untrusted text; escaped when shown)."""

    baseline: str = ""                  # e.g. the git hash of the baseline JIT build
    base_options: List[str] = field(default_factory=list)
    diff_options: List[str] = field(default_factory=list)
    collections: List[str] = field(default_factory=list)   # processing order
    repro_command: str = ""             # the command that reproduces the whole run
    history_page: str = ""              # the trend page of main's history beside this page (docs/history.md)

    @property
    def platform(self) -> str:
        return f"{self.target_os} {self.target_arch}"


@dataclass
class CollectionCounts:
    """Per-collection counts: contexts diffed, contexts with diffs, MISSING, failures; and the code-size
    and PerfScore totals over the contexts both JITs compiled (the header's changes)."""

    collection: str
    contexts: int = 0
    contexts_with_diffs: int = 0
    missing: int = 0
    failures: int = 0
    base_bytes: int = 0
    diff_bytes: int = 0
    base_perfscore: float = 0.0
    diff_perfscore: float = 0.0


@dataclass
class Failure:
    """One problem to show first: a failed replay, an assert group, MISSING contexts, no data.

    `kind` is a short label ("replay failed", "assert", "MISSING", ...); `text`
    the message or assert text; `count` how often; `repro_command` how to replay it.
    """

    collection: str
    kind: str
    text: str
    count: int = 1
    repro_command: str = ""


@dataclass
class DiffRow:
    """One context with diffs (a diff-list row, docs/contracts.md §12.9).

    `metric_deltas` holds other metrics' diff − base (only non-zero ones need be given).
    """

    collection: str
    context: int
    method: str
    tier: str
    minopts: bool
    base_bytes: int
    diff_bytes: int
    base_perfscore: float = 0.0
    diff_perfscore: float = 0.0
    metric_deltas: Dict[str, float] = field(default_factory=dict)

    @property
    def delta_bytes(self) -> int:
        return self.diff_bytes - self.base_bytes

    @property
    def delta_percent(self) -> float:
        """(d−b)/b×100 when b > 0, else 0 (as in the markdown summary)."""
        return percent(self.base_bytes, self.diff_bytes)

    @property
    def perfscore_delta(self) -> float:
        return self.diff_perfscore - self.base_perfscore

    @property
    def size_kind(self) -> str:
        """IMPROVEMENT, REGRESSION or SAME by code bytes."""
        return kind_of(self.delta_bytes)


@dataclass
class RowRun:
    """Consecutive rows of one collection: their columns and, by position in the run, the
    other metrics' deltas of the rows that have some. `start` is its first row's index."""

    collection: str
    columns: DiffRows
    start: int
    deltas: Dict[int, Dict[str, float]] = field(default_factory=dict)
    shared: bool = False  # the columns belong to someone else (a summary): rows are not added to them


class DiffRowTable(Sequence[DiffRow]):
    """The report's rows, held column-wise in runs (a collection's `DiffRows` is shared, not
    copied); as a sequence it gives one `DiffRow` per index, made when asked for."""

    def __init__(self, rows: Iterable[DiffRow] = ()) -> None:
        self.runs: List[RowRun] = []
        self._starts: List[int] = []  # each run's start
        self._count = 0
        self.extend(rows)

    def add(self, collection: str, columns: DiffRows) -> None:
        """A collection's rows, sharing `columns`."""
        if len(columns):
            self._new_run(RowRun(collection, columns, self._count, shared=True))
            self._count += len(columns)

    def append(self, row: DiffRow) -> None:
        run = self.runs[-1] if self.runs else None
        if run is None or run.shared or run.collection != row.collection:
            run = self._new_run(RowRun(row.collection, DiffRows(), self._count))
        if row.metric_deltas:
            run.deltas[len(run.columns)] = dict(row.metric_deltas)
        run.columns.append(row.context, row.method, row.tier, row.minopts, row.base_bytes, row.diff_bytes,
                           row.base_perfscore, row.diff_perfscore)
        self._count += 1

    def extend(self, rows: Iterable[DiffRow]) -> None:
        for row in rows:
            self.append(row)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> DiffRow: ...

    @overload
    def __getitem__(self, index: slice) -> List[DiffRow]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[DiffRow, List[DiffRow]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        position = index + self._count if index < 0 else index
        if not 0 <= position < self._count:
            raise IndexError("row index out of range")
        run = self._run_of(position)
        return _row_of(run, position - run.start)

    def __iter__(self) -> Iterator[DiffRow]:
        for run in self.runs:
            for offset in range(len(run.columns)):
                yield _row_of(run, offset)

    def method(self, index: int) -> str:
        """The method name of row `index` (0 <= index < len)."""
        run = self._run_of(index)
        return run.columns.method[index - run.start]

    def _new_run(self, run: RowRun) -> RowRun:
        self.runs.append(run)
        self._starts.append(run.start)
        return run

    def _run_of(self, index: int) -> RowRun:
        return self.runs[bisect.bisect_right(self._starts, index) - 1]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, DiffRowTable)):
            return len(self) == len(other) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DiffRowTable({list(self)!r})"


def _row_of(run: RowRun, offset: int) -> DiffRow:
    c = run.columns
    return DiffRow(run.collection, c.context[offset], c.method[offset], c.tier[offset], c.minopts[offset],
                   c.base_bytes[offset], c.diff_bytes[offset], c.base_perfscore[offset], c.diff_perfscore[offset],
                   dict(run.deltas.get(offset, {})))


def _deltas(runs: Iterable[RowRun], base: str, diff: str) -> Iterator[Any]:
    """diff − base of a pair of columns (`base_bytes`/`diff_bytes`, ...) over the runs' rows, in order."""
    return chain.from_iterable(map(operator.sub, getattr(run.columns, diff), getattr(run.columns, base))
                               for run in runs)


@dataclass
class Listing:
    """The base and diff `.dasm` listings of one context and the command that replays it."""

    collection: str
    context: int
    base_text: str
    diff_text: str
    repro_command: str = ""


@dataclass
class MetricVerdict:
    """One collection's total of one metric and what the significance rules made of it
    (reports/significance): `verdict` is "significant", "within noise" or "unchanged"."""

    collection: str
    metric: str
    base: float
    diff: float
    verdict: str
    minimum: float            # the rule's minimum meaningful change, %
    floor: Optional[float] = None  # k × the A/A spread, %, when measured

    @property
    def flagged(self) -> bool:
        return self.verdict == "significant"


@dataclass
class HtmlReport:
    header: ReportHeader
    counts: List[CollectionCounts] = field(default_factory=list)
    failures: List[Failure] = field(default_factory=list)
    rows: DiffRowTable = field(default_factory=DiffRowTable)  # a list of `DiffRow`s is taken too
    listings: List[Listing] = field(default_factory=list)
    metrics: List[MetricVerdict] = field(default_factory=list)
    significance_rule: str = ""  # the one line stating the rule the verdicts applied

    def __post_init__(self) -> None:
        if not isinstance(self.rows, DiffRowTable):
            self.rows = DiffRowTable(self.rows)

    @property
    def title(self) -> str:
        return f"asmdiffs {self.header.platform}"


def percent(base: float, diff: float) -> float:
    return (diff - base) / base * 100 if base > 0 else 0.0


def kind_of(delta: float) -> str:
    return IMPROVEMENT if delta < 0 else REGRESSION if delta > 0 else SAME


# ---------------------------------------------------------------- safe embedding

_JSON_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def _json_escape_char(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group(0)):04x}"


def embed_json(value: Any) -> str:
    """JSON text safe inside `<script type="application/json">`.

    `<`, `>`, `&`, U+2028, U+2029 and lone surrogates appear only as `\\uXXXX`
    escapes (such characters occur in JSON only inside strings, where the escape
    means the same character), so the text can neither close the script element
    nor start a comment, and it always encodes as UTF-8.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _JSON_UNSAFE.sub(_json_escape_char, text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_text(text: str) -> str:
    """Untrusted text for HTML content or a quoted attribute value (lone surrogates become U+FFFD)."""
    return html.escape(_SURROGATE.sub("\ufffd", str(text)), quote=True)


# ---------------------------------------------------------------- unified diff hunks

Opcode = Tuple[str, int, int, int, int]


def diff_hunks(base_lines: Sequence[str], diff_lines: Sequence[str],
               context: int = DIFF_CONTEXT_LINES) -> List[List[Opcode]]:
    """Hunks of a unified diff as `difflib` opcodes (tag letter e/r/d/i, i1, i2, j1, j2).

    The script draws them from the two listings' lines; same grouping as
    `difflib.unified_diff(..., n=context)`. No hunks when the listings are equal.
    """
    matcher = difflib.SequenceMatcher(None, base_lines, diff_lines, autojunk=False)
    if matcher.ratio() == 1.0 and list(base_lines) == list(diff_lines):
        return []
    return [[(tag[0], i1, i2, j1, j2) for tag, i1, i2, j1, j2 in group]
            for group in matcher.get_grouped_opcodes(context)]


def split_lines(text: str) -> List[str]:
    """Listing lines without line ends (CRLF or LF); no empty last line for a final line end."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def listing_document(listing: Listing) -> Dict[str, Any]:
    base = split_lines(listing.base_text)
    diff = split_lines(listing.diff_text)
    return {"collection": listing.collection, "context": listing.context, "base": base, "diff": diff,
            "hunks": diff_hunks(base, diff), "repro": listing.repro_command}


# ---------------------------------------------------------------- histograms

@dataclass
class Bin:
    """Values v with `low` < v <= `high` (positive side), `low` <= v < `high` (negative
    side) or v == 0 (the zero bin, low == high == 0). An open bin also holds every
    value beyond its outer edge."""

    low: float
    high: float
    count: int = 0
    open_end: bool = False

    @property
    def is_zero(self) -> bool:
        return self.low == 0 and self.high == 0


def nice_width(span: float, integral: bool) -> float:
    """The smallest of 1, 2, 5 × 10^k that is >= span (>= 1 for integers)."""
    if span <= 0:
        return 1.0 if integral else 0.01
    exponent = math.floor(math.log10(span))
    for step in (1, 2, 5, 10):
        width = step * 10.0 ** exponent
        if width >= span * (1 - 1e-12):
            break
    if integral:
        width = max(1.0, round(width))
    return width


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))]


def histogram(values: Sequence[float], bins_per_side: int = HISTOGRAM_BINS_PER_SIDE,
              integral: bool = False, clip: float = 0.01) -> List[Bin]:
    """Bins of equal width on each side of an exact-zero bin.

    The width comes from the `1 - clip` quantile of |v| so that a few outliers do
    not squash the picture; the outermost bin on each side is open and counts
    everything beyond. Only sides that have values get bins. Empty input: [].
    """
    if not values:
        return []
    magnitudes = sorted(abs(v) for v in values)
    reach = _quantile(magnitudes, 1 - clip) or magnitudes[-1]
    width = nice_width(reach / bins_per_side, integral)
    negatives = [0] * bins_per_side
    positives = [0] * bins_per_side
    zero = 0
    for value in values:
        if value == 0:
            zero += 1
            continue
        index = min(bins_per_side - 1, max(0, math.ceil(abs(value) / width - 1e-9) - 1))
        (positives if value > 0 else negatives)[index] += 1
    result: List[Bin] = []
    if any(negatives):
        last = max(i for i, c in enumerate(negatives) if c)
        for i in range(last, -1, -1):
            result.append(Bin(-(i + 1) * width, -i * width, negatives[i], open_end=i == bins_per_side - 1))
    result.append(Bin(0, 0, zero))
    if any(positives):
        last = max(i for i, c in enumerate(positives) if c)
        for i in range(last + 1):
            result.append(Bin(i * width, (i + 1) * width, positives[i], open_end=i == bins_per_side - 1))
    return result


def format_number(value: float, decimals: int = 0) -> str:
    text = f"{value:,.{decimals}f}"
    return "0" if text.lstrip("-") == f"{0:.{decimals}f}" else text


def signed(value: float, decimals: int = 0) -> str:
    text = format_number(value, decimals)
    return "+" + text if value > 0 and not text.startswith("-") else text


def bin_label(b: Bin, decimals: int) -> str:
    """`0`, one value (integer bins of width 1), `[low, high)` / `(low, high]`, or `< x` / `> x` when open."""
    if b.is_zero:
        return "0"
    negative = b.low < 0
    if b.open_end:
        return f"< {signed(b.high, decimals)}" if negative else f"> {signed(b.low, decimals)}"
    if decimals == 0 and b.high - b.low == 1:
        return signed(b.low if negative else b.high)
    low, high = signed(b.low, decimals), signed(b.high, decimals)
    return f"[{low}, {high})" if negative else f"({low}, {high}]"


# ---------------------------------------------------------------- SVG pictures

_SVG_WIDTH = 480
_HIST_HEIGHT = 150
_HIST_TOP = 14
_HIST_AXIS = 20


def _side_class(value: float) -> str:
    return {IMPROVEMENT: "good", REGRESSION: "bad", SAME: "same"}[kind_of(value)]


def histogram_svg(title: str, bins: Sequence[Bin], decimals: int) -> str:
    """Bars of a histogram with a tooltip per bar and labels under the first, zero and last bins."""
    if not bins:
        return ""
    peak = max(b.count for b in bins) or 1
    slot = (_SVG_WIDTH - 20) / len(bins)
    plot = _HIST_HEIGHT - _HIST_TOP - _HIST_AXIS
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {_SVG_WIDTH} {_HIST_HEIGHT}" width="{_SVG_WIDTH}" '
             f'height="{_HIST_HEIGHT}"><title>{escape_text(title)}</title>',
             f'<text class="axis" x="10" y="10">max {peak:,} per bar</text>']
    baseline = _HIST_TOP + plot
    for index, b in enumerate(bins):
        height = 0.0 if b.count == 0 else max(1.5, plot * b.count / peak)
        x = 10 + index * slot
        side = "same" if b.is_zero else ("good" if b.low < 0 else "bad")
        label = bin_label(b, decimals)
        parts.append(f'<rect class="bar {side}" x="{x + 1:.1f}" y="{baseline - height:.1f}" '
                     f'width="{max(1.0, slot - 2):.1f}" height="{height:.1f}">'
                     f'<title>{escape_text(label)}: {b.count:,}</title></rect>')
    parts.append(f'<line class="axisline" x1="10" x2="{_SVG_WIDTH - 10}" y1="{baseline}" y2="{baseline}"/>')
    for index in sorted({0, next(i for i, b in enumerate(bins) if b.is_zero), len(bins) - 1}):
        x = 10 + (index + 0.5) * slot
        anchor = "start" if index == 0 and len(bins) > 1 else "end" if index == len(bins) - 1 and len(bins) > 1 \
            else "middle"
        ax = 10 if anchor == "start" else _SVG_WIDTH - 10 if anchor == "end" else x
        parts.append(f'<text class="axis" x="{ax:.1f}" y="{_HIST_HEIGHT - 5}" text-anchor="{anchor}">'
                     f'{escape_text(bin_label(bins[index], decimals))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def top_bars_svg(title: str, entries: Sequence[Tuple[int, str, int]]) -> str:
    """Horizontal bars for (row index, method name, byte delta); a click on one opens that row."""
    if not entries:
        return ""
    row_height = 19
    height = row_height * len(entries) + 6
    label_width = 300
    bar_room = _SVG_WIDTH - label_width - 70
    peak = max(abs(delta) for _, _, delta in entries) or 1
    parts = [f'<svg class="chart bars" role="img" viewBox="0 0 {_SVG_WIDTH} {height}" width="{_SVG_WIDTH}" '
             f'height="{height}"><title>{escape_text(title)}</title>']
    for position, (row, name, delta) in enumerate(entries):
        y = 3 + position * row_height
        width = max(1.5, bar_room * abs(delta) / peak)
        parts.append(f'<g class="barrow" data-row="{row}" tabindex="0"><title>{escape_text(name)} '
                     f'({signed(delta)} bytes)</title>'
                     f'<text class="name" x="{label_width - 6}" y="{y + 13}" text-anchor="end">'
                     f'{escape_text(_short(name, 46))}</text>'
                     f'<rect class="bar {_side_class(delta)}" x="{label_width}" y="{y + 2}" width="{width:.1f}" '
                     f'height="{row_height - 5}"/>'
                     f'<text class="value" x="{label_width + width + 4:.1f}" y="{y + 13}">{signed(delta)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def top_changes(rows: Sequence[DiffRow], indices: Sequence[int], count: int = TOP_COUNT
                ) -> Tuple[List[Tuple[int, str, int]], List[Tuple[int, str, int]]]:
    """The `count` largest size improvements and regressions among `indices` (row index, name, Δ bytes)."""
    return _top_changes(list(indices), [rows[i].delta_bytes for i in indices], rows, count)


def _top_changes(indices: Sequence[int], deltas: Sequence[int], rows: Sequence[DiffRow], count: int = TOP_COUNT
                 ) -> Tuple[List[Tuple[int, str, int]], List[Tuple[int, str, int]]]:
    """`top_changes` of the rows at `indices`, whose Δ bytes are `deltas` (one per index)."""
    positions = range(len(indices))
    improved = heapq.nsmallest(count, (k for k in positions if deltas[k] < 0), key=lambda k: (deltas[k], indices[k]))
    regressed = heapq.nsmallest(count, (k for k in positions if deltas[k] > 0),
                                key=lambda k: (-deltas[k], indices[k]))

    def entry(k: int) -> Tuple[int, str, int]:
        row = rows[indices[k]]
        return indices[k], row.method or f"context {row.context}", deltas[k]

    return [entry(k) for k in improved], [entry(k) for k in regressed]


def collection_pictures(name: str, rows: DiffRowTable, runs: Sequence[RowRun]) -> str:
    """One card: byte-delta and PerfScore-delta histograms, top improvements and regressions
    (`runs`: the collection's rows)."""
    byte_deltas = list(_deltas(runs, "base_bytes", "diff_bytes"))
    byte_bins = histogram(byte_deltas, integral=True)
    perf_bins = histogram([round(delta, 2) for delta in _deltas(runs, "base_perfscore", "diff_perfscore")])
    indices = list(chain.from_iterable(range(run.start, run.start + len(run.columns)) for run in runs))
    improved, regressed = _top_changes(indices, byte_deltas, rows)
    label = escape_text(name)
    parts = [f'<article class="card"><h3>{label}</h3>',
             f'<h4>Code bytes Δ per context ({len(indices):,} contexts)</h4>',
             histogram_svg(f"Histogram of code byte deltas in {name}", byte_bins, 0),
             '<h4>PerfScore Δ per context</h4>',
             histogram_svg(f"Histogram of PerfScore deltas in {name}", perf_bins, 2)]
    if improved:
        parts += [f'<h4>Top {len(improved)} size improvements</h4>',
                  top_bars_svg(f"Largest code size improvements in {name}", improved)]
    if regressed:
        parts += [f'<h4>Top {len(regressed)} size regressions</h4>',
                  top_bars_svg(f"Largest code size regressions in {name}", regressed)]
    parts.append("</article>")
    return "".join(parts)


# ---------------------------------------------------------------- static parts

def _fact_value(value: str, code: bool) -> str:
    """A fact's text; as code, each line its own block (the merged report's repro commands)."""
    if not code:
        return escape_text(value)
    return "".join(f'<code class="line">{escape_text(line)}</code>' for line in value.split("\n") if line)


def _facts(report: HtmlReport) -> str:
    h = report.header
    host = f"{h.host_os} {h.host_arch}".strip()
    items: List[Tuple[str, str, bool]] = [
        ("Target", h.platform, False), ("Host", host, False), ("Base JIT", h.base_jit_path, True),
        ("Diff JIT", h.diff_jit_path, True), ("Baseline", h.baseline, True),
        ("Base JIT options", ";".join(h.base_options), True), ("Diff JIT options", ";".join(h.diff_options), True),
        ("Collections", ", ".join(h.collections), False), ("Reproduce", h.repro_command, True)]
    cells = "".join(f"<dt>{label}</dt><dd>{_fact_value(value, code)}</dd>" for label, value, code in items if value)
    if is_page_name(h.history_page):
        cells += (f'<dt>History</dt><dd><a class="history" href="{escape_text(h.history_page)}">'
                  f"main-branch trends ({escape_text(h.history_page)})</a></dd>")
    return f'<dl class="facts">{cells}</dl>'


_PAGE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}\.html$")


def is_page_name(name: str) -> bool:
    """A page beside this one that a link may name: a plain `.html` file name (no scheme, no folder)."""
    return bool(_PAGE_NAME_RE.match(name)) and ".." not in name


def _failures(report: HtmlReport) -> str:
    if not report.failures:
        return ('<section id="failures" class="ok"><p>No replay failures, no asserts, '
                'no MISSING contexts.</p></section>')
    total = sum(f.count for f in report.failures)
    collections = len({f.collection for f in report.failures})
    rows = "".join(
        f'<tr><td>{escape_text(f.collection)}</td><td class="kind">{escape_text(f.kind)}</td>'
        f'<td class="num">{f.count:,}</td><td><pre class="text">{escape_text(f.text)}</pre>'
        + (f'<pre class="repro">{escape_text(f.repro_command)}</pre>' if f.repro_command else "")
        + "</td></tr>" for f in report.failures)
    return (f'<section id="failures" class="problems" role="alert"><h2>⚠ {total:,} '
            f'problem{"s" if total != 1 else ""} in {collections} collection{"s" if collections != 1 else ""}</h2>'
            f'<table><thead><tr><th>Collection</th><th>Kind</th><th class="num">Count</th><th>Text</th></tr>'
            f'</thead><tbody>{rows}</tbody></table></section>')


def _delta_cell(value: float, decimals: int = 0) -> str:
    return f'<td class="num {_side_class(value)}">{signed(value, decimals)}</td>'


def _change_cell(base: float, diff: float, decimals: int) -> str:
    """`-193 (-0.01%)`: the total's change and its percentage (never `0.00%` for a real change),
    green when smaller (better), red when larger."""
    delta = diff - base
    pct = f" ({fmt_change(percent(base, diff))})" if base else ""
    return f'<td class="num {_side_class(delta)}">{signed(delta, decimals)}{pct}</td>'


def _header_totals(report: HtmlReport) -> str:
    """The header's answer: per collection (and in total) the change of code bytes and of PerfScore."""
    counts = report.counts
    if not counts:
        return ""
    rows = [(escape_text(c.collection), c) for c in counts]
    if len(counts) > 1:
        rows.append(("<strong>Total</strong>", CollectionCounts(
            "", sum(c.contexts for c in counts), sum(c.contexts_with_diffs for c in counts), 0, 0,
            sum(c.base_bytes for c in counts), sum(c.diff_bytes for c in counts),
            sum(c.base_perfscore for c in counts), sum(c.diff_perfscore for c in counts))))
    body = "".join(f'<tr><td class="name">{name}</td><td class="num">{c.contexts_with_diffs:,} of {c.contexts:,}</td>'
                   f"{_change_cell(c.base_bytes, c.diff_bytes, 0)}{_change_cell(c.base_perfscore, c.diff_perfscore, 2)}"
                   "</tr>" for name, c in rows)
    return ('<table id="totals" class="totals"><thead><tr><th>Collection</th><th class="num">Contexts with diffs</th>'
            '<th class="num">Δ bytes</th><th class="num">Δ PerfScore</th></tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _overview(report: HtmlReport, by_collection: Dict[str, List[RowRun]]) -> str:
    counts = {c.collection: c for c in report.counts}
    names = list(dict.fromkeys([*report.header.collections, *counts, *by_collection]))
    body = []
    totals = [0] * 4
    for name in names:
        c = counts.get(name, CollectionCounts(name))
        runs = by_collection.get(name, [])
        byte_deltas = list(_deltas(runs, "base_bytes", "diff_bytes"))
        improvements, regressions = sum(d < 0 for d in byte_deltas), sum(d > 0 for d in byte_deltas)
        delta = sum(byte_deltas)
        perf = in_order_sum(_deltas(runs, "base_perfscore", "diff_perfscore"))
        count = len(byte_deltas)
        totals = [totals[0] + c.contexts, totals[1] + count, totals[2] + c.missing, totals[3] + c.failures]
        body.append(
            f'<tr><td class="name">{escape_text(name)}</td><td class="num">{c.contexts:,}</td><td class="num">{count:,}</td>'
            f'<td class="num good">{improvements:,}</td>'
            f'<td class="num bad">{regressions:,}</td>'
            f'<td class="num same">{count - improvements - regressions:,}</td>'
            f'{_delta_cell(delta)}{_delta_cell(perf, 2)}'
            f'<td class="num{" warn" if c.missing else ""}">{c.missing:,}</td>'
            f'<td class="num{" warn" if c.failures else ""}">{c.failures:,}</td></tr>')
    summary = (f'<p class="lead">Diffs are based on <strong>{totals[0]:,}</strong> contexts; '
               f'<strong>{totals[1]:,}</strong> with diffs; <strong>{totals[2]:,}</strong> MISSING; '
               f'<strong>{totals[3]:,}</strong> failures.</p>')
    return (f'<section id="overview"><h2>Collections</h2>{summary}<table><thead><tr><th>Collection</th>'
            '<th class="num">Contexts</th><th class="num">With diffs</th><th class="num">Improvements</th>'
            '<th class="num">Regressions</th><th class="num">Same size</th><th class="num">Δ bytes</th>'
            '<th class="num">Δ PerfScore</th><th class="num">MISSING</th><th class="num">Failures</th></tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></section>')


def _floor_text(floor: Optional[float]) -> str:
    if floor is None:
        return "—"
    return "±∞" if floor >= 1e100 else f"±{floor:.4g}%"


def direction_class(metric: str, delta: float) -> str:
    """`good`/`bad` by the metric's direction (a smaller code size is good, fewer eliminated branches bad),
    `same` for no change or a neutral metric."""
    way = details.metric_direction(metric)
    if delta == 0 or way == details.NEUTRAL:
        return "same"
    better = delta < 0 if way == details.LOWER_IS_BETTER else delta > 0
    return "good" if better else "bad"


def _metrics(report: HtmlReport) -> str:
    """Every collection's metric totals with their verdict (flagged or within noise), the rule's
    minimum and the noise floor, and a "significant only" filter (the script toggles it)."""
    if not report.metrics:
        return ""
    flagged = sum(1 for m in report.metrics if m.flagged)
    quiet = sum(1 for m in report.metrics if m.verdict == "within noise")
    body = []
    for m in report.metrics:
        change = percent(m.base, m.diff) if m.base else (math.inf if m.diff != m.base else 0.0)
        mark = "⚑ " if m.flagged else ""
        body.append(
            f'<tr data-flagged="{1 if m.flagged else 0}"><td class="name">{escape_text(m.collection)}</td>'
            f'<td class="name">{escape_text(m.metric)}</td>'
            f'<td class="num">{format_number(m.base, 2 if m.base % 1 else 0)}</td>'
            f'<td class="num">{format_number(m.diff, 2 if m.diff % 1 else 0)}</td>'
            f'<td class="num {direction_class(m.metric, m.diff - m.base)}">{fmt_change(change)}</td>'
            f'<td class="verdict{" flag" if m.flagged else ""}">{mark}{escape_text(m.verdict)}</td>'
            f'<td class="num">{"any change" if m.minimum == 0 else f"{m.minimum:g}%"}</td>'
            f'<td class="num">{_floor_text(m.floor)}</td></tr>')
    return ('<section id="metrics" class="significant-only"><h2>Metrics</h2>'
            f'<p class="lead"><strong>{flagged:,}</strong> flagged (⚑), <strong>{quiet:,}</strong> within noise '
            f'(collection and metric totals).</p><p class="hint">{escape_text(report.significance_rule)}</p>'
            '<div class="toolbar"><label class="check"><input id="f-significant" type="checkbox" checked> '
            'significant only'
            '</label></div><table id="metric-table"><thead><tr><th>Collection</th><th>Metric</th>'
            '<th class="num">Base</th><th class="num">Diff</th><th class="num">Δ %</th><th>Verdict</th>'
            '<th class="num">Minimum</th><th class="num">Noise floor</th></tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></section>')


def _options(values: Sequence[str], all_label: str) -> str:
    return f'<option value="">{all_label}</option>' + "".join(
        f'<option value="{i}">{escape_text(v or "(none)")}</option>' for i, v in enumerate(values))


def _explorer(collections: Sequence[str], tiers: Sequence[str]) -> str:
    return (
        '<section id="explorer"><h2>Contexts with diffs</h2><div class="toolbar">'
        '<input id="f-text" type="search" placeholder="Filter method names…" aria-label="Filter method names">'
        f'<select id="f-collection" aria-label="Collection">{_options(collections, "All collections")}</select>'
        f'<select id="f-tier" aria-label="Tier">{_options(tiers, "All tiers")}</select>'
        '<select id="f-opts" aria-label="MinOpts or FullOpts"><option value="">MinOpts + FullOpts</option>'
        '<option value="1">MinOpts</option><option value="0">FullOpts</option></select>'
        '<select id="f-kind" aria-label="Size change"><option value="">All size changes</option>'
        '<option value="improvement">Improvements</option><option value="regression">Regressions</option>'
        '<option value="same">Same size</option></select>'
        '<label class="check"><input id="f-listing" type="checkbox"> with listings</label>'
        '<span id="status" class="status" aria-live="polite">Loading…</span></div>'
        '<div id="grid" class="grid" tabindex="0" role="grid"><div id="grid-head" class="row head" role="row"></div>'
        '<div id="grid-body" class="body"></div></div>'
        '<p class="hint">Click a column to sort (again to reverse); click a row for its metrics; ◆ marks rows '
        'with listings (unified diff, both listings and the repro command). ↑/↓ move the selection.</p></section>'
        '<section id="detail" hidden><div class="detail-head"><h2 id="d-title"></h2>'
        '<button id="d-close" type="button" aria-label="Close">×</button></div>'
        '<p id="d-facts" class="facts-line"></p><div id="d-metrics"></div>'
        '<div id="d-listing" hidden><div class="tabs" role="tablist">'
        '<button type="button" role="tab" data-view="diff" class="active">Unified diff</button>'
        '<button type="button" role="tab" data-view="base">Base listing</button>'
        '<button type="button" role="tab" data-view="new">Diff listing</button></div>'
        '<div class="repro-line"><span>Repro:</span> <code id="d-repro"></code> '
        '<button id="d-copy" type="button">Copy</button></div><pre id="d-text" class="listing"></pre></div>'
        '<p id="d-nolisting" class="hint" hidden>No listings were written for this context.</p></section>')


def _pictures(report: HtmlReport, by_collection: Dict[str, List[RowRun]]) -> str:
    cards = [collection_pictures(name, report.rows, runs) for name, runs in by_collection.items() if runs]
    if not cards:
        return ""
    return ('<section id="pictures"><h2>Pictures</h2><p class="hint">Green: smaller/better, red: larger/worse. '
            'The outermost bars also count everything beyond them. Click a bar to open that context.</p>'
            f'<div class="cards">{"".join(cards)}</div></section>')


# ---------------------------------------------------------------- the page

def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(script: str, style: str) -> str:
    """Nothing from outside, nothing but our own inline script and style (by hash), data: images only."""
    return (f"default-src 'none'; script-src {_sha256_source(script)}; style-src {_sha256_source(style)}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _json_array(values: Iterable[Any]) -> Iterator[str]:
    """A JSON array in pieces of `_CHUNK` values."""
    yield "["
    chunk: List[Any] = []
    first = True
    for value in values:
        chunk.append(value)
        if len(chunk) == _CHUNK:
            yield ("" if first else ",") + embed_json(chunk)[1:-1]
            first = False
            chunk = []
    if chunk:
        yield ("" if first else ",") + embed_json(chunk)[1:-1]
    yield "]"


def _index_of(values: Iterable[str]) -> Dict[str, int]:
    index: Dict[str, int] = {}
    for value in values:
        index.setdefault(value, len(index))
    return index


def _methods(runs: Iterable[RowRun]) -> Iterator[str]:
    return chain.from_iterable(run.columns.method for run in runs)


def _name_codes(rows: DiffRowTable) -> Tuple[array, array]:  # type: ignore[type-arg]
    """For each row, the first row with the same method name, and the name's number among the
    distinct names in order of first appearance. Rows are grouped by the names' hashes (one
    sort of numbers), so no name is held more than once at a time however many rows there are;
    rows of one hash are told apart by their names."""
    count = len(rows)
    offset = 2 ** (sys.hash_info.width - 1)  # hashes made non-negative
    keys = sorted((hash(name) + offset) * count + row for row, name in enumerate(_methods(rows.runs)))
    first = array("q", range(count))
    for _, group in groupby(keys, key=lambda key: key // count):
        same_hash = [key % count for key in group]  # ascending rows
        if len(same_hash) > 1:
            seen: Dict[str, int] = {}
            for row in same_hash:
                first[row] = seen.setdefault(rows.method(row), row)
    del keys
    codes = array("q", bytes(8 * count))
    distinct = 0
    for row, earliest in enumerate(first):
        if earliest == row:
            codes[row], distinct = distinct, distinct + 1
        else:
            codes[row] = codes[earliest]
    return first, codes


def _metric_columns(rows: DiffRowTable) -> List[Dict[str, Any]]:
    """Other metrics' deltas, sparse: per metric the row indices (ascending) and their deltas."""
    columns: Dict[str, Tuple[List[int], List[float]]] = {}
    for run in rows.runs:
        for offset in sorted(run.deltas):
            for name, delta in run.deltas[offset].items():
                if delta:
                    target = columns.setdefault(name, ([], []))
                    target[0].append(run.start + offset)
                    target[1].append(round(delta, 4))
    return [{"name": name, "rows": columns[name][0], "deltas": columns[name][1]} for name in sorted(columns)]


def _flag(value: object) -> int:
    return 1 if value else 0


def _rounded(value: float) -> float:
    return round(value, 2)


def _data_json(report: HtmlReport, collections: Dict[str, int], tiers: Dict[str, int],
               listing_of: Dict[Tuple[str, int], int]) -> Iterator[str]:
    """The row table, column by column, each column over the runs in order."""
    runs = report.rows.runs
    first, codes = _name_codes(report.rows)
    yield '{"collections":' + embed_json(list(collections)) + ',"tiers":' + embed_json(list(tiers))
    yield ',"names":'
    yield from _json_array(name for row, name in enumerate(_methods(runs)) if first[row] == row)

    def listings(run: RowRun) -> Iterator[int]:
        own = {context: index for (collection, context), index in listing_of.items() if collection == run.collection}
        return (own.get(context, -1) for context in run.columns.context)

    columns: List[Tuple[str, Callable[[RowRun], Iterable[Any]]]] = [
        ("c", lambda run: repeat(collections[run.collection], len(run.columns))),
        ("x", lambda run: run.columns.context),
        ("n", lambda run: codes[run.start:run.start + len(run.columns)]),
        ("t", lambda run: map(tiers.__getitem__, run.columns.tier)), ("m", lambda run: map(_flag, run.columns.minopts)),
        ("bb", lambda run: run.columns.base_bytes), ("db", lambda run: run.columns.diff_bytes),
        ("bp", lambda run: map(_rounded, run.columns.base_perfscore)),
        ("dp", lambda run: map(_rounded, run.columns.diff_perfscore)), ("l", listings)]
    yield ',"rows":{'
    for position, (key, values) in enumerate(columns):
        yield ("," if position else "") + f'"{key}":'
        yield from _json_array(chain.from_iterable(map(values, runs)))
    yield '},"metrics":' + embed_json(_metric_columns(report.rows)) + "}"


def _reachable_listings(report: HtmlReport) -> List[Listing]:
    """Listings of contexts that have a row (first one per context wins)."""
    wanted: Dict[str, Set[int]] = {}
    for listing in report.listings:
        wanted.setdefault(listing.collection, set()).add(listing.context)
    keys: Set[Tuple[str, int]] = set()
    for run in report.rows.runs:
        contexts = wanted.get(run.collection)
        if contexts:
            keys.update((run.collection, context) for context in run.columns.context if context in contexts)
    seen = set()
    result = []
    for listing in report.listings:
        key = (listing.collection, listing.context)
        if key in keys and key not in seen:
            seen.add(key)
            result.append(listing)
    return result


def iter_html(report: HtmlReport) -> Iterator[str]:
    """The page in pieces (what `render_html` joins and `write_html` streams)."""
    script, style = _asset("report.js"), _asset("report.css")
    by_collection: Dict[str, List[RowRun]] = {}
    for run in report.rows.runs:
        by_collection.setdefault(run.collection, []).append(run)
    collections = _index_of([*report.header.collections, *by_collection])
    tiers = _index_of(sorted({tier for run in report.rows.runs for tier in set(run.columns.tier)}))
    listings = _reachable_listings(report)
    listing_of = {(listing.collection, listing.context): i for i, listing in enumerate(listings)}
    title = escape_text(report.title)
    yield ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
           f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy(script, style)}">'
           '<meta name="referrer" content="no-referrer">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           f'<title>{title}</title><style>{style}</style></head>\n<body>'
           f'<header><h1>{title}</h1>{_header_totals(report)}{_facts(report)}</header>\n')
    yield _failures(report) + "\n"
    yield _overview(report, by_collection) + "\n"
    yield _explorer(list(collections), list(tiers)) + "\n"
    yield _metrics(report) + "\n"
    yield _pictures(report, by_collection) + "\n"
    yield '<script type="application/json" id="report-data">'
    yield from _data_json(report, collections, tiers, listing_of)
    yield "</script>\n"
    for index, listing in enumerate(listings):
        yield f'<script type="application/json" id="listing-{index}">{embed_json(listing_document(listing))}</script>\n'
    yield f"<script>{script}</script>\n</body></html>\n"


def render_html(report: HtmlReport) -> str:
    """The whole page as one string."""
    return "".join(iter_html(report))


def write_html(report: HtmlReport, path: Union[str, "os.PathLike[str]"]) -> Path:
    """Stream the page to `path` (UTF-8) through the one atomic writer: a temporary name in the
    same folder, renamed when complete, with the permissions every other output gets."""
    target = Path(path)
    fsutil.atomic_write_pieces(target, (piece.encode("utf-8") for piece in iter_html(report)), make_parents=False)
    return target


__all__ = [
    "Bin", "CollectionCounts", "DiffRow", "DiffRowTable", "Failure", "HtmlReport", "Listing", "ReportHeader",
    "content_security_policy", "diff_hunks", "embed_json", "histogram", "iter_html", "render_html", "write_html",
]
