#!/usr/bin/env python3
"""What `superpmi.py asmdiffs` costs on top of the superpmi runs it needs.

Makes a sample toolchain with one large collection (default 50,000 contexts,
linux-x64) in a temporary folder, runs `superpmi.py asmdiffs` on it (timed, DEBUG
log kept), then re-runs exactly the superpmi processes that run started -- read
from its log: the `superpmi -a` replay, then the batched listing runs with the same
parallelism -- and prints both wall times and their ratio (goal: at most 1.10).

    python bench/asmdiffs_overhead.py [--contexts 50000] [--parallelism N] [--compile-us US]
                                      [--repeat 3] [--toolchain DIR] [--keep DIR]

Numbers only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

from bench_support import ROOT, make_sample_toolchain, work_folder

Command = Tuple[List[str], Dict[str, str]]


def superpmi_commands(log_text: str, superpmi: str) -> List[Command]:
    """Every superpmi process the run started (the runner's DEBUG `Invoking:` lines and their environment)."""
    lines = log_text.splitlines()
    commands: List[Command] = []
    for index, line in enumerate(lines):
        marker = "] Invoking: "
        if marker not in line:
            continue
        argv = shlex.split(line.split(marker, 1)[1])
        if not argv or argv[0] != superpmi:
            continue
        env: Dict[str, str] = {}
        if index + 1 < len(lines) and "]   with environment: " in lines[index + 1]:
            for pair in lines[index + 1].split("]   with environment: ", 1)[1].split():
                key, _, value = pair.partition("=")
                env[key] = value
        if commands and commands[-1][0] == argv and not env:
            continue  # the command's own INFO line followed by the runner's DEBUG line
        if commands and commands[-1][0] == argv and not commands[-1][1]:
            commands[-1] = (argv, env)
            continue
        commands.append((argv, env))
    return commands


def run_raw(command: Command, cwd: Path) -> None:
    argv, env = command
    for arg in argv:
        if arg.startswith("JitStdOutFile="):
            Path(arg.split("=", 1)[1]).unlink(missing_ok=True)
    subprocess.run(argv, cwd=cwd, env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_suite(args: argparse.Namespace, toolchain: Path, mch: Path, work: Path) -> Tuple[int, float, List[Command]]:
    """One timed `superpmi.py asmdiffs` run; returns its exit code, wall time and superpmi commands."""
    core_root = toolchain / "core_root"
    log_file = work / "asmdiffs.log"
    temp_root = work / "tmp"
    temp_root.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "superpmi.py"), "asmdiffs", "-arch", "x64", "-target_os", "linux",
            "-target_arch", "x64", "-core_root", str(core_root), "-base_jit_path",
            str(toolchain / "base" / "libclrjit.so"), "-mch_files", str(mch), "-spmi_location", str(work / "spmi"),
            "--parallelism", str(args.parallelism), "-log_file", str(log_file), "--skip_cleanup", "--no_progress"]
    started = time.perf_counter()
    proc = subprocess.run(argv, env=dict(os.environ, TMPDIR=str(temp_root)), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    return proc.returncode, elapsed, superpmi_commands(log_file.read_text(encoding="utf-8"), str(core_root / "superpmi"))


def run_raw_commands(replay: List[Command], listings: List[Command], core_root: Path,
                     parallelism: int) -> Tuple[float, float]:
    """The same superpmi processes without the suite: the replay, then the listings with the same parallelism."""
    started = time.perf_counter()
    for command in replay:
        run_raw(command, core_root)
    raw_replay = time.perf_counter() - started
    started = time.perf_counter()
    with futures.ThreadPoolExecutor(max_workers=parallelism) as pool:
        list(pool.map(lambda c: run_raw(c, core_root), listings))
    return raw_replay, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=50000, help="contexts in the collection (default 50,000)")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 1, help="--parallelism for asmdiffs")
    parser.add_argument("--compile-us", type=float,
                        help="modelled cost of one compile in microseconds (default: the toolchain's, 50; "
                             "a real checked JIT takes around 1000)")
    parser.add_argument("--toolchain", help="use this existing sample toolchain (linux-x64 libraries.pmi)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind; the best is reported (default 3)")
    parser.add_argument("--keep", help="keep the work folder here")
    args = parser.parse_args()
    if args.compile_us is not None:
        os.environ["SPMI_SAMPLE_COMPILE_US"] = str(args.compile_us)
    with work_folder(args.keep, "bench-asmdiffs-") as work:
        toolchain = Path(args.toolchain) if args.toolchain else work / "toolchain"
        if not args.toolchain:
            started = time.perf_counter()
            make_sample_toolchain(toolchain, args.contexts)
            print(f"toolchain with {args.contexts} contexts made in {time.perf_counter() - started:.1f} s")
        core_root = toolchain / "core_root"
        [mch] = sorted(toolchain.glob("collections/*/linux/x64/libraries.pmi.*.mch"))
        suite_times: List[float] = []
        raw_times: List[Tuple[float, float]] = []
        for attempt in range(args.repeat):  # alternate, keep the best of each (a shared machine is noisy)
            code, suite, commands = run_suite(args, toolchain, mch, work / f"run{attempt}")
            suite_times.append(suite)
            replay = [c for c in commands if "-a" in c[0]]
            listings = [c for c in commands if "-a" not in c[0]]
            raw_times.append(run_raw_commands(replay, listings, core_root, args.parallelism))
        raw_replay, raw_listings = min(raw_times, key=sum)
        raw, suite = raw_replay + raw_listings, min(suite_times)
        print(f"asmdiffs exit code {code}; {len(replay)} replay run(s), {len(listings)} listing runs "
              f"(parallelism {args.parallelism}, compile cost "
              f"{os.environ.get('SPMI_SAMPLE_COMPILE_US', 'default')} us, best of {args.repeat})")
        print(f"superpmi.py asmdiffs:      {suite:8.2f} s")
        print(f"raw superpmi runs:         {raw:8.2f} s  (replay {raw_replay:.2f} s + listings {raw_listings:.2f} s)")
        print(f"ratio (goal <= 1.10):      {suite / raw:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
