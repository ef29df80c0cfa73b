"""Console messages, log file and details CSV of the sample superpmi."""
from __future__ import annotations

import sys
import time

from .model import METRICS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, List, Optional

#: message class -> (verbosity letter, prefix, goes to stderr)
_CLASSES = {
    "ERROR": ("e", "ERROR: ", True),
    "WARNING": ("w", "WARNING: ", True),
    "MISSING": ("m", "MISSING: ", False),
    "ISSUE": ("i", "ISSUE: ", False),
    "INFO": ("n", "", False),
    "VERBOSE": ("v", "", False),
    "DEBUG": ("d", "", False),
}


def enabled_letters(verbosity: str) -> str:
    letters = verbosity.lower()
    if "q" in letters:
        return ""
    if "a" in letters:
        return "ewminvd"
    return letters


class Console:
    """Prints messages filtered by ``-v``; also copies every message to ``-w``."""

    def __init__(self, verbosity: str = "ewminv", log: Optional[IO[bytes]] = None) -> None:
        self.letters = enabled_letters(verbosity)
        self.log = log
        self.out = sys.stdout
        self.err = sys.stderr

    def shows(self, kind: str) -> bool:
        return _CLASSES[kind][0] in self.letters

    def message(self, kind: str, text: str, function: str = "main") -> None:
        letter, prefix, to_stderr = _CLASSES[kind]
        if letter in self.letters:
            stream = self.err if to_stderr else self.out
            stream.write(prefix + text + "\n")
        if self.log is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            line = "%s - %s [%s:%d] - %s - %s\r\n" % (stamp, function, "superpmi.py", 0, kind, text)
            self.log.write(line.encode("utf-8", "replace"))

    def error(self, text: str) -> None:
        self.message("ERROR", text)

    def warning(self, text: str) -> None:
        self.message("WARNING", text)

    def missing(self, text: str) -> None:
        self.message("MISSING", text)

    def issue(self, text: str) -> None:
        self.message("ISSUE", text)

    def info(self, text: str) -> None:
        self.message("INFO", text)

    def verbose(self, text: str) -> None:
        self.message("VERBOSE", text)

    def flush(self) -> None:
        self.out.flush()
        self.err.flush()
        if self.log is not None:
            self.log.flush()

    def close(self) -> None:
        self.flush()
        if self.log is not None:
            self.log.close()
            self.log = None


# ---------------------------------------------------------------- details CSV

def replay_header() -> str:
    columns = ["Context", "Context size", "Method full name", "Tier name", "Result", "MinOpts", "Instructions"]
    columns.extend(name for name, _ in METRICS)
    return ",".join(columns) + "\n"


def diff_header() -> str:
    columns = ["Context", "Context size", "Method full name", "Tier name", "Base result", "Diff result",
               "MinOpts", "Has diff", "Base instructions", "Diff instructions"]
    for name, _ in METRICS:
        columns.append("Base " + name)
        columns.append("Diff " + name)
    return ",".join(columns) + "\n"


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def format_metric(value: object, kind: str) -> str:
    if kind == "double":
        return "%f" % float(value)  # type: ignore[arg-type]
    return "%d" % int(value)  # type: ignore[call-overload]


_KIND_FORMAT = {"double": "%f", "int": "%d", "int64": "%d"}
_NAMES = tuple(name for name, _ in METRICS)
_REPLAY_FORMAT = "%d,%d,%s,%s,%s,%s,%d," + ",".join(_KIND_FORMAT[kind] for _, kind in METRICS) + "\n"
_DIFF_FORMAT = ("%d,%d,%s,%s,%s,%s,%s,%s,%d,%d,"
                + ",".join(_KIND_FORMAT[kind] + "," + _KIND_FORMAT[kind] for _, kind in METRICS) + "\n")
_ZERO_VALUES = tuple(0 for _ in METRICS)


def metric_values(values: Optional[tuple]) -> tuple:
    return _ZERO_VALUES if values is None else values


def bool_text(value: bool) -> str:
    return "True" if value else "False"


def replay_row(number: int, size: int, name: str, tier: str, result: str, minopts: bool,
               instructions: int, values: Optional[tuple]) -> str:
    return _REPLAY_FORMAT % ((number, size, quote_name(name), tier, result, bool_text(minopts), instructions)
                             + metric_values(values))


def diff_row(number: int, size: int, name: str, tier: str, base_result: str, diff_result: str,
             minopts: bool, has_diff: bool, base_instructions: int, diff_instructions: int,
             base_values: Optional[tuple], diff_values: Optional[tuple]) -> str:
    interleaved: List[object] = []
    for base_value, diff_value in zip(metric_values(base_values), metric_values(diff_values)):
        interleaved.append(base_value)
        interleaved.append(diff_value)
    return _DIFF_FORMAT % ((number, size, quote_name(name), tier, base_result, diff_result, bool_text(minopts),
                            bool_text(has_diff), base_instructions, diff_instructions) + tuple(interleaved))


def summary_line(loaded: int, jitted: int, failed: int, excluded: int, missing: int,
                 diffs: Optional[int]) -> str:
    text = "Loaded %d  Jitted %d  FailedCompile %d Excluded %d Missing %d" % (loaded, jitted, failed, excluded, missing)
    if diffs is not None:
        text += " Diffs %d" % diffs
    return text


def print_help(stream: Optional[IO[str]] = None) -> None:
    from .superpmi_args import HELP_TEXT
    (stream or sys.stdout).write(HELP_TEXT)
