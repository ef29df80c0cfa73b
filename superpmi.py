#!/usr/bin/env python3
"""SuperPMI: replay recorded JIT compilations and compare a baseline and a diff JIT.

Usage: python superpmi.py <command> [options]; `python superpmi.py <command> -h`
lists a command's options. Commands live in their own modules; this file only
builds the command line and turns errors into one line and an exit code.
"""
from __future__ import annotations

import importlib
import sys
from typing import Dict, List, Optional, Sequence

from spmi.base import logs
from spmi.base.config import ArgumentParser

# Each module defines register(subparsers) adding its command(s); every
# command sets `func(args) -> int` as its parser default.
COMMAND_MODULES: List[str] = ["spmi.commands.replay", "spmi.commands.asmdiffs", "spmi.commands.metricdiff",
                              "spmi.commands.summarize", "spmi.commands.mch_commands", "spmi.commands.collect"]

# Which module registers each command, so a run imports only what it uses.
MODULE_OF_COMMAND: Dict[str, str] = {
    "replay": "spmi.commands.replay", "asmdiffs": "spmi.commands.asmdiffs",
    "tpdiff": "spmi.commands.metricdiff", "memdiff": "spmi.commands.metricdiff",
    "metricdiff": "spmi.commands.metricdiff",
    "summarize": "spmi.commands.summarize", "download": "spmi.commands.mch_commands", "upload": "spmi.commands.mch_commands",
    "upload-private": "spmi.commands.mch_commands", "list-collections": "spmi.commands.mch_commands", "merge-mch": "spmi.commands.mch_commands",
    "collect": "spmi.commands.collect",
}


def modules_for(argv: Optional[Sequence[str]]) -> List[str]:
    """The command's own module when argv starts with a known command, else all (for help and errors)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in MODULE_OF_COMMAND:
        return [MODULE_OF_COMMAND[args[0]]]
    return COMMAND_MODULES


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> ArgumentParser:
    parser = ArgumentParser(prog="superpmi.py",
                            description="Replay SuperPMI collections and diff JIT code, throughput and memory.")
    subparsers = parser.add_subparsers(dest="command", metavar="command", parser_class=ArgumentParser)
    subparsers.required = True
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser(modules_for(argv)).parse_args(argv)
    return logs.run_guarded("superpmi.py", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
