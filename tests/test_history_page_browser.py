"""The history trend page in a real browser (Debian's Chromium, driven by Playwright): a chart per
collection with its fence band, y ticks and a time axis, the PR in a slot of its own with its verdict,
hover text naming the run, no request leaving the page, hostile text inert."""
from __future__ import annotations

import shutil
from typing import Any, Iterator

import pytest
from test_html_report_browser import CHROMIUM, CHROMIUM_ARGS, Watched, _require_browser

from spmi.history.records import CollectionTotals, HistoryRecord
from spmi.history.trend_page import TrendGroup, render_trend_pages

COLLECTIONS = ("benchmarks.run.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch",
               "aspnet.run.linux.x64.checked.mch")
HOSTILE = "<img src=x onerror=alert(1)>##vso[task.complete]"


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
        CollectionTotals(COLLECTIONS[1], 1001, {"instructions": [1e9, 1.025e9]}),
        CollectionTotals(COLLECTIONS[2], 1002, {"instructions": [1e9, 1e9 * (1 + 0.0002)]})])
    path = folder / "trend.html"
    group = TrendGroup(f"tpdiff linux x64 {HOSTILE}", records(), pr, [f"note: {HOSTILE} skipped"])
    path.write_text(render_trend_pages([group], f"tpdiff history {HOSTILE}"), encoding="utf-8")
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


def chart(page, collection: str):
    return page.page.locator(f'figure.chart-one[data-collection="{collection}"]')


def test_a_chart_per_collection_with_a_point_per_run(page):
    figures = page.page.locator("section.chart figure.chart-one")
    assert figures.count() == len(COLLECTIONS)
    for name in COLLECTIONS:
        one = chart(page, name)
        assert one.locator("g.series polyline").count() == 1 and one.locator("g.series circle").count() == 7
        box = one.locator("svg[role=img]").bounding_box()
        assert box and box["width"] > 400 and box["height"] > 200
    # small multiples: the first two charts sit side by side in a 1,000 px window
    first, second = (figures.nth(i).bounding_box() for i in range(2))
    assert abs(first["y"] - second["y"]) < 1 and second["x"] > first["x"] + first["width"]


def test_each_chart_draws_its_fence_band_y_ticks_and_a_time_axis(page):
    for name in COLLECTIONS:
        one = chart(page, name)
        band = one.locator("rect.fence")
        assert band.count() == 1 and "fence ±" in band.locator("title").text_content()
        band_box = band.bounding_box()
        assert band_box and band_box["height"] > 4
        # the band is centred on zero: the zero grid line halves it
        zero = one.locator("g.y-axis line.grid").nth(
            [t.strip() for t in one.locator("g.y-axis text.tick").all_text_contents()].index("0%")).bounding_box()
        assert abs((band_box["y"] + band_box["height"] / 2) - zero["y"]) < 1.5
        ticks = one.locator("g.y-axis text.tick").all_text_contents()
        assert len(ticks) >= 3 and all(t.endswith("%") for t in ticks)
        dates = one.locator("g.x-axis text.date").all_text_contents()
        assert dates[0] == "2026-11-01" and dates[-1] == "2026-11-07" and len(dates) >= 3
    caption = chart(page, COLLECTIONS[0]).locator("figcaption").text_content()
    assert "fence ±" in caption and "last 7 main runs" in caption


def test_hover_names_the_run_and_the_pr_has_its_own_slot_and_verdict(page):
    first = page.page.locator("g.series circle title").first.text_content()
    assert "2026-11-01 03:00 UTC" in first and "base 0000065" in first and "diff 0000001" in first
    assert page.page.locator("rect.pr").count() == 2
    slow = chart(page, COLLECTIONS[1])
    marked = slow.locator("rect.pr")
    assert "+2.50%" in marked.locator("title").text_content()
    square = marked.bounding_box()
    for index in range(slow.locator("circle").count()):
        point = slow.locator("circle").nth(index).bounding_box()
        assert point["x"] + point["width"] < square["x"], "the PR's square overlaps a run"
    assert "PR FLAGGED +2.50%: outside the usual range by" in slow.locator("figcaption").text_content()
    quiet = chart(page, COLLECTIONS[2]).locator("figcaption").text_content()
    assert "PR +0.020%: within the usual range (fence ±" in quiet and "FLAGGED" not in quiet


def test_nothing_leaves_the_page_and_hostile_text_is_inert(page):
    assert page.blocked == [] and page.dialogs == [] and page.errors == []
    assert all(url.startswith("file:") for url in page.requests)
    assert page.page.title() == f"tpdiff history {HOSTILE}"
    assert page.page.locator("script, img, iframe, object, embed").count() == 0
    assert HOSTILE in page.page.locator("h2").first.text_content()
    # the style is allowed by its hash: the charts are laid out as styled
    assert page.page.evaluate("getComputedStyle(document.querySelector('figure')).borderTopStyle") == "solid"
