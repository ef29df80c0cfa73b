#!/usr/bin/env python3
"""Replaying while downloading: wall time of a cold `superpmi.py replay` (or asmdiffs) that
downloads its collections first vs one that starts on each as soon as it is ready.

Starts its own Azurite (tests/azurite.py) behind the loopback fault proxy
(tests/faultproxy.py) limited to `--mbps` MB/s for all connections together (a build
machine's link), publishes a sample toolchain's collections with `superpmi.py upload`, and
times, each with a fresh `-spmi_location`:

* download:   `superpmi.py download` alone (D);
* replay:     the command on the warm cache (R), and R / collections (r: they are the same size);
* sequential: the command with `--no_overlap` on a cold cache (today's behaviour);
* overlapped: the command on a cold cache.

Prints the four, the ideal max(D, R), and the goal 1.15 x max(D, R) + r for the overlapped run.
`--compile_us` is the sample superpmi's modelled cost per compile (it sets how long a replay
takes next to a download). Needs `npm ci` (Azurite). Numbers only; nothing is asserted.

    python bench/overlap.py [--collections 4] [--contexts 20000] [--mbps 2] [--compile_us 60]
                            [--command replay|asmdiffs] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from azurite import start_azurite  # noqa: E402
from bench_support import load_average, make_sample_toolchain, work_folder  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

GUID = "0e71a990-0000-4000-8000-000000000000"
SETS = ["aspnet.run", "benchmarks.run", "libraries.pmi", "coreclr_tests.run", "libraries_tests.run",
        "realworld.run", "smoke_tests.nativeaot", "libraries.crossgen2"]
TARGET = ["-arch", "x64", "-target_os", "linux", "-target_arch", "x64"]
SCRUBBED_ENV = ("SUPERPMI_STORAGE_URL", "AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_CACHE_DIRECTORY",
                "SUPERPMI_PRIVATE_STORE", "TF_BUILD", "GITHUB_STEP_SUMMARY")


def suite_env(compile_us: int, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US=str(compile_us))
    env.update(extra)
    return env


def suite(args: List[str], env: Dict[str, str]) -> Tuple[float, str]:
    """Wall seconds and output of one `superpmi.py` run (which must succeed)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "superpmi.py"), *args], capture_output=True, text=True,
                          env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"superpmi.py {args[0]} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    return seconds, done.stdout


def command_args(command: str, toolchain: Path, spmi: Path, storage_url: str, *extra: str) -> List[str]:
    argv = [command, "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi), *TARGET,
            "-jit_ee_version", GUID, "-storage_url", storage_url, "--no_progress", *extra]
    if command == "asmdiffs":
        argv += ["-base_jit_path", str(toolchain / "base" / "libclrjit.so"), "--no_html"]
    return argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collections", type=int, default=4, help="collections (default 4)")
    parser.add_argument("--contexts", type=int, default=20000, help="contexts per collection (default 20000)")
    parser.add_argument("--mbps", type=float, default=2.0, help="the link's MB/s, all connections together")
    parser.add_argument("--compile_us", type=int, default=60, help="sample superpmi's cost per compile (µs)")
    parser.add_argument("--command", choices=["replay", "asmdiffs"], default="replay")
    parser.add_argument("--keep", help="work folder to keep (the toolchain is reused from it)")
    args = parser.parse_args()
    with work_folder(args.keep, "bench-overlap-") as work:
        toolchain = work / f"toolchain-{args.collections}x{args.contexts}"
        if not (toolchain / "toolchain.json").exists():
            make_sample_toolchain(toolchain, args.contexts, ("--targets", "linux-x64", "--guid", GUID,
                                                             "--collections", ",".join(SETS[:args.collections])))
        azurite = start_azurite(work / "azurite")
        azurite.create_public_containers()
        proxy = FaultProxy(azurite.blob_endpoint).start()
        try:
            suite(["upload", "-spmi_location", str(work / "publish"), "-jit_ee_version", GUID, *TARGET,
                             "--no_progress", "-mch_files", str(toolchain / "collections")],
                            suite_env(0, AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string))
            proxy.total_bytes_per_second = args.mbps * 1e6
            env = suite_env(args.compile_us)
            runs = {}
            for name in ("download", "replay", "sequential", "overlapped"):
                spmi = work / f"spmi-{name}"
                if spmi.exists():
                    __import__("shutil").rmtree(spmi)
                if name == "replay":
                    suite(["download", *command_args("replay", toolchain, spmi, proxy.account_url)[1:]], env)
                    runs[name], _ = suite(command_args(args.command, toolchain, spmi, proxy.account_url), env)
                    runs["one"] = runs[name] / args.collections  # the collections are the same size
                elif name == "download":
                    runs[name], _ = suite(["download", *command_args("replay", toolchain, spmi,
                                                                     proxy.account_url)[1:]], env)
                else:
                    extra = ["--no_overlap"] if name == "sequential" else []
                    runs[name], _ = suite(command_args(args.command, toolchain, spmi, proxy.account_url, *extra), env)
        finally:
            proxy.stop()
            azurite.stop()
        size = sum(p.stat().st_size for p in (work / "spmi-download" / "mch").rglob("*.mch"))
        ideal = max(runs["download"], runs["replay"])
        goal = 1.15 * ideal + runs["one"]
        print(f"{args.command}: {args.collections} collections x {args.contexts} contexts "
              f"({size / 1e6:.1f} MB of .mch), link {args.mbps:g} MB/s, compile cost {args.compile_us} µs; "
              f"load {load_average()}")
        rows = [("download alone (D)", runs["download"], ""),
                (f"{args.command} on a warm cache (R)", runs["replay"], f"one collection r: {runs['one']:.2f} s"),
                (f"download, then {args.command}", runs["sequential"], ""),
                ("overlapped", runs["overlapped"], f"overlapped / goal = {runs['overlapped'] / goal:.2f}"),
                ("ideal max(D, R)", ideal, ""),
                ("goal 1.15 x max(D, R) + r", goal, "")]
        for label, seconds, note in rows:
            print(f"  {label + ':':<34}{seconds:7.2f} s   {note}".rstrip())


if __name__ == "__main__":
    main()
