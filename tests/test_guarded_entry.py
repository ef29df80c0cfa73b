"""The one guarded entry (spmi/base/logs.run_guarded): an unexpected exception is one line, and it points to
the log file only when one is being written."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest

from spmi.base import logs


@pytest.fixture
def fresh_logger() -> Iterator[logging.Logger]:
    """The suite's logger as before any setup, restored afterwards."""
    saved = list(logs.log.handlers)
    logs.log.handlers.clear()
    try:
        yield logs.log
    finally:
        for handler in logs.log.handlers:
            handler.close()
        logs.log.handlers[:] = saved


def fail() -> int:
    raise ValueError("no such shape")


def test_without_a_log_file_the_line_names_none(fresh_logger, capsys) -> None:
    assert logs.run_guarded("tool.py", fail) == 1
    assert capsys.readouterr().err == "tool.py: error: unexpected ValueError: no such shape\n"
    logs.setup_logging(logging.INFO, None)  # console logging, no file
    assert logs.run_guarded("tool.py", fail) == 1
    out = capsys.readouterr().out
    assert out.endswith("] Error: unexpected ValueError: no such shape\n") and "log file" not in out


def test_with_a_log_file_the_line_names_it_and_it_holds_the_traceback(fresh_logger, capsys, tmp_path: Path) -> None:
    log_file = tmp_path / "superpmi.log"
    logs.setup_logging(logging.INFO, log_file)
    assert logs.run_guarded("tool.py", fail) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if "Error" in line]
    assert len(lines) == 1
    assert lines[0].endswith(f"] Error: unexpected ValueError: no such shape (details in the log file {log_file})")
    for handler in logs.log.handlers:
        handler.flush()
    text = log_file.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and 'raise ValueError("no such shape")' in text


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="writes to /dev/full fail with ENOSPC")
def test_a_log_file_that_could_not_be_written_is_not_named(fresh_logger, capsys) -> None:
    logs.setup_logging(logging.INFO, Path("/dev/full"))  # the first record fails: a full disk
    assert logs.log_file_in_use() is None
    assert logs.run_guarded("tool.py", fail) == 1
    captured = capsys.readouterr()
    assert "warning: cannot write the log file /dev/full (No space left on device)" in captured.err
    assert "unexpected ValueError: no such shape\n" in captured.out and "details in the log file" not in captured.out
