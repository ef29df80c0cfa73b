"""Numeric flags are checked for range while parsing, before anything starts."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from parser_walk import command_parsers, option_actions

from spmi.base import config
from spmi.tools.superpmi_tool import RunOptions

REPO = Path(__file__).resolve().parent.parent
NUMBER_METAVARS = {"N", "SECONDS", "PCT", "COUNT", "BYTES", "MINUTES"}


@pytest.mark.parametrize("helper, good, bad", [
    (config.positive_seconds, {"1": 1.0, "0.5": 0.5, " 3 ": 3.0, "2592000": 2592000.0},
     ["0", "-1", "nan", "inf", "-inf", "x", "", "1e308", "2592000.5", "1_0"]),
    (config.non_negative_float, {"0": 0.0, "12.5": 12.5}, ["-0.1", "nan", "inf", "abc", "1_0", "0._5"]),
    (config.positive_int, {"1": 1, "64": 64, str(10 ** 15): 10 ** 15},
     ["0", "-3", "1.5", "nan", "x", str(10 ** 15 + 1), "1_0", "1__0", "_1"]),
    (config.non_negative_int, {"0": 0, "20": 20}, ["-1", "2.0", "inf", "1_000"]),
    (config.int_between(1, 64), {"1": 1, "64": 64}, ["0", "65", "nan", "1_0"]),
    (config.positive_float, {"2.5": 2.5}, ["0", "1_0", "1_0.5", "1e1_0"]),
])
def test_numeric_types_accept_and_refuse(helper, good, bad) -> None:
    for text, value in good.items():
        assert helper(text) == value and type(helper(text)) is type(value)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            helper(text)


def test_every_numeric_option_uses_a_checked_type() -> None:
    """No option parses with bare int/float; every option with a numeric metavar has a type."""
    for command, parser in command_parsers():
        for action in option_actions(parser):
            assert action.type not in (int, float), f"{command} {action.option_strings[0]} uses bare {action.type}"
            if action.metavar in NUMBER_METAVARS:
                assert action.type is not None, f"{command} {action.option_strings[0]} takes a number unchecked"


def test_no_numeric_option_reads_python_digit_separators() -> None:
    """Python's int() and float() read `1_0` as 10; no command line does: every option that takes a number
    refuses it with one line naming the flag."""
    checked = 0
    for _command, parser in command_parsers():
        for action in option_actions(parser):
            if action.metavar not in NUMBER_METAVARS and action.type not in (config.positive_seconds,
                                                                             config.positive_float):
                continue
            if action.type is None:
                continue
            with pytest.raises(argparse.ArgumentTypeError, match="is not a"):
                action.type("1_0")  # type: ignore[operator]
            checked += 1
    assert checked >= 20


def test_sequential_with_parallelism_is_refused() -> None:
    with pytest.raises(config.SuiteError, match="--sequential and --parallelism 4"):
        RunOptions(sequential=True, parallelism=4).validate()
    with pytest.raises(config.SuiteError, match="--timeout"):
        RunOptions(timeout=float("nan")).validate()


def run_script(script: str, argv: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_ACTIONS")}
    return subprocess.run([sys.executable, str(REPO / script), *argv], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=env)


@pytest.mark.parametrize("flags, expected", [
    (["--timeout", "nan"], "argument --timeout: 'nan' is not a finite number"),
    (["--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    (["--timeout", "-5"], "argument --timeout: '-5' must be greater than 0"),
    (["--timeout", "0"], "argument --timeout: '0' must be greater than 0"),
    (["--timeout", "1e308"], "argument --timeout: '1e308' is too large (at most 2,592,000 seconds, 30 days)"),
    (["--time_budget", "2592001"], "argument --time_budget: '2592001' is too large (at most 2,592,000 seconds, 30 days)"),
    (["-error_limit", "9" * 400], "argument -error_limit: '" + "9" * 400 + "' is too large"),
    (["--parallelism", "0"], "argument --parallelism: '0' must be from 1 to 64"),
    (["--parallelism", "65"], "argument --parallelism: '65' must be from 1 to 64"),
    (["-error_limit", "0"], "argument -error_limit: '0' must be at least 1"),
    (["--timeout", "1_0"], "argument --timeout: '1_0' is not a number"),
    (["--parallelism", "1_6"], "argument --parallelism: '1_6' is not a whole number"),
    (["--sequential", "--parallelism", "3"], "--sequential and --parallelism 3 contradict each other"),
])
def test_replay_refuses_bad_numbers_before_starting(sample_toolchain: Path, tmp_path: Path, flags, expected) -> None:
    spmi_location = tmp_path / "spmi"
    mch = sample_toolchain / "collections"
    proc = run_script("superpmi.py", ["replay", "-core_root", str(sample_toolchain / "core_root"),
                                      "-target_os", "linux", "-target_arch", "x64", "-arch", "x64",
                                      "-spmi_location", str(spmi_location), "-mch_files", str(mch), *flags], tmp_path)
    # a value argparse refuses is a usage error (exit 2, as argparse's); a contradiction found after parsing exits 1
    assert proc.returncode == (2 if expected.startswith("argument ") else 1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not spmi_location.exists(), "nothing started: no log, no cache"


@pytest.mark.parametrize("script, argv, expected", [
    ("superpmi.py", ["memdiff", "-memdiff_threshold", "nan"], "argument -memdiff_threshold: 'nan' is not a finite"),
    ("superpmi.py", ["tpdiff", "--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    ("superpmi.py", ["asmdiffs", "--timeout", "-1"], "argument --timeout: '-1' must be greater than 0"),
    ("superpmi_asmdiffs_setup.py", ["-product_directory", "p", "-payload_directory", "q", "-parallelism", "0"],
     "argument -jobs/-parallelism: '0' must be at least 1"),
    ("jitanalyze.py", ["-b", "a", "-d", "b", "-c", "-1"], "Error: Count (--count) must not be negative"),
])
def test_other_scripts_refuse_bad_numbers(tmp_path: Path, script: str, argv: list, expected: str) -> None:
    proc = run_script(script, argv, tmp_path)
    assert proc.returncode == (1 if script == "jitanalyze.py" else 2), "jitanalyze.py exits as jit-analyze does"
    assert expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == []
