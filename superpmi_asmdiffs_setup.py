#!/usr/bin/env python3
"""Stage the superpmi-asmdiffs Helix payload and work items (docs/contracts.md §12.15).

    python superpmi_asmdiffs_setup.py -product_directory P -host_arch x64|x86 -payload_directory OUT
        [-base_jit_directory B] [-release_product_directory PR -release_base_jit_directory BR]
        [-jit_analyze_directory J] [-git_directory G] [-pin_directory PIN] [-type asmdiffs|tpdiff|memdiff|metricdiff|all]
        [-mch_files M ... | -private_store S] [--run_locally]

Builds the correlation payload in OUT (the suite's scripts, superpmi/mcs with what they
load beside them, the host's cross JITs in diff/<flavour>/, the baseline JITs in
base/<flavour>/ (checked for asmdiffs, release for tpdiff/memdiff/metricdiff), the PIN package in
pin/ for tpdiff, optional jit-analyze/ and git/), checks that every work item finds what
it needs, writes the Helix project (one work item per target partition of the host) and
prints the AzDO variables the pipeline passes on. `--run_locally` then runs every work
item the way Helix would (own clean directory, only the payload and the HELIX_* variables)
and the summarize script, so a developer sees locally what CI shows.

The payload is self-contained: work items read nothing outside it. In particular the
PIN package is staged here on the build agent, from -pin_directory or else downloaded
once from the storage account (`pintools/1.0/<host_os>.zip|.tar.gz`, docs/contracts.md §10.1), and
work items pass `-pin_path <payload>/pin`, so Helix machines never fetch PIN themselves
(one download per pipeline instead of one per work item, and every target measured
with the same PIN).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

from spmi.base import logs, usage
from spmi.base.config import ArgumentParser, int_between, positive_int
from spmi.pipeline import common as pipeline
from spmi.pipeline.setup import run

SCRIPT_DIR = Path(__file__).resolve().parent


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=pipeline.SETUP_SCRIPT, description=__doc__.splitlines()[0])
    usage.add_version(parser)
    parser.add_argument("-source_directory", default=str(SCRIPT_DIR),
                        help="directory holding the suite's scripts (default: this script's)")
    parser.add_argument("-product_directory", required=True,
                        help="built product: superpmi, mcs and the checked cross JITs")
    parser.add_argument("-release_product_directory", help="release cross JITs (tpdiff, memdiff, metricdiff)")
    parser.add_argument("-host_arch", choices=pipeline.HOST_ARCHES, help="Helix host queue arch (default: this machine's)")
    parser.add_argument("-host_os", help="OS of the Helix machines (default: this machine's)")
    parser.add_argument("-payload_directory", required=True, help="correlation payload to create")
    parser.add_argument("-base_jit_directory", help="checked baseline JITs (default: rolling build download)")
    parser.add_argument("-release_base_jit_directory", help="release baseline JITs (default: rolling build download)")
    parser.add_argument("-base_git_hash", help="commit the baseline JITs were built from (recorded; downloaded "
                                               "when no baseline directory is given)")
    parser.add_argument("-baseline_of", metavar="REV",
                        help="find the baseline rolling build of REV instead of the work tree's HEAD (a scheduled "
                             "main run passes HEAD~1: the previous main build is the base, this one the diff)")
    parser.add_argument("-runtime_repo", help="dotnet/runtime clone for baseline discovery (default: the git work tree here)")
    parser.add_argument("-storage_url", help="storage account for rolling builds and history (default: the public account)")
    parser.add_argument("-jit_analyze_directory", help="self-contained jit-analyze to ship as jit-analyze/")
    parser.add_argument("-git_directory", help="portable git to ship as git/ (Windows)")
    parser.add_argument("-pin_directory",
                        help="PIN package (pin and clrjit_inscount_<arch>/) to ship as pin/ for tpdiff "
                             "(default: download pintools/1.0/<host_os> from the storage account)")
    parser.add_argument("-type", default="asmdiffs", choices=pipeline.TYPE_CHOICES, help="what work items run")
    parser.add_argument("-base_jit_options", help="';'-separated key=value options for the baseline JIT")
    parser.add_argument("-diff_jit_options", help="';'-separated key=value options for the diff JIT")
    parser.add_argument("-mch_files", nargs="+",
                        help="collections every work item replays instead of downloading (copied into the payload)")
    parser.add_argument("-private_store", action="append",
                        help="collection store laid out <guid>/<os>/<arch>/; each work item replays its target's "
                             "collections from it instead of downloading (copied into the payload)")
    parser.add_argument("-jit_ee_version", help="JIT-EE GUID selecting collections in -private_store "
                                                "(default: mcs -printJITEEVersion)")
    parser.add_argument("-helix_directory", help="where the .proj goes (default: <payload>_helix)")
    parser.add_argument("-creator", help="Helix Creator (default: $BUILD_REQUESTEDFOR or the user)")
    parser.add_argument("-source_prefix", help="Helix source prefix (default: pr for PR builds, else ci)")
    parser.add_argument("--clean", action="store_true", help="empty an existing payload directory first")
    parser.add_argument("--run_locally", action="store_true",
                        help="then run every work item here as Helix would, and summarize")
    parser.add_argument("-local_directory", help="where --run_locally works (default: <payload>_local)")
    parser.add_argument("-jobs", "-parallelism", dest="jobs", type=positive_int, metavar="N",
                        help="work items run at once with --run_locally (default: the CPUs this process may use)")
    parser.add_argument("-work_items_per_target", default="1", metavar="N|auto",
                        help="spread each target's collections over N Helix work items, assigned by size so that "
                             "they finish together; 'auto': one per -bytes_per_work_item of collections "
                             f"(at most {pipeline.AUTO_MAX_WORK_ITEMS}); needs -mch_files or -private_store "
                             "(default: 1)")
    parser.add_argument("-bytes_per_work_item", type=positive_int, default=pipeline.AUTO_BYTES_PER_WORK_ITEM, metavar="BYTES",
                        help="collection bytes per work item for -work_items_per_target auto "
                             f"(default: {pipeline.AUTO_BYTES_PER_WORK_ITEM})")
    parser.add_argument("-log_level", default="info", help="console level (default: info)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="with --run_locally: show everything (staging, the pipeline variables, the summarize "
                             "step's output); without it a local run prints one line per work item and the overall "
                             "pages (in CI everything is shown)")
    history = parser.add_argument_group("history (with --run_locally; docs/history.md)")
    history.add_argument("--history_upload", action="store_true",
                         help="the summarize step records each platform's results as a main-branch run in storage "
                              "(-storage_url; the credential from $AZURE_STORAGE_CONNECTION_STRING, "
                              "$AZURE_STORAGE_SAS_TOKEN or $AZURE_STORAGE_KEY)")
    history.add_argument("--history", action="store_true",
                         help="the summarize step judges each platform's changes against the recorded main runs")
    history.add_argument("-history_last", type=int_between(1, 1000), default=30, metavar="N",
                         help="how many main runs to compare with (default 30)")
    history.add_argument("-diff_git_hash", metavar="HASH", help="commit the diff JITs were built from (recorded)")
    pipeline.add_signal_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return logs.run_guarded(pipeline.SETUP_SCRIPT, lambda: run(args), errors_to_stderr=True)


if __name__ == "__main__":
    sys.exit(main())
