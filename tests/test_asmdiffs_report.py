"""asmdiffs aggregation, context picking and summaries (docs/contracts.md §12.9, §12.10, §12.13, §12.18)."""
from __future__ import annotations

import copy
import math
import random
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from spmi.base.errors import SuiteError
from spmi.formats.details import parse_details, read_details_csv
from spmi.reports import asm_analysis, summaries
from spmi.reports.asm_markdown import (
    NO_GIT,
    NO_GIT_DIFFS,
    RenderOptions,
    details_block,
    example_diff_text,
    fmt_delta,
    fmt_percent,
    render_long,
    render_short,
)
from spmi.reports.asm_model import (
    FULLOPTS,
    IMPROVEMENT,
    REGRESSION,
    Aggregate,
    AsmDiffsSummary,
    AssertGroup,
    AssertInstance,
    CollectionAggregates,
    CollectionReport,
    DiffListStats,
    ExampleDiff,
    JitOptions,
    ReplayStatus,
    combine_partitions,
)
from spmi.reports.asm_overall import measure_bytes, render_long_within, render_overall, render_short_within

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

DATA = Path(__file__).resolve().parent / "data" / "md"
GOLDEN_02 = (DATA / "02_superpmi_diff_summary_2024_complete.md").read_text(encoding="utf-8")
GOLDEN_04 = (DATA / "04_superpmi_diff_summary_2024_winx64_header_excerpt.md").read_text(encoding="utf-8")

HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
          "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,Base PerfScore,Diff PerfScore")


def csv_row(ctx: int, size: int = 100, name: Optional[str] = None, minopts: bool = True, has_diff: bool = True,
            base: int = 100, diff: int = 100, base_ps: float = 10.0, diff_ps: float = 10.0,
            results: Tuple[str, str] = ("Success", "Success"), instructions: Tuple[int, int] = (0, 0)) -> str:
    name = f"Ns.C:M{ctx}()" if name is None else name
    quoted = name.replace('"', '""')
    return (f'{ctx},{size},"{quoted}",{"Tier0" if minopts else "FullOpts"},{results[0]},{results[1]},{minopts},'
            f'{has_diff},{instructions[0]},{instructions[1]},{base},{diff},{base_ps:f},{diff_ps:f}')


def table_of(rows: Sequence[str]):  # type: ignore[no-untyped-def]
    return parse_details(HEADER + "\n" + "\n".join(rows) + "\n")


# ---------------------------------------------------------------- building blocks

def test_building_blocks():
    assert fmt_delta(10, 10) == "+0"
    assert fmt_delta(10, 1_010) == '<span style="color:red">+1,000</span>'
    assert fmt_delta(1_000_000, 0) == '<span style="color:green">-1,000,000</span>'
    assert fmt_percent(0.0) == "0.00%"
    assert fmt_percent(-0.0) == "0.00%"
    assert fmt_percent(1.234) == '<span style="color:red">+1.23%</span>'
    assert fmt_percent(-1.659, 4) == '<span style="color:green">-1.6590%</span>'
    assert details_block("T", "B") == ('\n<details>\n<summary>T</summary>\n<div style="margin-left:1em">\n\n'
                                       'B\n\n</div></details>\n')


def git_output(lines: Sequence[str]) -> str:
    header = ["diff --git a/b.dasm b/d.dasm", "index 1..2 100644", "--- a/b.dasm", "+++ b/d.dasm"]
    return "\n".join(header + list(lines)) + "\n"


def test_example_diff_text_strips_the_header_fences_and_cuts():
    assert example_diff_text(git_output(["@@ -1 +1 @@", "-a", "+b"]), 1) == "```diff\n@@ -1 +1 @@\n-a\n+b\n```"
    assert example_diff_text(git_output(["@@ -1 +1 @@", "-a\r", "+b\r"]), 1) == "```diff\n@@ -1 +1 @@\n-a\n+b\n```"
    long = example_diff_text(git_output([f"+line {i}" for i in range(300)]), 1)
    body = long.split("\n")
    assert body[0] == "```diff" and body[-1] == "```"
    assert body[1:-1] == [f"+line {i}" for i in range(125)] + ["... 50 lines ..."] + [f"+line {i}" for i in range(175, 300)]
    exactly = example_diff_text(git_output([f"+l{i}" for i in range(250)]), 1)
    assert "..." not in exactly and exactly.count("\n") == 251


def test_example_diff_text_without_diffs_or_git():
    assert example_diff_text("", 0) == NO_GIT_DIFFS == "No diffs found?"
    assert example_diff_text(git_output(["-a"]), 0) == "No diffs found?"
    assert example_diff_text(git_output([]), 1) == "No diffs found?"
    assert example_diff_text(None, None, git_found=False) == NO_GIT == "Could not find a git executable in PATH"


def test_listing_title():
    first = "; Assembly listing for method System.ConsolePal:InvalidateTerminalSettings() (FullOpts)\r\n"
    assert asm_analysis.listing_title(first) == "System.ConsolePal:InvalidateTerminalSettings() (FullOpts)"
    assert asm_analysis.listing_title("; Emitting BLENDED_CODE") is None


# ---------------------------------------------------------------- aggregation

def crafted_table():  # type: ignore[no-untyped-def]
    return table_of([
        csv_row(1, minopts=True, base=100, diff=90, base_ps=50.0, diff_ps=45.0, instructions=(10, 11)),
        csv_row(2, minopts=True, has_diff=False, base=200, diff=200, base_ps=0.5, diff_ps=0.5),
        csv_row(3, minopts=False, base=300, diff=320, base_ps=0.5, diff_ps=2.0),
        csv_row(4, minopts=False, has_diff=False, results=("Miss", "Success")),
        csv_row(5, minopts=False, has_diff=False, results=("Success", "Miss")),
        csv_row(6, minopts=True, has_diff=False, results=("Error", "Error")),
        csv_row(7, minopts=False, base=40, diff=40, base_ps=10.0, diff_ps=10.005),
        csv_row(3, minopts=False, has_diff=False, base=300, diff=300, base_ps=7.0, diff_ps=7.0),  # repeated context
    ])


def test_aggregation_splits_minopts_and_fullopts_and_counts_each_side():
    agg = asm_analysis.aggregate_table(crafted_table())
    m, f = agg.minopts, agg.fullopts
    assert (m.base_successes, m.base_misses, m.base_failures) == (2, 0, 1)
    assert (m.diff_successes, m.diff_misses, m.diff_failures) == (2, 0, 1)
    assert (f.base_successes, f.base_misses, f.base_failures) == (4, 1, 0)
    assert (f.diff_successes, f.diff_misses, f.diff_failures) == (4, 1, 0)
    assert (m.diffed_contexts, m.contexts_with_diffs, f.diffed_contexts, f.contexts_with_diffs) == (2, 1, 3, 2)
    assert (m.base_code_bytes, m.diff_code_bytes, f.base_code_bytes, f.diff_code_bytes) == (300, 290, 640, 660)
    assert m.base_perfscore == pytest.approx(50.5) and f.diff_perfscore == pytest.approx(19.005)
    assert (m.base_instructions, m.diff_instructions) == (10, 11)
    assert m.perfscore_log_sum == pytest.approx(math.log(0.9))
    assert f.perfscore_log_sum == pytest.approx(math.log(2.0) + math.log(1.0005))  # PerfScores clamped to >= 1
    overall = agg.overall
    assert (overall.diffed_contexts, overall.contexts_with_diffs, overall.base_total) == (5, 3, 8)
    log_sum = math.log(0.9) + math.log(2.0) + math.log(1.0005)
    assert overall.relative_geomean == pytest.approx(math.exp(log_sum / 5))
    assert overall.relative_geomean_diffs == pytest.approx(math.exp(log_sum / 3))
    assert Aggregate().relative_geomean == Aggregate().relative_geomean_diffs == 1.0


def test_diff_list_stats_for_the_details_tables():
    stats = asm_analysis.aggregate_table(crafted_table()).diff_stats
    assert (stats.contexts_with_diffs, stats.size_improvements, stats.size_regressions, stats.size_same) == (3, 1, 1, 1)
    assert (stats.bytes_improved, stats.bytes_regressed) == (10, 20)
    assert (stats.perfscore_improvements, stats.perfscore_regressions, stats.perfscore_same) == (1, 1, 1)
    assert stats.improvement_geomean == pytest.approx(-0.1)
    assert stats.regression_geomean == pytest.approx(1.0)
    assert DiffListStats().improvement_geomean == 0.0


# ---------------------------------------------------------------- context picking

def test_picking_takes_the_union_of_every_rule():
    rows = []
    rows += [csv_row(c, size=5000 + c, base=100, diff=100 - 3 * c) for c in range(1, 26)]                 # A
    rows += [csv_row(c, size=6000 + c, base=10, diff=10 + c - 100) for c in range(101, 126)]              # B
    rows += [csv_row(c, size=7000 + c, base=10**6, diff=10**6 + 1000 * (c - 200)) for c in range(201, 226)]  # C
    rows += [csv_row(c, size=8000 + c, base=10**6, diff=10**6 - 1000 * (c - 300)) for c in range(301, 326)]  # D
    rows += [csv_row(c, size=10 + c - 400, base=1000, diff=1001) for c in range(401, 426)]                # E
    rows += [csv_row(c, size=3000 + c, base=500, diff=500, base_ps=5.0, diff_ps=6.0) for c in range(501, 526)]  # F
    rows += [csv_row(c, size=1, has_diff=False, base=1, diff=9) for c in range(601, 611)]
    rows += [csv_row(700, size=1, results=("Error", "Success"), base=1, diff=99)]
    random.Random(7).shuffle(rows)
    pick = asm_analysis.pick_contexts(table_of(rows))
    expected = (set(range(6, 26))          # A: most negative relative change
                | set(range(106, 126))      # B: most positive relative change
                | set(range(206, 226))      # C: most positive change in bytes
                | set(range(306, 326))      # D: most negative change in bytes
                | set(range(401, 421))      # E: smallest contexts
                | set(range(501, 521)))     # F: smallest contexts whose size did not change
    # Examples: small |Δ| first by relative change (A16, A15, A14); the reversed order starts with
    # the large changes, highest relative change first (C225, C224, C223).
    assert [r.context for r in pick.improvement_examples] == [16, 15, 14]
    assert [r.context for r in pick.regression_examples] == [225, 224, 223]
    assert pick.contexts == sorted(expected)
    assert pick.metric == "ActualCodeBytes"


def test_ties_keep_context_order_for_both_ends():
    rows = [csv_row(c, size=1000 - c, base=100, diff=95) for c in range(45, 0, -1)]
    pick = asm_analysis.pick_contexts(table_of(rows))
    assert pick.contexts == list(range(1, 21)) + list(range(26, 46))
    assert [r.context for r in pick.improvement_examples] == [1, 2, 3]
    assert [r.context for r in pick.regression_examples] == [45, 44, 43]


def test_examples_have_distinct_names_per_pass_and_skip_chosen_contexts():
    rows = [csv_row(c, base=100, diff=100 - 5 * c, name="Same" if c in (4, 5) else None) for c in range(1, 6)]
    pick = asm_analysis.pick_contexts(table_of(rows))
    assert [r.context for r in pick.improvement_examples] == [5, 3, 2]
    assert [r.context for r in pick.regression_examples] == [1, 4]


def test_empty_method_names_do_not_block_examples():
    rows = [csv_row(c, base=100, diff=100 - c, name="") for c in range(1, 7)]
    pick = asm_analysis.pick_contexts(table_of(rows))
    assert [r.context for r in pick.improvement_examples] == [6, 5, 4]
    assert [r.context for r in pick.regression_examples] == [1, 2, 3]


def test_small_size_diffs_come_first_in_examples():
    rows = [csv_row(1, base=1000, diff=100),      # -90%, |Δ| = 900: not small
            csv_row(2, base=100, diff=60),        # -40%, small
            csv_row(3, base=100, diff=151),       # +51%, not small
            csv_row(4, base=100, diff=149)]       # +49%, small
    pick = asm_analysis.pick_contexts(table_of(rows), example_count=1)
    assert [r.context for r in pick.improvement_examples] == [2]
    assert [r.context for r in pick.regression_examples] == [3]


def test_metrics_perfscore_ranks_by_perfscore_and_other_metrics_take_every_diff():
    rows = [csv_row(c, size=100 + c, base=100, diff=100 + c, base_ps=100.0, diff_ps=100.0 - c) for c in range(1, 11)]
    rows.append(csv_row(50, has_diff=False))
    table = table_of(rows)
    by_perf = asm_analysis.pick_contexts(table, ["PerfScore"], count=2, example_count=1)
    # 2 smallest (1, 2); PerfScore most negative (10, 9) and most positive (1, 2), relative likewise.
    assert by_perf.contexts == [1, 2, 9, 10]
    assert by_perf.metric == "PerfScore"
    assert [r.context for r in by_perf.improvement_examples] == [10]
    by_bytes = asm_analysis.pick_contexts(table, None, count=2, example_count=1)
    assert [r.context for r in by_bytes.improvement_examples] == [1]
    every = asm_analysis.pick_contexts(table, ["ActualCodeBytes", "PerfScore"])
    assert every.contexts == list(range(1, 11)) and every.examples == [] and every.metric is None


# ---------------------------------------------------------------- golden rendering (02)

SAMPLE_EXAMPLES = {   # context: (CSV method name, base bytes, diff bytes), as in the 02 sample
    198: ("System.ConsolePal:InvalidateCachedCursorPosition()", 124, 76),
    667: ("System.ConsolePal:InvalidateTerminalSettings()", 132, 84),
    11911: ("Microsoft.CodeAnalysis.SyntaxNode+ChildSyntaxListEnumeratorStack+<>c:<.cctor>b__12_0():"
            "Microsoft.CodeAnalysis.ChildSyntaxList+Enumerator[]:this", 92, 60),
    12720: ("System.Linq.Enumerable+EnumerableSorter`1[System.__Canon]:Sort(System.__Canon[],int):int[]:this",
            300, 300),
    12704: ("Microsoft.CodeAnalysis.CSharp.VariablesDeclaredWalker:Free():this", 300, 300),
    12640: ("Microsoft.CodeAnalysis.DiagnosticBag:Add(Microsoft.CodeAnalysis.Diagnostic):this", 300, 300),
    203: ("System.ConsolePal:InvalidateCachedCursorPosition()", 124, 76),  # same name as 198: never an example
}
# Per class: rows, contexts with diffs, size improvements, PerfScore improvements, Σ base bytes, Σ Δ bytes.
SAMPLE_CLASSES = {True: (10_221, 8_171, 5_508, 5_355, 5_347_656, -684_524),
                  False: (2_513, 2_022, 1_400, 1_350, 1_637_260, -198_124)}
LOG_SUM_FULLOPTS = 2513 * math.log(1 - 0.016590)   # "PerfScore Overall in FullOpts" -1.6590%
LOG_SUM_MINOPTS = -166.88 - LOG_SUM_FULLOPTS       # with it: -1.62% / -1.52% / -2.06% / -2.46%


def spread(items: List[int], count: int) -> List[int]:
    """`count` of `items`, evenly spread."""
    return [item for i, item in enumerate(items) if (i * count) // len(items) != ((i + 1) * count) // len(items)]


def sample_02_rows() -> List[str]:
    """12,734 rows whose sums, geomeans and picks are exactly those of the 02 sample."""
    fullopts = set([c for c in range(1, 12_735) if c % 5 == 2][:2513])
    rows = {}
    for is_min, (count, n_diffs, n_improved, n_perf, base_sum, delta_sum) in SAMPLE_CLASSES.items():
        contexts = [c for c in range(1, 12_735) if (c not in fullopts) == is_min]
        special = [c for c in contexts if c in SAMPLE_EXAMPLES]
        # No size-same diffs above 12640 except the sample's regression examples.
        plain = [c for c in contexts if c not in SAMPLE_EXAMPLES]
        no_diff = [c for c in plain if c > 12640]
        no_diff = set(no_diff + [c for c in plain if c <= 12640][-(count - n_diffs - len(no_diff)):])
        pool = [c for c in plain if c not in no_diff]
        special_improved = [c for c in special if SAMPLE_EXAMPLES[c][1] != SAMPLE_EXAMPLES[c][2]]
        improved = spread(pool, n_improved - len(special_improved))
        sizes: Dict[int, Tuple[int, int]] = {c: SAMPLE_EXAMPLES[c][1:] for c in special}
        fifth, tenth = len(improved) // 5, len(improved) // 10
        sizes.update({c: (200, 190) for c in improved[:fifth]})                  # small: -5 %
        sizes.update({c: (100, 40) for c in improved[fifth:fifth + tenth]})      # steep but not small: -60 %
        large = improved[fifth + tenth:]
        left = delta_sum - sum(d - b for b, d in sizes.values())
        per = int(left / len(large))
        sizes.update({c: (600, 600 + per) for c in large[:-1]})
        sizes[large[-1]] = (10_000, 10_000 + left - per * (len(large) - 1))
        sizes.update({c: (300, 300) for c in pool if c not in sizes})
        quotient, remainder = divmod(base_sum - sum(b for b, _ in sizes.values()), len(no_diff))
        sizes.update({c: (quotient + (i < remainder),) * 2 for i, c in enumerate(sorted(no_diff))})
        diff_rows = sorted(set(contexts) - no_diff)
        perf_improved = set(spread(diff_rows, n_perf))
        ratio = math.exp((LOG_SUM_MINOPTS if is_min else LOG_SUM_FULLOPTS) / n_perf)
        for c in contexts:
            base, diff = sizes[c]
            base_ps, diff_ps = (1000.0, round(1000.0 * ratio, 6)) if c in perf_improved else (500.25, 500.25)
            name = SAMPLE_EXAMPLES[c][0] if c in SAMPLE_EXAMPLES else f"Test.C{c % 700}:M{c}(int):this"
            rows[c] = csv_row(c, size=1000 + (c * 7919) % 50_000, name=name, minopts=is_min,
                              has_diff=c not in no_diff, base=base, diff=diff, base_ps=base_ps, diff_ps=diff_ps)
    return [rows[c] for c in sorted(rows)]


def sample_02_bodies() -> Dict[int, Tuple[str, str]]:
    """Listing title and diff text of each example in the sample (what git and the listings provide)."""
    pattern = (r'<summary>[^\n]* : (\d+)\.dasm - ([^\n]*)</summary>\n<div style="margin-left:1em">\n\n'
               r'```diff\n(.*?)\n```\n')
    return {int(m.group(1)): (m.group(2), m.group(3)) for m in re.finditer(pattern, GOLDEN_02, re.S)}


def sample_02_summary(tmp_path: Path) -> AsmDiffsSummary:
    csv_path = tmp_path / "test.mch_details.csv"
    csv_path.write_text(HEADER + "\n" + "\n".join(sample_02_rows()) + "\n", encoding="utf-8")
    table = read_details_csv(csv_path, metrics=[])
    aggregates = asm_analysis.aggregate_table(table)
    pick = asm_analysis.pick_contexts(table)
    bodies = sample_02_bodies()
    examples = []
    for kind, rows in ((IMPROVEMENT, pick.improvement_examples), (REGRESSION, pick.regression_examples)):
        for row in rows:
            title, body = bodies[row.context]
            first_line = f"; Assembly listing for method {title}\n"
            examples.append(asm_analysis.example_from_row(row, kind, asm_analysis.listing_title(first_line),
                                                    example_diff_text(git_output(body.split("\n")), 1),
                                                    f"superpmi -c {row.context} libclrjit.so test.mch"))
    return AsmDiffsSummary("linux", "riscv64", "linux", "x64", collections=[
        CollectionReport("test.mch", aggregates, examples)])


def expected_02() -> str:
    # The 2024 sample predates HTML-escaping of the example display name, which §12.10
    # requires; that one summary line is compared in its escaped form.
    raw = "11911.dasm - Microsoft.CodeAnalysis.SyntaxNode+ChildSyntaxListEnumeratorStack+<>c:<.cctor>"
    assert GOLDEN_02.count(raw) == 1
    return GOLDEN_02.replace(raw, raw.replace("<", "&lt;").replace(">", "&gt;"))


@pytest.fixture(scope="module")
def summary_02(tmp_path_factory) -> AsmDiffsSummary:
    return sample_02_summary(tmp_path_factory.mktemp("golden02"))


def test_long_summary_matches_the_2024_sample_byte_for_byte(summary_02):
    assert render_long(summary_02, RenderOptions(additions=False)) == expected_02()


def test_picks_of_the_sample_csv_are_the_sample_examples(summary_02):
    examples = summary_02.collections[0].examples
    assert [(e.context, e.kind) for e in examples] == [
        (198, IMPROVEMENT), (667, IMPROVEMENT), (11911, IMPROVEMENT),
        (12720, REGRESSION), (12704, REGRESSION), (12640, REGRESSION)]


def test_short_summary_is_items_one_and_two(summary_02):
    short = render_short(summary_02, RenderOptions(additions=False))
    assert short == expected_02()[:expected_02().index("\n<details>\n<summary>Example diffs")]


def test_additions_leave_the_contract_sections_intact(summary_02):
    from spmi.reports.asm_markdown import EXAMPLE_LABELS
    labelled = render_long(summary_02)
    labels = [e.label for e in summary_02.collections[0].examples]
    assert labels[:3] == ["improvement"] * 3 and "regression" not in labels  # the 2024 sample: +0 "regressions"
    for label in set(labels):
        assert labelled.count(EXAMPLE_LABELS[label] + "\n\n```diff") == labels.count(label)
    full = labelled
    for label in EXAMPLE_LABELS.values():  # the one addition inside item 3: a label line above each diff
        full = full.replace(label + "\n\n", "")
    golden = expected_02()
    head = golden[:golden.index("\n<details>\n<summary>Example diffs")]
    tail = golden[len(head):]
    # the one addition before item 1: the verdict line
    verdict = full[:full.index("\n\n") + 2]
    assert verdict.startswith("linux riscv64: 10,193 of 12,734 contexts with diffs, ") and "; no failures" in verdict
    full = full[len(verdict):]
    assert full.startswith(head) and full.endswith(tail)
    extras = full[len(head):len(full) - len(tail)]
    assert extras.startswith("\n**Impact by collection**")
    assert "|test.mch|10,193|6,984,916|" in extras
    assert "<summary>PerfScore Overall (" in extras
    assert "superpmi -c 198 libclrjit.so test.mch" in extras and "<summary>Run information</summary>" in extras


def test_header_lines_match_the_winx64_sample():
    """Top section with MISSED and `Base JIT options:`, and the 10-collection pivots of 04."""
    end = GOLDEN_04.index("\n<details>\n<summary>Example diffs")
    tables = re.findall(r"<summary>(Overall|FullOpts) .*?\n\|---\|--:\|--:\|--:\|\n(.*?)\n\n", GOLDEN_04, re.S)
    rows = {kind: re.findall(r"^\|([^|]+)\|([\d,]+)\|<span style=\"color:green\">(-[\d,]+)</span>\|"
                             r"<span style=\"color:green\">(-[\d.]+)%</span>\|$", text, re.M)
            for kind, text in tables}
    collections = []
    for i, ((name, overall_base, delta, percent), (_, fullopts_base, _, _)) in enumerate(zip(rows["Overall"],
                                                                                           rows[FULLOPTS])):
        overall_base, fullopts_base = int(overall_base.replace(",", "")), int(fullopts_base.replace(",", ""))
        delta = int(delta.replace(",", ""))
        fullopts = Aggregate(diffed_contexts=149_513, diff_successes=149_513, base_successes=149_513,
                             contexts_with_diffs=1000, base_code_bytes=fullopts_base,
                             diff_code_bytes=fullopts_base + delta,
                             perfscore_log_sum=1000 * math.log(1 + float(percent) / 100))
        minopts_count = 95_529 + (4 if i == 0 else 0)
        minopts = Aggregate(diffed_contexts=minopts_count, base_successes=minopts_count, diff_successes=minopts_count,
                            base_code_bytes=overall_base - fullopts_base, diff_code_bytes=overall_base - fullopts_base)
        if i == 0:  # 6,611 contexts missed by the base JIT only and 7,147 by the diff JIT only
            minopts.base_misses, minopts.diff_successes = 6_611, minopts.diff_successes + 6_611
            minopts.diff_misses, minopts.base_successes = 7_147, minopts.base_successes + 7_147
        collections.append(CollectionReport(name, CollectionAggregates(minopts, fullopts)))
    assert len(collections) == 10
    summary = AsmDiffsSummary("windows", "x64", jit_options=JitOptions(base=["JitNoCSE=1"]), collections=collections)
    rendered = render_long(summary, RenderOptions(additions=False))
    assert rendered[:end] == GOLDEN_04[:end]


def test_missed_line_with_equal_counts_and_diff_options():
    agg = Aggregate(base_successes=995, base_misses=5, diff_successes=995, diff_misses=5, diffed_contexts=995)
    summary = AsmDiffsSummary("linux", "x64", jit_options=JitOptions(["JitStdOutFile=x"], [], ["JitNoCSE=1"]),
                              collections=[CollectionReport("a.mch", CollectionAggregates(agg))])
    text = render_long(summary, RenderOptions(additions=False))
    assert ('<span style="color:#d35400">MISSED</span> contexts: <span style="color:#d35400">5 (0.50%)</span>\n\n'
            "Base JIT options: JitStdOutFile=x\n\nDiff JIT options: JitStdOutFile=x;JitNoCSE=1\n\n") in text
    only_diff = Aggregate(base_successes=1000, diff_successes=998, diff_misses=2, diffed_contexts=998)
    summary.collections = [CollectionReport("a.mch", CollectionAggregates(only_diff))]
    assert ('contexts: base: <span style="color:green">0 (0.00%)</span>, diff: <span style="color:#d35400">2 (0.20%)'
            '</span>\n\n') in render_long(summary)


# ---------------------------------------------------------------- no diffs, failures

def no_diff_summary() -> AsmDiffsSummary:
    agg = Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, base_code_bytes=50, diff_code_bytes=50)
    return AsmDiffsSummary("linux", "x64", collections=[CollectionReport("a.mch", CollectionAggregates(agg)),
                                                        CollectionReport("b.mch", CollectionAggregates())])


def test_no_diffs_long_and_short():
    summary = no_diff_summary()
    long = render_long(summary, RenderOptions(additions=False))
    assert long.startswith("Diffs are based on <span style=\"color:#1460aa\">10</span> contexts")
    assert "\n\nNo diffs found.\n\n<details>\n<summary>Details</summary>" in long
    assert "Size improvements" not in long and "#### Context information" in long
    assert "|a.mch|10|10|0|0 (0.00%)|0 (0.00%)|\n|b.mch|0|0|0|0 (N/A)|0 (N/A)|\n||10|10|0|0 (0.00%)|0 (0.00%)|" in long
    assert render_short(summary, RenderOptions(additions=False)) == ""
    assert render_short(summary) == ("linux x64: no diffs in 10 contexts; no failures\n\n"
                                     "No diffs found in 2 collections (10 contexts diffed).\n")


def failing_summary() -> AsmDiffsSummary:
    summary = no_diff_summary()
    summary.collections.append(CollectionReport(
        "c.mch", CollectionAggregates(Aggregate(base_successes=8, base_failures=2, diff_successes=8, diff_failures=2,
                                                diffed_contexts=8)),
        status=ReplayStatus(failed=True, reason="Compilation failures", exit_code=1),
        asserts=[AssertGroup("!\"Jump into middle of try region\" (fgdiagnostic.cpp:2810)", 2,
                             [AssertInstance(242532, 35), AssertInstance(7, 90)]),
                 AssertGroup("x | y < 3 (lower.cpp:12)", 1, [AssertInstance(9, 4)])],
        repro_commands=["superpmi -c 242532 libclrjit.so c.mch"]))
    summary.collections.append(CollectionReport(
        "d.mch", status=ReplayStatus(no_data=True, reason="details CSV not found", missing_contexts=3)))
    return summary


def test_failures_box_comes_first_and_is_not_collapsed():
    summary = failing_summary()
    for text in (render_long(summary), render_short(summary)):
        verdict, box = text.split("\n\n", 1)
        assert verdict == ('linux x64: no diffs in 18 contexts; <span style="color:red">replay problems in 2 of 4 '
                           'collections</span>')
        box = box[:box.index("Diffs are based on") if "Diffs are based on" in box else box.index("No diffs found")]
        assert box.startswith('**<span style="color:red">Replay problems</span>** in 2 of 4 collections: '
                              "1 failed, JIT asserts in 3 contexts, no data for 1 collection, missing data in 1 collection.")
        assert "<details>" not in box
        assert ('|c.mch|<span style="color:red">failed</span>: Compilation failures (exit code 1)|3|3|0|' in box)
        assert '|d.mch|<span style="color:#d35400">no data</span>: details CSV not found|0|0|3|' in box
        assert ('|!&quot;Jump into middle of try region&quot; (fgdiagnostic.cpp:2810)|2|2|c.mch|242,532 (IL size 35)|'
                '<code>superpmi -c 242532 libclrjit.so c.mch</code>|') in box
        assert "|x \\| y &lt; 3 (lower.cpp:12)|1|1|c.mch|9 (IL size 4)||" in box
        assert "```\n# c.mch\nsuperpmi -c 242532 libclrjit.so c.mch\n```" in box
    assert render_short(summary).endswith("No diffs found in 4 collections (18 contexts diffed).\n")


# ---------------------------------------------------------------- JSON

def test_json_round_trip_keeps_everything(summary_02):
    summary = copy.deepcopy(summary_02)
    summary.collections.extend(failing_summary().collections)
    summary.jit_options = JitOptions(["A=1"], ["B=2"], ["C=3"])
    summary.baseline, summary.analyzer = "abc (2 tried)", "built-in"
    summary.repro_command = "python superpmi.py asmdiffs"
    text = summary.to_json()
    again = AsmDiffsSummary.from_json(text)
    assert again == summary
    assert render_long(again) == render_long(summary)
    assert summaries.as_summary(summary.to_document()) == summary


def test_json_errors_are_one_line_suite_errors():
    with pytest.raises(SuiteError, match="not a JSON summary"):
        AsmDiffsSummary.from_json("{", "x.json")
    with pytest.raises(SuiteError, match="not an asmdiffs JSON summary"):
        AsmDiffsSummary.from_json('{"format": "tpdiff"}', "x.json")
    with pytest.raises(SuiteError, match="version 99 is not supported"):
        AsmDiffsSummary.from_json('{"format": "superpmi-asmdiffs-summary", "version": 99}', "x.json")
    with pytest.raises(SuiteError, match="malformed"):
        AsmDiffsSummary.from_json('{"format": "superpmi-asmdiffs-summary", "version": 1, "summary": {}}', "x.json")


# ---------------------------------------------------------------- merging

def collection(name: str, delta: int, perf_delta: float = 0.0, examples: int = 0, lines: int = 10,
               base: int = 100_000) -> CollectionReport:
    diffs = 10 if delta or perf_delta else 0
    fullopts = Aggregate(base_successes=1000, diff_successes=1000, diffed_contexts=1000, contexts_with_diffs=diffs,
                         base_code_bytes=base, diff_code_bytes=base + delta, base_perfscore=50_000.0,
                         diff_perfscore=50_000.0 + perf_delta,
                         perfscore_log_sum=10 * math.log((50_000.0 + perf_delta) / 50_000.0))
    stats = DiffListStats(contexts_with_diffs=diffs, size_improvements=diffs if delta < 0 else 0,
                          size_regressions=diffs if delta > 0 else 0, bytes_improved=max(-delta, 0),
                          bytes_regressed=max(delta, 0))
    listing = [f"-            mov      rax, qword ptr [rbp-0x{i:04X}]      ; {name}" for i in range(lines)]
    text = example_diff_text(git_output(["@@ -1,2 +1,2 @@"] + listing), 1)
    return CollectionReport(name, CollectionAggregates(Aggregate(), fullopts, stats),
                            [ExampleDiff(i + 1, IMPROVEMENT, f"M{i}()", 100, 90, diff_text=text,
                                         repro_command=f"superpmi -c {i + 1} j {name}") for i in range(examples)],
                            jit_analyze_markdown="jit-analyze says hi")


def platform(os_name: str, arch: str, collections: List[CollectionReport]) -> AsmDiffsSummary:
    return AsmDiffsSummary(os_name, arch, repro_command=f"python superpmi.py asmdiffs -target_os {os_name} "
                                                         f"-target_arch {arch}", collections=collections)


def test_combine_partitions_sorts_collections_and_rejects_duplicates():
    one = platform("linux", "x64", [collection("b.mch", -5)])
    two = platform("linux", "x64", [collection("a.mch", 3), collection("c.mch", 0)])
    two.baseline = "abc"
    combined = combine_partitions([one, two])
    assert [c.name for c in combined.collections] == ["a.mch", "b.mch", "c.mch"]
    assert combined.baseline == "abc"
    with pytest.raises(SuiteError, match="a.mch"):
        combine_partitions([two, platform("linux", "x64", [collection("a.mch", 1)])])
    with pytest.raises(SuiteError, match="different targets"):
        combine_partitions([one, platform("linux", "arm64", [])])


def test_merged_rendering_order():
    windows = platform("windows", "x64", [collection("w1.mch", 900), collection("w2.mch", -10, perf_delta=-5.0)])
    linux_arm = platform("linux", "arm64", [collection("la.mch", 0)])
    linux = platform("linux", "x64", [collection("l1.mch", -1000), collection("l2.mch", -10, perf_delta=20.0)])
    linux.collections[0].status = ReplayStatus(failed=True, reason="JIT failed to initialize", exit_code=-2)
    merged = summaries.merge_summaries([windows.to_json(), linux_arm.to_document(), linux])
    assert [s.platform for s in merged.platforms] == ["linux arm64", "linux x64", "windows x64"]
    text = render_overall(merged, artifact="Asmdiffs_summary.zip", title="ASM diffs generated on windows x64")
    assert text.startswith("# ASM diffs generated on windows x64\n\n"
                           "linux arm64: no diffs in 1,000 contexts; no failures\n\n"
                           "linux x64: 20 of 2,000 contexts with diffs, ")  # one verdict line per platform first
    assert ('\n\nwindows x64: 20 of 2,000 contexts with diffs, <span style="color:red">+890</span> bytes '
            '(<span style="color:red">+0.45%</span>), PerfScore <span style="color:green">-0.01%</span>; no failures\n\n'
            '**<span style="color:red">Replay problems</span>** in 1 of 5 collections: 1 failed.') in text
    assert 'linux x64: 20 of 2,000 contexts with diffs, <span style="color:green">-1,010</span> bytes' in text
    assert '; <span style="color:red">replay problems in 1 of 2 collections</span>\n\nwindows x64' in text
    assert "|linux x64|l1.mch|" in text[:text.index("**Impact by collection**")]
    impact = text[text.index("**Impact by collection**"):text.index("## linux arm64")]
    order = [re.match(r"\|([^|]+)\|([^|]+)\|", line).groups() for line in impact.splitlines()
             if line.startswith("|") and not line.startswith(("|Platform", "|---"))]
    assert order == [("linux x64", "l1.mch"), ("windows x64", "w1.mch"), ("linux x64", "l2.mch"),
                     ("windows x64", "w2.mch"), ("linux arm64", "la.mch")]
    positions = [text.index(f"## {name}\n") for name in ("linux arm64", "linux x64", "windows x64")]
    assert positions == sorted(positions)
    assert "## linux arm64\n\nNo diffs (1 collection, 1,000 contexts diffed).\n" in text
    assert "```\npython superpmi.py asmdiffs -target_os windows -target_arch x64\n```" in text
    assert "<summary>windows x64 summary</summary>" in text
    assert "Truncated" not in text


def test_merged_rendering_without_any_diffs_says_so():
    merged = summaries.merge_summaries([platform("linux", "x64", [collection("a.mch", 0)]),
                                     platform("osx", "arm64", [collection("b.mch", 0)])])
    text = render_overall(merged)
    assert text.startswith("linux x64: no diffs in 1,000 contexts; no failures\n\n"
                           "osx arm64: no diffs in 1,000 contexts; no failures\n\n"
                           "No diffs found on any platform (2 platforms, 2 collections).\n\n")
    assert "## linux x64\n\nNo diffs" in text and "## osx arm64\n\nNo diffs" in text
    assert "Impact by collection" not in text


def test_single_platform_merge_renders_like_a_single_run(summary_02):
    merged = summaries.merge_summaries([summary_02.to_json()])
    assert summaries.render_long_summary(merged) == render_long(summary_02)
    assert summaries.render_short_summary(merged) == render_short(summary_02)


# ---------------------------------------------------------------- size budgets

def huge_merged():  # type: ignore[no-untyped-def]
    platforms = []
    for p, (os_name, arch) in enumerate([("linux", "x64"), ("linux", "arm64"), ("windows", "x64"),
                                         ("windows", "arm64"), ("osx", "arm64")]):
        platforms.append(platform(os_name, arch, [collection(f"c{i}.{os_name}.{arch}.mch", -(p * 10 + i + 1) * 100,
                                                             examples=6, lines=300) for i in range(10)]))
    platforms[0].collections[0].status = ReplayStatus(failed=True, reason="Compilation failures", exit_code=1)
    platforms[0].collections[0].asserts = [AssertGroup("false (x.cpp:1)", 5, [AssertInstance(3, 20)])]
    return summaries.merge_summaries(platforms)


def test_budgets_hold_for_a_huge_diff_set():
    merged = huge_merged()
    unbounded = render_overall(merged, budget=10**9)
    assert measure_bytes(unbounded) > 4 * 1024 * 1024
    text = render_overall(merged, artifact="Asmdiffs_x64.zip")
    assert measure_bytes(text) <= 1024 * 1024
    assert "**Truncated:** the example diffs of" in text and "see the artifact `Asmdiffs_x64.zip`" in text
    verdicts = text[:text.index("**")]
    assert verdicts.count("\n\n") == len(merged.platforms) and "contexts with diffs" in verdicts
    assert text[len(verdicts):].startswith('**<span style="color:red">Replay problems</span>**')
    assert text.count("|c0.linux.x64.mch|") >= 2  # failures box and impact table
    impact = text[text.index("**Impact by collection**"):text.index("## ")]
    assert impact.count("\n|") == 2 + 50
    assert "<summary>Example diffs</summary>" in text  # not every example had to go
    short = render_overall(merged, short=True, artifact="Asmdiffs_x64.zip")
    assert len(short) <= 65_536 and "|c9.osx.arm64.mch|" in short


def test_a_single_long_summary_drops_examples_first():
    summary = platform("linux", "x64", [collection(f"c{i}.mch", -100 * (i + 1), examples=6, lines=300)
                                        for i in range(40)])
    assert measure_bytes(render_long(summary)) > 3 * 1024 * 1024
    text = render_long_within(summary, artifact="diffs.zip")
    assert measure_bytes(text) <= 1024 * 1024
    assert "<summary>Details</summary>" in text and "**Truncated:** the example diffs of" in text
    assert "Truncated" not in render_short_within(summary)


def test_the_last_resort_is_a_hard_cut_that_still_fits():
    text = render_overall(huge_merged(), budget=3000, artifact="a.zip")
    assert measure_bytes(text) <= 3000
    assert text.rstrip().endswith("see the artifact `a.zip` for the full summary.")


def test_identical_asserts_are_one_row_across_collections_and_platforms():
    from spmi.reports import asm_markdown
    from spmi.reports.asm_model import AssertGroup, AssertInstance, CollectionReport, ReplayStatus
    key = "!\"bad\" (codegen.cpp:42)"

    def report(name, count, context, other=False):
        groups = [AssertGroup(key, count, [AssertInstance(context, 20)])]
        if other:
            groups.append(AssertGroup("x (lower.cpp:7)", 1, [AssertInstance(2, 5)]))
        return CollectionReport(name, status=ReplayStatus(failed=True, reason="asserts"), asserts=groups,
                                repro_commands=[f"python superpmi.py asmdiffs -filter {name} -c {context} -x"])

    entries = [("linux x64", report("a.mch", 5, 11)), ("linux x64", report("b.mch", 2, 12, other=True)),
               ("windows x64", report("a.mch", 4, 13))]
    text = asm_markdown.failures_box(entries, show_platform=True)
    rows = [line for line in text.splitlines() if line.startswith("|") and "codegen.cpp" in line]
    assert len(rows) == 1
    cells = rows[0].split("|")[1:-1]
    assert cells[1:5] == ["11", "11", "linux x64, windows x64", "a.mch, b.mch"]
    assert cells[5] == "11 (IL size 20)" and "-c 11 -x" in cells[6]
    assert sum(1 for line in text.splitlines() if "lower.cpp:7" in line) == 1
    # a single summary has no platform column
    single = asm_markdown.failures_box([("", report("a.mch", 5, 11))])
    assert "|Assert|Contexts|Hits (base / diff)|Collections|Example context|Repro|" in single


def test_examples_always_include_the_largest_changes_and_prefer_code_diffs():
    rows = [csv_row(c, base=100, diff=d) for c, d in ((1, 99), (2, 100), (3, 100), (4, 300), (5, 10), (6, 101))]
    pick = asm_analysis.pick_contexts(table_of(rows))
    assert pick.largest_improvement.context == 5 and pick.largest_regression.context == 4
    assert {4, 5} <= set(pick.contexts)
    header_only = "@@ -1 +1 @@\n-; Lcl frame size = 8\n+; Lcl frame size = 16\n"
    code = "@@ -5 +5 @@\n-       mov      rax, rcx\n+       lea      rax, [rcx+8]\n"
    assert not asm_analysis.touches_code(header_only) and asm_analysis.touches_code(code)
    table = table_of(rows)
    row = {r.context: r for r in table.rows}
    candidates = [(row[2], False), (row[3], True), (row[4], True), (row[6], True)]
    chosen = asm_analysis.choose_examples(candidates, 3, row[4])
    assert [r.context for r in chosen] == [4, 3, 6]  # the largest first, then diffs touching code
    assert [r.context for r in asm_analysis.choose_examples(candidates[:2], 3)] == [3, 2]


def test_example_labels():
    from spmi.reports.asm_model import ExampleDiff
    assert ExampleDiff(1, IMPROVEMENT, "m", 10, 8).label == "improvement"
    assert ExampleDiff(1, IMPROVEMENT, "m", 10, 12).label == "regression"
    assert ExampleDiff(1, REGRESSION, "m", 10, 10).label == "same size"
    assert ExampleDiff(1, REGRESSION, "m", 10, 10, touches_code=False).label == "text-only"


def test_other_metrics_table_lists_every_changed_metric_column():
    from spmi.reports import asm_markdown
    from spmi.reports.asm_model import CollectionReport
    a = CollectionReport("a.mch", metric_totals={"ActualCodeBytes": [10, 12], "GCInfoBytes": [100, 90],
                                                 "EHClauseCount": [3, 3], "PerfScore": [1.5, 2.5]})
    b = CollectionReport("b.mch", metric_totals={"GCInfoBytes": [50, 50], "EHClauseCount": [4, 5],
                                                 "ReadOnlyDataBytes": [0, 8]})
    text = asm_markdown.other_metrics_section([a, b])
    assert "<summary>Other metrics (3 metrics changed)</summary>" in text
    assert '|GCInfoBytes|a.mch|100|90|<span style="color:green">-10.00%</span>|' in text
    assert "|GCInfoBytes|b.mch|50|50|0.00%|" in text
    assert "|EHClauseCount|b.mch|4|5|+25.00%|" in text  # a neutral counter: no colour (colour is direction)
    higher = asm_markdown.other_metrics_section([CollectionReport("h.mch", metric_totals={
        "RedundantBranchesEliminated": [10, 12], "JumpThreadingsPerformed": [10, 9]})])
    assert '|RedundantBranchesEliminated|h.mch|10|12|<span style="color:green">+20.00%</span>|' in higher
    assert '|JumpThreadingsPerformed|h.mch|10|9|<span style="color:red">-10.00%</span>|' in higher
    assert "|ReadOnlyDataBytes|b.mch|0|8|+∞|" in text
    assert "ActualCodeBytes" not in text and "PerfScore" not in text
    assert asm_markdown.other_metrics_section([CollectionReport("c.mch")]) == ""


def test_metrics_that_changed_nowhere_are_named_on_one_line():
    from spmi.reports import asm_markdown
    from spmi.reports.asm_model import CollectionReport
    a = CollectionReport("a.mch", metric_totals={"ActualCodeBytes": [10, 12], "GCInfoBytes": [100, 90],
                                                 "EHClauseCount": [3, 3], "LoopsCloned": [2, 2]})
    b = CollectionReport("b.mch", metric_totals={"GCInfoBytes": [50, 50], "EHClauseCount": [4, 4],
                                                 "PerfScore": [1.0, 1.0]})
    text = asm_markdown.other_metrics_section([a, b])
    assert text.endswith("</div></details>\nMetrics with no diffs: EHClauseCount, LoopsCloned.\n\n")
    assert "<summary>Other metrics (1 metric changed)</summary>" in text and "|EHClauseCount|" not in text
    # nothing changed: only the line (code size and PerfScore have tables of their own)
    quiet = asm_markdown.other_metrics_section([b])
    assert quiet == "Metrics with no diffs: GCInfoBytes, EHClauseCount.\n\n"


def test_assert_hits_are_split_by_jit_from_the_details_results():
    # context 1 asserted in both JITs (two lines), 2 only in the base, 3 only in the diff
    hits = asm_analysis.attribute_assert_hits([1, 1, 2, 3], {1: (True, True), 2: (True, False), 3: (False, True)})
    assert hits == asm_analysis.AssertHits(contexts=3, hits=4, base=2, diff=2)
    # one line for a context both JITs failed: which JIT asserted is unknown, so no split
    assert asm_analysis.attribute_assert_hits([1, 1, 4], {4: (True, True)}) == asm_analysis.AssertHits(2, 3)
    assert asm_analysis.attribute_assert_hits([5], {}) == asm_analysis.AssertHits(1, 1)


def test_an_assert_in_six_contexts_by_both_jits_reads_as_six_contexts_and_twelve_hits():
    from spmi.reports import asm_markdown
    group = AssertGroup("x (lower.cpp:7)", 12, [AssertInstance(c, 10) for c in range(1, 7)],
                        contexts=6, base_hits=6, diff_hits=6)
    report = CollectionReport("a.mch", status=ReplayStatus(failed=True, reason="asserts"), asserts=[group],
                              asserting_contexts=6)
    box = asm_markdown.failures_box([("", report)])
    assert "JIT asserts in 6 contexts (12 hits)." in box.splitlines()[0]
    assert "|Collection|Result|Asserting contexts|Assert hits|Missing contexts|" in box
    assert '|a.mch|<span style="color:red">failed</span>: asserts|6|12|0|' in box
    assert "|x (lower.cpp:7)|6|12 (6 / 6)|a.mch|1 (IL size 10)||" in box
    # a second collection whose hits cannot be split: the total stays, the split goes
    other = CollectionReport("b.mch", asserts=[AssertGroup("x (lower.cpp:7)", 1, [AssertInstance(9, 3)], contexts=1)])
    merged = asm_markdown.failures_box([("", report), ("", other)])
    assert "|x (lower.cpp:7)|7|13|a.mch, b.mch|" in merged
