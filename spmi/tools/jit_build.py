"""What a JIT file says about itself: the build string (docs/contracts.md §6.6) and basic checks.

`parse_build_string(data)` is pure; `read_build_info(path)` scans a file;
`validate_jit_file` / `check_jit_target` turn problems into one-line `SuiteError`s
(an undecodable build string is only a warning: old or unusual JITs lack it).
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spmi.base import platforms
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

_MARKER = b"RyuJIT built by "
BUILD_STRING_RE = re.compile(
    rb"RyuJIT built by ([^\0]+?) targeting ([^\0]+?)-([^\0]+?)(| \(with native PGO\)| \(without native PGO\)|)\0")


@dataclass(frozen=True)
class BuildInfo:
    compiler: str
    os: str
    arch: str
    native_pgo: bool

    def describe(self) -> str:
        pgo = " (with native PGO)" if self.native_pgo else ""
        return f"{self.compiler} targeting {self.os}-{self.arch}{pgo}"


def parse_build_string(data: bytes) -> Optional[BuildInfo]:
    """The first build string in a JIT's bytes, or None ("could not decode")."""
    start = data.find(_MARKER)
    while start >= 0:
        match = BUILD_STRING_RE.match(data, start)
        if match:
            compiler, target_os, arch, pgo = (g.decode("ascii", errors="replace") for g in match.groups())
            return BuildInfo(compiler, target_os, arch, "with native PGO" in pgo)
        start = data.find(_MARKER, start + 1)
    return None


def read_build_info(path: Path) -> Optional[BuildInfo]:
    try:
        return parse_build_string(Path(path).read_bytes())
    except OSError:
        return None


def validate_jit_file(path: Path, what: str) -> Path:
    """The JIT must exist, be a file and be readable; returns the absolute path."""
    path = Path(path)
    if not path.exists():
        raise SuiteError(f"{what} '{path}' does not exist")
    if not path.is_file():
        raise SuiteError(f"{what} '{path}' is not a file")
    if not os.access(path, os.R_OK):
        raise SuiteError(f"{what} '{path}' is not readable")
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise SuiteError(f"{what} '{path}' cannot be read: {exc.strerror}") from exc
    return path.resolve()


def check_jit_target(path: Path, what: str, target_os: str, target_arch: str) -> Optional[BuildInfo]:
    """Error when the build string names another target; warn when it cannot be decoded."""
    info = read_build_info(path)
    if info is None:
        log.warning("Warning: could not decode the %s build string of '%s'; not checking its target", what, path)
        return None
    if not platforms.build_string_target_matches(info.os, info.arch, target_os, target_arch):
        raise SuiteError(f"{what} '{path}' generates code for {info.os}-{info.arch}, not {target_os}/{target_arch}; "
                         "pass the JIT for the target or fix -target_os/-target_arch")
    return info
