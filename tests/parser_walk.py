"""Walk the argparse parsers of every entry script: commands, their parsers and options."""
from __future__ import annotations

import argparse
import importlib
from typing import Dict, Iterator, List, Tuple

ENTRY_MODULES = ["superpmi", "jitrollingbuild", "jitutil", "superpmi_asmdiffs", "superpmi_asmdiffs_setup",
                 "superpmi_asmdiffs_summarize"]


def entry_parsers() -> Dict[str, argparse.ArgumentParser]:
    """Script name -> its top-level argparse parser (jitanalyze.py parses as jit-analyze does, with
    spmi/analyzer/cmdline.py, and is tested in tests/test_jitanalyze.py)."""
    return {f"{name}.py": importlib.import_module(name).build_parser() for name in ENTRY_MODULES}


def subcommands(parser: argparse.ArgumentParser) -> Dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_parsers() -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    """('superpmi.py replay', parser), ('jitutil.py', parser), ... for every leaf command."""
    for script, parser in entry_parsers().items():
        commands = subcommands(parser)
        if not commands:
            yield script, parser
        for name, sub in commands.items():
            yield f"{script} {name}", sub


def option_actions(parser: argparse.ArgumentParser) -> List[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def option_strings(parser: argparse.ArgumentParser) -> List[str]:
    return [flag for action in option_actions(parser) for flag in action.option_strings]
