"""Helpers shared by the end-to-end tests that drive the suite against the sample toolchain."""
from __future__ import annotations

from pathlib import Path
from typing import List


def collection(toolchain: Path, name: str = "libraries.pmi", arch: str = "x64") -> Path:
    """The toolchain's linux collection of one set, e.g. `libraries.pmi.linux.x64.checked.mch`."""
    [mch] = sorted(toolchain.glob(f"collections/*/linux/{arch}/{name}.*.mch"))
    return mch


def superpmi_processes_for(mch: Path) -> List[int]:
    """superpmi processes replaying `mch` (its `-details` argument tells them from the suite's own
    process, and from a just-forked child that still shows the suite's command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            if str(mch) in args and "-details" in args:
                found.append(int(entry.name))
    return found
