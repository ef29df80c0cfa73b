#!/usr/bin/env python3
"""Local pipeline wall time for one target whose collections are spread over several work items.

Makes a sample toolchain for the x86 host queue, gives its windows-x86 target 6 equal
collections (copies of one sample collection under 6 names) in a private store, and
runs `superpmi_asmdiffs_setup.py -type asmdiffs --run_locally -jobs 3` with 1 work item
for the target, then with 3 (`-work_items_per_target 3`), alternating, and prints the
wall times (setup, payload staging, work items, summarize), their ratio, the ideal
ratio on this machine (3 work items at once, but each superpmi already replays with one
process per core) and the core count and load. The store has nothing for the other
target of the queue (linux-arm): its work item tries to download from a closed port and
fails at once, the same in both runs. A checkout whose setup script has no
`-work_items_per_target` only runs the single-work-item case. Numbers only; nothing is
asserted.

    python bench/pipeline_scale.py [--contexts 5000] [--rounds 1] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from bench_support import ROOT, load_average, make_sample_toolchain, work_folder

CLOSED_STORAGE = "http://127.0.0.1:9/devstoreaccount1"
COLLECTIONS = 6


def host_os() -> str:
    return "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")


def make_store(toolchain: Path, store: Path) -> int:
    """6 equal windows-x86 collections in `store`; returns the bytes of one."""
    [source] = sorted(toolchain.glob("collections/*/windows/x86/*.mch"))
    target = store / source.parent.relative_to(toolchain / "collections")
    target.mkdir(parents=True, exist_ok=True)
    for index in range(1, COLLECTIONS + 1):
        name = source.name.replace("libraries.pmi", f"set{index}.pmi")
        shutil.copy2(source, target / name)
        companion = source.with_name(source.name + ".mct")
        if companion.is_file():
            shutil.copy2(companion, target / (name + ".mct"))
    return source.stat().st_size


def supports_parts() -> bool:
    help_text = subprocess.run([sys.executable, str(ROOT / "superpmi_asmdiffs_setup.py"), "--help"],
                               capture_output=True, text=True).stdout
    return "-work_items_per_target" in help_text


def run_pipeline(work: Path, toolchain: Path, store: Path, work_items: int, label: str) -> float:
    payload = work / f"payload_{label}"
    argv = [sys.executable, str(ROOT / "superpmi_asmdiffs_setup.py"), "-product_directory",
            str(toolchain / "core_root"), "-host_arch", "x86", "-payload_directory", str(payload), "--clean",
            "-base_jit_directory", str(toolchain / "base"), "-base_git_hash", "0" * 40, "-private_store", str(store),
            "-type", "asmdiffs", "--run_locally"]
    argv += ["-jobs", "3", "-work_items_per_target", str(work_items)] if supports_parts() else ["-parallelism", "3"]
    env = dict(os.environ, SUPERPMI_STORAGE_URL=CLOSED_STORAGE, SUPERPMI_STORAGE_RETRIES="1")
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.pop("TF_BUILD", None)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=str(work), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - started
    items = sorted(p.name for p in (work / f"payload_{label}_local" / "workitems").iterdir())
    if not any(item.startswith("win-x86") for item in items):
        raise SystemExit(f"the pipeline ran no win-x86 work item (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    print(f"  {label}: {elapsed:7.1f} s  exit {proc.returncode}  work items: {', '.join(items)}", flush=True)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", type=int, default=5000, help="contexts per collection (default 5000)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each kind (medians printed)")
    parser.add_argument("--keep", help="work (and keep) the toolchain and runs here")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"cores: {cores}, load average before: {load_average()}")
    with work_folder(args.keep, "bench-pipeline-") as work:
        toolchain = work / "toolchain"
        if not (toolchain / "toolchain.json").exists():
            make_sample_toolchain(toolchain, args.contexts, ("--host_arch", "x86",
                                                             "--collections", "libraries.pmi", "--seed", "5"))
        store = work / "store"
        shutil.rmtree(store, ignore_errors=True)
        size = make_store(toolchain, store)
        print(f"target windows-x86: {COLLECTIONS} collections x {args.contexts} contexts ({size} bytes each), "
              "-type asmdiffs, -jobs 3")
        counts = [1, 3] if supports_parts() else [1]
        times: Dict[int, List[float]] = {count: [] for count in counts}
        for round_index in range(args.rounds):
            for count in counts:
                label = f"{count}item{'s' if count > 1 else ''}_{round_index}"
                times[count].append(run_pipeline(work, toolchain, store, count, label))
        print(f"load average after: {load_average()}")
        one = statistics.median(times[1])
        print(f"1 work item : {one:7.1f} s")
        if 3 in times:
            three = statistics.median(times[3])
            print(f"3 work items: {three:7.1f} s  -> speed-up {one / three:.2f}x")
        else:
            print("3 work items: n/a (this checkout cannot spread a target over work items)")
        print(f"ideal speed-up here: at most {min(3, cores)}x (3 work items on {cores} core(s); a single work item "
              "already replays with one superpmi process per core, so only its serial parts gain); "
              "goal with 3 free cores: >= 2.5x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
