#!/usr/bin/env python3
"""SuperPMI: replay recorded JIT compilations and compare a baseline and a diff JIT.

Usage: python superpmi.py <command> [options]; `python superpmi.py <command> -h`
lists a command's options. Commands live in their own modules; this file only
builds the command line and turns errors into one line and an exit code.
"""
from __future__ import annotations

import importlib
import sys
from typing import List, Optional, Sequence

import jitutil
from spmi_config import ArgumentParser

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
    args = build_parser().parse_args(argv)
    return jitutil.run_guarded("superpmi.py", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
