#!/usr/bin/env python3
"""Small JIT utilities from the SuperPMI suite's library, for scripts and CI steps.

`python jitutil.py -h` lists the commands. The program, and what each command does, is
`spmi/entry/jitutil.py` (the console command `jitutil` after `pip install .`); this file runs it
from a checkout or a Helix payload.
"""
from __future__ import annotations

import sys

from spmi.entry.jitutil import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
