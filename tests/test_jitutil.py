"""Process running, safe writes and the AzDO/GitHub output helpers."""
from __future__ import annotations

import sys
import time

import pytest

from spmi.base import cioutput, errors, fsutil, logs, progress, runner


def test_run_captures_streams_separately_and_restores_negative_exit_codes():
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(-1)"
    result = runner.run([sys.executable, "-c", code])
    assert result.stdout.strip() == "out"
    assert result.stderr.strip() == "err"
    assert result.code == -1
    assert not result.outcome.crashed


def test_run_reports_a_crash_by_signal():
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    result = runner.run([sys.executable, "-c", code])
    assert result.outcome.crashed
    assert result.outcome.signal_number == 11


def test_run_kills_the_whole_tree_on_timeout(tmp_path):
    marker = tmp_path / "grandchild-alive"
    grandchild = f"import time, pathlib; time.sleep(1.5); pathlib.Path({str(marker)!r}).write_text('x')"
    code = ("import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(errors.ToolTimeout, match="did not finish within 0.5 s"):
        runner.run([sys.executable, "-c", code], timeout=0.5)
    assert time.monotonic() - started < 10
    time.sleep(2)
    assert not marker.exists(), "the grandchild survived the kill"


def test_run_missing_executable_is_a_suite_error(tmp_path):
    with pytest.raises(errors.SuiteError, match="cannot run"):
        runner.run([str(tmp_path / "nope")])


def test_unique_names(tmp_path):
    log = tmp_path / "superpmi.log"
    assert fsutil.unique_file_path(log) == log
    log.write_text("")
    assert fsutil.unique_file_path(log).name == "superpmi.1.log"
    asm = tmp_path / "asm.libraries.pmi"
    asm.mkdir()
    assert fsutil.unique_dir_path(asm).name == "asm.libraries.pmi.1"


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "out" / "summary.md"
    fsutil.atomic_write_text(target, "one")
    fsutil.atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["summary.md"]


def test_azdo_commands_are_single_line_and_escaped(tmp_path):
    assert cioutput.azdo_set_variable("Creator", "a;b]\nc%") == \
        "##vso[task.setvariable variable=Creator]a;b]%0Ac%AZP25"
    assert cioutput.azdo_set_variable("X", "1", is_output=True) == \
        "##vso[task.setvariable variable=X;isOutput=true]1"
    issue = cioutput.azdo_log_issue("error", "assert\r\nfailed", source_path="a;b.cpp", line_number=3)
    assert issue == "##vso[task.logissue type=error;sourcepath=a%3Bb.cpp;linenumber=3]assert%0D%0Afailed"
    summary = tmp_path / "s.md"
    assert cioutput.azdo_upload_summary(summary) == f"##vso[task.uploadsummary]{summary.resolve()}"
    with pytest.raises(ValueError):
        cioutput.azdo_log_issue("info", "x")


def test_github_step_summary_appends_only_when_set(tmp_path):
    assert cioutput.append_github_step_summary("# x", environ={}) is None
    target = tmp_path / "step.md"
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    cioutput.append_github_step_summary("# one", environ=env)
    cioutput.append_github_step_summary("# two\n", environ=env)
    assert target.read_text() == "# one\n# two\n"


def test_progress_is_off_for_non_terminals_and_with_no_progress():
    class Tty:
        def isatty(self):
            return True
    assert progress.progress_enabled(False, Tty())
    assert not progress.progress_enabled(True, Tty())
    assert not progress.progress_enabled(False, object())


def test_console_logging_follows_a_replaced_stdout(monkeypatch, tmp_path):
    import io
    import logging
    logs.setup_logging(logging.INFO, tmp_path / "x.log")
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", first)
    logs.log.info("one")
    monkeypatch.setattr(sys, "stdout", second)
    logs.report_error("prog", "two")
    logs.log.handlers.clear()
    assert "one" in first.getvalue() and "two" not in first.getvalue()
    assert "Error: two" in second.getvalue()
    assert "Error: two" in (tmp_path / "x.log").read_text()


def test_run_can_send_both_streams_to_one_file(tmp_path):
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True); sys.exit(3)"
    log_path = tmp_path / "console.log"
    with log_path.open("wb") as out:
        result = runner.run([sys.executable, "-c", code], output_file=out)
    assert result.returncode == 3 and result.stdout == "" and result.stderr == ""
    assert log_path.read_text().splitlines() == ["out", "err"]


def test_run_can_pass_output_through(capfd):
    result = runner.run([sys.executable, "-c", "print('shown')"], inherit_output=True)
    assert result.returncode == 0 and result.stdout == ""
    assert capfd.readouterr().out == "shown\n"


@pytest.mark.pure
def test_the_ci_service_is_told_by_its_own_variables() -> None:
    assert cioutput.running_under_github({"GITHUB_ACTIONS": "true"})
    assert not cioutput.running_under_github({"GITHUB_ACTIONS": "false"}) and not cioutput.running_under_github({})
    assert cioutput.running_under_azdo({"TF_BUILD": "True"}) and not cioutput.running_under_azdo({})
