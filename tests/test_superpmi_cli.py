"""The superpmi.py command line: every command is registered where the map says."""
from __future__ import annotations

import superpmi


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
