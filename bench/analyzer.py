#!/usr/bin/env python3
"""Throughput and memory of the built-in jit-analyze (jitanalyze.py).

Generates, in a temporary folder, base/diff trees of checked-JIT listings in the current
footer format (§7.4) in two shapes -- one method per file (asmdiffs' per-context files)
and several methods per file -- then analyses 1/2 and all of each tree, every run in a
fresh child process, `--rounds` times, and prints the median MB/s of .dasm read on one
core (by the child's CPU time, which is what a busy shared machine does not distort, and
by wall-clock time), the child's peak RSS, and, as "read only", the MB/s by CPU of a child that
only opens, reads and closes the same files (the floor the machine's file calls set).
The point of the two sizes: peak RSS stays flat while the input doubles. Each tree is read once
before its runs, so that they all find it in the page cache.
A second table gives the wall-clock MB/s of the same runs with `--parallelism N` worker
processes for each N of `--parallelism` (default 1,2; the counts take turns in each round), and
each N's speed-up over the first.

    python bench/analyzer.py [--pairs 50000] [--methods-per-file 10] [--rounds 3] [--parallelism 1,2] [--keep DIR]

`--break-even` prints instead, for trees of 1,000 to 32,000 one-method pairs, the median wall
seconds of one process and of 2 workers started by fork, forkserver and spawn (what
`core.worker_count`'s thresholds stand on).

Numbers only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TIERS = ["Tier1", "FullOpts", "Tier0", "Tier1-OSR", "Instrumented Tier0"]
_TYPES = ["int", "long", "ref", "byref", "ubyte", "double", "System.Span`1[ushort]", "ulong"]
_OPS = [
    "mov      rax, qword ptr [rcx+0x08]", "add      eax, edx", "test     rax, rax",
    "lea      rdx, [rsp+0x20]",
    "call     [System.Runtime.CompilerServices.RuntimeHelpers:GetHashCode(System.Object):int]",
    "cmp      ecx, dword ptr [rax+0x08]", "vmovups  ymm0, ymmword ptr [rdx]", "xor      r8d, r8d",
    "movzx    r9, word  ptr [rcx+2*r10+0x0C]", "mov      gword ptr [rbx+0x10], rsi", "inc      r10d",
    "vaddps   ymm1, ymm1, ymm0", "pop      rbx", "push     rbp", "mov      rcx, 0xD1FFAB1E      ; const ptr",
]


def _group_pool(rng: random.Random, count: int = 256) -> List[Tuple[str, int]]:
    """Reusable instruction groups (text, size in bytes) to assemble method bodies."""
    pool = []
    for _ in range(count):
        n = rng.randint(3, 9)
        lines = ["       " + rng.choice(_OPS) for _ in range(n)]
        size = sum(rng.randint(2, 7) for _ in range(n))
        pool.append(("\n".join(lines) + "\n\t\t\t\t\t\t;; size=%d bbWeight=%s PerfScore %.2f\n"
                     % (size, rng.choice(["1", "0.50", "4", "0.25"]), n * 1.25), size))
    return pool


def _method_text(i: int, rng: random.Random, pool: List[Tuple[str, int]], change: bool) -> str:
    tier = _TIERS[i % len(_TIERS)]
    args = ",".join(rng.choice(_TYPES) for _ in range(rng.randint(0, 4)))
    name = "Bench.Ns%d.Type%d`1[System.__Canon]:Method%d(%s):%s:this (%s)" % (
        i % 53, i % 997, i, args, rng.choice(_TYPES), tier)
    h = rng.randint(1000, 65000)
    out = ["; Assembly listing for method %s\n; Emitting BLENDED_CODE for x64 + VEX + EVEX on Windows\n"
           "; %s code\n; optimized code\n; rsp based frame\n; partially interruptible\n; No PGO data\n"
           "; Final local variable assignments\n;\n" % (name, tier)]
    for v in range(rng.randint(3, 12)):
        out.append(";  V%02d loc%d         [V%02d,T%02d] (  3,  6   )    long  ->  rcx         single-def\n"
                   % (v, v, v, v))
    out.append(";\n; Lcl frame size = 40\n\n")
    code = perf = 0.0
    count = 0
    for g in range(rng.randint(6, 14)):
        text, size = rng.choice(pool)
        out.append("G_M%d_IG%02d:\n" % (h, g + 1))
        out.append(text)
        code += size
        count += text.count("\n") - 1
        perf += 3.25
    if change:
        out.append("G_M%d_IG99:\n       nop      \n\t\t\t\t\t\t;; size=1 bbWeight=1 PerfScore 0.25\n" % h)
        code += 1 + (i % 7)
        perf += 0.25 + (i % 5) * 0.5
    out.append("\n; Total bytes of code %d, prolog size 4, PerfScore %.2f, instruction count %d, allocated bytes"
               " for code %d (MethodHash=%08x) for method %s\n; ============================================"
               "================\n\n" % (code, perf, count, code, rng.getrandbits(32), name))
    return "".join(out)


def generate(root: str, pairs: int, per_file: int) -> int:
    """Write root/{base,diff}/p{0,1}/*.dasm; returns total bytes written."""
    total = 0
    pool = _group_pool(random.Random(7))
    for side in ("base", "diff"):
        for part in (0, 1):
            os.makedirs(os.path.join(root, side, "p%d" % part), exist_ok=True)
        method = 0
        file_no = 0
        while method < pairs:
            part = 0 if method < pairs // 2 else 1
            texts = []
            for _ in range(per_file):
                if method >= pairs:
                    break
                change = side == "diff" and method % 3 == 0
                # Seeded per method so that base and diff listings differ only by the change.
                texts.append(_method_text(method, random.Random(method), pool, change))
                method += 1
            data = "".join(texts).encode()
            with open(os.path.join(root, side, "p%d" % part, "%d.dasm" % file_no), "wb") as f:
                f.write(data)
            total += len(data)
            file_no += 1
    return total


def _listing_paths(root: str, recursive: bool) -> List[str]:
    found = []
    for folder, subfolders, names in os.walk(root):
        found += [os.path.join(folder, name) for name in names if name.endswith(".dasm")]
        if not recursive:
            subfolders.clear()
    return found


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(listing) for listing in _listing_paths(path, True))


def _both_trees(base: str, diff: str, recursive: bool) -> List[str]:
    return _listing_paths(base, recursive) + _listing_paths(diff, recursive)


def _read_each_to_its_end(paths: List[str]) -> None:
    """Open, read to its end and close every file, with the calls the analyzer makes."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        while os.read(fd, 1 << 16):
            pass
        os.close(fd)


def read_into_page_cache(base: str, diff: str, recursive: bool) -> None:
    """Read both trees once, so that no measured run pays for the disk reads of files the page cache
    dropped meanwhile (a small machine's cache holds about one tree; the first run would be slower)."""
    _read_each_to_its_end(_both_trees(base, diff, recursive))


def read_only_child(base: str, diff: str, recursive: bool) -> None:
    """The floor any analysis of these trees stands on: every listing opened, read to its end and
    closed, and nothing else."""
    paths = _both_trees(base, diff, recursive)
    start, cpu_start = time.perf_counter(), time.process_time()
    _read_each_to_its_end(paths)
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu_start}))


def child(base: str, diff: str, recursive: bool, parallelism: int, start_method: str = "") -> None:
    sys.path.insert(0, ROOT)
    from spmi.analyzer import compare, core, workers

    if start_method:  # how this run's workers start, whatever the platform and the count
        workers._start_method = lambda: start_method
        core._MIN_PAIRS_PER_FORKED_WORKER = core._MIN_PAIRS_PER_STARTED_WORKER = 1

    options = compare.AnalyzeOptions(metrics=["CodeSize", "PerfScore"], recursive=recursive, parallelism=parallelism)
    start, cpu_start = time.perf_counter(), time.process_time()
    result = core.analyze(base, diff, options)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss_mb = rss / (1 << 20) if sys.platform == "darwin" else rss / 1024
    except ImportError:  # Windows
        rss_mb = float("nan")
    s = result.summaries["CodeSize"]
    print(json.dumps({"seconds": seconds, "cpu": cpu, "rss_mb": rss_mb, "files": result.paired_files,
                      "changed": s.changed_methods, "paired": s.paired_methods}))


def measure(base: str, diff: str, recursive: bool, parallelism: int = 1, read_only: bool = False,
            start_method: str = "") -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--child", base, diff, "--child-parallelism", str(parallelism)]
    argv += (["-r"] if recursive else []) + (["--child-read-only"] if read_only else [])
    argv += ["--child-start-method", start_method] if start_method else []
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def measure_median(base: str, diff: str, recursive: bool, rounds: int) -> dict:
    """The run with the median CPU time of `rounds` runs (and the largest peak RSS), and the median
    CPU time of reading the same files only (`read_only_cpu`); the two take turns."""
    runs, reads = [], []
    read_into_page_cache(base, diff, recursive)
    for _ in range(rounds):
        runs.append(measure(base, diff, recursive))
        reads.append(measure(base, diff, recursive, read_only=True)["cpu"])
    runs.sort(key=lambda r: r["cpu"])
    median = dict(runs[len(runs) // 2])
    median["seconds"] = statistics.median(r["seconds"] for r in runs)
    median["rss_mb"] = max(r["rss_mb"] for r in runs)
    median["read_only_cpu"] = statistics.median(reads)
    return median


def median_walls(base: str, diff: str, recursive: bool, rounds: int, ways: List[Tuple[int, str]]) -> List[float]:
    """The median wall-clock seconds of `rounds` runs each way (process count, start method or "" for
    the platform's). The ways take turns within each round, so that a machine slowing down or
    speeding up meanwhile does not favour one of them."""
    walls: List[List[float]] = [[] for _ in ways]
    read_into_page_cache(base, diff, recursive)
    for _ in range(rounds):
        for times, (processes, start_method) in zip(walls, ways):
            times.append(measure(base, diff, recursive, processes, start_method=start_method)["seconds"])
    return [statistics.median(times) for times in walls]


def parallelism_values(text: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma list of process counts (1 or more)")
    return values


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=50000, help="method pairs per tree (default 50000)")
    p.add_argument("--methods-per-file", type=int, default=10, help="methods per file in the second shape")
    p.add_argument("--rounds", type=int, default=3, help="runs per measurement; medians are shown (default 3)")
    p.add_argument("--parallelism", type=parallelism_values, default=[1, 2], metavar="N,N...",
                   help="worker processes of the second table's runs (default 1,2)")
    p.add_argument("--keep", help="generate into this folder and keep it")
    p.add_argument("--child", nargs=2, metavar=("BASE", "DIFF"), help=argparse.SUPPRESS)
    p.add_argument("--child-parallelism", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--break-even", action="store_true",
                   help="instead: from how many one-method pairs 2 workers beat one process, by start method")
    p.add_argument("--child-read-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-start-method", default="", help=argparse.SUPPRESS)
    p.add_argument("-r", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if args.child_read_only:
            read_only_child(args.child[0], args.child[1], args.r)
        else:
            child(args.child[0], args.child[1], args.r, args.child_parallelism, args.child_start_method)
        return
    work = args.keep or tempfile.mkdtemp(prefix="jitanalyze-bench-")
    try:
        if args.break_even:
            print_break_even(work, args.rounds)
            return
        print("%-22s %7s %6s %8s %7s %7s %9s %10s %9s %10s" % (
            "shape", "pairs", "files", "MB read", "wall s", "CPU s", "MB/s CPU", "MB/s wall", "peak RSS",
            "read only"))
        runs = []
        for shape, per_file in (("one method per file", 1), ("%d methods per file" % args.methods_per_file,
                                                             args.methods_per_file)):
            root = os.path.join(work, "shape%d" % per_file)
            if not os.path.isdir(root):
                generate(root, args.pairs, per_file)
            for pairs, base, diff, recursive in (
                    (args.pairs // 2, os.path.join(root, "base", "p0"), os.path.join(root, "diff", "p0"), False),
                    (args.pairs, os.path.join(root, "base"), os.path.join(root, "diff"), True)):
                mb = (_tree_bytes(base) + _tree_bytes(diff)) / 1e6
                r = measure_median(base, diff, recursive, args.rounds)
                print("%-22s %7d %6d %8.1f %7.2f %7.2f %9.1f %10.1f %6.1f MB %10.1f" % (
                    shape, pairs, r["files"], mb, r["seconds"], r["cpu"], mb / r["cpu"], mb / r["seconds"],
                    r["rss_mb"], mb / r["read_only_cpu"]))
                runs.append((shape, pairs, mb, base, diff, recursive))
        print_parallel_table(runs, args.parallelism, args.rounds)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def print_parallel_table(runs: List[Tuple[str, int, float, str, str, bool]], parallelism: List[int],
                         rounds: int) -> None:
    """Wall-clock MB/s of each run per worker count, and each count's speed-up over the first."""
    first = parallelism[0]
    print()
    print("%-22s %7s" % ("MB/s wall", "pairs") + "".join("%9s" % ("-p %d" % n) for n in parallelism)
          + "".join("%9s" % ("%d/%d" % (n, first)) for n in parallelism[1:]))
    for shape, pairs, mb, base, diff, recursive in runs:
        walls = median_walls(base, diff, recursive, rounds, [(n, "") for n in parallelism])
        speeds = [mb / seconds for seconds in walls]
        print("%-22s %7d" % (shape, pairs) + "".join("%9.1f" % v for v in speeds)
              + "".join("%9.2f" % (v / speeds[0]) for v in speeds[1:]))


_BREAK_EVEN_PAIRS = (1000, 2000, 4000, 8000, 16000, 32000)
_START_METHODS = ("fork", "forkserver", "spawn")


def print_break_even(work: str, rounds: int) -> None:
    """Median wall seconds of one process and of 2 workers started each way (every worker start
    forced, whatever core.worker_count would pick), for trees of one-method pairs of growing size."""
    import multiprocessing

    methods = [m for m in _START_METHODS if m in multiprocessing.get_all_start_methods()]
    print("%-8s %9s" % ("pairs", "1 process") + "".join("%17s" % ("2 by " + m) for m in methods))
    for pairs in _BREAK_EVEN_PAIRS:
        root = os.path.join(work, "break_even%d" % pairs)
        if not os.path.isdir(root):
            generate(root, pairs, 1)
        walls = median_walls(os.path.join(root, "base"), os.path.join(root, "diff"), True, rounds,
                             [(1, "")] + [(2, method) for method in methods])
        print("%-8d %9.3f" % (pairs, walls[0]) + "".join("%17.3f" % seconds for seconds in walls[1:]))


if __name__ == "__main__":
    main()
