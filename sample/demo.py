#!/usr/bin/env python3
"""Make a sample toolchain and run `superpmi.py asmdiffs` on it, natively and for one cross target.

    python sample/demo.py [--out DIR] [--contexts N] [--noise | --history]

The console shows each run's progress and where its summaries are, then the next
steps: the files to open, a flag to try, the pipeline on this toolchain. Everything
goes below --out (default `demo/` in the repository), which is safe to delete.

--noise makes the toolchain's JITs and pintool vary run to run (`make_toolchain.py --noise`,
`DEMO_NOISE`) and adds a `memdiff --noise_check` run: the summary flags only changes beyond the
noise floor an A/A replay measures, and the pipeline commands pass `--noise_check` on.

--history keeps a history without Azure: five tpdiff main runs whose diff JIT is the base JIT
(their changes are the toolchain's noise only) recorded in a folder (`-storage_url <folder>`),
then one PR whose diff JIT executes 1% more instructions, judged against them; it prints the
verdicts and the trend page's path.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
HOST_JITS = {"x64": "libclrjit.so", "arm64": "libclrjit_universal_arm64_x64.so"}
#: run-to-run noise of `--noise`: PIN counts ±0.004 % and BytesAllocated ±3 % per compile
DEMO_NOISE = ["--noise", "instructions=0.004", "--noise", "BytesAllocated=3", "--noise_seed", "1"]
#: `--history`: PIN counts ±0.2 % per compile, so that main's runs visibly differ; how many main runs
HISTORY_NOISE = ["--noise", "instructions=0.2", "--noise_seed", "1"]
HISTORY_MAIN_RUNS = 5
#: the PR of `--history`: its diff JIT executes this many times the base's instructions
HISTORY_PR_FACTOR = 1.025


def make_toolchain(out: Path, contexts: int, noise: bool = False) -> None:
    print(f"Making a sample toolchain in {out}{' (with run-to-run noise)' if noise else ''} ...", flush=True)
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", str(contexts), "--targets", "linux-x64,linux-arm64"] + (DEMO_NOISE if noise else []),
                   check=True, stdout=subprocess.DEVNULL)


def memdiff_command(toolchain: Path, spmi_location: Path) -> List[str]:
    """memdiff of the release JITs for linux-x64 with the A/A calibration (`--noise`)."""
    return [sys.executable, str(REPO / "superpmi.py"), "memdiff", "--noise_check",
            "-target_os", "linux", "-target_arch", "x64", "-arch", "x64",
            "-core_root", str(toolchain / "core_root"),
            "-base_jit_path", str(toolchain / "release" / "base" / HOST_JITS["x64"]),
            "-diff_jit_path", str(toolchain / "release" / "diff" / HOST_JITS["x64"]),
            "-mch_files", str(collection_dir(toolchain, "x64")),
            "-spmi_location", str(spmi_location), "--no_progress"]


def collection_dir(toolchain: Path, target_arch: str) -> Path:
    matches = sorted(toolchain.glob(f"collections/*/linux/{target_arch}"))
    if not matches:
        raise SystemExit(f"demo: no linux/{target_arch} collections in {toolchain}; remake it with --out elsewhere")
    return matches[0]


def asmdiffs_command(toolchain: Path, target_arch: str, spmi_location: Path) -> List[str]:
    jit = HOST_JITS[target_arch]
    return [sys.executable, str(REPO / "superpmi.py"), "asmdiffs",
            "-target_os", "linux", "-target_arch", target_arch, "-arch", "x64",
            "-core_root", str(toolchain / "core_root"),
            "-base_jit_path", str(toolchain / "base" / jit),
            "-diff_jit_path", str(toolchain / "core_root" / jit),
            "-mch_files", str(collection_dir(toolchain, target_arch)),
            "-spmi_location", str(spmi_location), "--no_progress"]


def newest(paths: Sequence[Path]) -> Optional[Path]:
    existing = [p for p in paths if p.exists()]
    return max(existing, key=lambda p: p.stat().st_mtime) if existing else None


def interpreter_as_typed(executable: str, cwd: str) -> str:
    """The interpreter running the demo as the user can type it: relative to `cwd` when it lies
    inside it (`.venv/bin/python`), else its full path. Symbolic links are kept (a virtual
    environment's `python` is one; resolving it would leave the environment)."""
    full = os.path.abspath(executable)
    try:
        relative = os.path.relpath(full, cwd)
    except ValueError:  # another drive
        return full
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        return full
    return relative if os.sep in relative else os.path.join(os.curdir, relative)


def shown(argv: Sequence[str]) -> str:
    """A command line as the user would type it, naming this interpreter (which has the
    suite's requirements installed) rather than whatever `python` is on PATH."""
    python = interpreter_as_typed(sys.executable, os.getcwd())
    return shlex.join([python if arg == sys.executable else arg for arg in argv])


def pipeline_commands(out: Path, noise: bool = False) -> List[List[str]]:
    """The whole CI pipeline run locally, as the README's "Run the pipeline locally" has it: a small
    toolchain with every target of this host's queue, then setup with --run_locally."""
    toolchain = out / "toolchain"
    pin = toolchain / "pintools" / "1.0" / ("osx" if sys.platform == "darwin" else "linux")
    make = [sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(toolchain), "--contexts", "50",
            "--collections", "libraries.pmi"] + (DEMO_NOISE if noise else [])
    setup = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"),
            "-product_directory", str(toolchain / "core_root"), "-base_jit_directory", str(toolchain / "base"),
            "-release_product_directory", str(toolchain / "release" / "diff"),
            "-release_base_jit_directory", str(toolchain / "release" / "base"), "-pin_directory", str(pin),
            "-private_store", str(toolchain / "collections"), "-payload_directory", str(out / "payload"),
            "--clean", "-type", "all"] + (["--noise_check"] if noise else []) + ["--run_locally"]
    return [make, setup]


def next_steps(out: Path, spmi_locations: Sequence[Path], commands: Sequence[List[str]],
               noise: bool = False) -> List[str]:
    """What to do after the demo: open the summaries, try -v, run the pipeline locally."""
    lines = ["", "Next steps:",
             "  1. Open a summary, or the HTML report in a browser (every context with diffs, the listings):"]
    for spmi_location in spmi_locations:
        for pattern in ("diff_summary*.md", "diff_report*.html", "memdiff_summary*.md"):
            found = newest(list(spmi_location.glob(pattern)))
            if found is not None:
                lines.append(f"       {found}")
    if commands:
        lines += ["  2. Add -v to see the details here too (the analyzer's per-method lists, superpmi's output;",
                  "     they are always in the superpmi.log beside the summaries), e.g. for one collection:",
                  "       " + shown(list(commands[0]) + ["-filter", "libraries", "-v"])]
    lines += ["  3. Run the whole CI pipeline (asmdiffs, tpdiff, memdiff) locally, on a small toolchain with "
              "every target:"]
    lines += ["       " + shown(command) for command in pipeline_commands(out / "pipeline", noise)]
    if not noise:
        lines.append("  4. Add run-to-run noise and flag only what stands out from it (memdiff --noise_check): "
                     + shown([sys.executable, str(REPO / "sample" / "demo.py"), "--noise"]))
        lines.append("  5. Keep a history of main runs in a folder and judge a PR's change against it (tpdiff, "
                     "trend page): " + shown([sys.executable, str(REPO / "sample" / "demo.py"), "--history"]))
    lines.append("  More: %s (examples and every option), %s."
                 % (shown([sys.executable, str(REPO / "superpmi.py"), "asmdiffs", "-h"]), REPO / "README.md"))
    return lines


def run_demo(out: Path, contexts: int, noise: bool = False) -> int:
    toolchain = out / ("toolchain-noisy" if noise else "toolchain")
    if not (toolchain / "core_root").is_dir():
        make_toolchain(toolchain, contexts, noise)
    status = 0
    commands: List[List[str]] = []
    spmi_locations = [out / f"spmi.linux.{target_arch}" for target_arch in ("x64", "arm64")]
    for target_arch, spmi_location in zip(("x64", "arm64"), spmi_locations):
        print(f"\n=== asmdiffs for linux/{target_arch}", flush=True)
        command = asmdiffs_command(toolchain, target_arch, spmi_location)
        commands.append(command)
        status = status or subprocess.run(command).returncode
    if noise:
        spmi_locations.append(out / "spmi.memdiff")
        print("\n=== memdiff --noise_check for linux/x64 (one more replay per collection: the A/A calibration)",
              flush=True)
        code = subprocess.run(memdiff_command(toolchain, spmi_locations[-1])).returncode
        status = status or (0 if code == 2 else code)  # 2: the memory gate (the sample's aspnet blow-up)
    print("\n".join(next_steps(out, spmi_locations, commands, noise)), flush=True)
    return status


def superpmi(*args: object) -> List[str]:
    return [sys.executable, str(REPO / "superpmi.py"), *map(str, args)]


def tpdiff_command(toolchain: Path, diff_jit: Path, spmi_location: Path) -> List[str]:
    """tpdiff of the release base JIT against `diff_jit` for linux-x64, with a JSON summary for history."""
    return superpmi("tpdiff", "-target_os", "linux", "-target_arch", "x64", "-arch", "x64",
                    "-core_root", toolchain / "core_root",
                    "-base_jit_path", toolchain / "release" / "base" / HOST_JITS["x64"], "-diff_jit_path", diff_jit,
                    "-mch_files", collection_dir(toolchain, "x64"), "-pin_path", toolchain / "pintools" / "1.0" / "linux",
                    "-spmi_location", spmi_location, "--summary_as_json", "--no_progress")


def run_time(days_ago: int) -> str:
    moment = datetime.now(timezone.utc) - timedelta(days=days_ago)
    return moment.strftime("%Y%m%dT%H%M%SZ")


def slower_jit(toolchain: Path, folder: Path) -> Path:
    """The PR's diff JIT: the release JIT with the toolchain's noise, executing HISTORY_PR_FACTOR as much."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from sample.make_toolchain import make_jit
    from sample.noise import NoiseConfig
    noise = json.loads((toolchain / "toolchain.json").read_text(encoding="utf-8"))["noise"]
    return make_jit(folder / HOST_JITS["x64"], "linux", "x64", flavor="release", tp_factor=HISTORY_PR_FACTOR,
                    noise=NoiseConfig(noise["noise"], noise["noise_seed"], noise["noise_runs"]))


def run_history_demo(out: Path, contexts: int) -> int:
    """Main runs recorded in a folder, one PR judged against them, the trend page."""
    toolchain = out / "toolchain-history"
    if not (toolchain / "core_root").is_dir():
        print(f"Making a sample toolchain in {toolchain} (PIN counts with run-to-run noise) ...", flush=True)
        subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(toolchain), "--contexts",
                        str(contexts), "--targets", "linux-x64", "--collections", "libraries.pmi,aspnet.run"]
                       + HISTORY_NOISE, check=True, stdout=subprocess.DEVNULL)
    store, runs = out / "history", out / "history-runs"
    for folder in (store, runs):
        shutil.rmtree(folder, ignore_errors=True)
    base = toolchain / "release" / "base" / HOST_JITS["x64"]
    for index in range(1, HISTORY_MAIN_RUNS + 1):
        print(f"\n=== main run {index} of {HISTORY_MAIN_RUNS}: tpdiff (the diff JIT is the base JIT: noise only), "
              f"recorded in {store}", flush=True)
        (runs / f"main{index}").mkdir(parents=True)
        same = Path(shutil.copy2(base, runs / f"main{index}" / base.name))
        spmi_location = runs / f"main{index}" / "spmi"
        if subprocess.run(tpdiff_command(toolchain, same, spmi_location), stdout=subprocess.DEVNULL).returncode:
            return 1
        upload = superpmi("history", "upload", "-summaries", spmi_location / "tpdiff_summary.json", "-storage_url",
                          store, "-run_time", run_time(HISTORY_MAIN_RUNS + 1 - index), "-diff_git_hash", f"{index:07x}")
        if subprocess.run(upload).returncode:
            return 1
    print(f"\n=== the PR: tpdiff of a diff JIT that executes {HISTORY_PR_FACTOR:g} times the instructions", flush=True)
    pr_jit = slower_jit(toolchain, runs / "pr")
    pr_summary = runs / "pr" / "spmi" / "tpdiff_summary.json"
    if subprocess.run(tpdiff_command(toolchain, pr_jit, pr_summary.parent), stdout=subprocess.DEVNULL).returncode:
        return 1
    print("\n=== history compare: the PR's change against the main runs", flush=True)
    status = subprocess.run(superpmi("history", "compare", "-summaries", pr_summary, "-storage_url", store)).returncode
    page = store / "trend.html"
    show = superpmi("history", "show", "-summaries", pr_summary, "-storage_url", store, "-output_html_path", page)
    status = status or subprocess.run(show, stdout=subprocess.DEVNULL).returncode
    print("\n".join(["", f"Trend page: {page}",
                     "  Open it in a browser: a chart per collection, the fence band that decides, the PR's square.",
                     "  Try: " + shown(superpmi("history", "list", "-storage_url", store)),
                     f"  More: {REPO / 'docs' / 'history.md'}"]), flush=True)
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "demo"), help="where to put the toolchain and results")
    parser.add_argument("--contexts", type=int, default=2000, help="contexts per collection")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--noise", action="store_true",
                      help="JITs and pintool with run-to-run noise, plus a memdiff --noise_check run")
    kind.add_argument("--history", action="store_true",
                      help="history in a local folder: a few noisy tpdiff main runs, one PR judged against them, "
                           "the trend page (at most 300 contexts per collection)")
    args = parser.parse_args(argv)
    if args.history:
        return run_history_demo(Path(args.out).resolve(), min(args.contexts, 300))
    return run_demo(Path(args.out).resolve(), args.contexts, args.noise)


if __name__ == "__main__":
    sys.exit(main())
