#!/usr/bin/env python3
"""SuperPMI: replay recorded JIT compilations and compare a baseline and a diff JIT.

Usage: python superpmi.py <command> [options]; `python superpmi.py <command> -h`
lists a command's options. The program is `spmi/entry/superpmi.py` (the console command
`superpmi` after `pip install .`); this file runs it from a checkout or a Helix payload.
"""
from __future__ import annotations

import sys

from spmi.entry.superpmi import COMMAND_MODULES, MODULE_OF_COMMAND, build_parser, main, modules_for

__all__ = ["COMMAND_MODULES", "MODULE_OF_COMMAND", "build_parser", "main", "modules_for"]

if __name__ == "__main__":
    sys.exit(main())
