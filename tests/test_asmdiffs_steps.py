"""Pure building blocks of asmdiffs: jit-analyze/git argv, console lines, repro commands."""
from __future__ import annotations

from pathlib import Path

import pytest

from spmi.base.errors import SuiteError
from spmi.steps import asmdiffs_steps as steps
from spmi.tools.superpmi_tool import SuperpmiInvocation

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

ASM = Path("/spmi/asm.libraries.pmi")


def test_parse_metrics_accepts_repeats_commas_and_any_case():
    assert steps.parse_metrics(None) == []
    assert steps.parse_metrics(["perfscore,CodeSize", "PerfScore"]) == ["PerfScore", "CodeSize"]
    with pytest.raises(SuiteError, match="'Bytes' is not a jit-analyze metric"):
        steps.parse_metrics(["Bytes"])


def test_picking_metric():
    assert steps.picking_metric([]) == "ActualCodeBytes"
    assert steps.picking_metric(["PerfScore"]) == "PerfScore"
    assert steps.picking_metric(["CodeSize"]) is None


RELEASED_HELP = """jit-analyze:
  --override-total-base-metric <override-total-base-metric>  Override the total base metric (double).
  --override-total-diff-metric <override-total-diff-metric>  Override the total diff metric (double).
"""
PER_METRIC_HELP = """  --override-total-base-metric <metric>,<value>  Override the total base metric; repeatable.
  --override-total-diff-metric <metric>,<value>  Override the total diff metric; repeatable.
"""


def test_override_form_is_read_from_the_help_text():
    assert steps.override_form_from_help(RELEASED_HELP) is steps.OverrideForm.BARE
    assert steps.override_form_from_help(PER_METRIC_HELP) is steps.OverrideForm.PER_METRIC
    assert steps.override_form_from_help("Usage: jit-analyze --base --diff") is steps.OverrideForm.NONE
    from spmi.analyzer import cli
    built_in = cli.help_text()
    assert steps.override_form_from_help(built_in) is steps.OverrideForm.PER_METRIC


TOTALS = {"CodeSize": (1234, 1200), "PerfScore": (10.25, 3134.4100000000003)}


def test_per_metric_overrides_one_pair_per_requested_metric():
    plan = steps.plan_overrides(["CodeSize", "PerfScore"], TOTALS, steps.OverrideForm.PER_METRIC)
    assert list(plan.argv) == ["--override-total-base-metric", "CodeSize,1234",
                               "--override-total-diff-metric", "CodeSize,1200",
                               "--override-total-base-metric", "PerfScore,10.25",
                               "--override-total-diff-metric", "PerfScore,3134.4100000000003"]
    # without -metrics the analyzer reports CodeSize
    assert list(steps.plan_overrides([], TOTALS, steps.OverrideForm.PER_METRIC).argv)[1] == "CodeSize,1234"
    # a metric without CSV totals gets no pair
    plan = steps.plan_overrides(["SpillCount", "PerfScore"], TOTALS, steps.OverrideForm.PER_METRIC)
    assert [a for a in plan.argv if "," in a] == ["PerfScore,10.25", "PerfScore,3134.4100000000003"]


def test_bare_overrides_only_for_a_single_metric():
    plan = steps.plan_overrides([], TOTALS, steps.OverrideForm.BARE)
    assert list(plan.argv) == ["--override-total-base-metric", "1234", "--override-total-diff-metric", "1200"]
    plan = steps.plan_overrides(["PerfScore"], TOTALS, steps.OverrideForm.BARE)
    assert list(plan.argv)[1::2] == ["10.25", "3134.4100000000003"]
    plan = steps.plan_overrides(["CodeSize", "PerfScore"], TOTALS, steps.OverrideForm.BARE)
    assert plan.argv == () and "every one of CodeSize, PerfScore" in plan.description
    assert steps.plan_overrides([], TOTALS, steps.OverrideForm.NONE).argv == ()


def test_jit_analyze_argv_exact_flags():
    argv = steps.jit_analyze_argv("jit-analyze", ASM, [], ["--override-total-base-metric", "1234",
                                                          "--override-total-diff-metric", "1200"],
                                  subset_of_diffs=False)
    assert argv == ["jit-analyze", "--md", f"{ASM}/summary.md", "-r", "--base", f"{ASM}/base", "--diff",
                    f"{ASM}/diff", "--override-total-base-metric", "1234", "--override-total-diff-metric", "1200",
                    "--is-diffs-only"]
    argv = steps.jit_analyze_argv("ja", ASM, ["PerfScore"], [], True)
    assert argv[8:] == ["--metrics", "PerfScore", "--is-subset-of-diffs"]


def test_git_argvs():
    assert steps.git_diff_argv("git", ASM) == ["git", "diff", f"--output={ASM}/asm_diffs.diff", "--no-index", "--",
                                               f"{ASM}/base", f"{ASM}/diff"]
    assert steps.example_diff_argv("git", Path("/b/1.dasm"), Path("/d/1.dasm")) == [
        "git", "diff", "--diff-algorithm=histogram", "--no-index", "--", "/b/1.dasm", "/d/1.dasm"]


def test_totals_lines_match_the_contract_wording():
    totals = steps.ConsoleTotals(base_bytes=1000, diff_bytes=990, base_perfscore=200.0, diff_perfscore=201.5,
                                 geomean=0.99876, geomean_diffs=0.95, contexts_with_diffs=7,
                                 size_improvements=3, size_regressions=2, same_size=2)
    assert steps.totals_lines(totals) == [
        "Total bytes of base: 1000", "Total bytes of diff: 990", "Total bytes of delta: -10 (-1.00% of base)",
        "Total PerfScore of base: 200.00", "Total PerfScore of diff: 201.50",
        "Total PerfScore of delta: 1.50 (0.75% of base)",
        "Relative PerfScore Geomean: -0.1240%", "Relative PerfScore Geomean (Diffs): -5.0000%",
        "7 contexts with diffs (3 size improvements, 2 size regressions, 2 same size)"]


def test_replay_instructions_use_the_hosts_shell_syntax():
    env = {"DOTNET_JitDisasm": "*", "DOTNET_JitDisasmDiffable": "1"}
    unix = steps.replay_instruction_lines(env, Path("/cr/superpmi"), ["-target", "arm64"], Path("/cr/j.so"),
                                          Path("/c/x.mch"), "linux")
    assert unix == ["Differences found. To replay SuperPMI use:", "", "export DOTNET_JitDisasm=*",
                    "export DOTNET_JitDisasmDiffable=1", "/cr/superpmi -target arm64 -c ### /cr/j.so /c/x.mch", ""]
    win = steps.replay_instruction_lines(env, Path("C:/cr/superpmi.exe"), [], Path("C:/cr/clrjit.dll"),
                                         Path("C:/c/x.mch"), "windows")
    assert win[2] == "set DOTNET_JitDisasm=*"


def test_asmdiffs_command_line_reconstructs_the_run():
    inputs = steps.ReproInputs(arch="x64", target_os="linux", target_arch="arm64", diff_jit=Path("/cr/d.so"),
                               base_jit=Path("/b/b.so"), base_git_hash=None,
                               collections=[Path("/c/a.mch"), Path("/c/b.mch")], jit_options=["JitNoCSE=1"],
                               diff_jit_options=["X=1"], metrics=["PerfScore"], altjit=True)
    assert steps.asmdiffs_command_line(inputs, "linux") == (
        "python superpmi.py asmdiffs -arch x64 -target_os linux -target_arch arm64 -base_jit_path /b/b.so "
        "-diff_jit_path /cr/d.so -mch_files /c/a.mch /c/b.mch -jitoption JitNoCSE=1 -diff_jit_option X=1 "
        "-metrics PerfScore --altjit")
    hashed = steps.ReproInputs(arch="x64", target_os="linux", target_arch="x64", diff_jit=Path("/cr/d.so"),
                               base_jit=Path("/spmi/basejit/abc/b.so"), base_git_hash="abc123",
                               collections=[Path("/c/a.mch")])
    assert "-base_git_hash abc123 " in steps.asmdiffs_command_line(hashed, "linux")
    assert "-base_jit_path" not in steps.asmdiffs_command_line(hashed, "linux")


def test_example_superpmi_command_is_one_paste_ready_line():
    line = steps.example_superpmi_command(SuperpmiInvocation(Path("/cr/superpmi"), "x64", "x64"), Path("/cr/j.so"),
                                          Path("/c/x.mch"), 42, ["JitAlignLoops=0"], ["D=1"],
                                          {"DOTNET_JitDisasm": "*"}, "linux")
    assert line == ("/cr/superpmi -c 42 -jitoption force JitAlignLoops=0 -jitoption D=1 "
                    "-jitoption 'JitDisasm=*' /cr/j.so /c/x.mch")
