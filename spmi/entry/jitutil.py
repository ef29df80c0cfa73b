"""`jitutil.py` (the console command `jitutil` when installed): small JIT utilities from the SuperPMI suite's library, for scripts and CI steps.

  python jitutil.py platform [-target_os OS] [-target_arch ARCH]
      host facts and the file names of the JIT and the tools for a target
  python jitutil.py jit-ee-version [-runtime_repo DIR]
      the JIT-EE interface GUID of an enlistment (docs/contracts.md §9)
  python jitutil.py extract ARCHIVE DIRECTORY
      extract a .zip or tar archive with the suite's path rules (no entry lands outside DIRECTORY)

The shared code itself lives in the `spmi` package (see docs/architecture.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from spmi.base import invocation, logs
from spmi.base.errors import SuiteError
from spmi.base.facts import jit_ee_version_text, platform_report
from spmi.commands import parsing
from spmi.commands.parsing import ArgumentParser
from spmi.storage import archives

PROG = invocation.program_name("jitutil.py")


def build_parser() -> ArgumentParser:
    parser, commands = parsing.program_parser(PROG, "Small JIT utilities from the SuperPMI suite.")
    platform = commands.add_parser("platform", help="host facts and JIT/tool file names for a target")
    platform.add_argument("-target_os", help="target OS (windows, linux, osx); default: the host's")
    platform.add_argument("-target_arch", help="target architecture (x64, x86, arm, arm64, ...); default: the host's")
    platform.set_defaults(func=_platform)
    version = commands.add_parser("jit-ee-version", help="the JIT-EE version GUID of a dotnet/runtime enlistment")
    version.add_argument("-runtime_repo", help="the enlistment (default: the git work tree around this directory)")
    version.set_defaults(func=_jit_ee_version)
    extract = commands.add_parser("extract", help="safely extract a .zip or tar archive")
    extract.add_argument("archive", help="the archive file")
    extract.add_argument("directory", help="where to extract it (created if missing)")
    extract.set_defaults(func=_extract)
    return parser


def _platform(args: argparse.Namespace) -> int:
    print(platform_report(args.target_os, args.target_arch))
    return 0


def _jit_ee_version(args: argparse.Namespace) -> int:
    print(jit_ee_version_text(args.runtime_repo))
    return 0


def _extract(args: argparse.Namespace) -> int:
    if not Path(args.archive).is_file():
        raise SuiteError(f"archive '{args.archive}' not found; check the path")
    written = archives.extract_archive(Path(args.archive), Path(args.directory))
    print(f"extracted {len(written)} files into {args.directory}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return logs.run_guarded(PROG, lambda: args.func(args), errors_to_stderr=True)
