"""Driving `mcs`, the method-context shell (docs/contracts.md §5).

Pure argument-vector builders, one per verb the suite uses, plus one runner that
treats any non-zero exit as failure and checks that the expected output exists.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Union

from spmi.base import runner
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")
PathLike = Union[str, Path]

TOC_SUFFIX = ".mct"


# ---------------------------------------------------------------- argument vectors (pure)

def merge_argv(mcs: PathLike, output: PathLike, pattern: str, recursive: bool = True, dedup: bool = True,
               thin: bool = True) -> List[str]:
    """`mcs -merge <out.mch> <pattern> [-recursive] [-dedup] [-thin]`."""
    argv = [str(mcs), "-merge", str(output), pattern]
    if recursive:
        argv.append("-recursive")
    if dedup:
        argv.append("-dedup")
    if thin:
        argv.append("-thin")
    return argv


def concat_argv(mcs: PathLike, target: PathLike, source: PathLike) -> List[str]:
    """`mcs -concat <file1> <file2>`: append file2 to file1 (created if needed)."""
    return [str(mcs), "-concat", str(target), str(source)]


def strip_argv(mcs: PathLike, context_list: PathLike, source: PathLike, output: PathLike) -> List[str]:
    """`mcs -strip <list> <in.mch> <out.mch>`: copy without the listed contexts."""
    return [str(mcs), "-strip", str(context_list), str(source), str(output)]


def toc_argv(mcs: PathLike, mch: PathLike) -> List[str]:
    """`mcs -toc <file.mch>`: write `<file.mch>.mct`."""
    return [str(mcs), "-toc", str(mch)]


def remove_dup_argv(mcs: PathLike, source: PathLike, output: PathLike, legacy: bool = False,
                    thin: bool = False) -> List[str]:
    """`mcs -removeDup [-legacy] [-thin] <in> <out>` (a verb the toolchain may omit)."""
    argv = [str(mcs), "-removeDup"]
    if legacy:
        argv.append("-legacy")
    if thin:
        argv.append("-thin")
    return argv + [str(source), str(output)]


def print_jit_ee_version_argv(mcs: PathLike) -> List[str]:
    return [str(mcs), "-printJITEEVersion"]


def toc_path(mch: Path) -> Path:
    """Where the suite keeps a collection's table of contents: `<name>.mch.mct` (§4.3)."""
    return Path(str(mch) + TOC_SUFFIX)


def warning_lines(output: str) -> List[str]:
    """mcs's `WARNING:` lines (e.g. a truncated last record skipped by -merge)."""
    return [line.strip() for line in output.splitlines() if line.strip().startswith("WARNING:")]


# ---------------------------------------------------------------- running

@dataclass(frozen=True)
class McsRun:
    argv: List[str]
    stdout: str
    warnings: List[str]


def run_mcs(argv: List[str], produces: Optional[Path], cwd: Optional[Path] = None) -> McsRun:
    """Run one mcs verb; non-zero exit or a missing `produces` file is a SuiteError naming both.

    `WARNING:` lines mcs prints are logged as warnings."""
    result = runner.run(argv, cwd=cwd)
    verb = argv[1] if len(argv) > 1 else "mcs"
    created = produces is None or produces.is_file()
    if result.code != 0 or not created:
        reason = result.outcome.describe()
        first = _first_error(result.stdout + "\n" + result.stderr)
        missing = "" if created else f"; {produces} was not created"
        raise SuiteError(f"mcs {verb} failed ({reason}{': ' + first if first else ''}){missing}; "
                         "the log file has its full output")
    warnings = warning_lines(result.stdout + "\n" + result.stderr)
    for line in warnings:
        log.warning("mcs %s: %s", verb, line)
    return McsRun(list(argv), result.stdout, warnings)


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if line.strip().startswith("ERROR:"):
            return line.strip()
    return ""
