"""Prints the size and time-to-interactive of the HTML diff explorer for 10,000 and 200,000 rows.

    python bench/html_report.py [ROWS ...] [--keep DIR] [--screenshot]

Time-to-interactive is measured in headless Chromium (Debian's `/usr/bin/chromium`,
driven by Playwright): from the start of navigation to the table showing its first
rows and a sort by Δ bytes having completed. Goals: < 2 s and < 40 MB at 200,000 rows.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import work_folder  # noqa: E402

from spmi.reports.html_report import CollectionCounts, DiffRow, Failure, HtmlReport, Listing, ReportHeader, write_html  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
COLLECTIONS = ["aspnet.run.windows.x64.checked.mch", "benchmarks.run.windows.x64.checked.mch",
               "coreclr_tests.run.windows.x64.checked.mch", "libraries.crossgen2.windows.x64.checked.mch",
               "libraries.pmi.windows.x64.checked.mch", "libraries_tests.run.windows.x64.Release.mch"]
TIERS = [("Tier0", True), ("Tier1", False), ("FullOpts", False), ("Instrumented Tier0", True), ("Tier1-OSR", False)]
NAMESPACES = ["System.Collections.Generic", "System.Linq", "System.Text.Json", "System.Runtime.Intrinsics",
              "Microsoft.AspNetCore.Http", "System.Net.Http.Headers", "System.Buffers.Text"]
TYPES = ["Dictionary`2[System.__Canon,int]", "List`1[System.__Canon]", "Utf8JsonReader", "Vector128`1[ubyte]",
         "HttpRequestStream", "SpanHelpers", "Enumerable+WhereSelectListIterator`2[int,System.__Canon]"]
METHODS = ["TryInsert{}(System.__Canon,int,ubyte):ubyte:this", "get_Item{}(int):System.__Canon:this",
           "ReadSingleSegment{}():ubyte:this", "op_Addition{}(Vector128`1[ubyte],Vector128`1[ubyte])",
           "MoveNext{}():ubyte:this", "IndexOfAnyValueType{}(byref,short,short,int):int", "Dispose{}():this"]


def listing_text(name: str, tier: str, body: List[str], total: int) -> str:
    lines = [f"; Assembly listing for method {name} ({tier})", "; Emitting BLENDED_CODE for x64 on Windows",
             f"; {tier} code", "; optimized code", "; rsp based frame", "; partially interruptible", ""]
    lines += ["G_M000_IG01:", *body, f"\n; Total bytes of code {total}, prolog size 4, PerfScore 12.25, "
              f"instruction count {len(body)}, allocated bytes for code {total} for method {name} ({tier})",
              "; " + "=" * 60, ""]
    return "\n".join(lines)


def synthetic_report(count: int, seed: int = 1, listings: int = 60) -> HtmlReport:
    """`count` rows over six collections with realistic, mostly distinct names and a long tail of deltas."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        collection = COLLECTIONS[index % len(COLLECTIONS)]
        tier, minopts = TIERS[rng.randrange(len(TIERS))]
        # Mostly distinct names, as in real collections (a method appears in a few tiers/collections).
        name = f"{rng.choice(NAMESPACES)}.{rng.choice(TYPES)}:" + rng.choice(METHODS).format(index // 2)
        base = rng.randint(20, 4000)
        delta = int(rng.gauss(0, 6) * (1 if rng.random() < 0.9 else 20))
        base_perf = round(base * rng.uniform(0.2, 1.5), 2)
        diff_perf = round(max(0.0, base_perf + delta * rng.uniform(0.1, 0.6)), 2)
        metrics = {"GCInfoBytes": rng.randint(-3, 3)} if rng.random() < 0.3 else {}
        rows.append(DiffRow(collection, index + 1, name, tier, minopts, base, base + delta,
                            base_perf, diff_perf, metrics))
    picked = [rows[i] for i in rng.sample(range(count), min(listings, count))]
    listing_list = []
    for row in picked:
        body = [f"       mov      rax, qword ptr [rcx+0x{k * 8:02X}]" for k in range(40)]
        changed = list(body)
        for k in rng.sample(range(40), 5):
            changed[k] = changed[k].replace("rax", "rdx")
        listing_list.append(Listing(row.collection, row.context,
                                    listing_text(row.method, row.tier, body, row.base_bytes),
                                    listing_text(row.method, row.tier, changed, row.diff_bytes),
                                    f"superpmi.exe -c {row.context} clrjit.dll {row.collection}"))
    counts = [CollectionCounts(name, contexts=count * 5, contexts_with_diffs=count // len(COLLECTIONS),
                               missing=3 if name.startswith("aspnet") else 0) for name in COLLECTIONS]
    failures = [Failure(COLLECTIONS[0], "MISSING", "3 contexts reported MISSING (collection older than the JIT)", 3),
                Failure(COLLECTIONS[2], "assert", "Assertion failed 'lvaTable[lclNum].lvType == TYP_INT' "
                        "(C:\\runtime\\src\\coreclr\\jit\\lclvars.cpp:1234)", 2,
                        f"superpmi.exe -c 4711 clrjit.dll {COLLECTIONS[2]}")]
    header = ReportHeader("windows", "x64", "linux", "x64", "/jits/base/libclrjit_win_x64_x64.so",
                          "/runtime/artifacts/bin/coreclr/linux.x64.Checked/libclrjit_win_x64_x64.so",
                          "a1b2c3d4e5f6 (main, 2 commits back)", ["JitStdOutFile=x"], ["JitStdOutFile=x", "JitFoo=1"],
                          COLLECTIONS, "python superpmi.py asmdiffs -target_os windows -target_arch x64")
    return HtmlReport(header, counts, failures, rows, listing_list)


def time_to_interactive(path: Path, screenshot: Optional[Path] = None) -> Tuple[float, float]:
    """Seconds from navigation start to first rows shown and a sort by Δ bytes completed (best of 3),
    and the slowest later interaction (`interaction_seconds`)."""
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="spmi-bench-chromium-")
    try:
        with sync_playwright() as driver:
            context = driver.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1440, "height": 1000})
            best, slowest = float("inf"), 0.0
            for _ in range(3):
                page = context.new_page()
                started = time.perf_counter()
                page.goto(path.as_uri(), wait_until="commit")
                page.wait_for_selector("#grid-body .row[data-row]", timeout=60_000)
                page.click("#grid-head [data-column='8']")
                page.wait_for_selector("#grid[data-sort='8+']", timeout=60_000)
                best = min(best, time.perf_counter() - started)
                slowest = max(slowest, interaction_seconds(page))
                if screenshot is not None:
                    page.screenshot(path=str(screenshot), full_page=False)
                page.close()
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return best, slowest


def interaction_seconds(page) -> float:  # type: ignore[no-untyped-def]
    """The slowest of: sort by method name, filter by text, filter regressions (in-page time)."""
    return page.evaluate("""() => {
        const time = (action) => { const t = performance.now(); action(); return performance.now() - t; };
        const change = (id, value) => { const e = document.getElementById(id); e.value = value;
            e.dispatchEvent(new Event("change")); };
        const byName = time(() => document.querySelector("#grid-head [data-column='3']").click());
        const regressions = time(() => change("f-kind", "regression"));
        const collection = time(() => change("f-collection", "2"));
        return Math.max(byName, regressions, collection) / 1000;
    }""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="*", type=int, default=[10_000, 200_000])
    parser.add_argument("--keep", help="write the reports into this folder and keep them")
    parser.add_argument("--screenshot", action="store_true", help="save a screenshot beside each report")
    args = parser.parse_args()
    with work_folder(args.keep, "spmi-bench-html-") as work:
        for count in args.rows:
            report = synthetic_report(count)
            path = work / f"diff_report_{count}.html"
            started = time.perf_counter()
            write_html(report, path)
            written = time.perf_counter() - started
            shot = work / f"diff_report_{count}.png" if args.screenshot else None
            tti, slowest = time_to_interactive(path, shot)
            print(f"{count:>8,} rows: {path.stat().st_size / 1e6:6.1f} MB, written in {written:.2f} s, "
                  f"time to interactive {tti:.2f} s, slowest sort/filter {slowest:.2f} s"
                  + (f", screenshot {shot}" if shot else ""))


if __name__ == "__main__":
    main()
