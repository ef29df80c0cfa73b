"""Helpers for the tests of asmdiffs' HTML diff explorer: running asmdiffs on the sample
toolchain as a real process, reading what a page carries, and reading the details CSV."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Set, Tuple

from sample_support import clean_env

REPO = Path(__file__).resolve().parent.parent


def run_asmdiffs(toolchain: Path, spmi: Path, collections: Sequence[Path], *extra: str,
                 target_arch: str = "x64") -> subprocess.CompletedProcess:
    """`python superpmi.py asmdiffs` against the sample toolchain (the base JIT of the target)."""
    jits = {"x64": "libclrjit.so", "arm64": "libclrjit_universal_arm64_x64.so"}
    argv = [sys.executable, str(REPO / "superpmi.py"), "asmdiffs", "-core_root", str(toolchain / "core_root"),
            "-spmi_location", str(spmi), "-arch", "x64", "-target_os", "linux", "-target_arch", target_arch,
            "-base_jit_path", str(toolchain / "base" / jits[target_arch]), "--parallelism", "2",
            "-mch_files", *[str(c) for c in collections], *extra]
    return subprocess.run(argv, cwd=str(REPO), env=clean_env(), capture_output=True, text=True, timeout=300)


def report_data(page: str) -> Dict[str, Any]:
    """The row table of a page (its `report-data` JSON block)."""
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert match, "no report data in the page"
    return json.loads(match.group(1))


def page_rows(page: str) -> List[Tuple[str, int, str, int, int, bool]]:
    """(collection, context, method, base bytes, diff bytes, has listing) per row of a page."""
    data = report_data(page)
    rows = data["rows"]
    return [(data["collections"][rows["c"][i]], rows["x"][i], data["names"][rows["n"][i]], rows["bb"][i],
             rows["db"][i], rows["l"][i] >= 0) for i in range(len(rows["x"]))]


def csv_diff_rows(path: Path, collection: str) -> List[Tuple[str, int, str, int, int]]:
    """The rows of a details CSV where both JITs succeeded and a difference was found, read with `csv`."""
    with open(path, newline="", encoding="utf-8") as stream:
        return [(collection, int(row["Context"]), row["Method full name"], int(row["Base ActualCodeBytes"]),
                 int(row["Diff ActualCodeBytes"]))
                for row in csv.DictReader(stream)
                if row["Has diff"] == "True" and row["Base result"] == row["Diff result"] == "Success"]


def dasm_pairs(asm_dir: Path) -> Set[int]:
    """Contexts with a listing on both sides."""
    return ({int(p.stem) for p in (asm_dir / "base").glob("*.dasm")}
            & {int(p.stem) for p in (asm_dir / "diff").glob("*.dasm")})
