#!/usr/bin/env python3
"""List, download and upload rolling builds of the JIT (docs/contracts.md §12.14).

    python jitrollingbuild.py list [-git_hash H] [--all | --global_all]
    python jitrollingbuild.py download [-git_hash H] [-target_dir D]
    python jitrollingbuild.py upload -git_hash H [--use_latest_jit_change]

Builds live in the `jitrollingbuild` container as
`builds/<hash>/<host_os>/<arch>/<build_type>/<jit file>`. Without `-git_hash`,
`list` and `download` use the baseline of the current checkout (§12.8): the
newest commits touching the JIT at or before the merge-base with `main`.
Exit code 0 on success, 1 on any error (one line); `download` exits 2 when no build of
the hash(es) tried exists (nothing was downloaded).

The program is `spmi/entry/jitrollingbuild.py` (the console command `jitrollingbuild` after
`pip install .`); this file runs it from a checkout or a Helix payload.
"""
from __future__ import annotations

import sys

from spmi.entry.jitrollingbuild import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
