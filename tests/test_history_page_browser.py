"""The history trend page in a real browser (Debian's Chromium, driven by Playwright): one series
per collection, the PR marked, hover text naming the run, no request leaving the page."""
from __future__ import annotations

import shutil
from typing import Any, Iterator

import pytest
from test_html_report_browser import CHROMIUM, CHROMIUM_ARGS, Watched, _require_browser

from spmi.history.records import CollectionTotals, HistoryRecord
from spmi.history.trend_page import render_trend_page

COLLECTIONS = ("benchmarks.run.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch",
               "aspnet.run.linux.x64.checked.mch")


def records() -> list:
    made = []
    for day in range(1, 8):
        made.append(HistoryRecord(
            "tpdiff", "linux", "x64", f"202611{day:02d}T030000Z", f"{day:07x}", base_hash=f"{day + 100:07x}",
            collections=[CollectionTotals(name, 1000 + i, {"instructions": [1e9, 1e9 * (1 + (day - 4 + i) / 1e4)]})
                         for i, name in enumerate(COLLECTIONS)]))
    return made


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Iterator[Any]:
    sync_api = _require_browser()
    folder = tmp_path_factory.mktemp("trend")
    pr = HistoryRecord("tpdiff", "linux", "x64", "20261109T030000Z", "abcdef1", collections=[
        CollectionTotals(COLLECTIONS[1], 1001, {"instructions": [1e9, 1.025e9]})])
    path = folder / "trend.html"
    path.write_text(render_trend_page(records(), "tpdiff history <linux x64>", pr, ["note: ##vso[x] skipped"]),
                    encoding="utf-8")
    profile = folder / "profile"
    with sync_api.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1000, "height": 900})
        try:
            watched = Watched(context.new_page())
            watched.page.goto(path.as_uri())
            watched.page.screenshot(path=str(folder / "trend.png"), full_page=True)
            yield watched
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


def test_one_series_per_collection_with_a_point_per_run(page):
    series = page.page.locator("section.chart g.series")
    assert series.count() == len(COLLECTIONS)
    assert sorted(series.nth(i).get_attribute("data-collection") for i in range(series.count())) == sorted(COLLECTIONS)
    assert page.page.locator("section.chart polyline").count() == len(COLLECTIONS)
    assert page.page.locator("section.chart circle").count() == 7 * len(COLLECTIONS)
    box = page.page.locator("section.chart svg[role=img]").first.bounding_box()
    assert box and box["width"] > 600 and box["height"] > 200


def test_hover_names_the_run_and_the_pr_is_marked(page):
    first = page.page.locator("g.series circle title").first.text_content()
    assert "2026-11-01 03:00 UTC" in first and "base 0000065" in first and "diff 0000001" in first
    marked = page.page.locator("rect.pr title")
    assert marked.count() == 1 and "this change" in marked.first.text_content()
    assert "+2.50%" in marked.first.text_content()


def test_nothing_leaves_the_page_and_names_are_inert(page):
    assert page.blocked == [] and page.dialogs == [] and page.errors == []
    assert all(url.startswith("file:") for url in page.requests)
    assert page.page.title() == "tpdiff history <linux x64>"
    assert page.page.locator("script").count() == 0
    # the style is allowed by its hash: the charts are laid out as styled
    assert page.page.evaluate("getComputedStyle(document.querySelector('svg')).borderTopStyle") == "solid"
