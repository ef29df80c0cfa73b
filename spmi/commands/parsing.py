"""The command-line parser every entry point uses, and the option value types.

`ArgumentParser` prints a bad command line as one line and exits with 2, naming the closest
known command, option or choice (docs/contracts.md §12.1, `usage`); it parses into a
`StrictNamespace`, so code reading an option its command does not register fails naming it.
The `type=` functions refuse a bad number while parsing, before anything starts. The entry scripts, `spmi/commands` and the pipeline's entry modules use
this module; nothing below them sees argparse.
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Callable, List, Optional, Tuple, TypeVar

from spmi.base.config import MAX_SECONDS
from spmi.base.untrusted import console_line
from spmi.commands import usage

Number = TypeVar("Number", int, float)
#: No number on a command line is larger than this (beyond it arithmetic and the OS's waits overflow).
MAX_NUMBER = 10 ** 15


class UnregisteredOption(AttributeError):
    """Code read an option its command's parser does not register."""


class StrictNamespace(argparse.Namespace):
    """Parsed options; reading a name no parser registered fails naming the option.

    Commands read their options as `args.<name>`, never with a fallback, so a
    command that reads an option it did not register fails in tests.
    """

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        known = ", ".join(sorted(vars(self))) or "none"
        raise UnregisteredOption(f"option '{name}' is read but not registered by this command (registered: {known})")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line usage error and exit code 2, a "did you mean" for an unknown
    command, option or choice (docs/contracts.md §12.1, commands/usage), parsing into a `StrictNamespace`."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        return super().parse_known_args(args, StrictNamespace() if namespace is None else namespace)

    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = usage.chosen_parser(self, parsed)
            chosen.error(usage.unrecognized(extras, chosen))
        return parsed

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(action, usage.invalid_choice(str(value), [str(c) for c in action.choices]))

    def error(self, message: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
        # the message repeats what was typed: one line, and no pipeline command in it
        self.exit(usage.USAGE_EXIT, f"{self.prog}: error: {console_line(message)}\n")


def program_parser(prog: str, description: str) -> Tuple[ArgumentParser, "argparse._SubParsersAction[ArgumentParser]"]:
    """A script's parser and its commands: `--version`, and a command that must be given (every
    command's parser is an `ArgumentParser` too, so its usage errors read the same)."""
    parser = ArgumentParser(prog=prog, description=description)
    usage.add_version(parser)
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=ArgumentParser)
    commands.required = True
    return parser, commands


# ---------------------------------------------------------------- numeric option types
# One argparse `type=` per kind of number, so a bad value is refused while parsing,
# before anything starts, with one line naming the flag (argparse adds it).


def _number(text: str, convert: Callable[[str], Number], kind: str, most: str = f"{MAX_NUMBER:,}") -> Number:
    """`text` as a number; Python's digit separators are refused (`1_0` is not 10 on a command line)."""
    try:
        if "_" in text:
            raise ValueError(text)
        value = convert(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {kind}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    if abs(value) > MAX_NUMBER:
        raise argparse.ArgumentTypeError(f"'{text}' is too large (at most {most})")
    return value


def _number_where(text: str, convert: Callable[[str], Number], kind: str,
                  accepted: Callable[[Number], bool], requirement: str) -> Number:
    """`text` as a number of `kind` that passes `accepted`, else "'text' must be <requirement>"."""
    value = _number(text, convert, kind)
    if not accepted(value):
        raise argparse.ArgumentTypeError(f"'{text}' must be {requirement}")
    return value


def positive_seconds(text: str) -> float:
    """A time in seconds: a finite number greater than 0 and at most `MAX_SECONDS`."""
    most = f"{MAX_SECONDS:,} seconds, 30 days"
    seconds = float(_number(text, float, "a number", most))
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be greater than 0")
    if seconds > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"'{text}' is too large (at most {most})")
    return seconds


def positive_float(text: str) -> float:
    """A finite number greater than 0 (a factor, a width)."""
    return float(_number_where(text, float, "a number", lambda v: v > 0, "greater than 0"))


def non_negative_float(text: str) -> float:
    """A finite number of 0 or more (e.g. a percentage where 0 disables)."""
    return float(_number_where(text, float, "a number", lambda v: v >= 0, "0 or more"))


def non_negative_int(text: str) -> int:
    """A whole number of 0 or more."""
    return int(_number_where(text, int, "a whole number", lambda v: v >= 0, "0 or more"))


def positive_int(text: str) -> int:
    """A whole number of 1 or more."""
    return int(_number_where(text, int, "a whole number", lambda v: v >= 1, "at least 1"))


def int_between(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high` (both included)."""
    def parse(text: str) -> int:
        return int(_number_where(text, int, "a whole number", lambda v: low <= v <= high, f"from {low} to {high}"))
    parse.__name__ = f"int_between_{low}_{high}"
    return parse


_METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def significance_override(text: str) -> Tuple[str, float]:
    """`-significance METRIC=PCT`: a metric name and a minimum meaningful change in % (0 = any change)."""
    name, equals, pct = text.partition("=")
    name = name.strip()
    if not equals or not _METRIC_NAME.match(name):
        raise argparse.ArgumentTypeError(f"'{text}' is not METRIC=PCT (e.g. instructions=0.01 or BytesAllocated=2)")
    try:
        value = non_negative_float(pct)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"'{text}': the percentage {exc}") from None
    return name, value


class SignificanceOverrides(argparse.Action):
    """`-significance` repeated: the overrides in order; a metric given twice is refused (the later one
    would otherwise win silently)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:
        override: Tuple[str, float] = values  # type: ignore[assignment]
        given: List[Tuple[str, float]] = list(getattr(namespace, self.dest, None) or [])
        if any(override[0] == earlier for earlier, _ in given):
            parser.error(f"argument {option_string}: {override[0]} is given twice; give each metric once")
        setattr(namespace, self.dest, given + [override])
