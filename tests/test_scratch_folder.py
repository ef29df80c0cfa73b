"""Where a test run keeps its files (tests/scratch_folder.py): the variable, else the RAM disk when
it has room, else the checkout."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import pytest
import scratch_folder

pytestmark = pytest.mark.pure

REPO = Path("/home/dev/runtime-scripts")
MOUNTS = """sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
/dev/vda / ext4 rw,relatime,discard 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
"""
ROOM = scratch_folder.MIN_FREE_BYTES


def free(value: Optional[int]) -> Callable[[], Optional[int]]:
    return lambda: value


def not_asked() -> Optional[int]:
    raise AssertionError("the RAM disk was looked at although the variable names the folder")


def test_the_mount_is_read_from_the_mount_table() -> None:
    assert scratch_folder.mount_entry(MOUNTS, "/dev/shm") == ("tmpfs", frozenset({"rw", "nosuid", "nodev"}))
    assert scratch_folder.mount_entry(MOUNTS, "/")[0] == "ext4"
    assert scratch_folder.mount_entry(MOUNTS, "/tmp") is None
    assert scratch_folder.mount_entry("", "/dev/shm") is None
    assert scratch_folder.mount_entry(MOUNTS + "/dev/vdb /dev/shm ext4 rw 0 0\n", "/dev/shm") == ("ext4", {"rw"})


def test_only_a_tmpfs_that_runs_programs_is_a_usable_ram_disk() -> None:
    assert scratch_folder.usable_ram_disk(MOUNTS)
    assert not scratch_folder.usable_ram_disk(MOUNTS.replace("rw,nosuid,nodev", "rw,nosuid,nodev,noexec"))
    assert not scratch_folder.usable_ram_disk(MOUNTS.replace("tmpfs /dev/shm tmpfs", "/dev/vdb /dev/shm ext4"))
    assert not scratch_folder.usable_ram_disk(MOUNTS + "shm /dev/shm tmpfs rw,noexec,size=65536k 0 0\n")
    assert not scratch_folder.usable_ram_disk("")


def test_the_variable_names_the_folder() -> None:
    environ = {scratch_folder.VARIABLE: "/scratch/run"}
    assert scratch_folder.scratch_root(REPO, environ, not_asked, 1000) == Path("/scratch/run")


def test_a_ram_disk_with_room_gets_one_folder_per_user_and_checkout() -> None:
    chosen = scratch_folder.scratch_root(REPO, {}, free(ROOM), 1000)
    assert chosen.parent == Path("/dev/shm") and chosen.name.startswith("spmi-tests-1000-")
    assert chosen == scratch_folder.scratch_root(REPO, {scratch_folder.VARIABLE: ""}, free(2 * ROOM), 1000)
    assert chosen != scratch_folder.scratch_root(REPO / "other", {}, free(ROOM), 1000)
    assert chosen != scratch_folder.scratch_root(REPO, {}, free(ROOM), 1001)


def test_without_a_ram_disk_or_room_on_it_the_checkout_keeps_the_files() -> None:
    assert scratch_folder.scratch_root(REPO, {}, free(None), 1000) == REPO / ".pytest_tmp"
    assert scratch_folder.scratch_root(REPO, {}, free(ROOM - 1), 1000) == REPO / ".pytest_tmp"
