"""Shared pytest fixtures.

The repository root is put on sys.path so tests import the top-level scripts
exactly as `python superpmi.py` would find them.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


@pytest.fixture(scope="session")
def sample_toolchain(tmp_path_factory) -> Path:
    """A small sample toolchain (all targets of a Linux x64 host), made once per session.

    Tests must not modify it; copy what you need to change.
    """
    out = tmp_path_factory.mktemp("toolchain")
    subprocess.run([sys.executable, str(REPO_ROOT / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", "120", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    return out
