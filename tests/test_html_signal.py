"""The HTML report's Metrics section: each collection's metric totals flagged or within noise, the
rule's minimum and the noise floor, and the "significant only" filter (unit and in Chromium)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from test_html_report_browser import HOSTILE, browser_context, make_report, watching  # noqa: F401  (fixture)

from spmi.reports import html_build, significance
from spmi.reports.asm_model import CollectionReport
from spmi.reports.html_report import MetricVerdict, render_html, write_html

METRICS = [MetricVerdict("libraries.pmi.linux.x64.checked.mch", "GCInfoBytes", 100, 90, "significant", 0.0),
           MetricVerdict("libraries.pmi.linux.x64.checked.mch", "BytesAllocated", 100000, 100400, "within noise", 1.0),
           MetricVerdict(HOSTILE[0], "PerfScore", 10.5, 12.25, "significant", 0.01, 0.004),
           MetricVerdict(HOSTILE[1], "CseCount", 5, 5, "unchanged", 0.1)]


def report_with_metrics():
    return dataclasses.replace(make_report(), metrics=list(METRICS),
                               significance_rule="Significance: a change is flagged when …")


def test_verdicts_come_from_the_significance_rules() -> None:
    collection = CollectionReport("a.mch", metric_totals={"BytesAllocated": [100000, 100400], "GCInfoBytes": [10, 11],
                                                          "CseCount": [4, 4]})
    found = html_build.metric_verdicts("a.mch", collection, significance.Significance())
    assert [(m.metric, m.verdict, m.minimum) for m in found] == [
        ("BytesAllocated", "within noise", 1.0), ("GCInfoBytes", "significant", 0.0), ("CseCount", "unchanged", 0.1)]
    loose = html_build.metric_verdicts("a.mch", collection, significance.Significance({"BytesAllocated": 0.1}))
    assert loose[0].verdict == "significant"


def test_metrics_section_is_escaped_and_marks_flagged_rows() -> None:
    page = render_html(report_with_metrics())
    section = page.split('<section id="metrics" class="significant-only">')[1].split("</section>")[0]
    assert "<strong>2</strong> flagged (⚑), <strong>1</strong> within noise" in section
    assert section.count('data-flagged="1"') == 2 and section.count('data-flagged="0"') == 2
    assert "</script><script>" not in section and "&lt;/script&gt;" in section
    assert "±0.004%" in section and "any change" in section
    assert 'id="f-significant" type="checkbox" checked' in section  # "significant only" on by default
    # significance is its own mark, colour is direction: GCInfoBytes 100 -> 90 is green, PerfScore up is red
    assert '<td class="num good">-10.00%</td><td class="verdict flag">⚑ significant</td>' in section
    assert '<td class="num bad">+16.67%</td><td class="verdict flag">⚑ significant</td>' in section
    assert '<td class="num bad">+0.40%</td><td class="verdict">within noise</td>' in section
    assert '<section id="metrics"' not in render_html(make_report())  # nothing judged: no section
    assert page.index('<section id="explorer">') < page.index('<section id="metrics"')  # after the contexts


def test_significant_only_filter_in_the_browser(browser_context, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "diff_report.html"
    write_html(report_with_metrics(), path)
    with watching(browser_context, path.as_uri(), tmp_path / "screenshot.png") as seen:
        page = seen.page
        rows = "#metric-table tbody tr"
        assert page.locator(rows).count() == 4
        assert page.is_checked("#f-significant")  # on by default: only what was flagged shows
        shown = [r.text_content() for r in page.query_selector_all(rows) if r.is_visible()]
        assert len(shown) == 2 and all("significant" in text for text in shown)
        assert any(HOSTILE[0] in text and "±0.004%" in text for text in shown)
        page.uncheck("#f-significant")
        assert len([r for r in page.query_selector_all(rows) if r.is_visible()]) == 4
        page.check("#f-significant")
        assert len([r for r in page.query_selector_all(rows) if r.is_visible()]) == 2
