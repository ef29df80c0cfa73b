"""The HTML diff explorer in a real browser (Debian's Chromium, driven by Playwright).

The page is opened from disk (file://) with every network request recorded and
refused; each test checks what a person would see and saves a screenshot in its
pytest tmp folder. Without Chromium or Playwright the tests skip, except in CI
(CI=true), where that is a failure.
"""
from __future__ import annotations

import difflib
import os
import random
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from spmi.reports.html_report import (
    CollectionCounts,
    DiffRow,
    Failure,
    HtmlReport,
    Listing,
    ReportHeader,
    signed,
    split_lines,
    write_html,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = ["</script><script>alert(1)</script>", '"><img src=x onerror="document.title=\'pwned\'">',
           "##vso[task.setvariable variable=x]y", "name\u2028with\u2029separators"]
COLLECTIONS = ["benchmarks.run.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch",
               "coreclr_tests.run.linux.x64.checked.mch"]
TIERS = [("Tier0", True), ("Tier1", False), ("FullOpts", False), ("Tier1-OSR", False)]
COLUMN = {"mark": 0, "collection": 1, "context": 2, "method": 3, "tier": 4, "delta": 8}


def _require_browser() -> Any:
    """The Playwright module, or skip (fail in CI) with the reason."""
    in_ci = os.environ.get("CI", "").lower() == "true"
    problem = None
    try:
        from playwright import sync_api
    except ImportError:
        problem = "Playwright is not installed (pip install -r requirements-test.txt)"
    if problem is None and not os.path.exists(CHROMIUM):
        problem = f"{CHROMIUM} is missing (apt-get install chromium)"
    if problem is not None:
        if in_ci:
            pytest.fail(f"browser tests cannot run in CI: {problem}", pytrace=False)
        pytest.skip(f"browser tests need a browser: {problem}")
    return sync_api


def listing_text(name: str, tier: str, body: List[str]) -> str:
    return "\n".join([f"; Assembly listing for method {name} ({tier})", "; Tier1 code", "", "G_M000_IG01:", *body,
                      "", f"; Total bytes of code {len(body) * 4}", ""])


def make_report() -> HtmlReport:
    rng = random.Random(11)
    rows = []
    for index in range(600):
        tier, minopts = TIERS[index % len(TIERS)]
        name = HOSTILE[index // 150] if index % 150 == 7 else f"Ns{index % 13}.Type{index % 7}:Method{index}():this"
        base = rng.randint(10, 900)
        delta = rng.choice([-40, -3, -1, 0, 1, 2, 25, 300]) * (1 if index % 5 else 0) + index % 3 - 1
        rows.append(DiffRow(COLLECTIONS[index % 3], index + 1, name, tier, minopts, base, base + delta,
                            round(base * 1.5, 2), round(base * 1.5 + rng.uniform(-9, 9), 2),
                            {"GCInfoBytes": rng.randint(-2, 2)}))
    listings = []
    for row in [rows[7], rows[20], rows[457]]:
        body = [f"       mov      rax, qword ptr [rcx+0x{k:02X}]" for k in range(30)]
        changed = body[:10] + ["       add      rax, 1"] + body[12:]
        listings.append(Listing(row.collection, row.context, listing_text(row.method, row.tier, body),
                                listing_text(row.method, row.tier, changed), f"superpmi -c {row.context} <jit> <mch>"))
    counts = [CollectionCounts(name, 2000, 200, 0, 0) for name in COLLECTIONS]
    failures = [Failure(COLLECTIONS[1], "assert", "Assertion failed '</script><img src=x>' (lsra.cpp:12)", 4)]
    header = ReportHeader("linux", "x64", "linux", "x64", "/base/libclrjit.so", "/diff/libclrjit.so", "0123abcd",
                          collections=COLLECTIONS)
    return HtmlReport(header, counts, failures, rows, listings)


REPORT = make_report()


@pytest.fixture(scope="module")
def report_url(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("html") / "diff_report.html"
    write_html(REPORT, path)
    return path.as_uri()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory) -> Iterator[Any]:
    sync_api = _require_browser()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1440, "height": 1000})
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


class Watched:
    """A page with what it did on the side: requests, dialogs, console errors, script errors."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.requests: List[str] = []
        self.blocked: List[str] = []
        self.dialogs: List[str] = []
        self.errors: List[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.route(re.compile(r"^(?!file:)"), lambda route: (self.blocked.append(route.request.url), route.abort()))


@contextmanager
def watching(browser_context: Any, url: str, screenshot: Path) -> Iterator[Watched]:
    """The page at `url`, ready; afterwards a screenshot and the checks that nothing else happened."""
    page = browser_context.new_page()
    seen = Watched(page)
    page.goto(url)
    page.wait_for_selector("html[data-ready='1']")
    try:
        yield seen
        page.screenshot(path=str(screenshot), full_page=False)
        assert seen.requests == [url], "the page asked for something besides itself"
        assert seen.blocked == [] and seen.dialogs == [] and seen.errors == []
        assert page.title() == "asmdiffs linux x64"
        assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    finally:
        page.close()


@pytest.fixture
def watched(browser_context, report_url, tmp_path) -> Iterator[Watched]:
    with watching(browser_context, report_url, tmp_path / "screenshot.png") as seen:
        yield seen


def visible_rows(page: Any) -> List[List[str]]:
    """Cell texts of the drawn rows, top to bottom."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('#grid-body .row:not([hidden])'))
        .map(r => [r.getBoundingClientRect().top, Array.from(r.children).map(c => c.textContent)])
        .sort((a, b) => a[0] - b[0]).map(x => x[1])""")


def status(page: Any) -> str:
    return page.text_content("#status") or ""


def sort_by(page: Any, column: str) -> None:
    page.click(f"#grid-head [data-column='{COLUMN[column]}']")


# ---------------------------------------------------------------- tests

def test_page_opens_offline_with_failures_first_and_draws_only_visible_rows(watched):
    page = watched.page
    assert page.is_visible("#failures.problems")
    assert "Assertion failed '</script><img src=x>' (lsra.cpp:12)" in page.text_content("#failures")
    assert status(page).startswith(f"{len(REPORT.rows)} of {len(REPORT.rows)} contexts")
    rows = visible_rows(page)
    assert 20 <= len(rows) < 100
    assert rows[0][COLUMN["context"]] == "1" and rows[0][COLUMN["method"]] == REPORT.rows[0].method
    page.eval_on_selector("#grid", "g => g.scrollTop = g.scrollHeight")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#grid-body .row:not([hidden])'))"
                           f".some(r => r.getAttribute('data-row') === '{len(REPORT.rows) - 1}')")
    assert visible_rows(page)[-1][COLUMN["context"]] == str(REPORT.rows[-1].context)
    assert page.evaluate("document.querySelectorAll('#grid-body .row').length") < 100


def test_sorting_by_delta_and_method_name(watched):
    page = watched.page
    deltas = sorted(row.delta_bytes for row in REPORT.rows)
    sort_by(page, "delta")
    assert visible_rows(page)[0][COLUMN["delta"]] == signed(deltas[0])
    assert page.get_attribute("#grid-head [data-column='8']", "aria-sort") == "ascending"
    sort_by(page, "delta")
    assert visible_rows(page)[0][COLUMN["delta"]] == signed(deltas[-1])
    assert "sorted by Δ bytes ▼" in status(page)
    sort_by(page, "method")
    first = [row[COLUMN["method"]] for row in visible_rows(page)[:5]]
    assert first == sorted(row.method for row in REPORT.rows)[:5]


def test_filters_by_collection_size_change_tier_and_name(watched):
    page = watched.page
    page.select_option("#f-collection", label=COLLECTIONS[1])
    expected = [r for r in REPORT.rows if r.collection == COLLECTIONS[1]]
    assert status(page).startswith(f"{len(expected)} of {len(REPORT.rows)}")
    assert {row[COLUMN["collection"]] for row in visible_rows(page)} == {COLLECTIONS[1]}
    page.select_option("#f-kind", "regression")
    expected = [r for r in expected if r.delta_bytes > 0]
    assert status(page).startswith(f"{len(expected)} of")
    assert all(not row[COLUMN["delta"]].startswith("-") and row[COLUMN["delta"]] != "0" for row in visible_rows(page))
    page.select_option("#f-tier", label="Tier1-OSR")
    expected = [r for r in expected if r.tier == "Tier1-OSR"]
    assert status(page).startswith(f"{len(expected)} of")
    page.select_option("#f-collection", "")
    page.select_option("#f-kind", "")
    page.select_option("#f-tier", "")
    page.fill("#f-text", "METHOD12")
    expected = [r for r in REPORT.rows if "method12" in r.method.lower()]
    page.wait_for_function(f"() => document.getElementById('grid').getAttribute('data-shown') === '{len(expected)}'")
    assert sorted(row[COLUMN["method"]] for row in visible_rows(page)) == sorted(r.method for r in expected)


def test_a_row_with_listings_opens_its_unified_diff_listings_and_repro(watched):
    page = watched.page
    page.check("#f-listing")
    assert status(page).startswith("3 of")
    target = REPORT.listings[1]
    page.click(f"#grid-body .row[data-row='{target.context - 1}']")
    assert page.is_visible("#detail")
    base, diff = split_lines(target.base_text), split_lines(target.diff_text)
    expected = list(difflib.unified_diff(base, diff, lineterm="", n=3))[2:]
    shown = page.evaluate("Array.from(document.querySelectorAll('#d-text > span')).map(s => s.textContent)")
    assert shown == expected
    assert page.text_content("#d-repro") == target.repro_command
    assert page.eval_on_selector_all("#d-text .add", "s => s.length") == sum(t[0] == "+" for t in expected) == 2
    assert page.eval_on_selector_all("#d-text .del", "s => s.length") == sum(t[0] == "-" for t in expected) == 3
    assert page.eval_on_selector_all("#d-text .hunk", "s => s.length") == sum(t[0] == "@" for t in expected)
    page.click(".tabs button[data-view='base']")
    assert page.evaluate("Array.from(document.querySelectorAll('#d-text > span')).map(s => s.textContent)") == base
    page.click(".tabs button[data-view='new']")
    assert page.evaluate("Array.from(document.querySelectorAll('#d-text > span')).map(s => s.textContent)") == diff
    metrics = page.text_content("#d-metrics")
    assert "Code bytes" in metrics and "PerfScore" in metrics


def test_hostile_names_show_as_text_everywhere(watched):
    page = watched.page
    for hostile in HOSTILE:
        index = next(i for i, r in enumerate(REPORT.rows) if r.method == hostile)
        page.fill("#f-text", hostile[:12])
        page.wait_for_function(f"() => !!document.querySelector(\"#grid-body .row[data-row='{index}']\")")
        cell = page.text_content(f"#grid-body .row[data-row='{index}'] > span:nth-child({COLUMN['method'] + 1})")
        assert cell == hostile
        page.click(f"#grid-body .row[data-row='{index}']")
        assert page.text_content("#d-title") == hostile
    listing_row = next(i for i, r in enumerate(REPORT.rows) if r.method == HOSTILE[0])
    page.fill("#f-text", "")
    page.check("#f-listing")
    page.click(f"#grid-body .row[data-row='{listing_row}']")
    page.click(".tabs button[data-view='base']")
    assert page.text_content("#d-text > span:first-child") == f"; Assembly listing for method {HOSTILE[0]} (Tier1-OSR)"
    assert page.evaluate("document.querySelectorAll('script').length") == 2 + len(REPORT.listings)


def test_a_bar_in_the_pictures_opens_its_context(watched):
    page = watched.page
    page.select_option("#f-collection", label=COLLECTIONS[2])
    bars = page.locator("#pictures .barrow")
    assert bars.count() > 0
    row = int(bars.first.get_attribute("data-row"))
    bars.first.click()
    assert page.text_content("#d-title") == REPORT.rows[row].method
    assert status(page).startswith(f"{len(REPORT.rows)} of")  # filters were cleared to show it
    assert page.locator(f"#grid-body .row.selected[data-row='{row}']").count() == 1
    assert page.locator("#pictures svg.chart").count() >= 2 * len(COLLECTIONS)


def test_arrow_keys_move_the_selection(watched):
    page = watched.page
    sort_by(page, "context")
    page.click("#grid-body .row[data-row='0']")
    page.focus("#grid")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.text_content("#d-title") == REPORT.rows[2].method
    page.keyboard.press("ArrowUp")
    assert page.text_content("#d-title") == REPORT.rows[1].method



# ---------------------------------------------------------------- a real asmdiffs report

@pytest.fixture(scope="module")
def asmdiffs_run(tmp_path_factory, sample_toolchain) -> Path:
    """spmi_location of a real asmdiffs run on the sample toolchain (two collections)."""
    from e2e_support import collection
    from html_support import run_asmdiffs
    spmi = tmp_path_factory.mktemp("asmdiffs_html")
    mchs = [collection(sample_toolchain, name) for name in ("libraries.pmi", "benchmarks.run")]
    proc = run_asmdiffs(sample_toolchain, spmi, mchs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return spmi


def test_a_real_asmdiffs_report_opens_a_diff_on_click(browser_context, asmdiffs_run, tmp_path):
    from html_support import page_rows
    page_path = asmdiffs_run / "diff_report.html"
    rows = page_rows(page_path.read_text(encoding="utf-8"))
    with watching(browser_context, page_path.as_uri(), tmp_path / "screenshot.png") as seen:
        page = seen.page
        assert status(page).startswith(f"{len(rows)} of {len(rows)} contexts")
        assert page.is_visible("#failures.ok")
        assert "libraries.pmi.linux.x64.checked.mch" in page.text_content("#overview")
        page.check("#f-listing")
        listed = [i for i, row in enumerate(rows) if row[5]]
        assert status(page).startswith(f"{len(listed)} of {len(rows)}")
        sort_by(page, "delta")  # the largest improvement first
        index = min(listed, key=lambda i: (rows[i][4] - rows[i][3], i))
        assert visible_rows(page)[0][COLUMN["context"]] == str(rows[index][1])
        page.click(f"#grid-body .row[data-row='{index}']")
        collection_name, context = rows[index][0], rows[index][1]
        asm_dir = asmdiffs_run / f"asm.{collection_name[:-4]}"
        base = split_lines((asm_dir / "base" / f"{context}.dasm").read_text(encoding="utf-8"))
        diff = split_lines((asm_dir / "diff" / f"{context}.dasm").read_text(encoding="utf-8"))
        assert page.text_content("#d-title") == rows[index][2]
        expected = list(difflib.unified_diff(base, diff, lineterm="", n=3))[2:]
        shown = page.evaluate("Array.from(document.querySelectorAll('#d-text > span')).map(s => s.textContent)")
        assert shown == expected and any(line.startswith("+") for line in shown)
        assert f"-c {context} " in page.text_content("#d-repro") and collection_name in page.text_content("#d-repro")
        page.click(".tabs button[data-view='new']")
        assert page.evaluate("Array.from(document.querySelectorAll('#d-text > span')).map(s => s.textContent)") == diff
        page.click(".tabs button[data-view='diff']")
        page.locator("#detail").scroll_into_view_if_needed()
