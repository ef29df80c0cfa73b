"""The baseline/diff JIT pair that asmdiffs, tpdiff and memdiff start from.

One place for the options that name the two JITs and their JIT config, and
for turning them into two checked, distinct JIT files for the target.
"""
from __future__ import annotations

import argparse
import filecmp
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from spmi.base import config
from spmi.base.errors import SuiteError
from spmi.sources import baseline
from spmi.tools import jit_build
from spmi.tools.superpmi_tool import JitPairOptions

log = logging.getLogger("superpmi")


def add_jit_pair_options(parser: argparse.ArgumentParser, title: str = "JIT options") -> None:
    """`-base_jit_path`, `-diff_jit_path` and the JIT config lists `-jitoption`, `-base_jit_option`,
    `-diff_jit_option`; add the other baseline options with `add_baseline_options(parser, base_jit_path=False)`."""
    group = parser.add_argument_group(title)
    baseline.add_base_jit_path_option(group)
    group.add_argument("-diff_jit_path", metavar="FILE",
                       help="diff JIT (default: the JIT for the target in Core_Root)")
    add_jitoption_option(group, "JIT config for both JITs, without DOTNET_ (repeatable)")
    group.add_argument("-base_jit_option", action="append", metavar="KEY=VALUE",
                       help="JIT config for the baseline JIT only (repeatable)")
    group.add_argument("-diff_jit_option", action="append", metavar="KEY=VALUE",
                       help="JIT config for the diff JIT only (repeatable)")


def add_jitoption_option(parser: "argparse._ActionsContainer", help_text: str) -> None:
    """`-jitoption KEY=VALUE` (repeatable): JIT config for every JIT the command runs."""
    parser.add_argument("-jitoption", action="append", metavar="KEY=VALUE", help=help_text)


def user_jit_options(args: argparse.Namespace, forced: Sequence[str] = ()) -> JitPairOptions:
    """The user's JIT config per side, plus the command's own `forced` options."""
    return JitPairOptions(
        forced=tuple(forced),
        shared=config.split_option_values(args.jitoption, "-jitoption"),
        base_only=config.split_option_values(args.base_jit_option, "-base_jit_option"),
        diff_only=config.split_option_values(args.diff_jit_option, "-diff_jit_option"))


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


def resolve_jit_pair(args: argparse.Namespace, settings: config.Settings,
                     jit_name: Optional[str] = None) -> JitPair:
    """Diff JIT (flag or Core_Root), baseline JIT (flag or rolling build), both checked.

    Each must be a readable file whose build string (when decodable) targets
    the requested OS/arch, and they must be two different files.
    """
    if args.diff_jit_path:
        diff = jit_build.validate_jit_file(Path(args.diff_jit_path), "-diff_jit_path")
    else:
        diff = jit_build.validate_jit_file(config.find_default_jit(settings, jit_name), "diff JIT")
    if args.base_jit_path:
        jit_build.validate_jit_file(Path(args.base_jit_path), "-base_jit_path")
    choice = baseline.find_baseline_jit(settings, args, jit_name or diff.name)
    base = jit_build.validate_jit_file(choice.path, "base JIT")
    choice.path = base
    if same_file(base, diff):
        raise SuiteError(f"the base and diff JIT are the same file ({diff}); pass a different -base_jit_path "
                         "or -diff_jit_path")
    warn_if_identical(base, diff)
    base_info = jit_build.check_jit_target(base, "base JIT", settings.target_os, settings.target_arch)
    diff_info = jit_build.check_jit_target(diff, "diff JIT", settings.target_os, settings.target_arch)
    return JitPair(base, diff, choice, base_info, diff_info)
