#!/usr/bin/env python3
"""The superpmi-asmdiffs Helix work item: one target's diffs from the correlation payload.

    <python> <payload>/superpmi_asmdiffs.py -base_jit_directory <payload>/base
        -diff_jit_directory <payload>/diff -log_directory <upload root> -arch <target arch>
        -platform <target os> -type asmdiffs|tpdiff|memdiff|metricdiff|all
        [-base_jit_options a;b] [-diff_jit_options a;b] [-mch_files ...] [-private_store DIR] [-part K/N]
        [-work_item_timeout H:MM:SS]

Runs `superpmi.py download`, then per type `superpmi.py <type> ... --summary_as_json`
with the payload's JITs (checked for asmdiffs, release for tpdiff/memdiff/metricdiff; tpdiff with
`-pin_path <payload>/pin`), and leaves in the upload root (docs/contracts.md §12.15):
`superpmi_<type>_summary_<os>_<arch>.md` (for people) and `.json` (for merging), the
logs, `Asmdiffs_<os>_<arch>.zip` with every `.dasm`, asmdiffs' HTML diff explorer
`superpmi_asmdiffs_report_<os>_<arch>.html`, and `superpmi_status_<os>_<arch>.json`
(steps, exit codes, problems, baseline hash, repro command). A declared file that
could not be produced is written as `<empty>`. Exit 1 when any step failed; memdiff's
exit code 2 (BytesAllocated grew by at least -memdiff_threshold %) fails the work item
too, recorded as a memory-gate step in the status file.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional, Sequence

from spmi.base import logs, usage
from spmi.base.config import ArgumentParser
from spmi.pipeline import common as pipeline
from spmi.pipeline.workitem import config_from_args, run_work_item


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=pipeline.DRIVER_SCRIPT, description=__doc__.splitlines()[0])
    usage.add_version(parser)
    parser.add_argument("-base_jit_directory", required=True, help="baseline JITs: <dir>/checked, <dir>/release")
    parser.add_argument("-diff_jit_directory", required=True, help="diff JITs: <dir>/checked, <dir>/release")
    parser.add_argument("-log_directory", required=True, help="where results go (the Helix upload root)")
    parser.add_argument("-arch", required=True, help="target architecture")
    parser.add_argument("-platform", required=True, help="target OS: windows, linux or osx")
    parser.add_argument("-type", default="asmdiffs", choices=pipeline.TYPE_CHOICES, help="what to run")
    parser.add_argument("-base_jit_options", help="';'-separated key=value options for the baseline JIT")
    parser.add_argument("-diff_jit_options", help="';'-separated key=value options for the diff JIT")
    parser.add_argument("-mch_files", nargs="+", help="collections to use instead of downloading them")
    parser.add_argument("-part", metavar="K/N",
                        help="this is work item K of the N the target's collections are spread over "
                             "(result file names carry .partKofN)")
    parser.add_argument("-private_store", action="append", help="extra collection store (repeatable)")
    parser.add_argument("-payload_directory",
                        help="correlation payload (default: $HELIX_CORRELATION_PAYLOAD, else this script's directory)")
    parser.add_argument("-host_os", help="OS this runs on (default: this machine's)")
    parser.add_argument("-work_item_timeout", metavar="H:MM:SS",
                        help="the work item's Helix timeout (the .proj passes it): replays stop early enough "
                             "to leave time for the summaries, which name the collections that timed out")
    parser.add_argument("--no_overlap", action="store_true",
                        help="download every collection before the first diff type starts "
                             "(default: the first type replays each collection as soon as it is downloaded)")
    pipeline.add_signal_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup_logging(logging.INFO, None)
    return logs.run_guarded(pipeline.DRIVER_SCRIPT,
                               lambda: run_work_item(config_from_args(args, os.environ), os.environ),
                               errors_to_stderr=True)


if __name__ == "__main__":
    sys.exit(main())
