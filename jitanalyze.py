#!/usr/bin/env python3
"""Built-in equivalent of jit-analyze (docs/contracts.md §8).

Compares two trees of JIT disassembly listings (`.dasm`) and prints, per metric, the same
report jit-analyze prints: totals, the top file and method regressions/improvements and
the final counts; `--md` also writes the markdown form asmdiffs embeds in its summary.
`python jitanalyze.py -h` lists the flags.

The analyzer lives in `spmi/analyzer/` (see docs/architecture.md):
* `cli.py`: the jit-analyze command line (flags, messages, exit codes), also run
  in-process by asmdiffs when the real `jit-analyze` is not on PATH;
* `core.py`: walks and pairs the input files, reads them one file (or one pair) at a
  time, streaming files too large to keep in memory; writes the output files;
* `scan.py`: one listing -- the metrics and the single-regex scan of its bytes (§7, §8.2);
* `compare.py`: options, results and the one pass that computes every requested metric,
  keeping only the top `--count` entries of each list;
* `render.py`: rendering and number formatting, pure functions (§8.4-§8.6).

Extensions beyond jit-analyze (none changes the output of a run that does not use them):
`--override-total-base-metric CodeSize=123` (per metric, repeatable; a bare number still
applies to every requested metric), `--md-per-metric DIR`, and release-JIT listings
(§7.5) reported as such instead of as 0-byte methods.
"""
from __future__ import annotations

import sys

from spmi.analyzer.cli import run_cli

if __name__ == "__main__":
    sys.exit(run_cli())
