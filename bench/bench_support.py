"""What the benchmark scripts share: a sample toolchain to measure and a scratch folder."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent


def make_sample_toolchain(out: Path, contexts: int, extra: Sequence[str] = ("--targets", "linux-x64",
                                                                              "--collections", "libraries.pmi")) -> None:
    """`sample/make_toolchain.py OUT --contexts N ...` (linux-x64 libraries.pmi unless `extra` says otherwise)."""
    subprocess.run([sys.executable, str(ROOT / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", str(contexts), *extra], check=True, stdout=subprocess.DEVNULL)


@contextmanager
def work_folder(keep: Optional[str], prefix: str) -> Iterator[Path]:
    """`keep` (created, left in place) or a new temporary folder removed afterwards."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, for the printed figures ("n/a" where unknown)."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except (OSError, AttributeError):
        return "n/a"
