"""The HTML diff explorer's renderer, without a browser: escaping, embedded data, CSP, diffs, histograms."""
from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from spmi.reports import html_report
from spmi.reports.html_report import (
    Bin,
    CollectionCounts,
    DiffRow,
    Failure,
    HtmlReport,
    Listing,
    ReportHeader,
    bin_label,
    diff_hunks,
    embed_json,
    histogram,
    nice_width,
    render_html,
    split_lines,
    write_html,
)

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

HOSTILE = [
    "</script><script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "##vso[task.setvariable variable=x]y",
    "line\u2028separator\u2029paragraph",
    "<!-- comment --> & &amp; <b>bold</b>",
    "::error::github command",
    "lone \udc80 surrogate",
]


def hostile_report() -> HtmlReport:
    header = ReportHeader("linux", "x64", "linux", "x64", base_jit_path="/base/<b>jit</b>",
                          diff_jit_path='/diff/"jit"', baseline="abc123 <i>", base_options=["A=<1>"],
                          diff_options=["B=&2"], collections=["a<script>.mch", "b.mch"],
                          repro_command="python superpmi.py asmdiffs </script>")
    rows = [DiffRow("a<script>.mch", i + 1, name, "Tier1</script>", i % 2 == 0, 100, 100 + (i - 3),
                    10.0, 10.0 + i, {"GCInfoBytes<x>": i})
            for i, name in enumerate(HOSTILE)]
    listing = Listing("a<script>.mch", 1, "; Assembly listing for method </script><script>alert(3)</script>\n mov\n",
                      "; Assembly listing for method </script><script>alert(3)</script>\n add\n",
                      "superpmi -c 1 </script>")
    failures = [Failure("a<script>.mch", "assert", "Assertion failed '</script><img src=x onerror=alert(4)>'", 2,
                        "superpmi <img src=x>")]
    return HtmlReport(header, [CollectionCounts("a<script>.mch", 10, 7, 1, 2)], failures, rows, [listing])


class PageScan(HTMLParser):
    """Every start tag with its attributes, and the text inside each script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: List[Tuple[str, Dict[str, Optional[str]]]] = []
        self.scripts: List[Tuple[Dict[str, Optional[str]], str]] = []
        self._script: Optional[Dict[str, Optional[str]]] = None

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "script":
            self._script = attributes
            self.scripts.append((attributes, ""))

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if self._script is not None:
            attributes, text = self.scripts[-1]
            self.scripts[-1] = (attributes, text + data)

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag == "script":
            self._script = None


def scan(page: str) -> PageScan:
    parser = PageScan()
    parser.feed(page)
    parser.close()
    return parser


def embedded(page: str, element_id: str):  # type: ignore[no-untyped-def]
    for attributes, text in scan(page).scripts:
        if attributes.get("id") == element_id:
            return json.loads(text)
    raise AssertionError(f"no script element {element_id}")


# ---------------------------------------------------------------- JSON embedding

@pytest.mark.parametrize("text", HOSTILE)
def test_embedded_json_has_no_markup_characters_and_round_trips(text):
    value = {"name": text, "list": [text, 1, 2.5]}
    out = embed_json(value)
    assert not set(out) & set("<>&\u2028\u2029")
    assert "</" not in out and "<!--" not in out
    assert json.loads(out) == value
    out.encode("utf-8")  # lone surrogates are escaped, so the page always encodes


def test_hostile_names_are_one_script_element_each_and_no_markup_of_theirs():
    page = render_html(hostile_report())
    page.encode("utf-8")
    found = scan(page)
    tag_names = [tag for tag, _ in found.tags]
    assert "img" not in tag_names and "b" not in tag_names and "i" not in tag_names
    assert not any(name.startswith("on") for _, attrs in found.tags for name in attrs)
    # report data, one listing, our script: nothing else became a script
    kinds = [(attrs.get("type"), attrs.get("id")) for attrs, _ in found.scripts]
    assert kinds == [("application/json", "report-data"), ("application/json", "listing-0"), (None, None)]
    for hostile in ("<script>alert", "<img src=x", "<b>bold</b>", "<i>", "<b>jit</b>"):
        assert hostile not in page


def test_hostile_text_survives_exactly_in_the_data_and_listing():
    report = hostile_report()
    page = render_html(report)
    data = embedded(page, "report-data")
    shown = [data["names"][n] for n in data["rows"]["n"]]
    assert shown == [row.method for row in report.rows]
    assert data["collections"] == ["a<script>.mch", "b.mch"]
    assert data["tiers"] == ["Tier1</script>"]
    assert data["metrics"] == [{"name": "GCInfoBytes<x>", "rows": [1, 2, 3, 4, 5, 6], "deltas": [1, 2, 3, 4, 5, 6]}]
    listing = embedded(page, "listing-0")
    assert listing["base"][0] == "; Assembly listing for method </script><script>alert(3)</script>"
    assert listing["repro"] == "superpmi -c 1 </script>"
    assert data["rows"]["l"] == [0, -1, -1, -1, -1, -1, -1]


def test_static_parts_escape_untrusted_text():
    page = render_html(hostile_report())
    assert "Assertion failed &#x27;&lt;/script&gt;&lt;img src=x onerror=alert(4)&gt;&#x27;" in page
    assert "/base/&lt;b&gt;jit&lt;/b&gt;" in page and "/diff/&quot;jit&quot;" in page
    assert "superpmi &lt;img src=x&gt;" in page
    # SVG pictures: names in <text> and <title> are escaped too
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_content_security_policy_allows_exactly_the_inline_script_and_style():
    page = render_html(hostile_report())
    found = scan(page)
    policy = next(attrs["content"] for tag, attrs in found.tags
                  if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy")
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    script = next(text for attrs, text in found.scripts if attrs.get("type") is None)
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)  # type: ignore[union-attr]

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == digest(script)
    assert directives["style-src"] == digest(style)
    assert directives["img-src"] == "data:"
    assert "unsafe" not in policy and "http" not in policy


def test_page_refers_to_nothing_outside_itself():
    page = render_html(hostile_report())
    for tag, attrs in scan(page).tags:
        for name in ("src", "href", "action", "xlink:href"):
            assert name not in attrs, (tag, attrs)
    assert "url(" not in html_report._asset("report.css")
    script = html_report._asset("report.js")
    for word in ("fetch(", "XMLHttpRequest", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                 "eval(", "new Function"):
        assert word not in script


# ---------------------------------------------------------------- writer

def test_write_html_streams_the_same_page_and_leaves_no_temporary(tmp_path: Path):
    report = hostile_report()
    target = write_html(report, tmp_path / "diff_report.html")
    assert target.read_text(encoding="utf-8") == render_html(report)
    assert [p.name for p in tmp_path.iterdir()] == ["diff_report.html"]


def test_many_rows_are_written_in_chunks_and_read_back(monkeypatch):
    monkeypatch.setattr(html_report, "_CHUNK", 7)
    rows = [DiffRow(f"c{i % 3}.mch", i, f"M{i % 11}", "Tier0" if i % 2 else "Tier1", i % 2 == 1, i, i + (i % 5) - 2,
                    i * 1.005, i * 1.0) for i in range(1, 60)]
    page = render_html(HtmlReport(ReportHeader("linux", "arm64"), rows=rows))
    data = embedded(page, "report-data")
    assert [data["collections"][c] for c in data["rows"]["c"]] == [r.collection for r in rows]
    assert [data["tiers"][t] for t in data["rows"]["t"]] == [r.tier for r in rows]
    assert [data["names"][n] for n in data["rows"]["n"]] == [r.method for r in rows]
    assert len(data["names"]) == 11
    assert data["rows"]["x"] == [r.context for r in rows]
    assert data["rows"]["db"] == [r.diff_bytes for r in rows]
    assert data["rows"]["bp"] == [round(r.base_perfscore, 2) for r in rows]
    assert data["rows"]["m"] == [1 if r.minopts else 0 for r in rows]


def test_empty_report_renders_without_pictures():
    page = render_html(HtmlReport(ReportHeader("windows", "x86")))
    assert 'id="pictures"' not in page
    assert "No replay failures" in page
    assert embedded(page, "report-data")["rows"]["c"] == []


def test_failures_come_before_everything_else():
    page = render_html(hostile_report())
    assert page.index('id="failures"') < page.index('id="overview"') < page.index('id="explorer"')
    assert "⚠ 2 problems in 1 collection" in page


# ---------------------------------------------------------------- unified diffs

def draw_unified(base: List[str], diff: List[str], hunks) -> List[str]:  # type: ignore[no-untyped-def]
    """What the page's script draws from the hunks (the same steps, in Python)."""
    def span(start: int, stop: int) -> str:
        begin, length = start + 1, stop - start
        if length == 1:
            return str(begin)
        return f"{begin - 1 if not length else begin},{length}"

    out = []
    for hunk in hunks:
        out.append(f"@@ -{span(hunk[0][1], hunk[-1][2])} +{span(hunk[0][3], hunk[-1][4])} @@")
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "e":
                out += [" " + line for line in base[i1:i2]]
            if tag in "rd":
                out += ["-" + line for line in base[i1:i2]]
            if tag in "ri":
                out += ["+" + line for line in diff[j1:j2]]
    return out


@pytest.mark.parametrize("base, diff", [
    ("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "a\nb\nX\nd\ne\nf\ng\nh\ni\nj\nk\n"),
    ("", "only\nnew\n"),
    ("gone\n", ""),
    ("\n".join(f"l{i}" for i in range(40)), "\n".join(f"l{i}" if i % 13 else f"m{i}" for i in range(40))),
])
def test_hunks_draw_the_same_text_as_difflib_unified_diff(base, diff):
    a, b = split_lines(base), split_lines(diff)
    expected = list(difflib.unified_diff(a, b, lineterm="", n=3))[2:]
    assert draw_unified(a, b, diff_hunks(a, b)) == expected


def test_equal_listings_have_no_hunks_and_crlf_is_ignored():
    assert diff_hunks(["a", "b"], ["a", "b"]) == []
    assert split_lines("x\r\ny\r\n") == ["x", "y"]


# ---------------------------------------------------------------- histograms

def test_integer_histogram_has_a_zero_bin_and_one_value_per_bin():
    bins = histogram([-3, -1, -1, 0, 0, 0, 2, 5], bins_per_side=8, integral=True, clip=0)
    assert nice_width(5 / 8, True) == 1
    assert [(b.low, b.high, b.count) for b in bins] == [
        (-3, -2, 1), (-2, -1, 0), (-1, 0, 2), (0, 0, 3), (0, 1, 0), (1, 2, 1), (2, 3, 0), (3, 4, 0), (4, 5, 1)]
    assert [bin_label(b, 0) for b in bins] == ["-3", "-2", "-1", "0", "+1", "+2", "+3", "+4", "+5"]


def test_histogram_counts_every_value_and_puts_outliers_in_open_end_bins():
    values = [float(v) for v in range(-50, 51)] + [10_000.0, -9_999.5]
    bins = histogram(values, bins_per_side=5, clip=0.02)
    assert sum(b.count for b in bins) == len(values)
    assert bins[0].open_end and bins[-1].open_end
    assert bins[-1].count >= 2  # 50 and 10,000 among them
    zero = [b for b in bins if b.is_zero]
    assert len(zero) == 1 and zero[0].count == 1
    width = bins[-1].high - bins[-1].low
    assert width in (10.0, 20.0, 5.0) and bin_label(bins[-1], 0).startswith("> +")
    for b in bins:
        if not b.is_zero and not b.open_end:
            inside = [v for v in values if (b.low < v <= b.high if b.low >= 0 else b.low <= v < b.high)]
            assert b.count == len(inside), b


def test_histogram_of_one_sign_has_no_bins_on_the_other_side():
    bins = histogram([0.25, 0.5, 1.0], bins_per_side=4)
    assert bins[0].is_zero and bins[0].count == 0
    assert all(b.low >= 0 for b in bins)
    assert histogram([]) == []
    assert isinstance(histogram([0, 0])[0], Bin) and [b.count for b in histogram([0, 0])] == [2]


def test_nice_widths():
    assert [nice_width(x, False) for x in (0.013, 0.3, 3, 7, 12)] == [0.02, 0.5, 5, 10, 20]
    assert nice_width(0.3, True) == 1


def test_pictures_show_the_largest_changes_first():
    rows = [DiffRow("c.mch", i, f"m{i}", "Tier1", False, 100, 100 + d) for i, d in enumerate([5, -7, 0, 12, -1])]
    improved, regressed = html_report.top_changes(rows, range(len(rows)), count=2)
    assert improved == [(1, "m1", -7), (4, "m4", -1)]
    assert regressed == [(3, "m3", 12), (0, "m0", 5)]
    page = render_html(HtmlReport(ReportHeader("linux", "x64"), rows=rows))
    assert page.count('class="barrow" data-row=') == 4
