"""The baseline/diff JIT pair that asmdiffs, tpdiff and memdiff start from.

Turns the JIT paths the command line names (or their defaults: Core_Root, the rolling
build) into two checked, distinct JIT files for the target.
"""
from __future__ import annotations

import filecmp
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spmi.base import config
from spmi.base.errors import SuiteError
from spmi.sources import baseline
from spmi.tools import jit_build

log = logging.getLogger("superpmi")


@dataclass
class JitPair:
    base: Path
    diff: Path
    baseline: baseline.BaselineChoice
    base_info: Optional[jit_build.BuildInfo]
    diff_info: Optional[jit_build.BuildInfo]


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return os.path.normcase(str(a.resolve())) == os.path.normcase(str(b.resolve()))


def warn_if_identical(base: Path, diff: Path) -> bool:
    """Two copies of one JIT can show no diffs at all; say so (True when identical)."""
    try:
        identical = filecmp.cmp(base, diff, shallow=False)
    except OSError:
        return False
    if identical:
        log.warning("Warning: the base JIT %s and the diff JIT %s are byte-identical; no diffs are possible",
                    base, diff)
    return identical


def resolve_jit_pair(diff_jit_path: Optional[str], request: baseline.BaselineRequest, settings: config.Settings,
                     jit_name: Optional[str] = None) -> JitPair:
    """Diff JIT (`-diff_jit_path` or Core_Root), baseline JIT (`-base_jit_path` or rolling build), both checked.

    Each must be a readable file whose build string (when decodable) targets
    the requested OS/arch, and they must be two different files.
    """
    if diff_jit_path:
        diff = jit_build.validate_jit_file(Path(diff_jit_path), "-diff_jit_path")
    else:
        diff = jit_build.validate_jit_file(config.find_default_jit(settings, jit_name), "diff JIT")
    if request.base_jit_path:
        jit_build.validate_jit_file(Path(request.base_jit_path), "-base_jit_path")
    choice = baseline.find_baseline_jit(settings, request, jit_name or diff.name)
    base = jit_build.validate_jit_file(choice.path, "base JIT")
    choice.path = base
    if same_file(base, diff):
        raise SuiteError(f"the base and diff JIT are the same file ({diff}); pass a different -base_jit_path "
                         "or -diff_jit_path")
    warn_if_identical(base, diff)
    base_info = jit_build.check_jit_target(base, "base JIT", settings.target_os, settings.target_arch)
    diff_info = jit_build.check_jit_target(diff, "diff JIT", settings.target_os, settings.target_arch)
    return JitPair(base, diff, choice, base_info, diff_info)
