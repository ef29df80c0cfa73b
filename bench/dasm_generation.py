#!/usr/bin/env python3
"""Batched vs one-context-per-process `.dasm` generation (dasm_gen.py) on a sample toolchain.

Makes a sample toolchain (linux-x64, one collection) in a temporary folder, runs one
`superpmi -a` to get the details CSV, picks the same N contexts (default 200, spread
over the collection), then generates the base and diff listings of those contexts

* batched: ⌈W/2⌉ chunks per JIT (W = --workers, default CPU count), one process each, W at a time;
* per context: one process per context and JIT (what the original scripts do);

with the toolchain's default modelled process start cost (unless --start-ms), and
prints wall time, process counts, the ratio and whether every file is byte-identical.

    python bench/dasm_generation.py [--contexts 200] [--collection-size 1500] [--workers N]
                                    [--start-ms MS] [--toolchain DIR] [--keep DIR]

Numbers only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from bench_support import ROOT, make_sample_toolchain, work_folder

sys.path.insert(0, str(ROOT))

from spmi.formats import details
from spmi.tools import dasm_gen, superpmi_tool


def diff_details(toolchain: Path, mch: Path, work: Path) -> details.DetailsTable:
    core_root = toolchain / "core_root"
    csv = work / "details.csv"
    forced = superpmi_tool.asmdiffs_replay_options(False)
    options = superpmi_tool.option_flags("-jitoption", forced, True) + superpmi_tool.option_flags("-jit2option",
                                                                                                 forced, True)
    subprocess.run([str(core_root / "superpmi"), "-a", "-v", "ewi", "-p", "-f", str(work / "fail.mcl"),
                    "-details", str(csv), *options, str(toolchain / "base" / "libclrjit.so"),
                    str(core_root / "libclrjit.so"), str(mch)],
                   cwd=core_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return details.read_details_csv(csv)


def spread(values: List[int], count: int) -> List[int]:
    if len(values) <= count:
        return values
    step = len(values) / count
    return sorted({values[int(i * step)] for i in range(count)})


def generate(toolchain: Path, mch: Path, out: Path, contexts: List[int],
             expected: Dict[int, dasm_gen.ExpectedMethod], base_sizes: Dict[int, int], workers: int, batched: bool):
    setup = dasm_gen.ListingSetup(superpmi=toolchain / "core_root" / "superpmi", core_root=toolchain / "core_root",
                                  mch=mch, host_arch="x64", target_arch="x64", altjit=False,
                                  forced=superpmi_tool.asmdiffs_replay_options(False), env=dasm_gen.listing_env(),
                                  scratch_dir=out / "scratch")
    sides = [dasm_gen.JitSide("base", toolchain / "base" / "libclrjit.so", [], out / "base", strict_names=False,
                              sizes=base_sizes),
             dasm_gen.JitSide("diff", toolchain / "core_root" / "libclrjit.so", [], out / "diff")]
    started = time.perf_counter()
    report = dasm_gen.generate_listings(setup, sides, contexts, expected, workers, batched=batched)
    return time.perf_counter() - started, report


def tree(root: Path) -> Dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.dasm"))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=200, help="picked contexts (default 200)")
    parser.add_argument("--collection-size", type=int, default=1500, help="contexts in the sample collection")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="W (default: CPU count)")
    parser.add_argument("--start-ms", type=float, help="modelled superpmi start cost (default: the toolchain's)")
    parser.add_argument("--toolchain", help="use this existing sample toolchain")
    parser.add_argument("--keep", help="keep the work folder here")
    args = parser.parse_args()
    if args.start_ms is not None:
        os.environ["SPMI_SAMPLE_START_MS"] = str(args.start_ms)
    with work_folder(args.keep, "bench-dasm-") as work:
        toolchain = Path(args.toolchain) if args.toolchain else work / "toolchain"
        if not args.toolchain:
            make_sample_toolchain(toolchain, args.collection_size)
        [mch] = sorted(toolchain.glob("collections/*/linux/x64/libraries.pmi.*.mch"))
        table = diff_details(toolchain, mch, work)
        expected = {r.context: dasm_gen.ExpectedMethod(r.method_name, r.tier) for r in table.rows}
        picked = spread(sorted(r.context for r in table.rows if r.both_succeeded), args.contexts)
        print(f"{len(picked)} picked contexts of {len(table.rows)}, workers W={args.workers}, "
              f"start cost {os.environ.get('SPMI_SAMPLE_START_MS', 'default')} ms")
        sizes = {r.context: int(r.base(details.CODE_BYTES)) for r in table.rows}
        t_batch, batch = generate(toolchain, mch, work / "batched", picked, expected, sizes, args.workers, True)
        t_single, single = generate(toolchain, mch, work / "single", picked, expected, sizes, args.workers, False)
        same = tree(work / "batched") == tree(work / "single")
        files = len(tree(work / "batched"))
        print(f"batched:     {t_batch:8.2f} s  {batch.processes:5d} superpmi processes  "
              f"({batch.fallback_chunks} chunks fell back, {len(batch.failures)} failures)")
        print(f"per context: {t_single:8.2f} s  {single.processes:5d} superpmi processes  "
              f"({len(single.failures)} failures)")
        print(f"speed-up:    {t_single / t_batch:8.1f}x   files: {files}   byte-identical: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
