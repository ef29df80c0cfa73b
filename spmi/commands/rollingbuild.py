"""`jitrollingbuild.py list | download | upload`: rolling builds of the JIT in Azure Storage
(docs/contracts.md §12.14). The entry script holds the command line; this module the commands.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from spmi.base import config, fsutil, invocation, platforms, redaction, runner, untrusted
from spmi.base.config import Settings
from spmi.base.errors import SuiteError
from spmi.commands import shared
from spmi.sources import baseline, git_utils
from spmi.storage import blobs, downloads, uploads

log = logging.getLogger("superpmi")

PROG = invocation.program_name("jitrollingbuild.py")
CONTAINER = baseline.ROLLING_BUILD_CONTAINER


GIT_HASH_ALTERNATIVE = ("-git_hash",)  # names the build without computing the baseline


def check_list_flags(args: argparse.Namespace) -> None:
    if args.all and args.global_all:
        raise SuiteError("--all and --global_all cannot be used together; pick one")
    if args.global_all and args.git_hash:
        raise SuiteError("--global_all lists every hash; do not pass -git_hash with it")


@dataclass(frozen=True)
class ListScope:
    prefix: str  # listing prefix
    header: str  # `<n>` is filled in later
    strict_prefix: str  # names must start with this (guards `Checked` vs `CheckedX`)


def list_scope(git_hash: Optional[str], all_builds: bool, global_all: bool,
               host_os: str, arch: str, build_type: str) -> ListScope:
    """What `list` asks for and how its header reads (§12.14)."""
    if global_all:
        return ListScope("builds/", "{n} JIT files", "builds/")
    assert git_hash is not None
    if all_builds:
        prefix = f"builds/{git_hash}/"
        return ListScope(prefix, f"{{n}} JIT files for {git_hash}/", prefix)
    prefix = baseline.build_prefix(git_hash, host_os, arch, build_type)
    return ListScope(prefix, f"{{n}} JIT files for {git_hash}/{host_os}/{arch}/{build_type}", prefix + "/")


def relative_blob_path(name: str, prefix: str) -> Path:
    """Where a blob under `prefix` lands relative to the download directory: the one
    confinement rule (docs/contracts.md §12.20), and no `:` (an NTFS stream) or `.` part."""
    rest = name[len(prefix):].lstrip("/") if name.startswith(prefix) else ""
    parts = [p for p in rest.split("/") if p]
    reason = fsutil.unsafe_name_reason(rest) if parts else "no file name under the build's folder"
    if reason is None and any(p == "." or "\\" in p or ":" in p for p in parts):
        reason = "a '.', '\\' or ':' in a component"
    if reason:
        raise SuiteError(f"refusing to download blob {untrusted.one_line(repr(name))}: it has {reason}, so it "
                         "does not map to a file under the download directory")
    return Path(*parts)


def jit_files_to_upload(names: Sequence[str], host_os: str) -> List[str]:
    """File names containing `clrjit` and ending in the host's shared-library suffix, sorted."""
    suffix = platforms.shared_lib_suffix(host_os)
    fold = host_os in (platforms.WINDOWS, platforms.OSX)
    chosen = [n for n in names
              if "clrjit" in (n.lower() if fold else n) and (n.lower() if fold else n).endswith(suffix)]
    return sorted(chosen)


def list_command(args: argparse.Namespace, settings: Settings) -> int:
    account_url = blobs.resolve_account_url(args.storage_url)
    git_hash = None
    if not args.global_all and not args.git_hash:
        require_enlistment(args, settings)
    if not args.global_all:
        git_hash = (baseline.check_hash(args.git_hash, "-git_hash") if args.git_hash
                    else first_candidate(settings))
    scope = list_scope(git_hash, args.all, args.global_all, settings.host_os, settings.arch, settings.build_type)
    names = [n for n in blobs.list_blobs(CONTAINER, scope.prefix, account_url) if n.startswith(scope.strict_prefix)]
    print(scope.header.format(n=len(names)))
    print()
    for name in names:
        print(untrusted.console_line(blobs.blob_url(CONTAINER, name, account_url)))
    sys.stdout.flush()
    return 0


#: What `list` and `download` say when no build is named and there is no enlistment to find a baseline in.
NOT_IN_ENLISTMENT = "not in a dotnet/runtime enlistment: pass -runtime_repo DIR or -git_hash HASH"


def require_enlistment(args: argparse.Namespace, settings: Settings) -> None:
    """The baseline is computed from a dotnet/runtime enlistment's history (docs/contracts.md §12.8);
    with neither a build nor an enlistment named and none around, say which flag names one."""
    if not args.runtime_repo and not config.is_runtime_enlistment(settings.repo_root):
        raise SuiteError(NOT_IN_ENLISTMENT)


def first_candidate(settings: Settings) -> str:
    return baseline.baseline_candidates(settings.repo_root, alternatives=GIT_HASH_ALTERNATIVE).candidates[0]


def download_command(args: argparse.Namespace, settings: Settings) -> int:
    if not args.git_hash:
        require_enlistment(args, settings)
    account_url = blobs.resolve_account_url(args.storage_url)
    target_dir: Optional[Path] = None
    if args.target_dir:
        target_dir = Path(args.target_dir).resolve()
        if not target_dir.is_dir():
            raise SuiteError(f"-target_dir '{args.target_dir}' is not an existing directory; create it first")
    where = f"{settings.host_os}/{settings.arch}/{settings.build_type}"
    if args.git_hash:
        tried = [baseline.check_hash(args.git_hash, "-git_hash")]
        git_hash, names = tried[0], build_listing(account_url, tried[0], settings)
    else:
        tried, git_hash, names = find_built_candidate(account_url, settings)
    if git_hash is None or not names:
        log.error("Error: nothing to download: no %s build of %s; `%s list` shows the builds of a hash "
                  "(pass -git_hash with one that has a build)", where, ", ".join(tried), PROG)
        return baseline.NO_ROLLING_BUILD_EXIT_CODE
    destination = target_dir or baseline.basejit_dir(settings.spmi_location, git_hash, settings.host_os,
                                                     settings.arch, settings.build_type)
    prefix = baseline.build_prefix(git_hash, settings.host_os, settings.arch, settings.build_type)
    files = download_build(account_url, names, prefix, destination, settings, keep_existing=target_dir is None)
    log.info("Downloaded %d JIT file%s of %s to %s", len(files), "" if len(files) == 1 else "s", git_hash, destination)
    if args.skip_cleanup:
        log.info("--skip_cleanup: nothing to keep (download writes straight into %s)", destination)
    return 0


def build_listing(account_url: str, git_hash: str, settings: Settings) -> List[str]:
    prefix = baseline.build_prefix(git_hash, settings.host_os, settings.arch, settings.build_type)
    return [n for n in blobs.list_blobs(CONTAINER, prefix, account_url) if n.startswith(prefix + "/")]


def find_built_candidate(account_url: str, settings: Settings):  # type: ignore[no-untyped-def]
    """The first baseline candidate with a non-empty build listing: (tried, hash, names)."""
    start = baseline.baseline_candidates(settings.repo_root, alternatives=GIT_HASH_ALTERNATIVE)
    tried: List[str] = []
    for index, candidate in enumerate(start.candidates, 1):
        log.info("try %d: %s", index, candidate)
        tried.append(candidate)
        names = build_listing(account_url, candidate, settings)
        if names:
            if index > 1:
                log.warning(baseline.NOT_FIRST_CANDIDATE_WARNING)
            return tried, candidate, names
    return tried, None, []


def download_build(account_url: str, names: Sequence[str], prefix: str, destination: Path,
                   settings: Settings, keep_existing: bool) -> List[Path]:
    """Download every blob into `destination` (files already in the cache are kept)."""
    planned = [(name, destination / relative_blob_path(name, prefix)) for name in names]
    # Only the shared cache needs a lock; a user's -target_dir gets no lock file beside it.
    with fsutil.directory_lock(destination.parent) if keep_existing else contextlib.nullcontext():
        items = []
        for name, path in planned:
            if keep_existing and path.is_file():
                log.info("Already downloaded: %s", untrusted.one_line(str(path)))
                continue
            items.append(downloads.DownloadItem(blobs.blob_url(CONTAINER, name, account_url), path.parent,
                                              file_name=path.name, extract=False))
        downloads.download_files(items, show_progress=settings.show_progress)
    return [path for _, path in planned]


def upload_command(args: argparse.Namespace, settings: Settings) -> int:
    git_hash = resolve_upload_hash(args.git_hash, args.use_latest_jit_change, settings)
    product_dir = require_product_dir(settings)
    native = platforms.jit_file_name(settings.host_os, settings.arch, settings.host_os, settings.arch)
    if not (product_dir / native).is_file():
        raise SuiteError(f"the native JIT {native} is not in {product_dir}; build the JIT or pass -product_location")
    names = jit_files_to_upload([p.name for p in product_dir.iterdir() if p.is_file()], settings.host_os)
    credentials = shared.storage_credentials(args)
    writer = uploads.StorageWriter(credentials, blobs.resolve_account_url(args.storage_url, authenticated=True))
    for name in names:
        blob = baseline.build_blob_name(git_hash, settings.host_os, settings.arch, settings.build_type, name)
        writer.upload_file(CONTAINER, blob, product_dir / name)
    log.info("Uploaded %d JIT files to %s", len(names),
             blobs.blob_url(CONTAINER, baseline.build_prefix(git_hash, settings.host_os, settings.arch,
                                                               settings.build_type), writer.account_url))
    if args.skip_cleanup:
        log.info("--skip_cleanup: nothing to keep (upload sends the files of %s as they are)", product_dir)
    return 0


def resolve_upload_hash(git_hash: str, use_latest_jit_change: bool, settings: Settings) -> str:
    if use_latest_jit_change:
        if settings.repo_root is None:
            raise SuiteError("--use_latest_jit_change needs the git checkout; run from it or pass -runtime_repo")
        latest = git_utils.latest_jit_change(settings.repo_root, baseline.check_revision(git_hash, "-git_hash"))
        if latest:
            if latest != git_hash:
                log.info("Using the latest JIT change %s instead of %s", latest, git_hash)
            git_hash = latest
    return baseline.check_hash(git_hash, "-git_hash")


def require_product_dir(settings: Settings) -> Path:
    if settings.product_dir is not None:
        return settings.product_dir
    expected = (config.default_product_dir(settings.repo_root, settings.host_os, settings.arch,
                                                settings.build_type) if settings.repo_root else None)
    where = f" ({expected} does not exist)" if expected else ""
    raise SuiteError(f"no product directory to upload from{where}; build the JIT or pass -product_location")


def run(args: argparse.Namespace, argv: Optional[Sequence[str]]) -> int:
    """Run the chosen `jitrollingbuild.py` command after the shared set-up (logging, secrets, settings);
    its own flag checks (`validate`, set by its parser) come first."""
    if args.validate is not None:
        args.validate(args)
    if args.func is upload_command:  # the one command with storage credentials
        for secret in (args.connection_string, args.sas_token, args.account_key):
            redaction.register_secret(secret)
    settings = shared.settings_from_args(args)
    shared.start_logging(args, settings)
    log.debug("Command line: %s", runner.format_command([PROG, *(sys.argv[1:] if argv is None else argv)]))
    return int(args.func(args, settings))
