"""Pure units of tpdiff/memdiff: significance, ±∞, aggregation, examples, rendering,
the memory gate, JSON round trips and merging, argv shapes, pin package handling."""
from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
import tarfile
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest

from spmi.base.errors import SuiteError
from spmi.commands import metricdiff
from spmi.formats import details
from spmi.reports import metric_markdown as report
from spmi.reports import metric_model as model
from spmi.steps import outputs, summary_render
from spmi.storage import archives
from spmi.tools import mcs, pintools
from spmi.tools.superpmi_tool import JitPairOptions, RunOptions, SuperpmiInvocation

RED = '<span style="color:red">'
GREEN = '<span style="color:green">'
HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
          "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,"
          "Base RedundantBranchesEliminated,Diff RedundantBranchesEliminated,Base PerfScore,Diff PerfScore,"
          "Base BytesAllocated,Diff BytesAllocated,Base InlineCount,Diff InlineCount")


def csv_row(context: int, minopts: bool, instr: Tuple[int, int], mem: Tuple[int, int],
            results: Tuple[str, str] = ("Success", "Success"), name: str = "", code: Tuple[int, int] = (10, 10),
            rbe: Tuple[int, int] = (1, 1), perf: Tuple[float, float] = (5.0, 5.0)) -> str:
    method = name or f"C:M{context}()"
    return (f'{context},100,"{method}",{"Tier0" if minopts else "FullOpts"},{results[0]},{results[1]},{minopts},False,'
            f"{instr[0]},{instr[1]},{code[0]},{code[1]},{rbe[0]},{rbe[1]},{perf[0]:f},{perf[1]:f},"
            f"{mem[0]},{mem[1]},2,2")


def table(rows: Sequence[str]) -> details.DetailsTable:
    return details.parse_details("\n".join([HEADER, *rows]) + "\n", "test.csv")


def collection(name: str, rows: Sequence[str], focus: str = model.BYTES_ALLOCATED,
               min_delta: int = 0) -> model.CollectionResult:
    parsed = table(rows)
    metrics = [model.INSTRUCTIONS] if focus == model.INSTRUCTIONS else list(parsed.metric_names)
    return model.aggregate(name, parsed.rows, metrics, focus, min_delta)


def tp_run(collections: List[model.CollectionResult], base: Optional[model.BuildRecord] = None,
           diff: Optional[model.BuildRecord] = None) -> model.MetricDiffRun:
    same = model.BuildRecord(True, "GCC 13.2.0", False, "GCC 13.2.0 targeting unix-x64")
    return model.MetricDiffRun(kind="tpdiff", focus=model.INSTRUCTIONS, collections=collections,
                               base_build=base or same, diff_build=diff or same)


def mem_run(collections: List[model.CollectionResult], threshold: Optional[float] = 25.0) -> model.MetricDiffRun:
    return model.MetricDiffRun(kind="memdiff", focus=model.BYTES_ALLOCATED, collections=collections,
                               threshold=threshold)


# ---------------------------------------------------------------- significance and formatting

def test_significance_uses_python_round_to_two_decimals():
    assert not model.is_significant(1_000_000, 1_000_049)   # +0.0049% rounds to 0.00
    assert model.is_significant(1_000_000, 1_000_051)       # +0.0051% rounds to 0.01
    assert not model.is_significant(1_000_000, 999_951)     # -0.0049% rounds to -0.0 == 0
    assert model.is_significant(1_000_000, 999_949)
    assert not model.is_significant(500, 500)


def test_zero_base_is_infinite_and_significant_only_when_diff_differs():
    assert model.pct_change(0, 7) == math.inf
    assert model.pct_change(0, -3) == -math.inf
    assert model.pct_change(0, 0) == 0.0
    assert model.is_significant(0, 1)
    assert not model.is_significant(0, 0)
    assert model.is_significant(0.0, 0.5)


def test_pct_formatting_colours_and_infinity():
    assert report.fmt_pct(1.234) == f"{RED}+1.23%</span>"
    assert report.fmt_pct(-0.5) == f"{GREEN}-0.50%</span>"
    assert report.fmt_pct(0.0) == "0.00%"
    assert report.fmt_pct(math.inf) == f"{RED}+∞</span>"
    assert report.fmt_pct(-math.inf) == f"{GREEN}-∞</span>"
    assert report.fmt_pct(2.0, direction=report.HIGHER) == f"{GREEN}+2.00%</span>"
    assert report.fmt_pct(-2.0, direction=report.HIGHER) == f"{RED}-2.00%</span>"
    assert report.fmt_pct(2.0, direction=report.NEUTRAL) == "+2.00%"
    assert report.fmt_pct(0.12345, decimals=4) == f"{RED}+0.1235%</span>"


def test_range_title_collapses_when_min_and_max_format_alike():
    assert report.range_title("Overall", [1.001, 1.004]) == f"Overall ({RED}+1.00%</span>)"
    assert report.range_title("MinOpts", [-0.5, 2.0]) == \
        f"MinOpts ({GREEN}-0.50%</span> to {RED}+2.00%</span>)"


def test_details_section_and_values():
    assert report.details_section("T", "body\n") == \
        '\n<details>\n<summary>T</summary>\n<div style="margin-left:1em">\n\nbody\n\n\n</div></details>\n'
    assert report.fmt_value(1234567) == "1,234,567"
    assert report.fmt_value(1234.5, "float") == "1,234.50"
    assert report.options_lines(["A=1", "B=2"], []) == "Base JIT options: A=1;B=2\n\n"


# ---------------------------------------------------------------- aggregation and examples

def test_aggregate_sums_both_success_rows_split_by_minopts():
    result = collection("a.mch", [
        csv_row(1, False, (100, 110), (1000, 1100)),
        csv_row(2, True, (50, 50), (500, 400)),
        csv_row(3, False, (70, 0), (700, 0), results=("Success", "Error")),
        csv_row(4, True, (0, 0), (0, 0), results=("Miss", "Miss")),
    ])
    assert result.total("BytesAllocated").base == 1500 and result.total("BytesAllocated").diff == 1500
    assert result.total("BytesAllocated", "FullOpts").diff == 1100
    assert result.total("BytesAllocated", "MinOpts").diff == 400
    assert result.total("PerfScore").base == 10.0 and result.kinds["PerfScore"] == "float"
    assert result.kinds["BytesAllocated"] == "int"
    assert result.contexts == {"Overall": 2, "MinOpts": 1, "FullOpts": 1}
    assert (result.base_counts.successes, result.base_counts.misses, result.base_counts.failures) == (3, 1, 0)
    assert (result.diff_counts.successes, result.diff_counts.misses, result.diff_counts.failures) == (2, 1, 1)


def test_tpdiff_aggregates_the_instruction_columns():
    result = collection("a.mch", [csv_row(1, False, (1000, 1100), (1, 1)), csv_row(2, True, (400, 380), (1, 1))],
                        focus=model.INSTRUCTIONS, min_delta=model.TPDIFF_MIN_EXAMPLE_DELTA)
    assert result.metrics == [model.INSTRUCTIONS]
    assert (result.total(model.INSTRUCTIONS).base, result.total(model.INSTRUCTIONS).diff) == (1400, 1480)
    # |Δ| >= 50 only: context 2 (-20) is no example
    assert [e.context for e in result.examples] == [1]


def test_examples_top_lists_order_and_direction():
    rows = [csv_row(i, False, (1, 1), (1000, 1000 + d)) for i, d in enumerate([50, -30, 10, 200, -400, 0], 1)]
    result = collection("a.mch", rows)
    worst = model.top_regressions(result.examples, "FullOpts", "pct")
    assert [e.context for e in worst] == [4, 1, 3]
    best = model.top_improvements(result.examples, "FullOpts", "delta")
    assert [e.context for e in best] == [5, 2]
    assert model.top_regressions(result.examples, "MinOpts") == []


def test_examples_keep_every_candidate_a_merged_summary_may_need():
    rows = [csv_row(i, i % 2 == 0, (1, 1), (1000, 1000 + i)) for i in range(1, 60)]
    result = collection("a.mch", rows)
    # top 20 by pct and by delta coincide here: 20 per class
    assert len(result.examples) == 40


# ---------------------------------------------------------------- tpdiff rendering

def _tp_collection(name: str, base: int, diff: int) -> model.CollectionResult:
    return collection(name, [csv_row(1, False, (base, diff), (1, 1), name="A:B(int)"),
                             csv_row(2, True, (base, base), (1, 1))],
                      focus=model.INSTRUCTIONS, min_delta=model.TPDIFF_MIN_EXAMPLE_DELTA)


def test_tpdiff_summary_lists_only_significant_collections():
    run = tp_run([_tp_collection("a.mch", 1_000_000, 1_030_000), _tp_collection("b.mch", 1_000_000, 1_000_010)])
    long_text = report.render_tpdiff(run, long=True)
    overall = long_text.split("<summary>Overall")[1].split("</details>")[0]
    assert "|a.mch|" in overall and "|b.mch|" not in overall
    assert "Top method regressions (FullOpts, by PDIFF %)" in long_text
    assert "|a.mch|1|1,000,000|1,030,000|" in long_text and "A:B(int)" in long_text
    details_part = long_text.split("<summary>Details</summary>")[1]
    assert "All contexts:\n\n|Collection|Base # instructions|Diff # instructions|PDIFF|\n|---|--:|--:|--:|\n" \
        in details_part
    # P(): any positive percentage is red and signed, and never reads as zero (more digits)
    assert f"|b.mch|2,000,000|2,000,010|{RED}+0.0005%</span>|" in details_part
    short_text = report.render_tpdiff(run, long=False)
    assert "Top method" not in short_text and "Details" not in short_text and "|a.mch|" in short_text


def test_pivot_ranges_cover_only_the_collections_shown():
    # b.mch is unchanged: it is not listed, so its 0.00% must not widen the title's range
    run = tp_run([_tp_collection("a.mch", 1_000_000, 1_030_000), _tp_collection("c.mch", 1_000_000, 1_010_000),
                  _tp_collection("b.mch", 1_000_000, 1_000_000)])
    text = report.render_tpdiff(run, long=False)
    assert f"<summary>Overall ({RED}+0.50%</span> to {RED}+1.50%</span>)</summary>" in text
    assert f"<summary>FullOpts ({RED}+1.00%</span> to {RED}+3.00%</span>)</summary>" in text
    assert "0.00%" not in text.split("<summary>Overall")[1].split("</summary>")[0]
    mem = mem_run([_mem_collection("big.mch", (1000, 1400)), _mem_collection("same.mch", (1000, 1000))], threshold=0)
    for kind, render in (("memdiff", report.render_memdiff), ("metricdiff", report.render_metricdiff)):
        mem.kind = kind
        title = render(mem, False, details.metric_direction).split("<summary>")[1].split("</summary>")[0]
        assert title == f"BytesAllocated ({RED}+20.00%</span>)", kind


def test_tpdiff_without_significant_differences():
    run = tp_run([_tp_collection("a.mch", 1_000_000, 1_000_010)])
    long_text = report.render_tpdiff(run, long=True)
    assert "No significant throughput differences found\n" in long_text
    assert "<summary>Overall" not in long_text and "<summary>Details</summary>" in long_text
    assert report.render_tpdiff(run, long=False) == ""


def test_tpdiff_build_warnings_each_on_its_own_line():
    base = model.BuildRecord(True, "MSVC 19.38", False)
    diff = model.BuildRecord(True, "Clang 17.0.6", True)
    run = tp_run([_tp_collection("a.mch", 100_000, 110_000)], base, diff)
    text = report.render_tpdiff(run, long=False)
    lines = [line for line in text.splitlines() if line]
    assert lines.pop(0) == f"tpdiff: instructions {RED}+5.00%</span> (significant); no failures"  # the verdict first
    assert lines[0] == (f"{RED}Warning:</span> Different compilers used for base and diff JITs. "
                        "Results may be misleading.")
    assert lines[1] == "Base JIT's compiler: MSVC 19.38"
    assert lines[2] == "Diff JIT's compiler: Clang 17.0.6"
    assert lines[3] == (f"{RED}Warning:</span> Diff JIT was compiled with native PGO. Results may be "
                        "misleading. Specify -p:NoPgoOptimize=true when building.")
    undecoded = tp_run([_tp_collection("a.mch", 100_000, 110_000)], model.BuildRecord(False), base)
    assert f"{RED}Warning:</span> Could not decode base JIT build string\n" in report.render_tpdiff(undecoded, True)


def test_tpdiff_console_lines():
    lines = report.tpdiff_console_lines(_tp_collection("a.mch", 1000, 1100), model.INSTRUCTIONS)
    assert lines == ["Total instructions executed by base: 2000", "Total instructions executed by diff: 2100",
                     "Total instructions executed delta: 100 (5.00% of base)"]


# ---------------------------------------------------------------- memdiff rendering and gate

def _mem_collection(name: str, full: Tuple[int, int], minopts: Tuple[int, int] = (1000, 1000),
                    rbe: Tuple[int, int] = (1, 1)) -> model.CollectionResult:
    return collection(name, [csv_row(1, False, (1, 1), full, rbe=rbe, name="N:Full()"),
                             csv_row(2, True, (1, 1), minopts, name="N:Min()")])


def test_memdiff_gate_breaches_overall_and_fullopts_only():
    run = mem_run([_mem_collection("big.mch", (1000, 1400)),
                   _mem_collection("minopts.mch", (1000, 1000), minopts=(1000, 3000)),
                   _mem_collection("small.mch", (1000, 1010))])
    breaches = report.gate_breaches(run, 25.0)
    assert [(b.collection, b.row) for b in breaches] == [("big.mch", "FullOpts"), ("minopts.mch", "Overall")]
    assert report.gate_breaches(run, 0) == []
    assert report.gate_breaches(run, 0.0) == []
    at_threshold = mem_run([_mem_collection("edge.mch", (1000, 1250), minopts=(1000, 1250))])
    assert len(report.gate_breaches(at_threshold, 25.0)) == 2


def test_memdiff_red_first_line_names_collection_row_and_figure():
    run = mem_run([_mem_collection("big.mch", (1000, 1400)), _mem_collection("ok.mch", (1000, 1010))])
    for long in (True, False):
        text = report.render_memdiff(run, long, details.metric_direction)
        verdict, first = text.splitlines()[0], text.splitlines()[2]
        assert verdict == (f"memdiff: BytesAllocated {RED}+10.25%</span> (significant in 1 of 2 collections; "
                           f"{RED}gate 25% reached in 1 collection</span>); no failures")
        assert first.startswith(RED) and "big.mch FullOpts +40.00%" in first and "ok.mch" not in first
        assert "Overall or FullOpts row is at least +25%" in text and "exit code 2" in text


def test_memdiff_bytesallocated_first_then_directional_metrics():
    run = mem_run([_mem_collection("a.mch", (1000, 1100), rbe=(4, 2))])
    text = report.render_memdiff(run, True, details.metric_direction)
    titles = [part.split("</summary>")[0] for part in text.split("<summary>")[1:]]
    assert titles[0].startswith("BytesAllocated (")
    assert titles[1].startswith("RedundantBranchesEliminated (")
    # higher is better: a decrease is red
    assert f"{RED}-40.00%</span>" in titles[1]
    assert not any(t.startswith("InlineCount") for t in titles)   # neutral: no pivot
    assert "Top method regressions (FullOpts, by PDIFF %)" in text
    assert "Top method regressions (FullOpts, by absolute delta)" in text
    assert "|a.mch|1|1,000|1,100|" in text and "N:Full()" in text


def test_memdiff_zero_base_renders_infinity_without_division_errors():
    rows = [csv_row(1, False, (1, 1), (1000, 1000), code=(0, 12))]
    run = mem_run([collection("z.mch", rows)])
    text = report.render_memdiff(run, True, details.metric_direction)
    assert f"ActualCodeBytes ({RED}+∞</span>)" in text
    assert "|z.mch|0|12|" + f"{RED}+∞</span>|" in text
    console = report.memdiff_console_lines(run.collections[0])
    assert "  ActualCodeBytes: base=0, diff=12, delta=12" in console
    assert "  BytesAllocated: base=1,000, diff=1,000, delta=0 (0.00%)" in console
    assert "  PerfScore: base=5.00, diff=5.00, delta=0.00 (0.00%)" in console


def test_memdiff_nothing_significant():
    run = mem_run([_mem_collection("a.mch", (1000, 1000))], threshold=0)
    long_text = report.render_memdiff(run, True, details.metric_direction)
    assert "No significant memory differences found\n" in long_text
    assert "Memory gate: disabled (-memdiff_threshold 0)." in long_text
    assert report.render_memdiff(run, False, details.metric_direction) == ""


# ---------------------------------------------------------------- JSON and merging

def test_json_round_trip_and_merge_sorted_by_name():
    first = mem_run([_mem_collection("z.mch", (1000, 1400))])
    first.base_jit_options = ["JitNoCSE=1"]
    second = mem_run([_mem_collection("a.mch", (1000, 1010))])
    import json
    docs = [json.loads(json.dumps(model.run_to_json(r), allow_nan=False)) for r in (first, second)]
    merged = model.merge_runs([model.run_from_json(d) for d in docs])
    assert [c.name for c in merged.collections] == ["a.mch", "z.mch"]
    assert merged.base_jit_options == ["JitNoCSE=1"]
    direct = mem_run([_mem_collection("a.mch", (1000, 1010)), _mem_collection("z.mch", (1000, 1400))])
    direct.base_jit_options = ["JitNoCSE=1"]
    for long in (True, False):
        assert report.render_memdiff(merged, long, details.metric_direction) == \
            report.render_memdiff(direct, long, details.metric_direction)


def test_merge_rejects_mixed_kinds_and_bad_documents():
    with pytest.raises(ValueError):
        model.merge_runs([tp_run([]), mem_run([])])
    with pytest.raises(ValueError):
        model.run_from_json({"version": 1, "kind": "memdiff"})
    with pytest.raises(ValueError):
        model.run_from_json({"version": 99})
    with pytest.raises(SuiteError, match="is a tpdiff summary, not memdiff"):
        summary_render.merge_metric_summaries("memdiff", [(Path("x.json"), model.run_to_json(tp_run([])))])


def test_an_unknown_summary_kind_is_named_on_one_short_line():
    hostile = "x\n##vso[task.setvariable variable=a]1\u2028  ::error::boom" + "y" * 500
    for merge in (lambda docs: summary_render.merge_metric_summaries("tpdiff", docs), summary_render.merge_asmdiffs):
        with pytest.raises(SuiteError) as raised:
            merge([(Path("s.json"), {"summary_type": hostile})])
        message = str(raised.value)
        assert message.splitlines() == [message] and "is of an unknown kind ('x ##vso[" in message
        assert len(message) < 200 and "...')" in message


def test_short_summary_path_next_to_long():
    assert summary_render.short_path_for(Path("/x/tpdiff_summary.md")) == Path("/x/tpdiff_short_summary.md")
    assert summary_render.short_path_for(Path("/x/memdiff_summary.3.md")) == Path("/x/memdiff_short_summary.3.md")
    assert summary_render.short_path_for(Path("/x/out.md")) == Path("/x/out_short.md")


def test_summary_paths_share_the_unique_index(tmp_path):
    (tmp_path / "tpdiff_summary.md").write_text("x")
    assert outputs.summary_paths(tmp_path, "tpdiff", False) == \
        (tmp_path / "tpdiff_summary.1.md", tmp_path / "tpdiff_short_summary.1.md")
    assert outputs.summary_paths(tmp_path, "tpdiff", True) == (tmp_path / "tpdiff_summary.json", None)


# ---------------------------------------------------------------- command pieces

def test_threshold_argument():
    assert metricdiff.threshold_value("25") == 25.0
    assert metricdiff.threshold_value("0") == 0.0
    assert metricdiff.threshold_value("12.5") == 12.5
    for bad in ("abc", "-1", "nan", "inf"):
        with pytest.raises(argparse.ArgumentTypeError):
            metricdiff.threshold_value(bad)


def test_metric_argv_shapes():
    pin = pintools.PinTool(Path("/p/pin"), Path("/p/clrjit_inscount_x64/libclrjit_inscount.so"))
    options = JitPairOptions(shared=["JitNoCSE=1"], base_only=["A=1"], diff_only=["B=2"])
    argv = metricdiff.build_metric_argv(SuperpmiInvocation(Path("/c/superpmi"), "x64", "x64", RunOptions()),
                                       Path("/b.so"), Path("/d.so"), "/m.mch", Path("/t/x.csv"), options, False, pin)
    assert argv == ["/p/pin", "-follow_execv", "-t", "/p/clrjit_inscount_x64/libclrjit_inscount.so", "-quiet", "--",
                    "/c/superpmi", "-applyDiff", "-v", "ewi", "-details", "/t/x.csv",
                    "-jitoption", "force", "JitReportMetrics=0", "-jitoption", "A=1", "-jitoption", "JitNoCSE=1",
                    "-jit2option", "force", "JitReportMetrics=0", "-jit2option", "B=2", "-jit2option", "JitNoCSE=1",
                    "-p", "/b.so", "/d.so", "/m.mch"]
    mem = metricdiff.build_metric_argv(SuperpmiInvocation(Path("/c/superpmi"), "x64", "arm64",
                                                         RunOptions(sequential=True, error_limit=100, altjit=True)),
                                      Path("/b.so"), Path("/d.so"), "/m.mch", Path("/t/x.csv"), JitPairOptions(), True,
                                      None)
    assert mem == ["/c/superpmi", "-applyDiff", "-v", "ewi", "-details", "/t/x.csv", "-target", "arm64",
                   "-jitoption", "force", "AltJit=*", "-jitoption", "force", "AltJitNgen=*",
                   "-jit2option", "force", "AltJit=*", "-jit2option", "force", "AltJitNgen=*",
                   "-jitoption", "force", "JitReportMetrics=1", "-jit2option", "force", "JitReportMetrics=1",
                   "-failureLimit", "100", "/b.so", "/d.so", "/m.mch"]


DUMP_MAP = (
    "index,method name,full signature,jit flags,os\n"
    '17,System.Collections.Generic.List`1[int]:TryFormat,"bool TryFormat(float64, class System.String)", '
    "JIT_FLAG_TIER1, 0\n"
    '1,System.Linq.Logger`3[System.__Canon,ushort,System.String]:Create,'
    '"static unsigned int16 Create[System.__Canon, unsigned int16, class System.String](class System.Object, '
    'valueclass System.Span`1[unsigned int8])", JIT_FLAG_TIER0, JIT_FLAG_BBINSTR, JIT_FLAG_MIN_OPT, 1\n'
    '2,System.FannkuchRedux:Match,"int32 Match(unsigned int64, unsigned int64)", , 1\n'
    '3,A.B:Say"Hi","void Say"Hi"(int32)", JIT_FLAG_OSR, JIT_FLAG_TIER1, 2\r\n'
    '4,Old.Era:Format,"void Format(int32)"\n'
    "not a row\n")


def test_dump_map_rows_are_read_without_assuming_a_column_count():
    rows = mcs.parse_dump_map(DUMP_MAP)
    assert sorted(rows) == [1, 2, 3, 4, 17]
    assert rows[17] == mcs.DumpMapRow(17, "System.Collections.Generic.List`1[int]:TryFormat",
                                      "bool TryFormat(float64, class System.String)", ("JIT_FLAG_TIER1",), 0)
    assert rows[1].method_name == "System.Linq.Logger`3[System.__Canon,ushort,System.String]:Create"
    assert rows[1].jit_flags == ("JIT_FLAG_TIER0", "JIT_FLAG_BBINSTR", "JIT_FLAG_MIN_OPT") and rows[1].os == 1
    assert rows[2].jit_flags == () and rows[2].os == 1
    assert rows[3].method_name == 'A.B:Say"Hi"' and rows[3].signature == 'void Say"Hi"(int32)'
    assert rows[3].jit_flags == ("JIT_FLAG_OSR", "JIT_FLAG_TIER1") and rows[3].os == 2
    assert rows[4].signature == "void Format(int32)" and rows[4].jit_flags == () and rows[4].os is None


def test_dump_map_names_are_class_and_method_never_the_signature_glued_on():
    rows = mcs.parse_dump_map(DUMP_MAP)
    assert rows[2].display_name() == "System.FannkuchRedux:Match"
    assert rows[2].display_name(with_arguments=True) == "System.FannkuchRedux:Match(unsigned int64, unsigned int64)"
    assert rows[17].display_name() == "System.Collections.Generic.List`1[int]:TryFormat"
    assert rows[1].display_name(with_arguments=True) == (
        "System.Linq.Logger`3[System.__Canon,ushort,System.String]:Create(class System.Object, "
        "valueclass System.Span`1[unsigned int8])")
    assert rows[4].display_name(with_arguments=True) == "Old.Era:Format(int32)"


def test_dump_map_rows_are_named_as_the_jit_names_them():
    """tpdiff names its examples as memdiff and metricdiff do (the details CSV's `Method full name`):
    arguments, return type and `:this` in the JIT's spelling, so overloads are told apart."""
    rows = mcs.parse_dump_map(DUMP_MAP)
    assert rows[17].jit_name() == "System.Collections.Generic.List`1[int]:TryFormat(double,System.String):bool:this"
    assert rows[1].jit_name() == ("System.Linq.Logger`3[System.__Canon,ushort,System.String]:"
                                  "Create(System.Object,System.Span`1[ubyte]):ushort")
    assert rows[2].jit_name() == "System.FannkuchRedux:Match(ulong,ulong):int:this"
    assert rows[3].jit_name() == 'A.B:Say"Hi"(int):this'
    assert rows[4].jit_name() == "Old.Era:Format(int):this"
    unreadable = mcs.DumpMapRow(5, "A:B", "no signature", (), 0)
    assert unreadable.jit_name() == "A:B"


def test_dump_map_names_equal_the_sample_jits_full_names():
    """The sample mcs writes its signatures from the full names the sample JIT reports (docs/contracts.md §5):
    reading them back gives those names, for every shape the sample makes. One spelling cannot come back:
    the signature writes the JIT's untyped `ref` as `class System.Object`, read as `System.Object`."""
    import random

    from sample import names
    rng = random.Random(5)
    for index in range(3000):
        full = names.method_name(rng, rng.choice(["libraries.pmi", "benchmarks.run", "aspnet.run"]))
        shape = names.method_shape(full)
        row = mcs.parse_dump_map_row(f'{index},{shape.map_name()},"{shape.signature()}", JIT_FLAG_TIER1, 0')
        expected = re.sub(r"(?<=[(,:])ref(?=[),:]|$)", "System.Object", full)
        assert row is not None and row.jit_name() == expected, (full, shape.signature())


LEGACY_2023 = ("Context,Context size,Base result,Diff result,MinOpts,Has diff,Base size,Diff size,"
               "Base instructions,Diff instructions\n1,10,Success,Success,False,False,12,12,0,0\n")


def test_missing_bytesallocated_columns_say_the_jits_do_not_report_metrics():
    legacy = details.parse_details(LEGACY_2023, "old.csv")
    with pytest.raises(SuiteError, match="do not report metrics"):
        metricdiff.check_metrics_reported(legacy, model.BYTES_ALLOCATED, "old.mch")
    with pytest.raises(SuiteError, match="-metric Foo: .* no 'Base Foo'"):
        metricdiff.check_metrics_reported(legacy, "Foo", "old.mch")


def test_all_zero_bytesallocated_means_a_jit_does_not_report():
    quiet = table([csv_row(1, False, (1, 1), (0, 700)), csv_row(2, True, (1, 1), (0, 800))])
    with pytest.raises(SuiteError, match="base JIT does not report metrics"):
        metricdiff.check_metrics_reported(quiet, model.BYTES_ALLOCATED, "a.mch")
    fine = table([csv_row(1, False, (1, 1), (600, 700))])
    assert "BytesAllocated" in metricdiff.check_metrics_reported(fine, model.BYTES_ALLOCATED, "a.mch")


# ---------------------------------------------------------------- pin package

def test_pin_package_names():
    tool = pintools.tool_in_package(Path("/s/pintools/1.0/windows"), "windows", "x86")
    assert tool.pin == Path("/s/pintools/1.0/windows/pin.exe")
    assert tool.pintool == Path("/s/pintools/1.0/windows/clrjit_inscount_x86/clrjit_inscount.dll")
    assert pintools.archive_blob_name("windows") == "pintools/1.0/windows.zip"
    assert pintools.archive_blob_name("osx") == "pintools/1.0/osx.tar.gz"
    with pytest.raises(SuiteError, match="^Throughput measurements not supported on platform arm64$"):
        pintools.check_throughput_host("arm64")


def _tar(path: Path, members: Sequence[Tuple[str, str]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                archive.addfile(info)
            else:
                data = b"#!/bin/sh\n"
                info.size, info.mode = len(data), 0o755
                archive.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("members, reason", [
    ([("../evil", "file")], "'..'"),
    ([("/abs/pin", "file")], "absolute"),
    ([("pin", "link")], "link"),
])
def test_unsafe_pin_archives_are_refused(tmp_path, members, reason):
    archive = _tar(tmp_path / "linux.tar.gz", members)
    with pytest.raises(SuiteError, match=reason):
        archives.extract_tar(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_pin_archive_extraction_keeps_exec_bits_and_finds_root(tmp_path):
    archive = _tar(tmp_path / "linux.tar.gz", [("linux/pin", "file"),
                                                ("linux/clrjit_inscount_x64/libclrjit_inscount.so", "file")])
    archives.extract_tar(archive, tmp_path / "out")
    root = pintools.package_root(tmp_path / "out", "linux")
    assert root == tmp_path / "out" / "linux"
    assert (root / "pin").stat().st_mode & 0o100


def test_fast_example_selection_matches_the_top_lists():
    rows = [csv_row(i, i % 3 == 0, (1, 1), (1000 + (i * 37) % 500, 1000 + (i * 53) % 700)) for i in range(1, 400)]
    parsed = table(rows)
    selected = model.select_examples("a.mch", parsed.rows, "BytesAllocated", 0)
    candidates = model.example_candidates("a.mch", parsed.rows, "BytesAllocated", 0)
    expected = set()
    for row_class in model.CLASSES:
        for by in ("pct", "delta"):
            expected |= {e.context for e in model.top_regressions(candidates, row_class, by)}
            expected |= {e.context for e in model.top_improvements(candidates, row_class, by)}
    assert [e.context for e in selected] == sorted(expected)


def test_azdo_issues_for_failures_and_gate(monkeypatch, capsys):
    run = mem_run([_mem_collection("big.mch", (1000, 1400))])
    run.failures.append(model.CollectionFailure("bad.mch", "JIT failed to initialize"))
    monkeypatch.setenv("TF_BUILD", "True")
    metricdiff.emit_azdo_issues(run, report.gate_breaches(run, 25.0))
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["##vso[task.logissue type=error]memdiff: bad.mch: JIT failed to initialize",
                     "##vso[task.logissue type=error]memdiff gate: big.mch FullOpts BytesAllocated +40.00%AZP25 "
                     "(threshold 25%AZP25)"]
    monkeypatch.delenv("TF_BUILD")
    metricdiff.emit_azdo_issues(run, [])
    assert capsys.readouterr().out == ""


def test_column_aggregation_matches_the_row_by_row_sums_and_examples():
    rows = [csv_row(i, i % 3 == 0, (i, i + i % 4), (1000 + (i * 37) % 500, 1000 + (i * 53) % 700),
                    results=("Success", "Error") if i % 11 == 0 else ("Miss", "Success") if i % 13 == 0
                    else ("Success", "Success"), code=(10 + i % 5, 10 + i % 7), perf=(i / 8, i / 8 + (i % 3) / 4))
            for i in range(1, 300)]
    parsed = table(rows)
    for metrics, focus, min_delta in ((list(parsed.metric_names), model.BYTES_ALLOCATED, 0),
                                      ([model.INSTRUCTIONS], model.INSTRUCTIONS, 2)):
        by_rows = model.aggregate("a.mch", parsed.rows, metrics, focus, min_delta)
        by_columns = model.aggregate_table("a.mch", parsed, metrics, focus, min_delta)
        assert by_columns == by_rows
        assert by_columns.kinds == by_rows.kinds and by_columns.examples == by_rows.examples
    assert {type(t.base) for t in by_columns.totals[model.INSTRUCTIONS].values()} == {int}


def test_unchanged_diff_columns_are_summed_once():
    parsed = table([csv_row(i, False, (0, 0), (5, 5)) for i in range(1, 20)])
    assert parsed.diff_column("InlineCount") is parsed.base_column("InlineCount")
    result = model.aggregate_table("a.mch", parsed, list(parsed.metric_names), model.BYTES_ALLOCATED)
    assert result.total("InlineCount") == model.Totals(38, 38)
    assert result.total("PerfScore").base == 5.0 * 19 and result.kinds["PerfScore"] == "float"


def test_pipeline_knows_the_metricdiff_type():
    from spmi.pipeline import common as pipeline
    parsed = pipeline.parse_result_name("superpmi_metricdiff_summary_linux_arm64.json")
    assert parsed is not None and (parsed.type_name, parsed.target_os, parsed.target_arch) == \
        ("metricdiff", "linux", "arm64")
    assert pipeline.overall_summary_name("metricdiff", "linux", "x64") == "3_overall_metricdiff_summary_linux_x64.md"
    assert [t.name for t in pipeline.expand_types("metricdiff")] == ["metricdiff"]
    assert [t.name for t in pipeline.expand_types("all")] == ["asmdiffs", "tpdiff", "memdiff"]
    assert pipeline.DIFF_TYPES["metricdiff"].flavour == "release"


def test_the_context_map_runs_in_the_background_and_gives_the_rows_of_a_plain_run(sample_toolchain):
    import json
    import subprocess
    manifest = json.loads((sample_toolchain / "toolchain.json").read_text(encoding="utf-8"))
    mch = manifest["collections"]["linux-x64"][0]
    plain = subprocess.run(mcs.dump_map_argv(manifest["mcs"], mch), capture_output=True, text=True, check=True)
    job = mcs.ContextMapJob(manifest["mcs"], mch)
    rows = job.rows()
    assert rows == mcs.parse_dump_map(plain.stdout) and len(rows) > 10
    assert job.rows() == rows  # asked again: the same rows, mcs is not run twice


def test_a_context_map_that_fails_leaves_the_contexts_unnamed(sample_toolchain, tmp_path):
    import json
    manifest = json.loads((sample_toolchain / "toolchain.json").read_text(encoding="utf-8"))
    assert mcs.ContextMapJob(manifest["mcs"], tmp_path / "missing.mch").rows() == {}
    assert mcs.ContextMapJob(tmp_path / "no-such-mcs", tmp_path / "missing.mch").rows() == {}


@pytest.mark.skipif(sys.platform.startswith("win"), reason="a shell script stands in for a hanging mcs")
def test_a_context_map_no_collection_uses_is_stopped_with_its_mcs(tmp_path):
    hanging = tmp_path / "mcs"
    started = tmp_path / "started"
    hanging.write_text(f"#!/bin/sh\necho $$ > {started}\nexec sleep 60\n")
    hanging.chmod(0o755)
    job = mcs.ContextMapJob(hanging, tmp_path / "a.mch")
    deadline = time.monotonic() + 10
    while not (started.exists() and started.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(started.read_text())
    begun = time.monotonic()
    job.stop()
    assert time.monotonic() - begun < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert job.rows() == {}
    mcs.ContextMapJob(hanging, tmp_path / "a.mch").stop()  # stopped at once: mcs killed as it starts


def test_examples_are_named_from_the_map_only_where_unnamed():
    rows = mcs.parse_dump_map(DUMP_MAP)
    examples = [model.Example("a.mch", 2, "", "FullOpts", 10, 20),
                model.Example("a.mch", 17, "Kept:Name", "FullOpts", 10, 20),
                model.Example("a.mch", 99, "", "FullOpts", 10, 20)]
    metricdiff.name_examples(examples, rows)
    assert [e.method for e in examples] == ["System.FannkuchRedux:Match(ulong,ulong):int:this", "Kept:Name", ""]


def test_a_summary_names_the_target_its_json_carries():
    run = tp_run([_tp_collection("a.mch", 100_000, 110_000)])
    run.target_os, run.target_arch = "linux", "arm64"
    again = model.run_from_json(model.run_to_json(run))
    for rendered in (report.render(run, False, details.metric_direction),
                     report.render(again, False, details.metric_direction)):
        assert rendered.splitlines()[0].startswith("tpdiff linux arm64: instructions ")
    assert report.verdict_line(run, "windows x64", markdown=False).startswith("tpdiff windows x64: ")
