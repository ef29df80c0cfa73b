"""Checks a replaying command makes before it looks for tools or downloads anything.

Every path the user gave (`-core_root`, `-product_location`, `-runtime_repo`, the JIT
paths, local `-mch_files`) is checked first, and every bad one is named on its own
line. With nothing given outside a dotnet/runtime enlistment there is nothing to
discover tools from: one line says so and points to `-h` and the sample demo.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spmi.base import config
from spmi.base.errors import SuiteError
from spmi.sources import mch_sources
from spmi.tools import jit_build


@dataclass
class GivenPaths:
    """The paths a command line names (None / empty: not given)."""

    directories: Dict[str, Optional[str]] = field(default_factory=dict)  # flag -> value
    jits: Dict[str, Optional[str]] = field(default_factory=dict)         # flag -> value
    mch_files: Sequence[str] = ()

    def anything(self) -> bool:
        return any(self.directories.values()) or any(self.jits.values()) or bool(self.mch_files)

    def problems(self) -> List[str]:
        """One line per bad path, in command-line order of the flags."""
        found = [f"{flag} '{value}' is not a directory; check the path"
                 for flag, value in self.directories.items() if value and not Path(value).is_dir()]
        for flag, value in self.jits.items():
            if value:
                try:
                    jit_build.validate_jit_file(Path(value), flag)
                except SuiteError as exc:
                    found.append(f"{exc}; check the path")
        found += [f"-mch_files '{spec}' is neither a file, a directory nor a URL; check the path"
                  for spec in self.mch_files if not mch_sources.is_remote(spec) and not Path(spec).exists()]
        return found


def given_paths(args: argparse.Namespace, jits: Dict[str, Optional[str]]) -> GivenPaths:
    """The shared path options of a replaying command, plus its own JIT path flags."""
    return GivenPaths(directories={"-core_root": args.core_root, "-product_location": args.product_location,
                                   "-runtime_repo": args.runtime_repo},
                      jits=dict(jits), mch_files=list(args.mch_files or []))


def nothing_given_message(command: str, cwd: Path) -> str:
    return (f"not in a dotnet/runtime enlistment ({cwd}) and no -core_root, JIT paths or -mch_files given: "
            f"see {config.script_command('superpmi.py')} {command} -h, or try the sample first: "
            f"{config.demo_command()}")


def check_inputs(args: argparse.Namespace, command: str, jits: Dict[str, Optional[str]]) -> None:
    """Fail before any tool discovery or download: every bad given path on its own line,
    or one line when nothing is given outside an enlistment."""
    given = given_paths(args, jits)
    problems = given.problems()
    if problems:
        raise SuiteError("\n".join(problems))
    if not given.anything() and not config.is_runtime_enlistment(config.resolve_repo_root(None)):
        raise SuiteError(nothing_given_message(command, Path.cwd()))
