"""Merging collections and the CI's zero-length placeholders (docs/contracts.md §12.7, §14.3).

Helix does not upload empty files, so a collection job whose `.mch` came out empty
replaces it with a small file holding `ZEROLENGTH` (`collect --ci`); `merge-mch --ci`
deletes such placeholders before merging.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import List

from spmi.base import fsutil
from spmi.tools import mcs as mcs_tool

log = logging.getLogger("superpmi")

ZERO_LENGTH_MARKER = b"ZEROLENGTH"
ZERO_LENGTH_MAX_SIZE = 15


def is_zero_length_marker(path: Path) -> bool:
    """A file smaller than 15 bytes that holds `ZEROLENGTH`."""
    try:
        if path.stat().st_size >= ZERO_LENGTH_MAX_SIZE:
            return False
        return ZERO_LENGTH_MARKER in path.read_bytes()
    except OSError:
        return False


def remove_zero_length_markers(directory: Path) -> List[Path]:
    """`merge-mch --ci`: delete the placeholders below `directory`; returns what was deleted."""
    removed: List[Path] = []
    if not directory.is_dir():
        return removed
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            path = Path(root) / name
            if is_zero_length_marker(path):
                log.info("Removing zero-length marker %s", path)
                path.unlink()
                removed.append(path)
    return removed


def mark_if_empty(mch: Path) -> bool:
    """`collect --ci`: replace a zero-length `mch` with a `ZEROLENGTH` placeholder; True if it did."""
    if mch.stat().st_size != 0:
        return False
    log.warning("Warning: %s is empty; writing a ZEROLENGTH placeholder instead (--ci)", mch)
    fsutil.atomic_write_bytes(mch, ZERO_LENGTH_MARKER)
    return True


def merge_and_index(mcs: Path, output: Path, pattern: str) -> Path:
    """`mcs -merge <output> <pattern> -recursive -dedup -thin`, then `mcs -toc <output>`; returns the TOC."""
    mcs_tool.run_mcs(mcs_tool.merge_argv(mcs, output, pattern), produces=output)
    toc = mcs_tool.toc_path(output)
    mcs_tool.run_mcs(mcs_tool.toc_argv(mcs, output), produces=toc)
    return toc
