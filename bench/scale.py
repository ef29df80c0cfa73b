#!/usr/bin/env python3
"""How `superpmi.py asmdiffs` scales with the size of a collection.

For each size (default 100,000 / 500,000 / 1,000,000 / 2,000,000 contexts) makes a sample toolchain
with one collection of that many contexts (linux-x64 libraries.pmi; reused when
`--keep DIR` already holds it), runs `superpmi.py asmdiffs` on it once through a small
wrapper that reports the suite process's own peak RSS and CPU time at exit (its children,
superpmi and the listing runs, are not counted), and prints:

    contexts, suite peak RSS (MB), suite CPU (s), suite CPU per context (µs), wall (s)

The sample collections have diffs in about 13% of their contexts (265,530 of 2,000,000).
Goals: peak RSS <= 200 MB at 1,000,000 contexts and <= 160 MB at 2,000,000 (with the HTML
report and with --no_html); <= 10 µs of suite CPU per context.
The sample superpmi's modelled costs are set to 0 so that the runs stay short.
Numbers only; nothing is asserted. Unix only (resource module).

    python bench/scale.py [--sizes 100000,500000] [--keep DIR] [--no_html]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from bench_support import ROOT, load_average, make_sample_toolchain, work_folder

#: Runs a script (argv[1:]) and writes its own peak RSS (KiB) and CPU seconds to stderr at exit.
SELF_USAGE_WRAPPER = """
import atexit, os, resource, runpy, sys
def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    os.write(2, b"\\nself-usage %d %f\\n" % (usage.ru_maxrss, usage.ru_utime + usage.ru_stime))
atexit.register(report)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def toolchain_for(work: Path, contexts: int) -> Path:
    """A toolchain of `contexts` contexts under `work`, made unless already there."""
    toolchain = work / f"toolchain-{contexts}"
    if not (toolchain / "toolchain.json").exists():
        started = time.perf_counter()
        make_sample_toolchain(toolchain, contexts, ("--seed", "5", "--targets", "linux-x64",
                                                     "--collections", "libraries.pmi"))
        print(f"  (toolchain of {contexts} contexts made in {time.perf_counter() - started:.0f} s)", flush=True)
    return toolchain


def run_asmdiffs(toolchain: Path, out: Path, extra: List[str]) -> Dict[str, float]:
    [mch] = sorted(toolchain.glob("collections/*/linux/x64/libraries.pmi.*.mch"))
    argv = [sys.executable, "-c", SELF_USAGE_WRAPPER, str(ROOT / "superpmi.py"), "asmdiffs",
            "-arch", "x64", "-target_os", "linux", "-target_arch", "x64",
            "-core_root", str(toolchain / "core_root"), "-base_jit_path", str(toolchain / "base" / "libclrjit.so"),
            "-mch_files", str(mch), "-spmi_location", str(out), "--no_progress", *extra]
    env = dict(os.environ, SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US="0")
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    reports = [line.split() for line in proc.stderr.splitlines() if line.startswith("self-usage ")]
    if not reports:
        raise SystemExit(f"asmdiffs exited {proc.returncode} without a usage report: {proc.stderr[-2000:]}")
    _, rss_kib, cpu = reports[-1]
    return {"code": proc.returncode, "rss_mb": int(rss_kib) / 1024, "cpu": float(cpu), "wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,500000,1000000,2000000", help="comma-separated context counts")
    parser.add_argument("--keep", help="make (or reuse) the toolchains here and keep them")
    parser.add_argument("--no_html", action="store_true",
                        help="pass --no_html (no HTML diff explorer: its cost follows the picked listings, "
                             "not the contexts)")
    args = parser.parse_args()
    sizes: List[int] = [int(size) for size in args.sizes.split(",") if size]
    print(f"cores: {os.cpu_count()}, load average before: {load_average()}")
    print(f"{'contexts':>10} {'exit':>4} {'peak RSS MB':>12} {'suite CPU s':>12} {'µs/context':>11} {'wall s':>8}"
          f"  load")
    with work_folder(args.keep, "bench-scale-") as work:
        for contexts in sizes:
            toolchain = toolchain_for(work, contexts)
            figures = run_asmdiffs(toolchain, work / f"spmi-{contexts}-{time.time_ns()}",
                                   ["--no_html"] if args.no_html else [])
            print(f"{contexts:>10} {figures['code']:>4} {figures['rss_mb']:>12.1f} {figures['cpu']:>12.2f} "
                  f"{figures['cpu'] / contexts * 1e6:>11.2f} {figures['wall']:>8.1f}  {load_average()}", flush=True)
    print("goals: peak RSS <= 200 MB at 1,000,000 contexts, <= 160 MB at 2,000,000 (with or without --no_html); "
          "<= 10 µs suite CPU per context")
    return 0


if __name__ == "__main__":
    sys.exit(main())
