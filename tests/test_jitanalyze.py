"""Tests for jitanalyze.py, the built-in jit-analyze (docs/contracts.md §7, §8)."""
from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spmi.analyzer import cli as analyzer_cli  # noqa: E402
from spmi.analyzer import cmdline, compare, core, render, scan

DATA = Path(__file__).resolve().parent / "data"
DASM = DATA / "dasm"
MD = DATA / "md"
SEPARATOR = "=" * 60


# ------------------------------------------------------------------ helpers


def checked_listing(name: str, code: int, prolog: int = 4, perf: Optional[str] = None, instr: int = 10,
                    alloc: Optional[int] = None) -> str:
    """A current checked-JIT listing (§7.4) with a small body."""
    perf = perf if perf is not None else "%.2f" % (code / 4)
    alloc = code if alloc is None else alloc
    return (f"; Assembly listing for method {name}\n; Emitting BLENDED_CODE for x64 + VEX on Windows\n"
            "; FullOpts code\n; optimized code\n; rsp based frame\n; fully interruptible\n\n"
            "G_M1_IG01:\n       ret      \n\t\t\t\t\t\t;; size=1 bbWeight=1 PerfScore 1.00\n\n"
            f"; Total bytes of code {code}, prolog size {prolog}, PerfScore {perf}, instruction count {instr}, "
            f"allocated bytes for code {alloc} (MethodHash=0000abcd) for method {name}\n; {SEPARATOR}\n\n")


def legacy_listing(name: str, code: int, prolog: int = 3) -> str:
    """The pre-2019 form (header and `code N, prolog size M for method` footer)."""
    return (f"; Assembly listing for method {name}\n\n"
            f"; Total bytes of code {code}, prolog size {prolog} for method {name}\n; {SEPARATOR}\n")


def write_tree(root: Path, files: Dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for key, text in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    return root


def cli(argv: List[str]) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = analyzer_cli.run_cli(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def reference_groups(text: str) -> Dict[str, Tuple[float, ...]]:
    """§8.2 applied literally, one line at a time, as an oracle for the fast scanner."""
    if text.startswith("\ufeff"):
        text = text[1:]
    groups: Dict[str, List[float]] = {}
    for index, line in enumerate(re.split(r"\r\n|\n|\r", text)):
        if not line.startswith(("; Total bytes of code", "; Assembly listing for method", "; Variable debug info:")):
            continue
        m = re.search(r"for method (.*)$", line)
        name = m.group(1) if m else ""
        data = re.search(r"code ([0-9]{1,}), prolog size ([0-9]{1,})", line)
        perf = re.search(r"(PerfScore|perf score) (\d+(\.\d+)?)", line)
        instr = re.search(r"instruction count ([0-9]{1,})", line)
        alloc = re.search(r"allocated bytes for code ([0-9]{1,})", line)
        debug = re.search(r"Variable debug info: ([0-9]{1,}) live range\(s\), ([0-9]{1,}) var\(s\)", line)
        spill = re.search(r"SpillCount (\d+) SpillCountWt (\d+\.\d+)", line)
        res = re.search(r"ResolutionMovs (\d+) ResolutionMovsWt (\d+\.\d+)", line)
        values = [int(data.group(1)) if data else 0, int(data.group(2)) if data else 0,
                  float(perf.group(2)) if perf else 0.0, int(instr.group(1)) if instr else 0,
                  int(alloc.group(1)) if alloc else 0, int(debug.group(1)) if debug else 0,
                  int(debug.group(2)) if debug else 0, int(spill.group(1)) if spill else 0,
                  float(spill.group(2)) if spill else 0.0, int(res.group(1)) if res else 0,
                  float(res.group(2)) if res else 0.0,
                  1 if (not data and index != 0) else 0]
        g = groups.setdefault(name, [0] * 12)
        for i, v in enumerate(values):
            g[i] += v
    return {k: tuple(v) for k, v in groups.items()}


def as_tuple(m: scan.MethodMetrics) -> Tuple[float, ...]:
    return (m.code_size, m.prolog_size, m.perf_score, m.instr_count, m.alloc_size, m.debug_clause_count,
            m.debug_var_count, m.spill_count, m.spill_weight, m.resolution_count, m.resolution_weight, m.instances)


EDGE_LISTING = (
    "; Assembly listing for method A:M() (Tier1)\n"
    "; Total bytes of code 10, prolog size 2, PerfScore 3.50, instruction count 4, allocated bytes for code 12,"
    " num cse 3 SpillCount 2 SpillCountWt 1.50 ResolutionMovs 1 ResolutionMovsWt 0.25 (MethodHash=00000001)"
    " for method A:M() (Tier1)\n"
    f"; {SEPARATOR}\n"
    "; Variable debug info: 3 live range(s), 2 var(s) for method A:M() (Tier1)\n"
    "; Assembly listing for method B:code 5, prolog size 6(int) (Tier0)\n"
    "; Total bytes of code 7, prolog size 1, PerfScore 2.00, instruction count 2, allocated bytes for code 7"
    " (MethodHash=00000002) for method B:code 5, prolog size 6(int) (Tier0)\n"
    "; Assembly listing for methodX PerfScore 9\n"
    "; Total bytes of code 99\n"
    "; Total bytes of code 5, prolog size 1, perf score 1.25, (MethodHash=00000003) for method C\n"
    "; Assembly listing for method A:M() (Tier1)\r\n"
    "; Total bytes of code 10, prolog size 2, PerfScore 3.25, instruction count 4, allocated bytes for code 12"
    " (MethodHash=00000001) for method A:M() (Tier1)\r\n"
    "  ; Total bytes of code 1000, prolog size 1 for method indented-is-ignored\n"
    "; Total bytes of code 8, prolog size 0 for method last line without line end"
)


# ------------------------------------------------------------------ parsing samples


def test_sample_03_checked_footer_all_metrics() -> None:
    methods = scan.parse_dasm_text((DASM / "03_x64_fullopts_checked_perfscore_windows.dasm").read_bytes())
    avx2 = methods["DotLLM.Cpu.Kernels.KvQuantize:Q8_0ToF32Avx2(ptr,ptr,int) (FullOpts)"]
    avx512 = methods["DotLLM.Cpu.Kernels.KvQuantize:Q8_0ToF32Avx512(ptr,ptr,int) (FullOpts)"]
    assert len(methods) == 2
    assert (avx2.code_size, avx2.prolog_size, avx2.perf_score, avx2.instr_count, avx2.alloc_size,
            avx2.extra_alloc_bytes) == (173, 0, 272.12, 44, 173, 0)
    assert (avx512.code_size, avx512.prolog_size, avx512.perf_score, avx512.instr_count, avx512.alloc_size,
            avx512.extra_alloc_bytes) == (138, 0, 184.12, 36, 142, 4)
    assert avx512.value("ExtraAllocBytes") == 4 and avx2.value("PerfScore") == 272.12
    # header on line 0 is not an instance; the second method's header is one
    assert (avx2.instances, avx512.instances) == (0, 1)


def test_sample_05_2019_perf_score_spelling() -> None:
    methods = scan.parse_dasm_text((DASM / "05_x64_optimized_checked_2019_perfscore_unix.dasm").read_bytes())
    m = methods["Bench`1:ReverseVectorized():this"]
    assert list(methods) == ["Bench`1:ReverseVectorized():this"]
    assert (m.code_size, m.prolog_size, m.perf_score, m.instr_count, m.alloc_size) == (43, 5, 12.05, 0, 0)


def test_sample_06_legacy_footer_code_and_prolog_only() -> None:
    methods = scan.parse_dasm_text((DASM / "06_x64_optimized_checked_2018_legacy.dasm").read_bytes())
    assert {n: (m.code_size, m.prolog_size, m.perf_score, m.instr_count, m.alloc_size) for n, m in methods.items()} == {
        "Program:Do(struct,ushort)": (59, 4, 0.0, 0, 0),
        "ValueStringBuilder:GrowAndAppend(ushort):this": (95, 9, 0.0, 0, 0),
    }


@pytest.mark.parametrize("sample, listings", [
    ("01_x64_tier0_release_unix.dasm", 1),
    ("02_arm64_fullopts_release_unix.dasm", 2),
    ("04_x64_minopts_debuggable_release_unix.dasm", 1),
])
def test_release_samples_are_release_listings_not_zero_byte_methods(sample: str, listings: int) -> None:
    text = (DASM / sample).read_bytes()
    parsed = scan.parse_dasm(text)
    assert parsed.methods == {} and parsed.release_listings == listings
    raw = scan.parse_dasm(text, raw=True).methods  # what jit-analyze itself sees: 0 bytes under ""
    assert raw[""].code_size == 0 and all(m.code_size == 0 for m in raw.values())


@pytest.mark.parametrize("sample", sorted(p.name for p in DASM.glob("*.dasm")) + ["edge", "edge-bom"])
def test_scanner_matches_line_by_line_rules(sample: str) -> None:
    if sample.startswith("edge"):
        text = ("\ufeff" if sample == "edge-bom" else "") + EDGE_LISTING
    else:
        text = (DASM / sample).read_bytes().decode("utf-8")
    got = {n: as_tuple(m) for n, m in scan.parse_dasm(text, raw=True).methods.items()}
    assert got == reference_groups(text)


def test_edge_listing_details() -> None:
    raw = scan.parse_dasm(EDGE_LISTING, raw=True).methods
    a = raw["A:M() (Tier1)"]
    assert (a.code_size, a.perf_score, a.spill_count, a.spill_weight, a.debug_clause_count, a.debug_var_count) == (
        20, 6.75, 2, 1.5, 3, 2)
    assert a.instances == 2  # the repeated header and the debug-info line
    assert raw["B:code 5, prolog size 6(int) (Tier0)"].code_size == 5 + 7  # header matches the data pattern
    assert raw["last line without line end"].code_size == 8
    assert "indented-is-ignored" not in raw


def test_large_files_are_streamed_with_same_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = "".join(checked_listing(f"N:M{i}() (Tier1)", 100 + i) for i in range(60))
    write_tree(tmp_path / "base", {"a.dasm": body, "b.dasm": body})
    write_tree(tmp_path / "diff", {"a.dasm": body.replace("code 130,", "code 131,"), "b.dasm": body})
    expected = core.analyze(tmp_path / "base", tmp_path / "diff")
    monkeypatch.setattr(core, "_WHOLE_FILE_LIMIT", 1000)
    monkeypatch.setattr(core, "_STREAM_CHUNK", 777)
    monkeypatch.setattr(core, "_READ_SIZE", 500)
    streams: List[int] = []
    feed_stream = scan._Unit.feed_stream
    monkeypatch.setattr(scan._Unit, "feed_stream",
                        lambda unit, *args: streams.append(1) or feed_stream(unit, *args))
    streamed = core.analyze(tmp_path / "base", tmp_path / "diff")
    assert streams, "no file was read in chunks"
    assert streamed == expected
    assert streamed.text_diff_keys == {"a.dasm"} and streamed.summaries["CodeSize"].delta_total == 1


def test_identical_files_are_parsed_once_with_the_same_results(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    release = (DASM / "02_arm64_fullopts_release_unix.dasm").read_text(encoding="utf-8")
    files = {"a.dasm": checked_listing("A:a()", 10) + checked_listing("A:a()", 12) + legacy_listing("B:b()", 7),
             "b.dasm": release + checked_listing("C:c()", 3), "c.dasm": checked_listing("D:d()", 5)}
    base = write_tree(tmp_path / "base", files)
    feeds: List[int] = []
    feed = scan._Unit.feed
    monkeypatch.setattr(scan._Unit, "feed", lambda unit, data, starts: feeds.append(1) or feed(unit, data, starts))
    options = compare.AnalyzeOptions(report_release=True)  # no 0/0 (NaN) relative deltas to compare
    same = core.analyze(base, write_tree(tmp_path / "same", files), options)
    assert len(feeds) == 3 and same.text_diff_keys == set()
    touched = core.analyze(base, write_tree(tmp_path / "touched", {k: v + "\n" for k, v in files.items()}), options)
    assert len(feeds) == 3 + 6 and touched.text_diff_keys == {"a.dasm", "b.dasm", "c.dasm"}  # other bytes
    touched.text_diff_keys = set()
    assert same == touched


# ------------------------------------------------------------------ number formatting


def test_round_trip_doubles() -> None:
    f = render.format_round_trip
    assert f(86033549.0) == "86033549" and f(-210.0) == "-210"
    assert f(3134.4100000000003) == "3134.4100000000003" and f(2769.83) == "2769.83"
    assert f(1e15) == "1E+15" and f(1234567890123456.0) == "1234567890123456"
    assert f(0.0001) == "0.0001" and f(0.00001) == "1E-05" and f(0.0) == "0"


def test_percentages_and_two_decimals() -> None:
    assert render.format_percent_invariant(-210 / 86033549) == "-0.00 %"
    assert render.format_percent_invariant(-364.58 / 3134.41) == "-11.63 %"
    assert render.format_percent_current(-81 / 310) == "-26.13%"
    assert render.format_percent_current(19.0) == "1,900.00%" and render.format_percent_invariant(19.0) == "1,900.00 %"
    assert "{:>6}".format(render.format_percent_current(0.007)) == " 0.70%"
    # half away from zero on the exact value: 1/32 = 3.125 % exactly; 2.675 is below 2.675
    assert render.format_percent_current(1 / 32) == "3.13%" and render.format_percent_current(-1 / 32) == "-3.13%"
    assert render.format_fixed2(0.125) == "0.13" and render.format_fixed2(2.675) == "2.67"
    assert render.format_fixed2(-364.5800000000004) == "-364.58" and render.format_fixed2(-0.001) == "-0.00"
    # invariant-culture symbols everywhere, never the en-US "∞"
    assert render.format_percent_current(float("inf")) == "Infinity"
    assert render.format_percent_current(float("-inf")) == "-Infinity"
    assert render.format_percent_invariant(float("inf")) == "Infinity"
    assert render.format_percent_invariant(float("nan")) == "NaN" and render.format_fixed2(float("nan")) == "NaN"
    assert render.format_round_trip(float("-inf")) == "-Infinity"


def test_collation_puts_punctuation_before_letters_and_lower_case_first() -> None:
    names = ["F(Formatter`1[Byte])", "F(Formatter`1[__Canon])", "a", "B", "b", "A", "1"]
    assert sorted(names, key=compare.collation_key) == ["1", "a", "A", "b", "B", "F(Formatter`1[__Canon])",
                                                   "F(Formatter`1[Byte])"]


# ------------------------------------------------------------------ golden renderings

GOLDEN_01_METHODS = {
    "2863": ("Microsoft.CodeAnalysis.RecoverableTextAndVersion:TryGetTextVersion(byref):bool:this", 310, -81),
    "2547": ("Microsoft.CodeAnalysis.MetadataOnlyReference:TryGetReferenceFromBranch(Microsoft.CodeAnalysis.BranchId,"
             "Microsoft.CodeAnalysis.ProjectReference,Microsoft.CodeAnalysis.Compilation,"
             "Microsoft.CodeAnalysis.VersionStamp,byref):bool", 489, -60),
    "12931": ("TreeTextSource:TryGetTextVersion(byref):bool:this", 127, -33),
    "9089": ("Microsoft.CodeAnalysis.Formatting.AbstractTriviaFormatter:FormatTrivia(Formatter`1[__Canon],"
             "WhitespaceAppender`1[__Canon],Microsoft.CodeAnalysis.PooledObjects.ArrayBuilder`1[__Canon],"
             "System.Threading.CancellationToken):Microsoft.CodeAnalysis.Formatting.LineColumn:this", 4700, -18),
    "9090": ("Microsoft.CodeAnalysis.Formatting.AbstractTriviaFormatter:FormatTrivia(Formatter`1[Byte],"
             "WhitespaceAppender`1[Byte],Microsoft.CodeAnalysis.PooledObjects.ArrayBuilder`1[Byte],"
             "System.Threading.CancellationToken):Microsoft.CodeAnalysis.Formatting.LineColumn:this", 4700, -18),
}


def test_golden_markdown_2021_one_collection(tmp_path: Path) -> None:
    for side in ("base", "diff"):
        write_tree(tmp_path / side, {f"{k}.dasm": legacy_listing(n, b + (d if side == "diff" else 0))
                                     for k, (n, b, d) in GOLDEN_01_METHODS.items()})
    md = tmp_path / "summary.md"
    code, out, err = cli(["--md", str(md), "-r", "--base", str(tmp_path / "base"), "--diff", str(tmp_path / "diff"),
                          "--override-total-base-metric", "86033549", "--override-total-diff-metric", "86033339"])
    golden = (MD / "01_jit_analyze_md_2021_one_collection.md").read_bytes().split(b"\n", 2)[2]
    assert md.read_bytes() == golden
    assert (code, err) == (-1, "")
    assert out.startswith("Found 5 files with textual diffs.\n\nSummary of Code Size diffs:\n")
    assert "    relative diff is an improvement.\n\n\nTop file improvements (bytes):\n" in out
    assert out.endswith("0 unchanged.\n\n" + "-" * 80 + "\n")  # the report's line end, then the console's


SAMPLE_A_FILES = [("210037", 79321, -7637), ("210048", 34334, -7490), ("210040", 38916, -7007),
                  ("210041", 29498, -5707), ("210049", 29909, -5040), ("210045", 56382, -2810),
                  ("173175", 45081, -767)]  # base PerfScore and delta, in hundredths


def sample_a_expected_lines() -> List[str]:
    text = (MD / "05_jit_analyze_console_excerpts.md").read_text(encoding="utf-8")
    block = text.split("## A.")[1].split("```")[1]
    lines = [re.sub(r"^\[\d\d:\d\d:\d\d\] ?", "", line) for line in block.strip("\n").split("\n")]
    return lines[1:]  # drop the "Invoking:" line


def test_golden_console_perfscore_run(tmp_path: Path) -> None:
    for side in ("base", "diff"):
        perf = {k: "%.2f" % ((b + (d if side == "diff" else 0)) / 100) for k, b, d in SAMPLE_A_FILES}
        write_tree(tmp_path / side, {f"{k}.dasm": checked_listing(f"M{k}:F() (Tier1)", 100, perf=p)
                                     for k, p in perf.items()})
    code, out, _ = cli(["--base", str(tmp_path / "base"), "--diff", str(tmp_path / "diff"), "--metrics", "PerfScore"])
    expected = sample_a_expected_lines()
    got = out.split("\n")
    assert got[:len(expected) - 1] == expected[:-1]
    assert got[len(expected) - 1].startswith(expected[-1]) and expected[-1] == "Top method improvemen"
    assert code == -1


def test_concat_files_counts_instances_across_files(tmp_path: Path) -> None:
    name = "System.Text.Ascii:NarrowUtf16ToAscii(ulong,ulong,ulong):ulong (Tier1)"
    other = "System.SpanHelpers:IndexOfNullByte(ulong):int (Tier1)"
    base, diff = {}, {}
    for i in range(631):
        size = 1447 if i == 0 else 1615
        base[f"{i:04}.dasm"] = legacy_listing(name, size)
        diff[f"{i:04}.dasm"] = legacy_listing(name, size + (12940 if i == 0 else 0))
    base["x.dasm"] = legacy_listing(other, 50) * 2
    diff["x.dasm"] = legacy_listing(other, 60) * 3
    write_tree(tmp_path / "base", base)
    write_tree(tmp_path / "diff", diff)
    code, out, _ = cli(["--base", str(tmp_path / "base"), "--diff", str(tmp_path / "diff"), "--concat-files",
                        "--skip-text-diff"])
    assert "Top file regressions (bytes):\n       13020 : diff (1.28% of base)\n" in out
    assert (f"       12940 ( 1.27% of base) : base - {name} (630 methods)\n" in out)
    assert f"          80 (80.00% of base) : base - {other} (2 base, 3 diff methods)\n" in out
    assert "1 total files with Code Size differences (0 improved, 1 regressed), 0 unchanged." in out
    assert "Found" not in out and code == -1


# ------------------------------------------------------------------ report semantics


def build_pair(tmp_path: Path, base: Dict[str, str], diff: Dict[str, str]) -> Tuple[Path, Path]:
    return write_tree(tmp_path / "base", base), write_tree(tmp_path / "diff", diff)


def test_reconciliation_and_method_lists(tmp_path: Path) -> None:
    base, diff = build_pair(
        tmp_path,
        {"1.dasm": checked_listing("A:a()", 100) + checked_listing("A:gone()", 30),
         "2.dasm": checked_listing("B:b()", 50), "3.dasm": checked_listing("C:c()", 10)},
        {"1.dasm": checked_listing("A:a()", 90) + checked_listing("A:new()", 12),
         "2.dasm": checked_listing("B:b()", 60), "3.dasm": checked_listing("C:c()", 10)})
    result = core.analyze(base, diff, compare.AnalyzeOptions(metrics=["CodeSize"]))
    s = result.summaries["CodeSize"]
    assert (s.base_total, s.diff_total, s.delta_total) == (190, 172, -18)
    assert (s.files_improved, s.files_regressed, s.files_unchanged) == (1, 1, 1)
    assert (s.methods_improved, s.methods_regressed, s.paired_methods, s.unchanged_methods) == (2, 2, 3, -1)
    text = render.render_text(result, "CodeSize")
    assert ("\nTotal byte diff includes -18 bytes from reconciling methods\n"
            "\tBase had    1 unique methods,       30 unique bytes\n"
            "\tDiff had    1 unique methods,       12 unique bytes\n") in text
    assert ("\nTop file regressions (bytes):\n          10 : 2.dasm (20.00% of base)\n\n"
            "Top file improvements (bytes):\n         -28 : 1.dasm (-21.54% of base)\n") in text
    # a diff-only method has base 0 (percentage infinity) and no instances on the base side
    assert ("\nTop method regressions (bytes):\n"
            "          12 (Infinity of base) : 1.dasm - A:new() (0 base, 1 diff methods)\n"
            "          10 (20.00% of base) : 2.dasm - B:b()\n") in text
    assert ("\nTop method improvements (percentages):\n"
            "         -30 (-100.00% of base) : 1.dasm - A:gone() (1 base, 0 diff methods)\n"
            "         -10 (-10.00% of base) : 1.dasm - A:a()\n") in text
    assert "Total relative delta: 0.10\n    diff is an improvement.\n    relative diff is a regression.\n" in text
    assert text.endswith("4 total methods with Code Size differences (2 improved, 2 regressed), -1 unchanged.\n\n"
                         + "-" * 80 + "\n")

    no_rec = core.analyze(base, diff, compare.AnalyzeOptions(reconcile=False))
    s = no_rec.summaries["CodeSize"]
    assert (s.base_total, s.diff_total, s.changed_methods) == (160, 160, 2)
    assert "reconciling" not in render.render_text(no_rec, "CodeSize")


def test_options_shape_the_text(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"a.dasm": checked_listing("A:a()", 100), "b.dasm": checked_listing("B:b()", 7)},
                            {"a.dasm": checked_listing("A:a()", 99), "b.dasm": checked_listing("B:b()", 7)})
    opts = compare.AnalyzeOptions(note="my note", file_filter="a*", count=0, is_diffs_only=True)
    text = render.render_text(core.analyze(base, diff, opts), "CodeSize")
    assert text == ("\nmy note\n\nSummary of Code Size diffs: (using filter 'a*')\n(Lower is better)\n\n"
                    "Total bytes of base: 100\nTotal bytes of diff: 99\nTotal bytes of delta: -1 (-1.00 % of base)\n"
                    "Total relative delta: -0.01\n    diff is an improvement.\n    relative diff is an improvement.\n\n\n"
                    + "-" * 80 + "\n")
    diffs_only = render.render_text(core.analyze(base, diff, compare.AnalyzeOptions(is_diffs_only=True)), "CodeSize")
    assert diffs_only.endswith("\n1 total methods with Code Size differences (1 improved, 0 regressed).\n\n"
                               + "-" * 80 + "\n")
    subset = render.render_text(core.analyze(base, diff, compare.AnalyzeOptions(is_subset_of_diffs=True)), "CodeSize")
    assert "total methods" not in subset and "1 total files with Code Size differences" in subset


def test_top_lists_keep_only_count_entries_in_exact_order(tmp_path: Path) -> None:
    n = 700
    base = "".join(checked_listing(f"T:m{i:03}()", 1000) for i in range(n))
    diff = "".join(checked_listing(f"T:m{i:03}()", 1000 + ((i * 37) % 50) - 25) for i in range(n))
    b, d = build_pair(tmp_path, {"x.dasm": base}, {"x.dasm": diff})
    s = core.analyze(b, d, compare.AnalyzeOptions(count=5)).summaries["CodeSize"]
    deltas = [((i * 37) % 50) - 25 for i in range(n)]
    expected_reg = sorted((i for i in range(n) if deltas[i] > 0), key=lambda i: (-deltas[i], i))[:5]
    expected_imp = sorted((i for i in range(n) if deltas[i] < 0), key=lambda i: (deltas[i], i))[:5]
    assert [m.name for m in s.top_method_regressions] == [f"T:m{i:03}()" for i in expected_reg]
    assert [m.name for m in s.top_method_improvements] == [f"T:m{i:03}()" for i in expected_imp]
    assert s.changed_methods == sum(1 for x in deltas if x) and s.unchanged_methods == deltas.count(0)


def test_release_listings_get_one_line_before_totals(tmp_path: Path) -> None:
    release = (DASM / "02_arm64_fullopts_release_unix.dasm").read_text(encoding="utf-8")
    base, diff = build_pair(tmp_path, {"1.dasm": release}, {"1.dasm": release.replace("196", "200")})
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "--report-release-listings"])
    assert ("(Lower is better)\n\nNo metrics: 4 release JIT listing(s) (footer has no prolog size/PerfScore); "
            "use a checked JIT.\nWarning: the base metric is 0, the diff metric is 0, have you used a release "
            "version?\n") in out
    assert "0 total files with Code Size differences (0 improved, 0 regressed), 0 unchanged." in out
    assert "0 total methods with Code Size differences (0 improved, 0 regressed), 0 unchanged." in out
    assert code == 0


def test_per_metric_overrides_and_markdown_per_metric(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"a.dasm": checked_listing("A:a()", 100, perf="10.00")},
                            {"a.dasm": checked_listing("A:a()", 90, perf="9.50")})
    out_dir = tmp_path / "md"
    code, out, err = cli(["-b", str(base), "-d", str(diff), "-m", "CodeSize,PerfScore", "-m", "InstrCount",
                          "--override-total-base-metric", "CodeSize=123",
                          "--override-total-diff-metric", "CodeSize=120", "--md-per-metric", str(out_dir)])
    assert err == "" and code == -2  # CodeSize and PerfScore changed, InstrCount did not
    assert ("Total bytes of base: 123 (overridden on cmd)\nTotal bytes of diff: 120 (overridden on cmd)\n"
            "Total bytes of delta: -3 (-2.44 % of base)\n") in out
    assert "Total PerfScoreUnits of base: 10\nTotal PerfScoreUnits of diff: 9.5\n" in out
    assert "Total PerfScoreUnits of delta: -0.50 (-5.00 % of base)" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["CodeSize.md", "InstrCount.md", "PerfScore.md"]
    assert (out_dir / "PerfScore.md").read_text(encoding="utf-8").startswith("```\n\nSummary of Perf Score diffs:")

    code, out, _ = cli(["-b", str(base), "-d", str(diff), "-m", "CodeSize", "-m", "PerfScore",
                        "--override-total-base-metric", "5", "--override-total-diff-metric", "7"])
    assert out.count("(overridden on cmd)") == 4 and "Total PerfScoreUnits of delta: 2 (40.00 % of base)" in out


def test_text_diffs_warn_and_retain_only_top_files(tmp_path: Path) -> None:
    same = checked_listing("S:s()", 5)
    base, diff = build_pair(
        tmp_path, {"1.dasm": checked_listing("A:a()", 10), "2.dasm": same, "3.dasm": same.replace("G_M1", "G_M2"),
                   "only_base.dasm": same, "notes.txt": "x"},
        {"1.dasm": checked_listing("A:a()", 11), "2.dasm": same, "3.dasm": same, "only_diff.dasm": same})
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "-w", "--retain-only-top-files"])
    # per metric: the count, then the deletions (before the report, as jit-analyze prints them)
    assert out.startswith("Found 2 files with textual diffs.\nDeleted 4 .dasm files.\n\nSummary of Code Size")
    # the --warn lists come after the report, in jit-analyze's layout
    assert out.endswith("-" * 80 + "\nWarning: 1 files in base but not in diff.\n\nOnly in base files:\n"
                        "only_base.dasm\nWarning: 1 files in diff but not in base.\n\nOnly in diff files:\n"
                        "only_diff.dasm\n") and code == -1
    # only the pairs outside the top file lists go; unpaired files and other extensions stay
    assert sorted(os.listdir(base)) == ["1.dasm", "notes.txt", "only_base.dasm"]
    assert sorted(os.listdir(diff)) == ["1.dasm", "only_diff.dasm"]


def test_recursive_keys_and_single_files(tmp_path: Path) -> None:
    base, diff = build_pair(
        tmp_path, {"sub/a.dasm": checked_listing("A:a()", 10), "b.dasm": checked_listing("B:b()", 1)},
        {"sub/a.dasm": checked_listing("A:a()", 12), "b.dasm": checked_listing("B:b()", 1)})
    assert core.analyze(base, diff).paired_files == 1
    s = core.analyze(base, diff, compare.AnalyzeOptions(recursive=True)).summaries["CodeSize"]
    assert s.top_file_regressions[0].diff_key == os.path.join("sub", "a.dasm")
    single = core.analyze(base / "sub" / "a.dasm", diff / "b.dasm")  # one pair, whatever the names
    s = single.summaries["CodeSize"]
    assert [(m.file_key, m.name, m.delta) for m in s.top_method_improvements] == [("a.dasm", "A:a()", -10)]
    assert [(f.base_key, f.diff_key, f.delta) for f in s.top_file_improvements] == [("a.dasm", "b.dasm", -9)]
    assert (s.base_unique_methods, s.diff_unique_methods, s.paired_methods) == (1, 1, 0)


# ------------------------------------------------------------------ command-line errors


def test_cli_validation_errors_go_to_stderr_with_exit_1(tmp_path: Path) -> None:
    assert cli([]) == (1, "", "Error: Base path (--base) is required\nDiff path (--diff) is required\n")
    code, out, err = cli(["-b", str(tmp_path), "-d", str(tmp_path), "-m", "codesize"])
    assert code == 1 and out == "" and err.startswith("Error: Unknown metric 'codesize'. Available metrics: CodeSize, ")
    code, _, err = cli(["-b", str(tmp_path), "-d", str(tmp_path), "--override-total-base-metric", "5"])
    assert (code, err) == (1, "Error: override-total-base-metric and override-total-diff-metric must either both "
                              "be specified or both not be specified\n")
    code, _, err = cli(["-b", str(tmp_path), "-d", str(tmp_path), "-c", "-1"])
    assert (code, err) == (1, "Error: Count (--count) must not be negative\n")


def test_cli_missing_input_prints_error_on_stdout_and_exits_0(tmp_path: Path) -> None:
    code, out, err = cli(["--base", str(tmp_path / "nope"), "--diff", str(tmp_path)])
    assert (code, err) == (0, "") and out.startswith("Error: Could not find file '") and "nope" in out
    assert out.count("\n") == 1


def test_cli_help_mentions_extensions_and_exit_code() -> None:
    for flag in ("--help", "-h", "-?"):
        code, out, err = cli([flag])
        assert (code, err) == (0, "") and out.startswith("Description:\n") and "Exit code" in out
    assert "[suite extension] Also write <dir>/<Metric>.md" in out
    assert "[suite extension] Say which listings come from a release JIT" in out
    assert "a comma list is a suite extension" in out and "<metric>,<value> or <metric>=<value>" in out


def test_no_diffs_exit_code_zero(tmp_path: Path) -> None:
    same = {"a.dasm": checked_listing("A:a()", 10)}
    base, diff = build_pair(tmp_path, same, same)
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "--md", str(tmp_path / "s.md")])
    assert code == 0 and "Found" not in out and "diff is" not in out
    assert "0 total files with Code Size differences (0 improved, 0 regressed), 1 unchanged." in out
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert md.endswith("1 unchanged.\n\n0 total methods with Code Size differences (0 improved, 0 regressed), "
                       "1 unchanged.\n\n```\n\n</details>\n\n" + "-" * 80 + "\n\n")


# ------------------------------------------------------------------ drop-in for jit-analyze: command line
# System.CommandLine 2.0 forms (docs/contracts.md §8.1); the expected texts are jit-analyze's own.

HELP_START = "Description:\n"


def two_file_trees(tmp_path: Path) -> Tuple[Path, Path]:
    return build_pair(tmp_path, {"a.dasm": checked_listing("A:a()", 100), "b.dasm": checked_listing("B:b()", 7)},
                      {"a.dasm": checked_listing("A:a()", 90), "b.dasm": checked_listing("B:b()", 7)})


def test_parser_option_forms_give_the_same_values() -> None:
    specs = analyzer_cli.SPECS
    no_files = lambda path: (_ for _ in ()).throw(FileNotFoundError(path))  # noqa: E731
    canonical = cmdline.parse(["--base", "B", "--diff", "D", "--count", "5", "--recursive", "--warn"], specs, no_files)
    for argv in (["--base=B", "--diff:D", "-c5", "-rw"], ["-b:B", "-d=D", "-c", "5", "-r", "-w"],
                 ["-b", "B", "-d", "D", "-rwc5"], ["-b", "B", "-d", "D", "-rwc:5"],
                 ["-bB", "-dD", "-c=5", "-r", "true", "--warn=True"]):
        parsed = cmdline.parse(argv, specs, no_files)
        assert parsed.errors == [], argv
        assert (parsed.last("--base"), parsed.last("--diff"), parsed.last("--count")) == ("B", "D", "5"), argv
        assert parsed.flag("--recursive") and parsed.flag("--warn"), argv
    assert canonical.errors == [] and canonical.flag("--recursive")
    # a bool option takes `true`/`false` only: anything else is the next argument
    parsed = cmdline.parse(["-r", "false", "--warn:false", "-b", "B"], specs, no_files)
    assert not parsed.flag("--recursive") and not parsed.flag("--warn") and parsed.errors == []
    assert cmdline.parse(["-r", "maybe"], specs, no_files).errors == ["Unrecognized command or argument 'maybe'."]
    # a value option takes the next token whatever it looks like; one value per token
    assert cmdline.parse(["--note", "--diff"], specs, no_files).last("--note") == "--diff"
    assert cmdline.parse(["--note", "-rw"], specs, no_files).last("--note") == "-rw"
    assert cmdline.parse(["-c", "-1"], specs, no_files).last("--count") == "-1"
    assert cmdline.parse(["-m", "A", "B"], specs, no_files).errors == ["Unrecognized command or argument 'B'."]
    assert cmdline.parse(["-m", "A", "-m", "B"], specs, no_files).values["--metrics"] == ["A", "B"]
    # `--` ends the options: what follows is a stray argument
    assert cmdline.parse(["-r", "--", "-w"], specs, no_files).errors == ["Unrecognized command or argument '-w'."]
    assert cmdline.parse(["--base", "--"], specs, no_files).errors == ["Required argument missing for option: '--base'."]
    assert cmdline.parse(["-x"], specs, no_files).errors == ["Unrecognized command or argument '-x'."]
    assert cmdline.parse(["-rx"], specs, no_files).errors == ["Unrecognized command or argument 'x'."]
    # errors name the option as typed
    assert cmdline.parse(["-c", "five"], specs, no_files).errors == [
        "Cannot parse argument 'five' for option '-c' as expected type 'System.Int32'."]
    assert cmdline.parse(["--count=five"], specs, no_files).errors == [
        "Cannot parse argument 'five' for option '--count' as expected type 'System.Int32'."]
    assert cmdline.parse(["-b"], specs, no_files).errors == ["Required argument missing for option: '-b'."]
    # a single-value option takes one value in all; a list option one per occurrence
    assert cmdline.parse(["-b", "X", "--base", "Y"], specs, no_files).errors == [
        "Option '-b' expects a single argument but 2 were provided."]
    assert cmdline.parse(["-r", "true", "-r", "false"], specs, no_files).errors == [
        "Option '-r' expects a single argument but 2 were provided."]
    assert cmdline.parse(["-r", "-r", "-m", "A", "-m", "B"], specs, no_files).errors == []


def test_response_files_are_read_as_arguments(tmp_path: Path) -> None:
    rsp = tmp_path / "args.rsp"
    nested = tmp_path / "more.rsp"
    nested.write_text("--note \"two words\"\n", encoding="utf-8")
    rsp.write_text(f"# a comment line\n  -b B -d D\n\n-c 3\n@{nested}\n", encoding="utf-8")
    parsed = cmdline.parse([f"@{rsp}", "-r"], analyzer_cli.SPECS, lambda p: Path(p).read_text(encoding="utf-8"))
    assert parsed.errors == [] and parsed.last("--note") == "two words" and parsed.last("--count") == "3"
    assert (parsed.last("--base"), parsed.last("--diff"), parsed.flag("--recursive")) == ("B", "D", True)
    assert cmdline.split_response_line('-b "C:\\\\my dir" x') == ["-b", "C:\\\\my dir", "x"]


def test_every_option_form_gives_the_same_report(tmp_path: Path) -> None:
    base, diff = two_file_trees(tmp_path)
    expected = cli(["--base", str(base), "--diff", str(diff), "--count", "5", "--recursive"])
    rsp = tmp_path / "a.rsp"
    rsp.write_text(f"--base {base}\n--diff {diff}\n", encoding="utf-8")
    for argv in ([f"--base={base}", f"--diff={diff}", "-c5", "-r"], [f"--base:{base}", f"-d:{diff}", "-rc5"],
                 [f"@{rsp}", "-c", "5", "-r", "true"], ["-b", str(base), "-d", str(diff), "-c5", "-r", "--"]):
        assert cli(argv) == expected, argv
    assert expected[0] == -1 and "Top file improvements (bytes):\n         -10 : a.dasm" in expected[1]


def test_unknown_option_prints_jit_analyze_texts_and_help(tmp_path: Path) -> None:
    base, diff = two_file_trees(tmp_path)
    code, out, err = cli(["-b", str(base), "-d", str(diff), "--bogus"])
    assert (code, err) == (1, "Unrecognized command or argument '--bogus'.\n\n")
    assert out == analyzer_cli.help_text(), "a parse error writes the help to stdout, nothing else"
    code, out, err = cli(["-b", str(base), "-d", str(diff), "--bse"])
    assert code == 1 and err == "Unrecognized command or argument '--bse'.\n\n"
    assert out == analyzer_cli.help_text()
    code, out, err = cli(["-b", str(base), "-d", str(diff), "--override-total-base-metric", "five",
                          "--override-total-diff-metric", "6"])
    assert (code, err) == (1, "Cannot parse argument 'five' for option '--override-total-base-metric' as expected "
                              "type 'System.Double'.\n\n")
    assert out == analyzer_cli.help_text()
    code, out, err = cli(["-b", str(base), "-b", str(base), "-d", str(diff)])
    assert (code, err, out) == (1, "Option '-b' expects a single argument but 2 were provided.\n\n",
                                analyzer_cli.help_text())
    code, out, err = cli(["-b", str(base), "-d"])
    assert (code, err) == (1, "Required argument missing for option: '-d'.\n\n")  # as typed
    code, _, err = cli(["@" + str(tmp_path / "missing.rsp")])
    assert code == 1 and err.startswith(f"Response file not found '{tmp_path / 'missing.rsp'}'.\n")


def test_version_and_number_styles_of_the_overrides(tmp_path: Path) -> None:
    assert cli(["--version"]) == (0, analyzer_cli.VERSION + "\n", "")
    assert cli(["-v"]) == (0, analyzer_cli.VERSION + "\n", "")
    code, _, err = cli(["--version", "-r"])
    assert code == 1 and "--version option cannot be combined with other arguments." in err
    code, _, err = cli(["-v", "-r"])
    assert code == 1 and "-v option cannot be combined with other arguments." in err
    base, diff = two_file_trees(tmp_path)
    # the released tool parses the bare number with NumberStyles.Any: group separators are allowed
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "--override-total-base-metric", "86,033,549",
                        "--override-total-diff-metric", " 86033339 "])
    assert "Total bytes of base: 86033549 (overridden on cmd)\nTotal bytes of diff: 86033339 (overridden on cmd)\n" \
           "Total bytes of delta: -210 (-0.00 % of base)\n" in out
    assert analyzer_cli.parse_double_any("(1,5)") == -15 and analyzer_cli.parse_double_any("1e3") == 1000
    assert analyzer_cli.parse_double_any("-Infinity") == float("-inf") and analyzer_cli.parse_double_any("1.2.3") is None


# ------------------------------------------------------------------ drop-in for jit-analyze: report text


def test_exact_console_output_with_the_empty_line_before_each_separator(tmp_path: Path) -> None:
    base, diff = two_file_trees(tmp_path)
    code, out, err = cli(["-b", str(base), "-d", str(diff), "-m", "CodeSize", "-m", "InstrCount"])
    report_code_size = (
        "Found 1 files with textual diffs.\n"
        "\nSummary of Code Size diffs:\n(Lower is better)\n\n"
        "Total bytes of base: 107\nTotal bytes of diff: 97\nTotal bytes of delta: -10 (-9.35 % of base)\n"
        "Total relative delta: -0.10\n    diff is an improvement.\n    relative diff is an improvement.\n"
        "\n"  # the marker line
        "\nTop file improvements (bytes):\n         -10 : a.dasm (-10.00% of base)\n"
        "\n1 total files with Code Size differences (1 improved, 0 regressed), 1 unchanged.\n"
        "\nTop method improvements (bytes):\n         -10 (-10.00% of base) : a.dasm - A:a()\n"
        "\nTop method improvements (percentages):\n         -10 (-10.00% of base) : a.dasm - A:a()\n"
        "\n1 total methods with Code Size differences (1 improved, 0 regressed), 1 unchanged.\n"
        "\n" + "-" * 80 + "\n")
    report_instr = (
        "Found 1 files with textual diffs.\n"
        "\nSummary of Instruction Count diffs:\n(Lower is better)\n\n"
        "Total Instructions of base: 20\nTotal Instructions of diff: 20\nTotal Instructions of delta: 0 (0.00 % of base)\n"
        "\n"
        "\n0 total files with Instruction Count differences (0 improved, 0 regressed), 2 unchanged.\n"
        "\n0 total methods with Instruction Count differences (0 improved, 0 regressed), 2 unchanged.\n"
        "\n" + "-" * 80 + "\n")
    assert (code, err) == (-1, "") and out == report_code_size + report_instr


def test_infinity_and_nan_print_as_the_invariant_culture_does(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"x.dasm": checked_listing("A:a()", 10, prolog=0) + checked_listing("B:b()", 8)},
                            {"x.dasm": checked_listing("A:a()", 10, prolog=2) + checked_listing("B:b()", 8)})
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "-m", "PrologSize", "--skip-text-diff"])
    assert ("Total bytes of base: 4\nTotal bytes of diff: 6\nTotal bytes of delta: 2 (50.00 % of base)\n"
            "Total relative delta: Infinity\n    diff is a regression.\n    relative diff is a regression.\n") in out
    assert "\nTop method regressions (bytes):\n           2 (Infinity of base) : x.dasm - A:a()\n" in out
    assert "\u221e" not in out and code == -1
    # 0 -> 0 gives 0/0: NaN, which is not 0 and not below 0 (a regression), as in jit-analyze
    same = {"x.dasm": checked_listing("A:a()", 10, prolog=0) + checked_listing("B:b()", 8)}
    base, diff = build_pair(tmp_path / "nan", same, same)
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "-m", "PrologSize"])
    assert "Total relative delta: NaN\n    relative diff is a regression.\n" in out


def test_reconciliation_values_use_the_metric_format(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"x.dasm": checked_listing("A:a()", 10, perf="5.00")},
                            {"x.dasm": checked_listing("A:a()", 10, perf="5.00")
                             + checked_listing("N:new()", 20, perf="190.50")})
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "-m", "PerfScore"])
    assert ("\nTotal PerfScoreUnit diff includes 190.5 PerfScoreUnits from reconciling methods\n"
            "\tBase had    0 unique methods,     0.00 unique PerfScoreUnits\n"
            "\tDiff had    1 unique methods,   190.50 unique PerfScoreUnits\n") in out


def test_warn_lists_follow_all_reports_in_jit_analyze_layout(tmp_path: Path) -> None:
    base, diff = build_pair(
        tmp_path, {"1.dasm": checked_listing("A:a()", 10) + checked_listing("A:gone()", 5), "b.dasm": "x"},
        {"1.dasm": checked_listing("A:a()", 10) + checked_listing("A:new()", 6) + checked_listing("A:new2()", 1),
         "d.dasm": "y", "e.dasm": "z"})
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "-w", "-m", "CodeSize", "-m", "PerfScore", "--skip-text-diff"])
    assert out.count("-" * 80) == 2
    assert out.split("-" * 80 + "\n")[-1] == (
        "Warning: 1 files in base but not in diff.\n\nOnly in base files:\nb.dasm\n"
        "Warning: 2 files in diff but not in base.\n\nOnly in diff files:\nd.dasm\ne.dasm\n"
        "Mismatched methods in 1.dasm\nBase:\n    A:gone()\nDiff:\n    A:new()\n    A:new2()\n")
    # one pair of files: no file lists (as jit-analyze)
    _, out, _ = cli(["-b", str(base / "1.dasm"), "-d", str(diff / "1.dasm"), "-w"])
    assert out.split("-" * 80 + "\n")[-1] == "Mismatched methods in 1.dasm\nBase:\n    A:gone()\nDiff:\n" \
                                              "    A:new()\n    A:new2()\n"


def test_textual_diffs_are_counted_over_the_whole_trees(tmp_path: Path) -> None:
    base, diff = build_pair(
        tmp_path,
        {"a.dasm": checked_listing("A:a()", 10), "notes.txt": "one", "sub/s.dasm": "x", "same.dasm": "s",
         "only.txt": "o", "f.dasm": "file", "dir/x.dasm": "dir"},
        {"a.dasm": checked_listing("A:a()", 10).replace("G_M1", "G_M9"), "notes.txt": "two", "sub/s.dasm": "y",
         "same.dasm": "s", "f.dasm/inside": "a folder", "dir": "a file"})
    # a.dasm, notes.txt (any extension) and sub/s.dasm (without -r, and whatever --filter says)
    for extra in ([], ["--filter", "zzz"], ["-r"], ["--concat-files"], ["-r", "--file-extension", ".txt"]):
        _, out, _ = cli(["-b", str(base), "-d", str(diff), *extra])
        assert out.startswith("Found 3 files with textual diffs.\n"), extra
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "--count", "0"])
    assert "Found" not in out and out.startswith("\nSummary of Code Size diffs:")
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "--skip-text-diff"])
    assert "Found" not in out
    if hasattr(os, "symlink"):
        os.symlink("t1", base / "link.dasm")
        os.symlink("t2", diff / "link.dasm")
        os.symlink("t1", base / "l2")
        os.symlink("t1", diff / "l2")
        _, out, _ = cli(["-b", str(base), "-d", str(diff)])
        assert out.startswith("Found 4 files with textual diffs.\n")  # links compare by target, as git does


def test_retain_only_top_files_keeps_each_metric_top_file_lists(tmp_path: Path) -> None:
    base_files, diff_files = {}, {}
    for i in range(4):  # code size: 3.dasm changes most; perf score: 0.dasm changes most
        base_files[f"{i}.dasm"] = checked_listing(f"M{i}:m()", 100, perf="10.00")
        diff_files[f"{i}.dasm"] = checked_listing(f"M{i}:m()", 100 + i, perf="%.2f" % (20 - i))
    base_files["only_base.dasm"] = checked_listing("O:o()", 1)
    base, diff = build_pair(tmp_path, base_files, diff_files)
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "-c", "1", "--retain-only-top-files",
                        "-m", "CodeSize", "-m", "PerfScore"])
    reports = out.split("-" * 80 + "\n")
    # CodeSize keeps 3.dasm and deletes the other 3 pairs; PerfScore keeps 0.dasm (already deleted: the
    # count is jit-analyze's, 2 per pair outside the lists); the textual-diff count follows the deletions
    assert reports[0].startswith("Found 4 files with textual diffs.\nDeleted 6 .dasm files.\n\nSummary of Code Size")
    assert reports[1].startswith("Found 1 files with textual diffs.\nDeleted 6 .dasm files.\n\nSummary of Perf Score")
    assert sorted(os.listdir(base)) == ["only_base.dasm"] and os.listdir(diff) == []
    # --count 0 prints only the totals and deletes nothing
    base, diff = build_pair(tmp_path / "zero", base_files, diff_files)
    _, out, _ = cli(["-b", str(base), "-d", str(diff), "-c", "0", "--retain-only-top-files"])
    assert "Deleted" not in out and len(os.listdir(base)) == 5


def test_tsv_has_jit_analyze_columns_and_json_the_changed_files(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"x.dasm": checked_listing("A:a()", 10, perf="2.50", alloc=12)
                                       + checked_listing("A:gone()", 4)},
                            {"x.dasm": checked_listing("A:a()", 12, perf="2.50", alloc=12),
                             "y.dasm": checked_listing("Y:y()", 1)})
    tsv, js = tmp_path / "out.tsv", tmp_path / "out.json"
    code, _, _ = cli(["-b", str(base), "-d", str(diff), "--tsv", str(tsv), "--json", str(js)])
    header = "File\tMethod" + "".join(f"\tBase {m}\tDiff {m}\tDelta {m}\tPercentage {m}" for m in scan.METRICS)
    lines = tsv.read_text(encoding="utf-8").split("\n")
    assert lines[0] == header and lines[-1] == "" and len(lines) == 4
    assert lines[1].startswith("x.dasm\tA:a()\t10\t12\t2\t0.2\t4\t4\t0\t0\t2.5\t2.5\t0\t0\t10\t10\t0\t0\t"
                               "12\t12\t0\t0\t2\t0\t-2\t-1\t")
    assert lines[2].startswith("x.dasm\tA:gone()\t4\t0\t-4\t-1\t4\t0\t-4\t-1\t1\t0\t-1\t-1\t")  # reconciled
    assert lines[1].endswith("\t") and lines[1].count("\t") == 2 + 4 * len(scan.METRICS)
    import json as json_module
    files = json_module.loads(js.read_text(encoding="utf-8"))
    assert [(f["baseName"], f["deltaMetrics"]["CodeSize"], f["methodsOnlyInBase"]) for f in files] == \
        [("x.dasm", -2, ["A:gone()"])]
    assert code == -1


# ------------------------------------------------------------------ 2026 release footers, FIFOs

RELEASE_2026 = ("; Assembly listing for method {name} (Tier1)\n; Emitting BLENDED_CODE for generic ARM64 on Unix\n"
                "; Tier1 code\n; optimized code\n; fp based frame\n; partially interruptible\n\n"
                "G_M000_IG01:        ;; offset=0x0000\n            ret     lr\n \n"
                "; Total bytes of code {code} for method {name} (Tier1)\n\n")


def test_2026_release_footer_counts_for_code_size_only(tmp_path: Path) -> None:
    methods = scan.parse_dasm_text(RELEASE_2026.format(name="A:a()", code=24))
    m = methods["A:a() (Tier1)"]
    assert (m.code_size, m.instances, m.code_size_only) == (24, 0, True)
    assert m.value("CodeSize") == 24 and m.value("PerfScore") is None and m.value("ExtraAllocBytes") is None
    base, diff = build_pair(tmp_path, {"1.dasm": RELEASE_2026.format(name="A:a()", code=24),
                                       "2.dasm": RELEASE_2026.format(name="B:b()", code=8)},
                            {"1.dasm": RELEASE_2026.format(name="A:a()", code=20),
                             "2.dasm": RELEASE_2026.format(name="B:b()", code=8)})
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "-m", "CodeSize", "-m", "ExtraAllocBytes", "--skip-text-diff",
                        "--report-release-listings"])
    code_size, extra = out.split("-" * 80 + "\n")[:2]
    assert "Total bytes of base: 32\nTotal bytes of diff: 28\nTotal bytes of delta: -4 (-12.50 % of base)\n" in code_size
    assert "         -4 (-16.67% of base) : 1.dasm - A:a() (Tier1)\n" in code_size
    assert "No metrics" not in code_size and "No Code Size" not in code_size
    # no negative ExtraAllocBytes: the methods are left out of that metric, and the report says why
    assert ("(Lower is better)\n\nNo Extra Allocation Size: 2 method(s) from release JIT listings (their footer "
            "gives only the code size); use a checked JIT.\nWarning: the base metric is 0, the diff metric is 0, "
            "have you used a release version?\n") in extra
    assert "0 total methods with Extra Allocation Size differences (0 improved, 0 regressed), 0 unchanged." in extra
    assert code == -1


def test_2026_release_footers_next_to_checked_listings(tmp_path: Path) -> None:
    base, diff = build_pair(tmp_path, {"1.dasm": RELEASE_2026.format(name="A:a()", code=24),
                                       "2.dasm": checked_listing("C:c()", 10, perf="4.00")},
                            {"1.dasm": RELEASE_2026.format(name="A:a()", code=20),
                             "2.dasm": checked_listing("C:c()", 10, perf="3.00")})
    result = core.analyze(base, diff, compare.AnalyzeOptions(metrics=["PerfScore", "CodeSize"], report_release=True))
    perf, size = result.summaries["PerfScore"], result.summaries["CodeSize"]
    assert (perf.base_total, perf.diff_total, perf.unavailable_methods, perf.paired_methods) == (4.0, 3.0, 1, 1)
    assert (size.base_total, size.diff_total, size.paired_methods) == (34, 30, 2)


def test_fifos_named_like_listings_are_not_read(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    base, diff = build_pair(tmp_path, {"a.dasm": checked_listing("A:a()", 10), "sub/b.dasm": checked_listing("B:b()", 3)},
                            {"a.dasm": checked_listing("A:a()", 11), "sub/b.dasm": checked_listing("B:b()", 3)})
    os.mkfifo(base / "sub" / "pipe.dasm")
    os.mkfifo(diff / "sub" / "pipe.dasm")
    os.mkfifo(base / "pipe2.dasm")
    (diff / "pipe2.dasm").write_text(checked_listing("P:p()", 1), encoding="utf-8")
    os.mkfifo(diff / "sub" / "only_diff_pipe.dasm")
    (base / "sub" / "only_diff_pipe.dasm").write_text(checked_listing("Q:q()", 1), encoding="utf-8")
    import subprocess
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "jitanalyze.py"), "-r", "-w",
                           "-b", str(base), "-d", str(diff)], capture_output=True, text=True, timeout=60)
    assert proc.stderr == "" and proc.returncode == 255
    assert proc.stdout.startswith("Found 1 files with textual diffs.\n")
    assert "1 total files with Code Size differences (0 improved, 1 regressed), 1 unchanged." in proc.stdout
    assert "Only in base files:\n" + os.path.join("sub", "only_diff_pipe.dasm") + "\n" in proc.stdout
    assert "Only in diff files:\npipe2.dasm\n" in proc.stdout
    # without the textual-diff walk the diff side is opened by name: a FIFO there is refused, not read
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "jitanalyze.py"), "-r",
                           "--skip-text-diff", "-b", str(base), "-d", str(diff)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 255 and "1 regressed), 1 unchanged." in proc.stdout and proc.stderr == ""


def test_a_file_against_a_directory_pairs_nothing_as_jit_analyze(tmp_path: Path) -> None:
    """jit-analyze keys a named file "" and a directory's files by their paths: `-b FILE -d DIR`
    (or the reverse) compares no pair, though the directory holds a file of that name."""
    base, diff = two_file_trees(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = cli(["-b", str(empty), "-d", str(empty), "--skip-text-diff"])
    for argv in (["-b", str(base / "a.dasm"), "-d", str(diff)], ["-b", str(base), "-d", str(diff / "a.dasm")]):
        code, out, err = cli(argv + ["--skip-text-diff"])
        assert (code, out, err) == nothing, argv
    code, out, _ = cli(["-b", str(base / "a.dasm"), "-d", str(diff), "--skip-text-diff", "-w"])
    assert "Only in base files" not in out and "Only in diff files:\nb.dasm\n" in out, out
    code, out, _ = cli(["-b", str(base / "a.dasm"), "-d", str(diff / "a.dasm")])
    assert code == -1 and "Total bytes of delta: -10" in out, "two files: one pair"


def test_release_listings_in_a_plain_run_are_read_as_jit_analyze_reads_them(tmp_path: Path) -> None:
    """Without --report-release-listings: no extra line; the headers and the nameless bare footers are
    methods of zeros, paired and unchanged; the file pair counts (unchanged) and --retain-only-top-files
    deletes it as any pair outside the top lists."""
    release = (DASM / "02_arm64_fullopts_release_unix.dasm").read_text(encoding="utf-8")
    base, diff = build_pair(tmp_path, {"1.dasm": release, "2.dasm": checked_listing("C:c()", 10)},
                            {"1.dasm": release.replace("196", "200"), "2.dasm": checked_listing("C:c()", 9)})
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "--skip-text-diff"])
    assert "No metrics" not in out and "release JIT" not in out
    assert "Total bytes of base: 10\nTotal bytes of diff: 9\nTotal bytes of delta: -1 (-10.00 % of base)\n" in out
    assert "1 total files with Code Size differences (1 improved, 0 regressed), 1 unchanged." in out
    # two headers and the nameless footers of 1.dasm, C:c() of 2.dasm: 4 paired methods, 1 changed
    assert "1 total methods with Code Size differences (1 improved, 0 regressed), 3 unchanged." in out
    assert code == -1
    code, out, _ = cli(["-b", str(base), "-d", str(diff), "--skip-text-diff", "--retain-only-top-files"])
    assert "Deleted 2 .dasm files." in out
    assert sorted(p.name for p in base.iterdir()) == ["2.dasm"] and sorted(p.name for p in diff.iterdir()) == ["2.dasm"]
