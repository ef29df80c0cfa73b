"""The options several commands share, and the typed records each command makes of them once.

Option definitions: the common and target options, significance, collections, storage,
credentials, baseline, JIT pair and replay options. Records: each command turns its parsed
arguments into typed records once, here (`settings_options`, `log_options`, `run_options`,
`collection_query`, `baseline_request`, `jit_pair_options`, `given_paths`,
`storage_credentials`) and in its own module, and hands those down; nothing below
`spmi/commands` reads a namespace (docs/architecture.md, "The command-line edge").
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

from spmi.base import config, platforms
from spmi.commands import usage
from spmi.commands.parsing import (
    ArgumentParser,
    SignificanceOverrides,
    int_between,
    positive_float,
    positive_int,
    positive_seconds,
    significance_override,
)
from spmi.sources import baseline, mch_sources
from spmi.steps import preflight
from spmi.storage import blobs, uploads
from spmi.tools import superpmi_tool
from spmi.tools.superpmi_tool import JitPairOptions, RunOptions

#: k of the A/A calibration: a change must exceed k × the measured spread (docs/contracts.md §12.12b)
DEFAULT_NOISE_K = 3.0


# ---------------------------------------------------------------- shared option groups

def common_options() -> ArgumentParser:
    """Options every command takes."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("common options")
    group.add_argument("-arch", help="host architecture (default: this machine's)")
    group.add_argument("-host_os", help="host OS: windows, linux or osx (default: this machine's)")
    group.add_argument("-build_type", help="Debug, Checked or Release (default: Checked; Release for tpdiff/memdiff)")
    group.add_argument("-core_root", help="Core_Root directory (holds superpmi, mcs and the JITs)")
    group.add_argument("-product_location", help="built product directory (artifacts/bin/coreclr/<os>.<arch>.<build_type>)")
    group.add_argument("-runtime_repo", help="dotnet/runtime enlistment (default: the git work tree around the "
                                              "current directory, else the one around these scripts)")
    group.add_argument("-spmi_location", help="cache and output root (default: $SUPERPMI_CACHE_DIRECTORY, else <repo>/artifacts/spmi)")
    group.add_argument("-log_level", default="info", help="console level: critical, error, warning, info (default), debug")
    group.add_argument("-v", "--verbose", action="store_true",
                       help="also show the details on the console: commands run, superpmi's output, the analyzer's "
                            "lists (same as -log_level debug; the log file always has them)")
    group.add_argument("-log_file", help="log file (default: a new superpmi.log in spmi_location); always at debug level")
    group.add_argument("--no_progress", action="store_true", help="no progress bars")
    # Without `target_options` a command works for the host: the target is "not chosen".
    parser.set_defaults(target_os=None, target_arch=None, mch_arch=None)
    return parser


def target_options() -> ArgumentParser:
    """Options naming the target a collection or JIT is for."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("target options")
    group.add_argument("-target_os", help="target OS (default: host OS)")
    group.add_argument("-target_arch", help="target architecture (default: -arch)")
    group.add_argument("-mch_arch", help="architecture the collections were recorded on (default: -target_arch)")
    return parser


def significance_options(calibration: bool = True) -> ArgumentParser:
    """How a metric diff decides that a change is significant: the per-metric rule and, with
    `calibration`, the A/A noise check (docs/contracts.md §12.12b)."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("significance options")
    group.add_argument("-significance", action=SignificanceOverrides, type=significance_override, default=[],
                       metavar="METRIC=PCT",
                       help="minimum meaningful change of METRIC in %% (0 = any change), replacing the default "
                            "rule for that metric (instructions 0.005, code bytes any change, BytesAllocated 1, "
                            "PerfScore 0.01, other metrics 0.1); repeatable")
    if calibration:
        group.add_argument("--noise_check", action="store_true",
                           help="A/A calibration: also replay every collection with the base JIT as both sides "
                                "and call a change significant only when it exceeds -noise_k times the spread "
                                "that measures (costs one more replay per collection)")
        group.add_argument("-noise_k", type=positive_float, default=DEFAULT_NOISE_K, metavar="K",
                           help="with --noise_check: a change must exceed K times the A/A spread (default 3)")
    return parser


# ---------------------------------------------------------------- collections and storage

def add_collection_options(parser: argparse.ArgumentParser) -> "argparse._ArgumentGroup":
    """Add `-mch_files`, `-filter`, `--force_download`, `-jit_ee_version`,
    `-private_store` and `-storage_url` (the last only if the parser lacks it)."""
    group = parser.add_argument_group("collection options")
    group.add_argument("-mch_files", nargs="+", metavar="FILE_DIR_OR_URL",
                       help="collections to use: files, directories (searched recursively) or URLs")
    group.add_argument("-filter", nargs="+", metavar="TEXT",
                       help="use only collections whose file name contains one of these (case-insensitive)")
    group.add_argument("--force_download", action="store_true",
                       help="download collections even if the cache holds a complete earlier download")
    add_jit_ee_version_option(group)
    group.add_argument("-private_store", action="append", metavar="DIR",
                       help=f"extra collection store (repeatable; default: ${mch_sources.PRIVATE_STORE_ENV}, ';'-separated)")
    add_storage_url_option(parser)
    return group


def add_jit_ee_version_option(parser: "argparse._ActionsContainer") -> None:
    """`-jit_ee_version`: the GUID selecting collections (docs/contracts.md §9)."""
    parser.add_argument("-jit_ee_version", metavar="GUID",
                        help="JIT-EE version GUID selecting the collections (default: from the source tree or mcs)")


def add_overlapped_collection_options(parser: argparse.ArgumentParser) -> None:
    """`add_collection_options` plus `--no_overlap` (the commands that replay while collections download)."""
    group = add_collection_options(parser)
    group.add_argument("--no_overlap", action="store_true",
                        help="download every collection before replaying the first "
                             "(default: replay each one as soon as it is downloaded)")


def add_storage_url_option(parser: argparse.ArgumentParser) -> None:
    """Add `-storage_url` unless the parser has it already."""
    if "-storage_url" not in getattr(parser, "_option_string_actions", {}):
        parser.add_argument("-storage_url", metavar="URL",
                            help=f"storage account URL (default: ${blobs.STORAGE_URL_ENV}, else {blobs.DEFAULT_ACCOUNT_URL})")


def add_credential_options(parser: argparse.ArgumentParser) -> None:
    """Options for commands that write to storage."""
    group = parser.add_argument_group(
        "storage credentials (for writing)",
        f"Prefer the environment variables ${uploads.CONNECTION_STRING_ENV}, ${uploads.SAS_TOKEN_ENV} or ${uploads.ACCOUNT_KEY_ENV} "
        "(used in that order when no credential flag is given): a secret passed as a flag is visible to "
        "other local users in the process list.")
    group.add_argument("-connection_string", metavar="TEXT",
                       help=f"storage connection string{uploads.VISIBLE_NOTE}{uploads.CONNECTION_STRING_ENV}")
    group.add_argument("-sas_token", metavar="TOKEN",
                       help=f"SAS token with write permission{uploads.VISIBLE_NOTE}{uploads.SAS_TOKEN_ENV}")
    group.add_argument("-account_key", metavar="KEY", help=f"storage account key{uploads.VISIBLE_NOTE}{uploads.ACCOUNT_KEY_ENV}")
    usage.add_renamed(group, "-az_storage_key", "-account_key")
    group.add_argument("--use_azure_cli", action="store_true", help="authenticate as the signed-in Azure CLI user")
    group.add_argument("--use_default_credential", action="store_true",
                       help="authenticate with azure-identity's DefaultAzureCredential")


# ---------------------------------------------------------------- JITs and replay

def add_baseline_options(parser: argparse.ArgumentParser, add_storage_url: bool = True,
                         base_jit_path: bool = True) -> None:
    """Add `-base_jit_path` (unless `base_jit_path` is False: another group has it), `-git_hash`,
    `-base_git_hash` and (unless the parser already has it, or `add_storage_url` is False) `-storage_url`."""
    group = parser.add_argument_group("baseline JIT options")
    if base_jit_path:
        add_base_jit_path_option(group)
    group.add_argument("-git_hash", metavar="REV",
                       help="commit whose baseline to find (default: git rev-parse HEAD)")
    group.add_argument("-base_git_hash", metavar="HASH",
                       help="use the rolling build of exactly this commit as the baseline")
    if add_storage_url:
        add_storage_url_option(parser)


def add_base_jit_path_option(parser: "argparse._ActionsContainer") -> None:
    parser.add_argument("-base_jit_path", metavar="FILE",
                        help="baseline JIT (default: a rolling build of the merge-base with main)")


def add_jit_pair_options(parser: argparse.ArgumentParser, title: str = "JIT options") -> None:
    """`-base_jit_path`, `-diff_jit_path` and the JIT config lists `-jitoption`, `-base_jit_option`,
    `-diff_jit_option`; add the other baseline options with `add_baseline_options(parser, base_jit_path=False)`."""
    group = parser.add_argument_group(title)
    add_base_jit_path_option(group)
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


def add_superpmi_common_options(group: "argparse._ArgumentGroup") -> None:
    """The superpmi switches every command that runs superpmi takes (replay, asmdiffs, tpdiff,
    memdiff, metricdiff and collect's clean and verify replays; §12.1, §14.3)."""
    group.add_argument("--altjit", action="store_true",
                       help="replay with AltJit=* and AltJitNgen=* (cross-target altjits)")
    group.add_argument("--sequential", action="store_true", help="run superpmi without -p (one process)")
    group.add_argument("-error_limit", type=positive_int, metavar="N",
                       help="stop after N compile errors (superpmi -failureLimit)")
    group.add_argument("-spmi_log_file", metavar="FILE", help="superpmi -w log file (requires --sequential)")
    group.add_argument("--break_on_assert", action="store_true", help="superpmi -boa")
    group.add_argument("--break_on_error", action="store_true", help="superpmi -boe")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The replay options replay, asmdiffs, tpdiff and memdiff share (§12.1)."""
    group = parser.add_argument_group("replay options")
    group.add_argument("-jit_name", help="JIT file name to look for (default: native or cross name for the target)")
    add_superpmi_common_options(group)
    group.add_argument("--parallelism", type=int_between(1, superpmi_tool.MAX_PARALLELISM), metavar="N", help="superpmi -p N (default: -p, one worker per CPU)")
    group.add_argument("-compile", "-c", dest="compile", metavar="LIST",
                       help="compile only these contexts (superpmi -c: 20, 5,10-99, or an .mcl file); implies no -p")
    group.add_argument("--produce_repro", action="store_true",
                       help="write a .mc repro per failing context into repro.<collection>")
    group.add_argument("-details", metavar="FILE_OR_DIR",
                       help="keep superpmi's details CSV: a directory (one <collection>.csv each) or a file")
    group.add_argument("--skip_cleanup", action="store_true", help="keep the temporary directory")
    group.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                       help="kill a superpmi process (and its workers) running longer than this")
    group.add_argument("--time_budget", type=positive_seconds, metavar="SECONDS",
                       help="finish replaying within this many seconds of the start: the superpmi running "
                            "then is stopped and later collections are not started, each reported as timed "
                            "out with the contexts it reached (the Helix work item sets it from its timeout)")


# ---------------------------------------------------------------- records of the parsed options

def settings_options(args: argparse.Namespace) -> config.SharedOptions:
    """The common and target options (`common_options`, `target_options`)."""
    return config.SharedOptions(host_os=args.host_os, arch=args.arch, target_os=args.target_os,
                                target_arch=args.target_arch, mch_arch=args.mch_arch, build_type=args.build_type,
                                runtime_repo=args.runtime_repo, core_root=args.core_root,
                                product_location=args.product_location, spmi_location=args.spmi_location,
                                no_progress=bool(args.no_progress))


def settings_from_args(args: argparse.Namespace, default_build_type: str = "Checked") -> config.Settings:
    """The settings the common and target options resolve to (no side effects)."""
    return config.resolve_settings(settings_options(args), default_build_type)


def log_options(args: argparse.Namespace) -> config.LogOptions:
    return config.LogOptions(verbose=bool(args.verbose), log_level=args.log_level, log_file=args.log_file)


def start_logging(args: argparse.Namespace, settings: config.Settings) -> Path:
    """Console and log file as `-v`, `-log_level` and `-log_file` say; the log file's path."""
    return config.start_logging(log_options(args), settings)


def run_options(args: argparse.Namespace) -> RunOptions:
    """The replay options (`add_run_options`), checked."""
    options = RunOptions(sequential=bool(args.sequential), parallelism=args.parallelism, compile_list=args.compile,
                         error_limit=args.error_limit, spmi_log_file=args.spmi_log_file,
                         break_on_assert=bool(args.break_on_assert), break_on_error=bool(args.break_on_error),
                         produce_repro=bool(args.produce_repro), details=args.details,
                         skip_cleanup=bool(args.skip_cleanup), jit_name=args.jit_name, altjit=bool(args.altjit),
                         timeout=args.timeout, time_budget=args.time_budget)
    options.validate()
    return options


def collection_query(args: argparse.Namespace) -> mch_sources.CollectionQuery:
    """The collection options (`add_collection_options`)."""
    return mch_sources.CollectionQuery(mch_files=tuple(args.mch_files or ()), filters=tuple(args.filter or ()),
                                       force_download=bool(args.force_download), jit_ee_version=args.jit_ee_version,
                                       private_stores=tuple(args.private_store or ()), storage_url=args.storage_url)


def baseline_request(args: argparse.Namespace) -> baseline.BaselineRequest:
    """The baseline options (`add_baseline_options`, `-base_jit_path`)."""
    return baseline.BaselineRequest(base_jit_path=args.base_jit_path, git_hash=args.git_hash,
                                    base_git_hash=args.base_git_hash, storage_url=args.storage_url)


def jit_pair_options(args: argparse.Namespace, forced: Sequence[str] = ()) -> JitPairOptions:
    """The user's JIT config per side (`add_jit_pair_options`), plus the command's own `forced` options."""
    return JitPairOptions(
        forced=tuple(forced),
        shared=config.split_option_values(args.jitoption, "-jitoption"),
        base_only=config.split_option_values(args.base_jit_option, "-base_jit_option"),
        diff_only=config.split_option_values(args.diff_jit_option, "-diff_jit_option"))


def given_paths(args: argparse.Namespace, jits: Dict[str, Optional[str]]) -> preflight.GivenPaths:
    """The shared path options of a replaying command, plus its own JIT path flags."""
    return preflight.GivenPaths(directories={"-core_root": args.core_root, "-product_location": args.product_location,
                                             "-runtime_repo": args.runtime_repo},
                                jits=dict(jits), mch_files=list(args.mch_files or []), details=args.details,
                                host_os=platforms.normalize_os(args.host_os or "") or platforms.detect_host_os())


def check_inputs(args: argparse.Namespace, command: str, jits: Dict[str, Optional[str]]) -> None:
    """`preflight.check_inputs` for the paths this command line names."""
    preflight.check_inputs(given_paths(args, jits), command)


def storage_credentials(args: argparse.Namespace,
                        environ: Optional[Mapping[str, str]] = None) -> uploads.StorageCredentials:
    """The credential options (`add_credential_options`), else the environment's credential."""
    return uploads.StorageCredentials.from_flags(
        connection_string=args.connection_string, sas_token=args.sas_token, account_key=args.account_key,
        use_azure_cli=bool(args.use_azure_cli), use_default_credential=bool(args.use_default_credential),
        environ=environ)
