"""The superpmi.py command line: every command is registered where the map says."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import superpmi

REPO = Path(__file__).resolve().parent.parent


def test_each_command_is_registered_by_its_mapped_module_alone():
    for command, module in superpmi.MODULE_OF_COMMAND.items():
        parser = superpmi.build_parser([module])
        subparsers = next(a for a in parser._actions if a.dest == "command")
        assert command in subparsers.choices, (command, module)
    every = superpmi.build_parser()
    subparsers = next(a for a in every._actions if a.dest == "command")
    assert set(subparsers.choices) == set(superpmi.MODULE_OF_COMMAND)
    assert set(superpmi.MODULE_OF_COMMAND.values()) == set(superpmi.COMMAND_MODULES)


def test_unknown_or_missing_command_uses_every_module():
    assert superpmi.modules_for([]) == superpmi.COMMAND_MODULES
    assert superpmi.modules_for(["-h"]) == superpmi.COMMAND_MODULES
    assert superpmi.modules_for(["memdif"]) == superpmi.COMMAND_MODULES
    assert superpmi.modules_for(["memdiff", "-h"]) == ["spmi.commands.metricdiff"]


def run_superpmi(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), *args], capture_output=True, text=True,
                          cwd=cwd, env={k: v for k, v in os.environ.items() if k != "SUPERPMI_CACHE_DIRECTORY"})


def test_no_arguments_print_the_usage_and_one_line_per_command():
    proc = run_superpmi()
    assert proc.returncode == 2
    text = proc.stdout + proc.stderr
    assert text.startswith("usage: superpmi.py")
    assert "the following arguments are required" not in text
    lines = text.splitlines()
    parser = superpmi.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name in subparsers.choices:
        [line] = [line for line in lines if line.split() and line.split()[0] == name]
        helps = {a.dest: a.help for a in subparsers._choices_actions}
        assert line.strip().endswith(helps[name]), line
    assert "python superpmi.py <command> -h" in text
    assert "sample/demo.py" in text and "Traceback" not in text
