"""Where a test run keeps its files (tests/conftest.py): a folder of the checkout's own in RAM where
the machine has a RAM disk (Linux's `/dev/shm`), else `.pytest_tmp/` in the checkout.

A run creates and deletes tens of thousands of files (payload copies, work item folders, listings).
On a disk that journals every new file and discards every deleted one, that costs 5 to 12 times the
CPU it costs on a RAM disk (`bench/scratch_files.py`); a whole run on 2 cores took about 10 s less
there. `SPMI_TEST_SCRATCH` names another folder.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, FrozenSet, Mapping, Optional, Tuple

VARIABLE = "SPMI_TEST_SCRATCH"
RAM_DISK = Path("/dev/shm")
#: what the RAM disk must have free: a whole run's files peak at about 330 MiB (2 cores, 3 workers)
MIN_FREE_BYTES = 4 * 1024 ** 3


def mount_entry(mounts: str, mount_point: str) -> Optional[Tuple[str, FrozenSet[str]]]:
    """(type, options) of what is mounted at `mount_point`, from `/proc/mounts` text (a later mount
    at the same point hides an earlier one); None when nothing is mounted there."""
    found = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == mount_point:
            found = (fields[2], frozenset(fields[3].split(",")))
    return found


def usable_ram_disk(mounts: str) -> bool:
    """A tmpfs at `/dev/shm` that runs programs: the sample tools a run makes live in its folder
    (a container's `/dev/shm` is often mounted `noexec`)."""
    entry = mount_entry(mounts, str(RAM_DISK))
    return entry is not None and entry[0] == "tmpfs" and "noexec" not in entry[1]


def scratch_root(repo: Path, environ: Mapping[str, str], ram_disk_free: Callable[[], Optional[int]],
                 uid: int) -> Path:
    """The variable's folder; else one folder per user and checkout on the RAM disk when it has room
    (`ram_disk_free()`: its free bytes, None without one; asked only when the variable is unset, so
    the workers, which inherit it, don't look again); else `.pytest_tmp/` in the checkout."""
    given = environ.get(VARIABLE, "")
    if given:
        return Path(given)
    free = ram_disk_free()
    if free is not None and free >= MIN_FREE_BYTES:
        checkout = hashlib.sha256(str(repo).encode("utf-8")).hexdigest()[:12]
        return RAM_DISK / f"spmi-tests-{uid}-{checkout}"
    return repo / ".pytest_tmp"


def ram_disk_free() -> Optional[int]:
    """Free bytes of a writable tmpfs at `/dev/shm` that runs programs (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        if not usable_ram_disk(mounts) or not os.access(RAM_DISK, os.W_OK | os.X_OK):
            return None
        return shutil.disk_usage(RAM_DISK).free
    except OSError:
        return None


def current_uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
