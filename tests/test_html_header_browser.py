"""The HTML report reads top-down at 1,024 px: the header answers first (Δ bytes and Δ PerfScore with
percentages per collection), the metrics come after the contexts with "significant only" on, every table
fits the window, and the merged report shows each repro command on its own line. Real asmdiffs runs on
the sample toolchain, `superpmi.py summarize -output_html_path`, and Chromium (a screenshot of the header)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import pytest
from test_html_report_browser import CHROMIUM, CHROMIUM_ARGS, _require_browser

from spmi.reports.significance import fmt_change

REPO = Path(__file__).resolve().parent.parent
WIDTH = 1024


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sample_toolchain) -> Tuple[Path, Path, Dict[str, Any]]:
    """(x64 report, merged x64 + arm64 report, the x64 JSON summary) of real asmdiffs runs."""
    from e2e_support import collection
    from html_support import run_asmdiffs
    root = tmp_path_factory.mktemp("header")
    summaries = []
    for arch in ("x64", "arm64"):
        spmi = root / arch
        mchs = [collection(sample_toolchain, name, arch) for name in ("libraries.pmi", "benchmarks.run")]
        proc = run_asmdiffs(sample_toolchain, spmi, mchs, "--summary_as_json", target_arch=arch)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [summary] = spmi.glob("diff_summary*.json")
        summaries.append(summary)
    merged = root / "merged.html"
    proc = subprocess.run([sys.executable, str(REPO / "superpmi.py"), "summarize", "-summary_type", "asmdiffs",
                           "-summaries", *map(str, summaries), "-output_long_summary_path", str(root / "all.md"),
                           "-output_html_path", str(merged)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "x64" / "diff_report.html", merged, json.loads(summaries[0].read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def narrow_browser(tmp_path_factory) -> Iterator[Any]:
    sync_api = _require_browser()
    with sync_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser.new_context(viewport={"width": WIDTH, "height": 800})
        finally:
            browser.close()


def opened(context: Any, path: Path) -> Any:
    page = context.new_page()
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    page.wait_for_selector("html[data-ready='1']")
    assert requests == [path.as_uri()], "the page asked for something besides itself"
    return page


def assert_fits(page: Any) -> None:
    """Nothing wider than the window: the page, each table, the contexts grid."""
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    too_wide = page.evaluate("""() => Array.from(document.querySelectorAll('table, #grid'))
        .filter(t => t.offsetParent !== null)
        .filter(t => t.getBoundingClientRect().right > document.documentElement.clientWidth
                     || t.scrollWidth > t.clientWidth + 1)
        .map(t => t.id || t.parentElement.id)""")
    assert too_wide == []


def expected_totals(document: Dict[str, Any]) -> Dict[str, Tuple[str, str]]:
    """collection -> (Δ bytes cell, Δ PerfScore cell) computed from the JSON summary's aggregates."""
    found = {}
    for collection in document["summary"]["collections"]:
        rows = collection["aggregates"]
        base = sum(rows[r]["base_code_bytes"] for r in ("minopts", "fullopts"))
        diff = sum(rows[r]["diff_code_bytes"] for r in ("minopts", "fullopts"))
        base_ps = sum(rows[r]["base_perfscore"] for r in ("minopts", "fullopts"))
        diff_ps = sum(rows[r]["diff_perfscore"] for r in ("minopts", "fullopts"))
        found[collection["name"]] = (f"{diff - base:+,d} ({fmt_change((diff - base) / base * 100)})",
                                     f"{diff_ps - base_ps:+,.2f} ({fmt_change((diff_ps - base_ps) / base_ps * 100)})")
    return found


def test_the_header_answers_first_and_the_page_fits_1024_px(narrow_browser, runs, tmp_path) -> None:
    report, _, document = runs
    page = opened(narrow_browser, report)
    header = page.locator("header")
    header.screenshot(path=str(tmp_path / "header.png"))
    assert (tmp_path / "header.png").stat().st_size > 1000
    assert header.bounding_box()["width"] <= WIDTH
    cells = page.evaluate("""() => Array.from(document.querySelectorAll('#totals tbody tr'))
        .map(r => Array.from(r.children).map(c => [c.textContent, c.className]))""")
    expected = expected_totals(document)
    assert [row[0][0] for row in cells] == [*expected, "Total"]
    for row in cells[:-1]:
        assert (row[2][0], row[3][0]) == expected[row[0][0]]
        for text, css in row[2:]:  # smaller is green, larger red
            assert ("good" in css) == text.startswith("-") and ("bad" in css) == text.startswith("+")
    for text, _ in (cell for row in cells for cell in row[2:]):
        assert text.startswith(("0 ", "0.00 ")) or "(0.00%)" not in text  # a real change never reads 0.00%
    # top-down: header, failures, collections, contexts, then the metrics (significant only)
    order = page.evaluate("Array.from(document.querySelectorAll('header, section[id]')).map(s => s.id || 'header')")
    assert order.index("header") == 0 and order.index("explorer") < order.index("metrics")
    assert page.is_checked("#f-significant")
    flagged = page.evaluate("""() => Array.from(document.querySelectorAll('#metric-table tbody tr'))
        .filter(r => r.offsetParent !== null).map(r => r.dataset.flagged)""")
    assert set(flagged) <= {"1"}
    assert_fits(page)
    page.close()


def test_the_merged_report_shows_each_repro_command_on_its_own_line(narrow_browser, runs) -> None:
    _, merged, _ = runs
    page = opened(narrow_browser, merged)
    lines = page.evaluate("""() => Array.from(document.querySelectorAll('.facts code.line'))
        .filter(c => c.textContent.includes('superpmi.py asmdiffs'))
        .map(c => [c.textContent, c.getBoundingClientRect().top, c.getBoundingClientRect().left])""")
    assert len(lines) == 2
    assert sorted(line[0].split("-target_arch ")[1].split()[0] for line in lines) == ["arm64", "x64"]
    assert lines[1][1] > lines[0][1] and lines[0][2] == lines[1][2]  # one below the other
    assert page.locator("#totals tbody tr").count() == 5  # 2 collections × 2 targets + the total
    assert_fits(page)
    page.close()


def test_the_contexts_grid_never_shows_a_real_change_as_zero_percent(narrow_browser, tmp_path) -> None:
    from spmi.reports.html_report import CollectionCounts, DiffRow, HtmlReport, ReportHeader, write_html
    rows = [DiffRow("a.mch", 1, "A:B()", "Tier1", False, 500_000, 500_001, 10.0, 10.0),
            DiffRow("a.mch", 2, "A:C()", "Tier1", False, 100_000, 99_999, 10.0, 10.0),
            DiffRow("a.mch", 3, "A:D()", "Tier1", False, 100_000_000, 100_000_001, 10.0, 10.0),
            DiffRow("a.mch", 4, "A:E()", "Tier1", False, 200, 201, 10.0, 10.0)]
    report = HtmlReport(ReportHeader("linux", "x64", collections=["a.mch"]),
                        counts=[CollectionCounts("a.mch", 4, 4, 0, 0, 100_600_200, 100_600_202, 40.0, 40.0)])
    report.rows.extend(rows)
    path = tmp_path / "diff_report.html"
    write_html(report, path)
    page = opened(narrow_browser, path)
    shown = page.evaluate("""() => Array.from(document.querySelectorAll('#grid-body .row'))
        .map(r => [r.children[2].textContent, r.children[9].textContent])""")
    assert sorted(shown) == [["1", "+0.0002%"], ["2", "-0.0010%"], ["3", "+<0.0001%"], ["4", "+0.50%"]]
    assert page.text_content("#totals tbody tr") == "a.mch4 of 4+2 (+<0.0001%)0 (0.00%)"
    page.close()
