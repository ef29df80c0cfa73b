#!/usr/bin/env python3
"""Time the sample toolchain generator and a sequential replay of the big collection.

    python bench/make_toolchain.py [--contexts 100000] [--replay 50000] [--out DIR]

Prints the figures (seconds); asserts nothing.  The goal is generation of
100,000 contexts (one target, one collection) in under a minute, and a
sequential replay of 50,000 contexts within a few seconds of the modelled costs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command, cwd=None, env=None, allowed=(0,)) -> float:
    started = time.perf_counter()
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    if result.returncode not in allowed:
        raise SystemExit("bench: %s exited %d" % (command[0], result.returncode))
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=100000)
    parser.add_argument("--replay", type=int, default=50000, help="contexts of the replay timing (0: skip)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch) / "toolchain"
        seconds = timed([sys.executable, ROOT / "sample" / "make_toolchain.py", out, "--contexts", args.contexts,
                         "--targets", "linux-x64", "--collections", "libraries.pmi"])
        print("make_toolchain --contexts %d --targets linux-x64 --collections libraries.pmi: %.2f s"
              % (args.contexts, seconds), flush=True)
        if not args.replay:
            return 0
        [mch] = sorted(out.glob("collections/*/linux/x64/libraries.pmi.*.mch"))
        small = Path(scratch) / "replay.mch"
        subprocess.run([out / "core_root" / "mcs", "-strip", "%d-%d" % (args.replay + 1, args.contexts + 1), mch,
                        small], check=True, stdout=subprocess.DEVNULL)
        base = out / "base" / "libclrjit.so"
        diff = out / "core_root" / "libclrjit.so"
        for label, costs in (("no modelled costs", {"SPMI_SAMPLE_START_MS": "0", "SPMI_SAMPLE_COMPILE_US": "0"}),
                             ("default modelled costs", {})):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("DOTNET_", "SPMI_SAMPLE_"))}
            env.update(costs)
            replay = timed([out / "core_root" / "superpmi", "-v", "ewi", "-details", Path(scratch) / "r.csv", base,
                            small], cwd=out / "core_root", env=env)
            diffs = timed([out / "core_root" / "superpmi", "-a", "-v", "ewi", "-details", Path(scratch) / "d.csv",
                           base, diff, small], cwd=out / "core_root", env=env, allowed=(0, 2))
            print("sequential replay of %d contexts (%s): %.2f s; with -applyDiff: %.2f s"
                  % (args.replay, label, replay, diffs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
