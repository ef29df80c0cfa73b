"""Untrusted text never becomes a pipeline command or live HTML (docs/contracts.md §12.20)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.base import cioutput, untrusted
from spmi.pipeline import common as pipeline
from spmi.reports.asm_model import (
    Aggregate,
    AsmDiffsSummary,
    AssertGroup,
    AssertInstance,
    CollectionAggregates,
    CollectionReport,
    DiffListStats,
    ExampleDiff,
    ReplayStatus,
)

REPO = Path(__file__).resolve().parent.parent
INJECT = "##vso[task.setvariable variable=X]yes"
SCRIPT = "<script>alert(1)</script>"


def console_lines(text: str) -> List[str]:
    """Lines as the AzDO agent splits them: on LF and on a bare CR."""
    return re.split(r"\r\n|\r|\n", text)


def assert_no_foreign_commands(text: str) -> None:
    """Only the suite's own uploadsummary/logissue lines carry `##vso[`, once, at the start;
    no line is a GitHub workflow command."""
    for line in console_lines(text):
        if line.startswith(("##vso[task.uploadsummary]", "##vso[task.logissue ")):
            assert line.count("##vso[") == 1 and "##[" not in line, line
            continue
        assert "##vso[" not in line and "##[" not in line, line
        assert not re.match(r"^\s*::", line), line


def assert_no_live_html(text: str) -> None:
    assert "<script" not in text.lower()
    assert "<img" not in text.lower()


# ---------------------------------------------------------------- pure rules

@pytest.mark.parametrize("text", [
    INJECT, "x " + INJECT, "a\r" + INJECT, "##[error]boom", "::set-output name=a::b", "  ::warning::w",
    "ok\n::error::e", "##VSO[task.complete result=Failed]",
])
def test_neutralize_commands_breaks_every_prefix(text):
    assert_no_foreign_commands(untrusted.neutralize_commands(text))


def test_neutralize_keeps_ordinary_text():
    assert untrusted.neutralize_commands("Loaded 10 contexts: a::b ## not [a command]") == \
        "Loaded 10 contexts: a::b ## not [a command]"


def test_inline_escape_is_one_line_and_inert():
    text = untrusted.escape_md_inline(f"a|b\n# {SCRIPT} `x` [l](javascript:x) *e* {INJECT}", line_start=True)
    assert "\n" not in text and "\r" not in text
    assert "<" not in text and "\\|" in text and "\\`x\\`" in text and "\\[l\\]" in text and "\\*e\\*" in text
    assert_no_foreign_commands(text)
    assert untrusted.escape_md_inline("# title", line_start=True).startswith("\\#")
    assert untrusted.escape_md_inline("libraries_tests.run.linux.x64.checked.mch") == \
        "libraries_tests.run.linux.x64.checked.mch"


def test_sanitize_markdown_keeps_only_the_suites_tags():
    source = ('<details>\n<summary>t</summary>\n<div style="margin-left:1em">\n\n'
              f'<span style="color:red">-1</span> {SCRIPT} <img src=x onerror=alert(1)>'
              ' <span style="background:url(javascript:x)">u</span> `List<T>`\n\n</div></details>\n')
    text = untrusted.sanitize_markdown(source)
    assert text.startswith('<details>\n<summary>t</summary>\n<div style="margin-left:1em">\n\n'
                           '<span style="color:red">-1</span> &lt;script>')
    assert "`List<T>`" in text  # code span: literal text, left alone
    assert_no_live_html(text.replace("`List<T>`", ""))
    assert '&lt;span style="background:url' in text


def test_sanitize_markdown_fence_breakout_is_escaped():
    # A fence right after an HTML line is part of the HTML block: not code, so escaped.
    text = untrusted.sanitize_markdown(f"<details>\n```\n{SCRIPT}\n```\n")
    assert_no_live_html(text)
    # Code fences after a blank line keep their text, a closing fence ends them, unclosed ones are closed.
    text = untrusted.sanitize_markdown(f"\n```\n<Main>b__0\n```\n{SCRIPT}\n\n````\n```\n<x>")
    assert "\n<Main>b__0\n" in text and "&lt;script>" in text and text.endswith("<x>\n````")


def test_code_block_cannot_be_closed_from_inside():
    block = untrusted.code_block(["a", "```", SCRIPT + "\n" + INJECT])
    fence = block.split("\n", 1)[0]
    assert len(fence) == 4 and block.endswith("\n" + fence) and block.count(fence) == 2
    assert_no_foreign_commands(block)


def test_own_logging_commands_carry_no_second_command():
    line = cioutput.azdo_log_issue("error", f"assert in x.mch: {INJECT}\r\n::error::e")
    assert_no_foreign_commands(line)
    assert cioutput.azdo_group(f"step {INJECT}").count("##") == 2  # `##[group]` + the broken `##vso［`


# ---------------------------------------------------------------- the summarize script, per source

def aggregate(delta: int) -> Aggregate:
    return Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, contexts_with_diffs=2,
                     base_code_bytes=1000, diff_code_bytes=1000 + delta, base_perfscore=100.0,
                     diff_perfscore=100.0 + delta, perfscore_log_sum=0.1)


def hostile_summary(source: str) -> AsmDiffsSummary:
    """An asmdiffs JSON summary whose `source` field carries the injection."""
    name = f"{INJECT}{SCRIPT}.mch" if source == "collection" else "libraries.pmi.linux.x64.checked.mch"
    title = f"Foo:Bar()\n{INJECT}\r::error::x {SCRIPT}" if source == "method" else "Foo:Bar() (Tier0)"
    analyzer = "jit-analyze output\n"
    if source == "analyzer":
        analyzer = f"```\nok\n```\n{SCRIPT}\n{INJECT}\n<details>\n```\n<img src=x onerror=alert(1)>\n```\n"
    example = ExampleDiff(context=7, kind="regression", title=title, base_bytes=10, diff_bytes=12,
                          diff_text=f"```diff\n-a\n+b {SCRIPT}\n```\n{SCRIPT}\n```diff\n+{INJECT}\n```",
                          repro_command=f"superpmi -c 7 jit.so {name}\n```\n{SCRIPT}")
    asserts = [AssertGroup(f"x != nullptr {INJECT} {SCRIPT}", 1, [AssertInstance(7, 10)])]
    collection = CollectionReport(name=name, aggregates=CollectionAggregates(aggregate(2), aggregate(3),
                                                                             DiffListStats(contexts_with_diffs=4)),
                                  examples=[example], jit_analyze_markdown=analyzer,
                                  status=ReplayStatus(failed=True, reason=f"Compilation failures {INJECT}", exit_code=1),
                                  asserts=asserts, repro_commands=[f"superpmi {name}\n{INJECT}"])
    return AsmDiffsSummary(target_os="linux", target_arch="x64", repro_command=f"python superpmi.py asmdiffs {INJECT}",
                           collections=[collection])


def write_results(directory: Path, source: str) -> None:
    directory.mkdir(parents=True)
    if source == "platform_md":
        text = (f"# {INJECT}\n{SCRIPT}\r{INJECT}\n::set-env name=X::y\n|a|{SCRIPT}|\n"
                f"<details>\n```\n{SCRIPT}\n```\n")
        (directory / "superpmi_tpdiff_summary_linux_x64.md").write_text(text)
        (directory / "superpmi_asmdiffs_summary_linux_x64.md").write_text(text)
    else:
        summary = hostile_summary(source)
        (directory / pipeline.summary_json_name("asmdiffs", "linux", "x64")).write_text(summary.to_json())
    status = {"ok": False, "steps": [{"name": "asmdiffs", "exit_code": 1, "ok": False,
                                      "problems": [f"Error: {INJECT}\r::error::y {SCRIPT}"]}],
              "repro": {"asmdiffs": f"python superpmi.py asmdiffs\n```\n{SCRIPT}"}}
    (directory / pipeline.status_name("linux", "x64")).write_text(json.dumps(status))


def run_summarize(directory: Path, diff_type: str, env_extra: Dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    env.update(env_extra)
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir", str(directory),
            "-arch", "x64", "-platform", "windows", "-type", diff_type]
    return subprocess.run(argv, capture_output=True, timeout=120, env=env)


@pytest.mark.parametrize("source", ["collection", "method", "analyzer", "platform_md"])
@pytest.mark.parametrize("ci", ["azdo", "github"])
def test_summarize_prints_no_foreign_command_and_writes_no_live_html(tmp_path, source, ci):
    results = tmp_path / "results"
    write_results(results, source)
    step_summary = tmp_path / "step_summary.md"
    env = {"TF_BUILD": "True"} if ci == "azdo" else {"GITHUB_STEP_SUMMARY": str(step_summary)}
    diff_type = "tpdiff" if source == "platform_md" else "asmdiffs"
    for kind in ([diff_type, "asmdiffs"] if source == "platform_md" else [diff_type]):
        proc = run_summarize(results, kind, env)
        stdout, stderr = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
        assert proc.returncode == 0, stderr
        assert_no_foreign_commands(stdout)
        assert_no_foreign_commands(stderr)
        if ci == "azdo":
            assert "##vso[task.uploadsummary]" in stdout and "##vso[task.logissue type=error]" in stdout
        overall = sorted(results.glob(f"*overall_{kind}_summary_windows_x64.md"))
        assert overall, list(results.iterdir())
        text = overall[0].read_text(encoding="utf-8")
        assert_no_live_html(text)
        assert "task.setvariable variable=X" in text  # shown, not dropped
    if ci == "github":
        assert_no_live_html(step_summary.read_text(encoding="utf-8"))
        assert_no_foreign_commands(step_summary.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the console log

def test_collection_name_with_a_command_is_neutralised_in_the_console_log(sample_toolchain, tmp_path):
    from e2e_support import collection
    hostile = tmp_path / "in" / "x##vso[task.setvariable variable=X]yes ##[error]e.mch"
    hostile.parent.mkdir()
    shutil.copyfile(collection(sample_toolchain), hostile)
    argv = [sys.executable, str(REPO / "superpmi.py"), "replay", "-core_root", str(sample_toolchain / "core_root"),
            "-spmi_location", str(tmp_path / "spmi"), "-arch", "x64", "-target_os", "linux",
            "-mch_files", str(hostile), "-log_level", "debug"]
    env = dict(os.environ, TF_BUILD="True", SPMI_SAMPLE_START_MS="0")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vso［task.setvariable" in proc.stdout  # the name is shown, its prefix broken
    assert_no_foreign_commands(proc.stdout)
    assert_no_foreign_commands(proc.stderr)
    assert_no_foreign_commands((tmp_path / "spmi" / "superpmi.log").read_text(encoding="utf-8"))
