"""`superpmi.py` (the console command `superpmi` when installed): replay recorded JIT
compilations and compare a baseline and a diff JIT.

Usage: python superpmi.py <command> [options]; `python superpmi.py <command> -h`
lists a command's options. Commands live in their own modules; this one only
builds the command line and turns errors into one line and an exit code.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Dict, List, Optional, Sequence

from spmi.base import invocation, logs
from spmi.commands import parsing
from spmi.commands.parsing import ArgumentParser

SCRIPT = "superpmi.py"
PROG = invocation.program_name(SCRIPT)

# Each module defines register(subparsers) adding its command(s); every
# command sets `func(args) -> int` as its parser default.
COMMAND_MODULES: List[str] = ["spmi.commands.replay", "spmi.commands.asmdiffs", "spmi.commands.metricdiff",
                              "spmi.commands.summarize", "spmi.commands.mch_commands", "spmi.commands.collect",
                              "spmi.commands.history"]

# Which module registers each command, so a run imports only what it uses.
MODULE_OF_COMMAND: Dict[str, str] = {
    "replay": "spmi.commands.replay", "asmdiffs": "spmi.commands.asmdiffs",
    "tpdiff": "spmi.commands.metricdiff", "memdiff": "spmi.commands.metricdiff",
    "metricdiff": "spmi.commands.metricdiff",
    "summarize": "spmi.commands.summarize", "download": "spmi.commands.mch_commands", "upload": "spmi.commands.mch_commands",
    "upload-private": "spmi.commands.mch_commands", "list-collections": "spmi.commands.mch_commands", "merge-mch": "spmi.commands.mch_commands",
    "collect": "spmi.commands.collect", "history": "spmi.commands.history",
}


def modules_for(argv: Optional[Sequence[str]]) -> List[str]:
    """The command's own module when argv starts with a known command, else all (for help and errors)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in MODULE_OF_COMMAND:
        return [MODULE_OF_COMMAND[args[0]]]
    return COMMAND_MODULES


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> ArgumentParser:
    parser, subparsers = parsing.program_parser(
        PROG, "Replay SuperPMI collections and diff JIT code, throughput and memory.")
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def command_lines(parser: argparse.ArgumentParser) -> List[str]:
    """One line per command: its name and its help."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = subparsers._choices_actions  # the (name, help) entries argparse lists under "command"
    width = max(len(action.dest) for action in actions) + 2
    return [f"  {action.dest.ljust(width)}{action.help or ''}" for action in actions]


def overview(parser: argparse.ArgumentParser) -> str:
    """What `superpmi.py` with no arguments prints: usage, the commands, where to start."""
    demo = invocation.demo_command()
    return "\n".join([parser.format_usage().rstrip(), "", str(parser.description), "", "commands:",
                      *command_lines(parser), "",
                      f"Options of a command: {invocation.script_command(SCRIPT)} <command> -h",
                      *([f"New here? {demo} runs asmdiffs on a sample toolchain (no enlistment needed)."] if demo else [])])


def main(argv: Optional[Sequence[str]] = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(modules_for(given))
    if not given:
        print(overview(parser), file=sys.stderr)
        return 2  # as argparse exits for a missing argument
    args = parser.parse_args(given)
    return logs.run_guarded(PROG, lambda: args.func(args))
