#!/usr/bin/env python3
"""Make a sample toolchain and run `superpmi.py asmdiffs` on it, natively and for one cross target.

    python sample/demo.py [--out DIR] [--contexts N]

Prints where each summary was written. Everything goes below --out (default
`demo/` in the repository), which is safe to delete.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
HOST_JITS = {"x64": "libclrjit.so", "arm64": "libclrjit_universal_arm64_x64.so"}


def make_toolchain(out: Path, contexts: int) -> None:
    print(f"Making a sample toolchain in {out} ...", flush=True)
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", str(contexts), "--targets", "linux-x64,linux-arm64"],
                   check=True, stdout=subprocess.DEVNULL)


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


def run_demo(out: Path, contexts: int) -> int:
    toolchain = out / "toolchain"
    if not (toolchain / "core_root").is_dir():
        make_toolchain(toolchain, contexts)
    status = 0
    for target_arch in ("x64", "arm64"):
        spmi_location = out / f"spmi.linux.{target_arch}"
        print(f"\n=== asmdiffs for linux/{target_arch}", flush=True)
        code = subprocess.run(asmdiffs_command(toolchain, target_arch, spmi_location)).returncode
        summary = newest(list(spmi_location.glob("diff_summary*.md")))
        if summary is not None:
            print(f"\nSummary for linux/{target_arch}: {summary}")
        status = status or code
    return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "demo"), help="where to put the toolchain and results")
    parser.add_argument("--contexts", type=int, default=2000, help="contexts per collection")
    args = parser.parse_args(argv)
    return run_demo(Path(args.out).resolve(), args.contexts)


if __name__ == "__main__":
    sys.exit(main())
