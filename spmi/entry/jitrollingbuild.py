"""`jitrollingbuild.py` (the console command `jitrollingbuild` when installed): list, download and
upload rolling builds of the JIT (docs/contracts.md §12.14).

    python jitrollingbuild.py list [-git_hash H] [--all | --global_all]
    python jitrollingbuild.py download [-git_hash H] [-target_dir D]
    python jitrollingbuild.py upload -git_hash H [--use_latest_jit_change]

Builds live in the `jitrollingbuild` container as
`builds/<hash>/<host_os>/<arch>/<build_type>/<jit file>`. Without `-git_hash`,
`list` and `download` use the baseline of the current checkout (§12.8): the
newest commits touching the JIT at or before the merge-base with `main`.
Exit code 0 on success, 1 on any error (one line), 2 on a usage error; `download` exits 2
also when no build of the hash(es) tried exists (nothing was downloaded).
"""
from __future__ import annotations

from typing import Optional, Sequence

from spmi.base import logs
from spmi.commands import parsing, shared
from spmi.commands.parsing import ArgumentParser
from spmi.commands.rollingbuild import PROG, check_list_flags, download_command, list_command, run, upload_command


def build_parser() -> ArgumentParser:
    common = shared.common_options()
    shared.add_storage_url_option(common)
    parser, subparsers = parsing.program_parser(PROG, "List, download and upload rolling builds of the JIT.")

    listing = subparsers.add_parser("list", parents=[common], help="list the JIT files of a build")
    listing.add_argument("-git_hash", metavar="HASH",
                         help="build to list (default: the baseline of the current checkout)")
    listing.add_argument("--all", action="store_true", help="every OS, arch and build type of the hash")
    listing.add_argument("--global_all", action="store_true", help="every build of every hash")
    listing.set_defaults(func=list_command, validate=check_list_flags)

    download = subparsers.add_parser("download", parents=[common], help="download the JIT files of a build")
    download.add_argument("-git_hash", metavar="HASH",
                          help="build to download (default: the newest built baseline of the current checkout)")
    download.add_argument("-target_dir", metavar="DIR",
                          help="existing directory to download into (default: <spmi_location>/basejit/...)")
    add_skip_cleanup(download, "download writes the JIT files straight into their folder")
    download.set_defaults(func=download_command, validate=None)

    upload = subparsers.add_parser("upload", parents=[common], help="upload the JITs of the product directory")
    upload.add_argument("-git_hash", metavar="HASH", required=True, help="commit the JITs were built from")
    upload.add_argument("--use_latest_jit_change", action="store_true",
                        help="use the newest commit at or before -git_hash that changed src/coreclr/jit")
    shared.add_credential_options(upload)
    add_skip_cleanup(upload, "upload sends the product directory's files as they are")
    upload.set_defaults(func=upload_command, validate=None)
    return parser


def add_skip_cleanup(parser: ArgumentParser, why: str) -> None:
    parser.add_argument("--skip_cleanup", action="store_true",
                        help=f"accepted as upstream does; {why}, so there is no temporary folder to keep")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return logs.run_guarded(PROG, lambda: run(args, argv))
