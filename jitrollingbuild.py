#!/usr/bin/env python3
"""List, download and upload rolling builds of the JIT (docs/contracts.md §12.14).

`python jitrollingbuild.py -h` lists the commands. The program, and what each command does, is
`spmi/entry/jitrollingbuild.py` (the console command `jitrollingbuild` after `pip install .`); this file runs it
from a checkout or a Helix payload.
"""
from __future__ import annotations

import sys

from spmi.entry.jitrollingbuild import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
