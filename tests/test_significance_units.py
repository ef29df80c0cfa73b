"""The significance rules and the A/A noise floor (pure functions: reports/significance and the
summaries that use it)."""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spmi.base import config
from spmi.reports import asm_markdown
from spmi.reports import metric_markdown as report
from spmi.reports import metric_model as model
from spmi.reports import significance as signal
from spmi.reports.asm_model import CollectionReport
from spmi.reports.significance import Significance, SpreadSums, Verdict, aa_spread_pct, judge

REPO = Path(__file__).resolve().parents[1]


def test_default_rules_per_metric() -> None:
    rules = Significance()
    assert rules.min_pct("instructions") == 0.005
    assert rules.min_pct("ActualCodeBytes") == 0 and rules.min_pct("GCInfoBytes") == 0
    assert rules.min_pct("BytesAllocated") == 1.0
    assert rules.min_pct("CseCount") == signal.OTHER_METRICS_RULE
    assert signal.direction("instructions") == signal.LOWER
    assert signal.direction("RedundantBranchesEliminated") == signal.HIGHER
    assert signal.direction("CseCount") == signal.NEUTRAL


def test_judge_applies_the_rule_then_the_noise_floor() -> None:
    assert judge(100, 100, 0.0) is Verdict.UNCHANGED
    assert judge(1000, 1001, 0.0) is Verdict.SIGNIFICANT                 # any change
    assert judge(1_000_000, 1_000_049, 0.005) is Verdict.BELOW_RULE      # +0.0049%
    assert judge(1_000_000, 1_000_050, 0.005) is Verdict.SIGNIFICANT     # reaches the minimum
    assert judge(1_000_000, 999_940, 0.005) is Verdict.SIGNIFICANT       # decreases count alike
    assert judge(0, 5, 1.0) is Verdict.SIGNIFICANT                       # from nothing: infinite
    # the noise floor is k × spread; the change must exceed it
    assert judge(1000, 1020, 1.0, spread=0.7, noise_k=3) is Verdict.WITHIN_NOISE   # 2.0% < 2.1%
    assert judge(1000, 1022, 1.0, spread=0.7, noise_k=3) is Verdict.SIGNIFICANT    # 2.2% > 2.1%
    assert judge(1000, 1005, 1.0, spread=0.0, noise_k=3) is Verdict.BELOW_RULE     # the rule still applies
    assert judge(1000, 1022, 1.0, spread=None, noise_k=3) is Verdict.SIGNIFICANT   # not measured: rule alone


def test_overrides_replace_one_metric_rule() -> None:
    rules = Significance({"BytesAllocated": 5.0, "instructions": 0.0})
    assert rules.judge("BytesAllocated", 100, 104) is Verdict.BELOW_RULE
    assert rules.judge("instructions", 10**9, 10**9 + 1) is Verdict.SIGNIFICANT
    assert rules.min_pct("PerfScore") == signal.RULES["PerfScore"]


def test_significance_flag_is_checked_while_parsing() -> None:
    assert config.significance_override("BytesAllocated=2.5") == ("BytesAllocated", 2.5)
    assert config.significance_override("instructions=0") == ("instructions", 0.0)
    for bad in ("BytesAllocated", "=1", "Bytes Allocated=1", "BytesAllocated=-1", "BytesAllocated=nan", "x=y",
                "instructions=1_0", "instructions=0_.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            config.significance_override(bad)
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'instructions=1_0': the percentage '1_0' is not a number$"):
        config.significance_override("instructions=1_0")


def _parse_significance(*argv: str) -> list:
    parser = config.ArgumentParser(prog="p", parents=[config.significance_options()])
    return parser.parse_args(list(argv)).significance


def test_a_metric_given_twice_is_refused(capsys) -> None:
    assert _parse_significance("-significance", "instructions=1", "-significance", "PerfScore=2") == \
        [("instructions", 1.0), ("PerfScore", 2.0)]
    for second in ("instructions=2", "instructions=1"):
        with pytest.raises(SystemExit) as exit_info:
            _parse_significance("-significance", "instructions=1", "-significance", second)
        assert exit_info.value.code == 2  # a usage error, as argparse's
        assert capsys.readouterr().err == "p: error: argument -significance: instructions is given twice; " \
                                          "give each metric once\n"


def test_a_known_metric_in_another_case_is_refused_before_the_run() -> None:
    signal.check_override_names([("instructions", 1.0), ("CseCount", 0.5), ("MyNewMetric", 1.0)])
    for name, known in (("Instructions", "instructions"), ("bytesallocated", "BytesAllocated"),
                        ("PERFSCORE", "PerfScore"), ("jumpThreadingsPerformed", "JumpThreadingsPerformed")):
        with pytest.raises(config.SuiteError) as info:
            signal.check_override_names([("instructions", 1.0), (name, 2.5)])
        assert str(info.value) == (f"-significance {name}=2.5: no metric is named '{name}' (names are "
                                   f"case-sensitive); did you mean '{known}'?")


def test_an_override_that_applies_to_nothing_is_named_with_the_run_s_metrics() -> None:
    metrics = ["ActualCodeBytes", "CseCount", "BytesAllocated"]
    assert signal.unmatched_overrides({"CseCount": 1.0, "instructions": 0.1, "PerfScore": 2}, metrics) == []
    assert signal.unmatched_overrides({"csecount": 1.0, "Nope": 0.5}, metrics) == [
        "-significance csecount=1 applied to nothing: no metric 'csecount' in this run; did you mean 'CseCount'? "
        "(its metrics: ActualCodeBytes, CseCount, BytesAllocated)",
        "-significance Nope=0.5 applied to nothing: no metric 'Nope' in this run "
        "(its metrics: ActualCodeBytes, CseCount, BytesAllocated)"]
    assert signal.unmatched_overrides({"Nope": 1}, []) == [
        "-significance Nope=1 applied to nothing: no metric 'Nope' in this run (its metrics: none)"]


def test_aa_spread_is_the_larger_of_the_total_change_and_the_pooled_per_context_noise() -> None:
    # four equal contexts, each changed by ±1%: the total does not move, the pooled sigma is 1%·√4/4 = 0.5%
    sums = SpreadSums(base=400.0, delta=0.0, base_squares=4 * 100.0 ** 2, relative_squares=4 * 0.01 ** 2, count=4)
    assert aa_spread_pct(sums) == pytest.approx(0.5)
    # a run-wide shift shows as the total's own change
    assert aa_spread_pct(SpreadSums(400.0, 8.0, 40000.0, 4 * 0.02 ** 2, 4)) == pytest.approx(2.0)
    assert aa_spread_pct(SpreadSums()) == 0.0
    assert math.isinf(aa_spread_pct(SpreadSums(0.0, 3.0)))


def _collection(name: str, base: int, diff: int, noise: float = -1.0, metric: str = "BytesAllocated"):
    totals = {metric: {"Overall": model.Totals(base, diff), "MinOpts": model.Totals(0, 0),
                       "FullOpts": model.Totals(base, diff)}}
    result = model.CollectionResult(name, [metric], {metric: "int"}, totals, {"Overall": 1, "MinOpts": 0,
                                                                               "FullOpts": 1},
                                    model.SideCounts(1), model.SideCounts(1))
    if noise >= 0:
        result.noise = {metric: {"Overall": noise, "MinOpts": 0.0, "FullOpts": noise}}
    return result


def test_memdiff_shows_the_floor_and_collapses_changes_within_noise() -> None:
    run = model.MetricDiffRun(kind="memdiff", focus="BytesAllocated", threshold=25.0, noise_k=3.0)
    run.collections = [_collection("big.mch", 1000, 1400, noise=0.004), _collection("quiet.mch", 1000, 1005, 0.5),
                       _collection("noisy.mch", 1000, 1030, noise=2.0)]
    text = report.render_memdiff(run, True, lambda m: "lower")
    assert "+40.00%</span> (noise floor ±0.012%)|" in text
    assert ("Significance: a change is flagged when it reaches its metric's minimum (BytesAllocated 1%) and "
            "exceeds its noise floor; other changes count as within noise. Noise floor: 3 × the larger of the A/A "
            "replay's change of the same total and its pooled per-context spread") in text
    within = text.split("<summary>Changes within noise (2)</summary>")[1].split("</details>")[0]
    # below the rule: the rule's minimum is shown, the floor only as what it is
    assert "|quiet.mch|BytesAllocated|Overall|+0.50%|below the rule (minimum 1%); within the noise floor ±1.50%|" \
        in within
    assert "|noisy.mch|BytesAllocated|Overall|+3.00%|within the noise floor (±6.00%)|" in within
    assert "|big.mch|" not in within


def test_a_change_above_the_floor_but_below_the_rule_says_which_rule_held_it_back() -> None:
    run = model.MetricDiffRun(kind="memdiff", focus="BytesAllocated", threshold=25.0, noise_k=3.0)
    run.collections = [_collection("held.mch", 10000, 10080, noise=0.17)]   # +0.80% against ±0.51%
    within = report.render_memdiff(run, True, lambda m: "lower").split("Changes within noise (1)")[1]
    assert "|held.mch|BytesAllocated|Overall|+0.80%|below the rule (minimum 1%); above the noise floor ±0.51%|" \
        in within
    assert "(±0.51%)" not in within


def test_no_real_change_prints_as_zero() -> None:
    assert signal.fmt_change(0.0) == "0.00%" and signal.fmt_change(-0.0) == "0.00%"
    assert signal.fmt_change(0.004) == "+0.0040%" and signal.fmt_change(-0.0049) == "-0.0049%"
    assert signal.fmt_change(0.005) == "+0.01%" and signal.fmt_change(2.0166) == "+2.02%"
    assert signal.fmt_change(1e-6) == "+<0.0001%" and signal.fmt_change(-3e-5) == "-<0.0001%"
    assert signal.fmt_change(0.4, 0) == "+0.40%" and signal.fmt_change(math.inf) == "+∞"
    assert report.fmt_pct(0.001) == '<span style="color:red">+0.0010%</span>'
    assert asm_markdown.fmt_percent(-0.0001) == '<span style="color:green">-0.0001%</span>'


def test_the_memory_gate_counts_significant_growth_only() -> None:
    run = model.MetricDiffRun(kind="memdiff", focus="BytesAllocated", threshold=25.0, noise_k=3.0)
    run.collections = [_collection("noisy.mch", 1000, 1300, noise=12.0), _collection("real.mch", 1000, 1300, 1.0)]
    assert [b.collection for b in report.gate_breaches(run, 25.0)] == ["real.mch", "real.mch"]
    run.noise_k = None
    assert len(report.gate_breaches(run, 25.0)) == 4


def test_tpdiff_rows_carry_their_floor() -> None:
    run = model.MetricDiffRun(kind="tpdiff", focus="instructions", noise_k=3.0)
    run.collections = [_collection("a.mch", 10**8, 10**8 + 210_000, noise=0.004 / 3, metric="instructions")]
    short = report.render_tpdiff(run, False)
    assert "|a.mch|<span style=\"color:red\">+0.21%</span> (noise floor ±0.004%)|" in short


def test_noise_fields_survive_the_json_summary_and_merging() -> None:
    run = model.MetricDiffRun(kind="memdiff", focus="BytesAllocated", significance={"BytesAllocated": 2.0},
                              noise_k=4.0)
    run.collections = [_collection("a.mch", 10, 20, noise=0.25)]
    back = model.run_from_json(model.run_to_json(run))
    assert back.significance == {"BytesAllocated": 2.0} and back.noise_k == 4.0
    assert back.collections[0].noise["BytesAllocated"]["Overall"] == 0.25
    merged = model.merge_runs([model.MetricDiffRun(kind="memdiff", focus="BytesAllocated"), back])
    assert merged.noise_k == 4.0 and merged.significance == {"BytesAllocated": 2.0}


def test_asmdiffs_other_metrics_table_applies_the_rules() -> None:
    a = CollectionReport("a.mch", metric_totals={"BytesAllocated": [100000, 100500], "GCInfoBytes": [100, 101]})
    text = asm_markdown.other_metrics_section([a])
    assert "<summary>Other metrics (1 metric changed)</summary>" in text
    assert "|GCInfoBytes|a.mch|100|101|" in text and "|BytesAllocated|" not in text
    assert "Within noise (1): BytesAllocated." in text and "Significance: a change is flagged" in text
    quiet = asm_markdown.other_metrics_section([a], Significance({"GCInfoBytes": 5.0}))
    assert "Other metrics (none changed significantly; 2 within noise)" in quiet
    loud = asm_markdown.other_metrics_section([a], Significance({"BytesAllocated": 0.1}))
    assert "|BytesAllocated|a.mch|100,000|100,500|" in loud


def test_the_flag_help_names_the_table_defaults() -> None:
    """`-significance -h` repeats the defaults (base cannot import reports): it must match the table."""
    action = next(a for a in config.significance_options()._actions if "-significance" in a.option_strings)
    for metric in ("instructions", "BytesAllocated", "PerfScore"):
        assert f"{metric} {signal.RULES[metric]:g}" in action.help
    assert f"other metrics {signal.OTHER_METRICS_RULE:g}" in action.help and "code bytes any change" in action.help


@pytest.mark.parametrize("script, argv, expected", [
    ("superpmi.py", ["tpdiff", "-significance", "instructions=1", "-significance", "instructions=2"],
     "superpmi.py tpdiff: error: argument -significance: instructions is given twice; give each metric once"),
    ("superpmi.py", ["memdiff", "-significance", "Instructions=1"],
     "superpmi.py: error: -significance Instructions=1: no metric is named 'Instructions' (names are "
     "case-sensitive); did you mean 'instructions'?"),
    ("superpmi.py", ["asmdiffs", "-significance", "perfscore=1"],
     "superpmi.py: error: -significance perfscore=1: no metric is named 'perfscore' (names are "
     "case-sensitive); did you mean 'PerfScore'?"),
    ("superpmi.py", ["metricdiff", "-significance", "CseCount=1_0"],
     "superpmi.py metricdiff: error: argument -significance: 'CseCount=1_0': the percentage '1_0' is not a number"),
    ("superpmi_asmdiffs_setup.py", ["-product_directory", "p", "-payload_directory", "q",
                                    "-significance", "gcinfobytes=1"],
     "superpmi_asmdiffs_setup.py: error: -significance gcinfobytes=1: no metric is named 'gcinfobytes' (names are "
     "case-sensitive); did you mean 'GCInfoBytes'?"),
])
def test_bad_overrides_are_one_line_before_anything_starts(tmp_path, script, argv, expected) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_ACTIONS")}
    proc = subprocess.run([sys.executable, str(REPO / script), *argv], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=env)
    usage_error = ": error: argument " in expected  # refused by argparse: exit 2; found after parsing: 1
    assert (proc.returncode, proc.stdout, proc.stderr) == (2 if usage_error else 1, "", expected + "\n")
    assert list(tmp_path.iterdir()) == []


def test_the_noise_check_line_names_each_collection_whose_aa_replay_failed() -> None:
    clean = _collection("clean.mch", 100, 120, noise=0.1)
    failing = _collection("_ab.mch", 100, 120, noise=0.1)
    failing.noise_failed, failing.noise_problem = 16, "Compilation failures"
    crashed_worker = _collection("w.mch", 100, 120, noise=0.1)
    crashed_worker.noise_problem = "Compilation failures"
    no_data = _collection("<x>.mch", 100, 120)
    no_data.noise_problem = "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault)"
    assert report.noise_check_line([clean]) == ""
    assert report.noise_check_line([clean, failing, crashed_worker, no_data]) == (
        "Noise check incomplete: \\_ab.mch: the A/A replay ended with Compilation failures; 16 contexts failed in it, "
        "so its noise floor comes from the contexts that compiled; w.mch: the A/A replay ended with Compilation "
        "failures; no failed context is in its details (a worker that crashed leaves its contexts out), so its noise "
        "floor comes from the contexts that compiled; &lt;x&gt;.mch: the A/A replay produced no data (Fatal error, "
        "SuperPMI has returned SIGSEGV (segmentation fault)), so it was judged by the rule alone.")
    run = model.MetricDiffRun(kind="memdiff", focus="BytesAllocated", noise_k=3.0, collections=[clean, failing])
    text = report.render(run, long=True, direction_of=lambda metric: "lower")
    assert "\n\nNoise check incomplete: \\_ab.mch: the A/A replay ended with Compilation failures; 16 contexts" in text
    back = model.run_from_json(json.loads(json.dumps(model.run_to_json(run))))
    assert [(c.noise_failed, c.noise_problem) for c in back.collections] == [(0, ""), (16, "Compilation failures")]
    for bad in (-1, 1.5, True, "3", 10 ** 13):
        data = model.run_to_json(run)
        data["collections"][1]["noise_failed"] = bad
        with pytest.raises(ValueError, match="collections.1..noise_failed: (a count of contexts must be a whole "
                                             "number|expected an integer)"):
            model.run_from_json(data)
