"""Logging set-up and the one guarded entry every script runs through.

The suite logs to the `superpmi` logger: console on stdout and a DEBUG log file.
Every record is redacted (see `redaction`). `run_guarded` turns every failure
into one line and an exit code.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Callable, Mapping, Optional, Union

from spmi.base import redaction, untrusted
from spmi.base.errors import SuiteError, Terminated
from spmi.base.runner import kill_all_children, stop_on_termination

log = logging.getLogger("superpmi")


SUITE_COMMAND = {"suite_command": True}  # `extra=` of a record that carries one of the suite's own commands
MULTI_LINE = {"multi_line": True}  # `extra=` of a record whose values keep their lines (`log_block`)


def _one_line_value(value: object) -> object:
    """A log argument as the one-line rule wants it: numbers stay numbers (for `%d`), all else one line."""
    if isinstance(value, (int, float)):
        return value
    return untrusted.one_line(value)


class CommandNeutralizingFilter(logging.Filter):
    """The one place log records are made safe for the console (docs/architecture.md,
    "Untrusted text"): every value interpolated into a message (`%s` arguments: names,
    paths, reasons, exceptions) is put on one line, and the whole message, and any
    traceback, carries no pipeline command (`##vso[`, `##[`, a line starting with `::` after
    any whitespace). A child's output dumped as one block (`log_block`) keeps its lines, each
    of them neutralised.

    It runs first on the suite's logger (before redaction formats the message) and again on
    the suite's handlers, for any record that reaches them another way."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "suite_command", False):
            return True
        if getattr(record, "multi_line", False):
            pass
        elif isinstance(record.args, tuple):
            record.args = tuple(_one_line_value(value) for value in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {key: _one_line_value(value) for key, value in record.args.items()}
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not hide the record
            message = str(record.msg)
        record.msg = untrusted.neutralize_commands(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = untrusted.neutralize_commands(record.exc_text)
        if record.stack_info:
            record.stack_info = untrusted.neutralize_commands(record.stack_info)
        return True


def install_command_filter(logger: logging.Logger) -> None:
    """Put the filter first on `logger` (before the redacting filter joins message and values)."""
    if not any(isinstance(f, CommandNeutralizingFilter) for f in logger.filters):
        logger.filters.insert(0, CommandNeutralizingFilter())


def log_block(level: int, heading: str, text: str) -> None:
    """Multi-line text (a child's output) as one record: `heading` (one line, when given), then
    the text's lines, each free of pipeline commands."""
    if heading:
        log.log(level, "%s\n%s", untrusted.one_line(heading), text, extra=MULTI_LINE)
    else:
        log.log(level, "%s", text, extra=MULTI_LINE)


install_command_filter(log)
PathLike = Union[str, "os.PathLike[str]"]


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever `sys.stdout` is at the time of each message.

    A handler bound to the stream object of the moment would keep writing to a
    replaced stdout (a test's capture, a redirected console) after it changed.
    """

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property  # type: ignore[override]
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:  # type: ignore[no-untyped-def]
        pass


class _LogFileHandler(logging.FileHandler):
    """The DEBUG log file. When writing it fails (a full disk, a size limit), one warning line
    on stderr names the file and why, and the file gets no more records: no traceback, and
    the console goes on as before."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, mode="a", encoding="utf-8")
        self.failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if self.failed:
            return
        self.failed = True
        error = sys.exc_info()[1]
        reason = (error.strerror if isinstance(error, OSError) else None) or str(error) or type(error).__name__
        print(untrusted.neutralize_commands(f"warning: cannot write the log file {self.baseFilename} ({reason}); "
                                            "nothing more is written to it"),
              file=sys.stderr, flush=True)
        self.close_quietly()

    def close_quietly(self) -> None:
        """Close the file; what is still buffered cannot be written either."""
        stream, self.stream = self.stream, None  # type: ignore[assignment]
        try:
            if stream is not None:
                stream.close()
        except (OSError, ValueError):
            pass

    def flush(self) -> None:
        if not self.failed:
            try:
                super().flush()
            except (OSError, ValueError):  # logging.shutdown at exit: the same one line, once
                self.handleError(None)  # type: ignore[arg-type]


class _ConsoleFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(message)s", datefmt="%H:%M:%S")


def parse_log_level(text: str) -> int:
    levels = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
              "info": logging.INFO, "debug": logging.DEBUG}
    try:
        return levels[text.strip().lower()]
    except KeyError:
        raise SuiteError(f"unknown -log_level '{text}'; use one of {', '.join(levels)}") from None


def setup_logging(console_level: int, log_file: Optional[Path]) -> None:
    """Console at `console_level` on stdout; the log file (if any) always at DEBUG."""
    log.handlers.clear()
    log.setLevel(logging.DEBUG)
    log.propagate = False
    console = _StdoutHandler()
    console.setLevel(console_level)
    console.setFormatter(_ConsoleFormatter())
    console.addFilter(CommandNeutralizingFilter())
    log.addHandler(console)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = _LogFileHandler(log_file)
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(_ConsoleFormatter())
        handler.addFilter(CommandNeutralizingFilter())
        log.addHandler(handler)
        log.info("================ Logging to %s", log_file)


def report_error(prog: str, message: str, to_stderr: bool = False) -> None:
    """The one line a user sees for an error.

    Through the console log once logging is set up (so log readers and the
    log file see it), else, or when `to_stderr`, as `<prog>: error: ...` on stderr.
    A message of several lines (several bad inputs) gives one error line each.
    """
    lines = [line for line in message.splitlines() if line.strip()] or [message]
    if log.handlers and not to_stderr:
        for line in lines:
            log.error("Error: %s", line)
        return
    for line in lines:
        log.debug("Error: %s", line)
        print(untrusted.neutralize_commands(f"{prog}: error: {line}"), file=sys.stderr)


def run_guarded(prog: str, body: Callable[[], int], errors_to_stderr: bool = False) -> int:
    """Run a script's body; every failure becomes one line and an exit code.

    SuiteError: its message, exit 1. OSError: what failed on which file, exit 1.
    Ctrl-C: children killed, exit 130; SIGTERM (`runner.stop_on_termination`) the same, exit
    128 + the signal (143). Anything else: a one-line summary (secrets redacted), the
    traceback only in the DEBUG log, exit 1.
    """
    def report(message: str) -> None:
        report_error(prog, redaction.redact(message), errors_to_stderr)

    try:
        with stop_on_termination():
            return int(body())
    except SuiteError as exc:
        report(str(exc))
        return 1
    except KeyboardInterrupt as exc:
        kill_all_children()
        if isinstance(exc, Terminated):
            report(f"interrupted; child processes stopped, finished outputs kept (terminated by {exc.signal_name})")
            return exc.exit_code
        report("interrupted; child processes stopped, finished outputs kept")
        return 130
    except OSError as exc:
        log.debug("I/O error", exc_info=True)
        where = f" ({exc.filename})" if exc.filename else ""
        report(f"{exc.strerror or exc}{where}; check the path, its permissions and the free space")
        return 1
    except Exception as exc:  # noqa: BLE001 - last line of defence
        log.debug("Unexpected error", exc_info=True)
        log_file = log_file_in_use()
        report(f"unexpected {type(exc).__name__}: {exc}" + (f" (details in the log file {log_file})" if log_file else ""))
        return 1


def log_file_in_use() -> Optional[str]:
    """The log file records go to, if there is one and writing it has not failed."""
    for handler in log.handlers:
        if isinstance(handler, _LogFileHandler) and not handler.failed:
            return handler.baseFilename
    return None
