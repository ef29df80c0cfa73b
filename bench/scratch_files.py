#!/usr/bin/env python3
"""What the test run's file churn costs where it keeps its files (tests/scratch_folder.py): in the
checkout (the disk) and on the RAM disk (`/dev/shm`, Linux).

A test run writes and deletes tens of thousands of small files: payload copies per work item,
listings, summaries. For each place, this writes `--files` files of 4 KiB into a tree, copies the
tree (as a work item copies its payload), deletes both, `--rounds` times, and prints the CPU time
(user + system: what the run's two cores pay) and the wall time, with the ratio disk / RAM disk.
Numbers only; nothing is asserted.

    python bench/scratch_files.py [--files 2000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Tuple

from bench_support import load_average, positive_int

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import scratch_folder  # noqa: E402  (the test run's own choice of place)

BLOCK = b"x" * 4096


def churn(root: Path, files: int) -> None:
    tree = root / "tree"
    for index in range(files):
        folder = tree / f"d{index % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index}.txt").write_bytes(BLOCK)
    shutil.copytree(tree, root / "copy")
    shutil.rmtree(tree)
    shutil.rmtree(root / "copy")


def measure(parent: Path, files: int, rounds: int) -> Tuple[float, float]:
    """(CPU seconds, wall seconds) of `rounds` rounds of churn in a fresh folder under `parent`."""
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spmi-bench-scratch-", dir=parent) as work:
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(rounds):
            churn(Path(work), files)
        return time.process_time() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=positive_int, default=2000, help="files per round (default 2000)")
    parser.add_argument("--rounds", type=positive_int, default=5, help="rounds per place (default 5)")
    args = parser.parse_args()
    free = scratch_folder.ram_disk_free()
    if free is None:
        print("scratch_files.py: this machine has no writable RAM disk at /dev/shm", file=sys.stderr)
        return 1
    print(f"load average {load_average()}; {args.rounds} rounds of {args.files:,} files written, copied, deleted")
    places = [("checkout (.pytest_tmp)", REPO / ".pytest_tmp"), ("RAM disk (/dev/shm)", scratch_folder.RAM_DISK)]
    results = []
    for label, parent in places:
        cpu, wall = measure(parent, args.files, args.rounds)
        results.append((cpu, wall))
        print(f"{label:24} CPU {cpu:6.2f} s   wall {wall:6.2f} s")
    (disk_cpu, disk_wall), (ram_cpu, ram_wall) = results
    tiny = 1e-9  # a round too short for the clock
    print(f"disk / RAM disk: CPU x{disk_cpu / max(ram_cpu, tiny):.2f}, wall x{disk_wall / max(ram_wall, tiny):.2f}")
    scratch_folder.remove_if_empty(REPO / ".pytest_tmp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
