#!/usr/bin/env python3
"""Built-in equivalent of jit-analyze (docs/contracts.md §8).

Compares two trees of JIT disassembly listings (`.dasm`) and prints, per metric, the same
report jit-analyze prints: totals, the top file and method regressions/improvements and
the final counts; `--md` also writes the markdown form asmdiffs embeds in its summary.
`python jitanalyze.py -h` lists the flags.

The analyzer lives in `spmi/analyzer/` (see docs/architecture.md):
* `cli.py`: the jit-analyze command line (options, messages, output order, exit codes), also run
  in-process by asmdiffs when the real `jit-analyze` is not on PATH;
* `cmdline.py`: the System.CommandLine-compatible argument parser (`--base=X`, `-b:X`, `-rw`,
  `-c5`, `@file`, `--`, optional `true`/`false` after a bool option, `--version`);
* `core.py`: walks and pairs the input files (regular files only), reads them one file (or one pair)
  at a time, streaming files too large to keep in memory; counts textual diffs; deletes for
  --retain-only-top-files; writes the output files;
* `scan.py`: one listing -- the metrics and the single-regex scan of its bytes (§7, §8.2);
* `compare.py`: options, results and the one pass that computes every requested metric,
  keeping only the top `--count` entries of each list;
* `render.py`: rendering and number formatting, pure functions (§8.4-§8.6);
* `export.py`: the --tsv and --json files (§8.7);
* `workers.py`: worker processes that read and scan chunks of file pairs (--parallelism), their results
  taken in the original order, so every N gives the same output.

Suite extensions beyond jit-analyze (none changes the output of a run that does not use them),
listed by `-h`: comma lists in `--metrics`; `--override-total-base-metric CodeSize=123` (per metric,
repeatable; a bare number still applies to every requested metric); `--md-per-metric DIR`; the
pre-2023 option spellings; `--report-release-listings`: release-JIT listings (§7.5) reported as such
instead of as 0-byte methods, and the 2026 release footer counted for CodeSize only (without it they are
read as jit-analyze reads them); `--parallelism N` (default: the CPUs).
"""
from __future__ import annotations

import sys

from spmi.analyzer.cli import main

if __name__ == "__main__":
    sys.exit(main())
