#!/usr/bin/env python3
"""Small JIT utilities from the SuperPMI suite's library, for scripts and CI steps.

  python jitutil.py platform [-target_os OS] [-target_arch ARCH]
      host facts and the file names of the JIT and the tools for a target
  python jitutil.py jit-ee-version [-runtime_repo DIR]
      the JIT-EE interface GUID of an enlistment (docs/contracts.md §9)
  python jitutil.py extract ARCHIVE DIRECTORY
      extract a .zip or tar archive with the suite's path rules (no entry lands outside DIRECTORY)

The program is `spmi/entry/jitutil.py` (the console command `jitutil` after `pip install .`);
this file runs it from a checkout or a Helix payload.
"""
from __future__ import annotations

import sys

from spmi.entry.jitutil import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
