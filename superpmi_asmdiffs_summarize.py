#!/usr/bin/env python3
"""Summarize the Helix results of one host's work items (docs/contracts.md §12.16).

    python superpmi_asmdiffs_summarize.py -diff_summary_dir D -arch x64|x86 -platform windows
        -type asmdiffs|tpdiff|memdiff|metricdiff|all [--short]

Reads every `superpmi_<type>_summary_<os>_<arch>.md|json` and `superpmi_status_<os>_<arch>.json`
under D (names case-insensitive) and writes `D/<n>_overall_<type>_summary_<platform>_<arch>.md`
(`<n>` = 1, 2, 3 for asmdiffs, tpdiff, memdiff and metricdiff, which orders the Extensions tabs; `all`
writes the three in that order; `--short`: `..._short_summary_...`): the problems of
every platform in a box at the top (failed steps of that type, MISSING results, asserts,
replay failures, a crossed memory gate), for asmdiffs the cross-platform impact table,
then one collapsible section per platform with its result and the repro command with
the exact baseline hash, and where each platform's HTML diff explorer is (file and artifact). ` ```diff ` fences become HTML for Azure DevOps. The file stays
under 1 MiB (`--short`: 65,536 characters) by dropping detail sections, never the top
box or the impact table, with a note saying so.

Prints each file, then `##vso[task.uploadsummary]<path>` under Azure DevOps, one
`##vso[task.logissue type=error]` per failed platform, and appends the markdown to
`$GITHUB_STEP_SUMMARY` when set. Exit 0 (1 only for bad arguments).
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional, Sequence

from spmi.base import logs, usage
from spmi.base.config import ArgumentParser
from spmi.pipeline import common as pipeline
from spmi.pipeline.history_step import add_history_options
from spmi.pipeline.summarize import DEFAULT_ARTIFACT, run


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=pipeline.SUMMARIZE_SCRIPT, description=__doc__.splitlines()[0])
    usage.add_version(parser)
    parser.add_argument("-diff_summary_dir", required=True, help="directory holding the work items' results")
    parser.add_argument("-arch", required=True, help="host arch of the Helix queue (x64 or x86)")
    parser.add_argument("-platform", required=True, help="host OS of the Helix queue (e.g. windows)")
    parser.add_argument("-type", required=True, choices=pipeline.TYPE_CHOICES,
                        help="what the work items ran (all: asmdiffs, tpdiff and memdiff, in tab order)")
    parser.add_argument("--short", action="store_true",
                        help="write the short variant (under 65,536 characters, for a PR comment)")
    parser.add_argument("-artifact_name", help="artifact named in truncation notes "
                                               f"(default: {DEFAULT_ARTIFACT} per platform)")
    add_history_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup_logging(logging.INFO, None)
    return logs.run_guarded(pipeline.SUMMARIZE_SCRIPT, lambda: run(args, os.environ), errors_to_stderr=True)


if __name__ == "__main__":
    sys.exit(main())
