#!/usr/bin/env python3
"""What memdiff or tpdiff costs on top of the superpmi (or pin) runs it needs.

Generates a sample toolchain in a temporary folder, then, alternating, for each round:

* `superpmi.py memdiff` (or `tpdiff --command tpdiff`) over the native collections (release
  base vs release diff JITs), wall-clock time of the whole command (Python start, option
  parsing, JIT checks, CSV reading, aggregation, method names, summaries);
* the raw processes the command starts to measure: the same argument vectors (built by
  `metricdiff.build_metric_argv`; tpdiff: pin in front of superpmi), the same collections, the
  same working directory, one after the other. Nothing else (tpdiff's `mcs -dumpMap`, which
  names the example methods, counts as the command's own work).

Prints the medians and the ratio command / raw (goals: memdiff at most 1.10, tpdiff at most
1.05), plus the time the command spends outside those processes, by wall clock and by CPU time
of all child processes (the CPU figure is what a busy shared machine distorts least). Where the
platform reports it, also the CPU time of the command's process itself (superpmi.py run through a
small wrapper that prints it at exit) and 1 + that / raw: the same ratio without the noise of two
separate sets of runs. Numbers only; nothing is asserted.

    python bench/replay_overhead.py [--command memdiff|tpdiff] [--contexts 5000] [--rounds 3]
                                    [--sequential] [--keep DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Tuple

from bench_support import ROOT, children_cpu, make_sample_toolchain, work_folder

sys.path.insert(0, str(ROOT))

from spmi.commands import metricdiff
from spmi.tools.pintools import PinTool
from spmi.tools.superpmi_tool import JitPairOptions, RunOptions, SuperpmiInvocation


def make_toolchain(directory: Path, contexts: int) -> dict:
    make_sample_toolchain(directory, contexts, ("--seed", "3", "--targets", "linux-x64"))
    return json.loads((directory / "toolchain.json").read_text(encoding="utf-8"))


def bytecode_env(work: Path, toolchain: Path) -> dict:
    """Environment for both sides: byte code cached under `work` and compiled up front.

    (A machine with PYTHONDONTWRITEBYTECODE would otherwise recompile every module at
    every start of superpmi.py and of the sample superpmi, which a normal install does not.)
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    sources = [str(p) for p in ROOT.glob("*.py")] + [str(toolchain / "core_root" / "lib")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *sources], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return env


def measured(action: Callable[[], float]) -> Tuple[float, float]:
    """(wall seconds, child CPU seconds) of one action."""
    cpu_before = children_cpu()
    wall = action()
    return wall, children_cpu() - cpu_before


#: Runs a script (argv[1:]) and writes its own CPU seconds (not its children's) to stderr at exit.
SELF_CPU_WRAPPER = """
import atexit, os, resource, runpy, sys
def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    os.write(2, b"\\nself-cpu %f\\n" % (usage.ru_utime + usage.ru_stime))
atexit.register(report)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def self_cpu_supported() -> bool:
    return importlib.util.find_spec("resource") is not None  # not on Windows


GOALS = {"memdiff": 1.10, "tpdiff": 1.05}


def pin_folder(manifest: dict) -> Path:
    """The folder of the sample pin kit (`pin` and its pintools), as `-pin_path` takes it."""
    return Path(manifest["pin"]).parent


def sample_pin(manifest: dict) -> PinTool:
    return PinTool(Path(manifest["pin"]), Path(manifest["pintool"]))


def time_command(command: str, toolchain: Path, manifest: dict, collections: List[str], spmi: Path,
                 sequential: bool, env: dict, self_cpu: List[float]) -> float:
    """Wall seconds of one memdiff/tpdiff command; its own CPU seconds are appended to `self_cpu`."""
    native = next(iter(manifest["jit_names"]))
    jit = manifest["jit_names"][native]
    wrapper = [sys.executable, "-c", SELF_CPU_WRAPPER] if self_cpu_supported() else [sys.executable]
    argv = [*wrapper, str(ROOT / "superpmi.py"), command, "-core_root", str(Path(manifest["superpmi"]).parent),
            "-base_jit_path", str(toolchain / "release" / "base" / jit),
            "-diff_jit_path", str(toolchain / "release" / "diff" / jit),
            "-spmi_location", str(spmi), "-mch_files", *collections]
    if command == "tpdiff":
        argv += ["-pin_path", str(pin_folder(manifest))]
    if sequential:
        argv.append("--sequential")
    started = time.perf_counter()
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 2):
        raise SystemExit(f"{command} failed ({result.returncode}): {result.stderr.strip()}")
    reports = [line.split()[1] for line in result.stderr.splitlines() if line.startswith("self-cpu ")]
    if reports:
        self_cpu.append(float(reports[-1]))
    return elapsed


def time_raw(command: str, toolchain: Path, manifest: dict, collections: List[str], scratch: Path,
             sequential: bool, env: dict) -> float:
    native = next(iter(manifest["jit_names"]))
    jit = manifest["jit_names"][native]
    superpmi = Path(manifest["superpmi"])
    call = SuperpmiInvocation(superpmi, manifest["host_arch"], manifest["host_arch"],
                              RunOptions(sequential=sequential))
    started = time.perf_counter()
    for index, mch in enumerate(collections):
        argv = metricdiff.build_metric_argv(call, toolchain / "release" / "base" / jit,
                                            toolchain / "release" / "diff" / jit, mch, scratch / f"{index}.csv",
                                            JitPairOptions(), report_metrics=command != "tpdiff",
                                            pin=sample_pin(manifest) if command == "tpdiff" else None)
        subprocess.run(argv, cwd=str(superpmi.parent), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--command", choices=sorted(GOALS), default="memdiff", help="the command measured")
    parser.add_argument("--contexts", type=int, default=5000, help="contexts per collection (default 5000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sequential", action="store_true", help="superpmi without -p (both sides)")
    parser.add_argument("--keep", help="generate the toolchain here and keep it")
    args = parser.parse_args()
    with work_folder(args.keep, "bench-replay-") as work:
        manifest = make_toolchain(work / "toolchain", args.contexts)
        collections = [p for paths in manifest["collections"].values() for p in paths]
        env = bytecode_env(work, work / "toolchain")
        command = args.command
        command_times: List[Tuple[float, float]] = []
        raw_times: List[Tuple[float, float]] = []
        self_cpu: List[float] = []
        for round_index in range(args.rounds):
            scratch = work / f"raw{round_index}"
            scratch.mkdir(parents=True)
            raw_times.append(measured(lambda scratch=scratch: time_raw(command, work / "toolchain", manifest,
                                                                       collections, scratch, args.sequential, env)))
            spmi = work / f"spmi{round_index}"
            command_times.append(measured(lambda spmi=spmi: time_command(command, work / "toolchain", manifest,
                                                                         collections, spmi, args.sequential, env,
                                                                         self_cpu)))
        mode = "sequential" if args.sequential else "parallel (-p)"
        raw_name = "raw pin+superpmi runs" if command == "tpdiff" else "raw superpmi runs"
        print(f"{command}: collections: {len(collections)} x {args.contexts} contexts, superpmi {mode}, "
              f"{args.rounds} rounds")
        for label, index in (("wall", 0), ("CPU", 1)):
            raw = [t[index] for t in raw_times]
            mine = [t[index] for t in command_times]
            if not any(raw):
                continue
            raw_median, mine_median = statistics.median(raw), statistics.median(mine)
            print(f"{label:4} {raw_name:22}: median {raw_median:.2f} s  ({', '.join(f'{t:.2f}' for t in raw)})")
            print(f"{label:4} {command + ' command':22}: median {mine_median:.2f} s  "
                  f"({', '.join(f'{t:.2f}' for t in mine)})")
            print(f"{label:4} {command + ' overhead':22}: {mine_median - raw_median:.2f} s outside them")
            print(f"{label:4} {'ratio ' + command + '/raw':22}: {mine_median / raw_median:.3f}  "
                  f"(goal <= {GOALS[command]:.2f})")
            if label == "CPU" and self_cpu:
                own = statistics.median(self_cpu)
                print(f"CPU  {command} process itself: median {own:.2f} s  "
                      f"({', '.join(f'{t:.2f}' for t in self_cpu)})")
                print(f"CPU  1 + itself / raw      : {1 + own / raw_median:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
