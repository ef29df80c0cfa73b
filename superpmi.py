#!/usr/bin/env python3
"""SuperPMI: replay recorded JIT compilations and compare a baseline and a diff JIT.

Usage: python superpmi.py <command> [options]; `python superpmi.py <command> -h`
lists a command's options. Commands live in their own modules; this file only
builds the command line and turns errors into one line and an exit code.
"""
from __future__ import annotations

import importlib
import logging
import sys
from typing import List, Optional, Sequence

import jitutil
from jitutil import SuiteError
from spmi_config import ArgumentParser

log = logging.getLogger("superpmi")

# Each module defines register(subparsers) adding its command(s); every
# command sets `func(args) -> int` as its parser default.
COMMAND_MODULES: List[str] = ["replay", "asmdiffs", "metricdiff", "summarize_cmd", "mch_commands"]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="superpmi.py",
                            description="Replay SuperPMI collections and diff JIT code, throughput and memory.")
    subparsers = parser.add_subparsers(dest="command", metavar="command", parser_class=ArgumentParser)
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SuiteError as exc:
        _report_error(str(exc))
        return 1
    except KeyboardInterrupt:
        jitutil.kill_all_children()
        _report_error("interrupted; child processes stopped, finished outputs kept")
        return 130
    except Exception as exc:  # noqa: BLE001 - last line of defence: one line, traceback to the log
        log.debug("Unexpected error", exc_info=True)
        _report_error(f"unexpected {type(exc).__name__}: {exc} (details in the log file)")
        return 1


def _report_error(message: str) -> None:
    if log.handlers:
        log.error("Error: %s", message)
    else:
        print(f"superpmi.py: error: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
