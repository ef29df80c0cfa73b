#!/usr/bin/env python3
"""What one start of a sample tool costs, in CPU time: the test suite starts the stand-ins
thousands of times (superpmi alone about 2,700 times per run), so their start-up is most of
what the sample toolchain costs a test run (sample/README.md, sample/plain.py).

Generates a small sample toolchain in a temporary folder, then runs each command `--runs`
times, one after the other, and prints the mean CPU time (user + system) of the child
process, next to a bare `python -S -c pass` (the floor no tool goes below). CPU time, not
wall time: a busy shared machine distorts it least. Numbers only; nothing is asserted.

    python bench/sample_tool_start.py [--runs 30] [--contexts 120] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Tuple

from bench_support import load_average, make_sample_toolchain, mean_child_cpu_ms, positive_int, work_folder


def commands(toolchain: Path) -> List[Tuple[str, List[str]]]:
    core_root = toolchain / "core_root"
    [mch] = sorted((toolchain / "collections").rglob("libraries.pmi.linux.x64.checked.mch"))
    jit = str(core_root / "libclrjit.so")
    base = str(toolchain / "base" / "libclrjit.so")
    return [
        ("python -S -c pass", [sys.executable, "-S", "-c", "pass"]),
        ("superpmi (usage)", [str(core_root / "superpmi")]),
        ("superpmi replay", [str(core_root / "superpmi"), "-v", "ewi", jit, str(mch)]),
        ("superpmi replay -p", [str(core_root / "superpmi"), "-v", "ewi", "-p", jit, str(mch)]),
        ("superpmi asm diffs", [str(core_root / "superpmi"), "-a", "-v", "ewi", base, jit, str(mch)]),
        ("mcs -toc", [str(core_root / "mcs"), "-toc", str(mch)]),
        ("mcs -printJITEEVersion", [str(core_root / "mcs"), "-printJITEEVersion"]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=30, help="starts per command (default 30)")
    parser.add_argument("--contexts", type=positive_int, default=120, help="contexts per collection (default 120)")
    parser.add_argument("--keep", help="make the toolchain in this folder and leave it there")
    args = parser.parse_args()
    if os.name == "nt":
        print("sample_tool_start.py: needs the CPU time of child processes (Linux or macOS)", file=sys.stderr)
        return 1
    with work_folder(args.keep, "spmi-bench-start-") as work:
        toolchain = work / "toolchain"
        if not (toolchain / "core_root").is_dir():
            make_sample_toolchain(toolchain, args.contexts)
        print(f"{args.runs} starts each, mean CPU ms per start (load average {load_average()})")
        for label, argv in commands(toolchain):
            print(f"{mean_child_cpu_ms(argv, args.runs):8.1f}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
