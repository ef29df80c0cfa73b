"""Shared helpers and fixtures for the sample toolchain tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sample import make_toolchain as generator  # noqa: E402

__all__ = ["ASSERT_PATTERN", "BUILD_STRING_PATTERN", "REPO", "clean_env", "csv_rows", "generator", "run"]

ASSERT_PATTERN = (r"ISSUE: <ASSERT> #([0-9]+) (.*) \(([0-9]*)\) - Assertion failed '(.*)' in '.*' "
                  r"during '.*' \(IL size ([0-9]*); hash .*\)")
BUILD_STRING_PATTERN = (rb"RyuJIT built by ([^\0]+?) targeting ([^\0]+?)-([^\0]+?)"
                        rb"(| \(with native PGO\)| \(without native PGO\)|)\0")


def clean_env(extra: Optional[Dict[str, str]] = None, fast: bool = True) -> Dict[str, str]:
    """The process environment without JIT config, with modelled costs off when ``fast``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DOTNET_", "COMPlus_", "SPMI_SAMPLE_"))}
    if fast:
        env["SPMI_SAMPLE_START_MS"] = "0"
        env["SPMI_SAMPLE_COMPILE_US"] = "0"
    env.update(extra or {})
    return env


def run(command: Sequence[object], cwd: Path, env: Optional[Dict[str, str]] = None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], cwd=str(cwd), env=env or clean_env(),
                          capture_output=True, timeout=timeout)


def csv_rows(path: Path) -> List[List[str]]:
    import csv
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))
