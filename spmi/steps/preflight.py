"""Checks a replaying command makes before it looks for tools or downloads anything.

Every path the user gave (`-core_root`, `-product_location`, `-runtime_repo`, the JIT
paths, local `-mch_files`) is checked first, and every bad one is named on its own
line. With nothing given outside a dotnet/runtime enlistment there is nothing to
discover tools from: one line says so and points to `-h` and the sample demo.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spmi.base import config, invocation, platforms
from spmi.base.errors import SuiteError
from spmi.sources import mch_sources
from spmi.tools import jit_build, superpmi_tool
from spmi.tools.superpmi_tool import PositionalKind


@dataclass
class GivenPaths:
    """The paths a command line names (None / empty: not given)."""

    directories: Dict[str, Optional[str]] = field(default_factory=dict)  # flag -> value
    jits: Dict[str, Optional[str]] = field(default_factory=dict)         # flag -> value
    mch_files: Sequence[str] = ()
    details: Optional[str] = None  # -details: an existing folder, or a file in one
    host_os: str = platforms.detect_host_os()  # where superpmi runs: it sorts its positionals by extension

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
                    continue
                found += self.jit_kind_problems(flag, value)
        for spec in self.mch_files:
            if mch_sources.is_remote(spec):
                continue
            if not Path(spec).exists():
                found.append(f"-mch_files '{spec}' is neither a file, a directory nor a URL; check the path")
            elif Path(spec).is_file():
                found += self.collection_kind_problems(spec)
        found += self.details_problems()
        return found

    def details_problems(self) -> List[str]:
        """superpmi cannot create `-details` in a folder that is not there (it would stop at once)."""
        if not self.details or Path(self.details).is_dir():
            return []
        folder = Path(self.details).parent
        if folder.is_dir():
            return []
        return [f"-details '{self.details}': the folder '{folder}' does not exist; create it or pass an existing "
                "folder (one <collection>.csv each) or a file in one"]

    def jit_kind_problems(self, flag: str, value: str) -> List[str]:
        """A JIT path superpmi would take for its input (docs/contracts.md §2.3): it would
        replay the wrong thing, so it is refused."""
        if superpmi_tool.positional_kind(value, self.host_os) is not PositionalKind.INPUT:
            return []
        return [f"{flag} '{value}' ends in {Path(value).suffix}, which superpmi reads as a collection, not a JIT; "
                f"pass the JIT ({platforms.shared_lib_suffix(self.host_os)} file)"]

    def collection_kind_problems(self, spec: str) -> List[str]:
        """A collection file superpmi would take for a JIT or not read at all (§2.3)."""
        kind = superpmi_tool.positional_kind(spec, self.host_os)
        if kind is PositionalKind.INPUT:
            return []
        return [f"-mch_files '{spec}': superpmi reads this file as {kind.value}, not a collection; pass a "
                f"{', '.join(superpmi_tool.INPUT_EXTENSIONS)} file or a folder holding them"]


def nothing_given_message(command: str, cwd: Path) -> str:
    demo = invocation.demo_command()
    return (f"not in a dotnet/runtime enlistment ({cwd}) and no -core_root, JIT paths or -mch_files given: "
            f"see {invocation.script_command('superpmi.py')} {command} -h"
            + (f", or try the sample first: {demo}" if demo else ""))


def check_inputs(given: GivenPaths, command: str) -> None:
    """Fail before any tool discovery or download: every bad given path on its own line,
    or one line when nothing is given outside an enlistment."""
    problems = given.problems()
    if problems:
        raise SuiteError("\n".join(problems))
    if not given.anything() and not config.is_runtime_enlistment(config.resolve_repo_root(None)):
        raise SuiteError(nothing_given_message(command, Path.cwd()))
