"""Collection commands: `download`, `upload`, `upload-private`, `list-collections`, `merge-mch`.

docs/contracts.md §11.4, §12.5 and §12.7 (merge-mch).
"""
from __future__ import annotations

import argparse
import logging
import os
import zipfile
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from spmi.base import config, fsutil, untrusted
from spmi.base.errors import SuiteError
from spmi.commands import shared
from spmi.sources import mch_sources
from spmi.steps import mch_merge
from spmi.storage import blobs, uploads

log = logging.getLogger("superpmi")


# ---------------------------------------------------------------- registration

def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    _register_download(subparsers)
    _register_upload(subparsers)
    _register_upload_private(subparsers)
    _register_list_collections(subparsers)
    _register_merge_mch(subparsers)


def _register_download(subparsers) -> None:  # type: ignore[no-untyped-def]
    parser = subparsers.add_parser(
        "download", parents=[shared.common_options(), shared.target_options()],
        help="download collections into the cache",
        description="Download the collections for a JIT-EE version and target into spmi_location/mch/.")
    shared.add_collection_options(parser)
    parser.add_argument("--skip_cleanup", action="store_true",
                        help="keep the downloaded archives (.zip) in a temporary folder and say where")
    parser.set_defaults(func=download_command)


def _register_upload(subparsers) -> None:  # type: ignore[no-untyped-def]
    parser = subparsers.add_parser(
        "upload", parents=[shared.common_options(), shared.target_options()],
        help="upload collections to Azure Storage",
        description="Zip every non-empty .mch (and its .mct) and upload it to "
                    "superpmi/collections/<guid>/<target_os>/<mch_arch>/.")
    parser.add_argument("-mch_files", nargs="+", required=True, metavar="FILE_OR_DIR",
                        help=".mch files or directories holding them (searched recursively)")
    parser.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version GUID (default: from the source tree or mcs)")
    shared.add_storage_url_option(parser)
    shared.add_credential_options(parser)
    parser.add_argument("--skip_cleanup", action="store_true",
                        help="keep the temporary folder with the compressed files and say where")
    parser.set_defaults(func=upload_command)


def _register_upload_private(subparsers) -> None:  # type: ignore[no-untyped-def]
    parser = subparsers.add_parser(
        "upload-private", parents=[shared.common_options(), shared.target_options()],
        help="copy collections to a private store",
        description="Copy every non-empty .mch (and its .mct) to <private_store>/<guid>/<target_os>/<mch_arch>/.")
    parser.add_argument("-mch_files", nargs="+", required=True, metavar="FILE_OR_DIR",
                        help=".mch files or directories holding them (searched recursively)")
    parser.add_argument("-private_store", metavar="DIR",
                        help=f"the store (default: the first entry of ${mch_sources.PRIVATE_STORE_ENV})")
    parser.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version GUID (default: from the source tree or mcs)")
    parser.add_argument("--skip_cleanup", action="store_true",
                        help="accepted as upstream does; upload-private copies straight into the store, so there is "
                             "no temporary folder to keep")
    parser.set_defaults(func=upload_private_command)


def _register_list_collections(subparsers) -> None:  # type: ignore[no-untyped-def]
    parser = subparsers.add_parser(
        "list-collections", parents=[shared.common_options(), shared.target_options()],
        help="list the collections in Azure Storage or in the local cache",
        description="List collection blobs for the JIT-EE version and target (--all: every one), "
                    "or the cached .mch files (--local).")
    parser.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version GUID (default: from the source tree or mcs)")
    parser.add_argument("--all", action="store_true", help="all JIT-EE versions, OSes and architectures")
    parser.add_argument("--local", action="store_true", help="list the local download cache instead")
    shared.add_storage_url_option(parser)
    parser.set_defaults(func=list_collections_command)


def _register_merge_mch(subparsers) -> None:  # type: ignore[no-untyped-def]
    parser = subparsers.add_parser(
        "merge-mch", parents=[shared.common_options()],
        help="merge collections into one deduplicated .mch with a table of contents",
        description="mcs -merge <output> <pattern> -recursive -dedup -thin, then mcs -toc <output>.")
    parser.add_argument("-output_mch_path", required=True, metavar="FILE", help="the merged .mch to write")
    parser.add_argument("-pattern", required=True, metavar="PATTERN",
                        help="files to merge: a directory and a wildcard, e.g. /work/mch/*.mch (searched recursively)")
    parser.add_argument("--ci", action="store_true",
                        help="first delete ZEROLENGTH marker files left by collection jobs")
    parser.set_defaults(func=merge_mch_command)


# ---------------------------------------------------------------- shared

def _start(args: argparse.Namespace, default_build_type: str = "Checked") -> config.Settings:
    settings = shared.settings_from_args(args, default_build_type)
    shared.start_logging(args, settings)
    return settings


def _known_jit_ee_version(settings: config.Settings, explicit: Optional[str]) -> str:
    guid = config.resolve_jit_ee_version(settings, explicit)
    if guid == config.UNKNOWN_JIT_EE_VERSION:
        raise SuiteError("cannot determine the JIT-EE version (no source tree header, no mcs); pass -jit_ee_version")
    return guid


def collections_to_publish(specs: Sequence[str]) -> List[Path]:
    """Every non-empty `.mch` under `specs`, each followed by its non-empty `<file>.mct`."""
    found: List[Path] = []
    for spec in specs:
        path = Path(spec)
        if path.is_dir():
            candidates = [p for p in mch_sources.find_collection_files(path) if p.suffix.lower() == ".mch"]
        elif path.is_file():
            candidates = [path]
        else:
            raise SuiteError(f"-mch_files '{spec}' is neither a file nor a directory; check the path")
        for mch in candidates:
            if mch.stat().st_size == 0:
                log.warning("Warning: skipping empty %s", mch)
                continue
            found.append(mch)
            toc = Path(str(mch) + ".mct")
            if toc.is_file() and toc.stat().st_size > 0:
                found.append(toc)
    if not found:
        raise SuiteError(f"no non-empty .mch files found in -mch_files {' '.join(specs)}")
    return found


def zip_single_file(source: Path, archive: Path) -> int:
    """Deflate `source` into `archive` as one entry named by its basename; returns the zip size."""
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        zf.write(source, arcname=source.name)
    return archive.stat().st_size


def collection_blob_name(guid: str, target_os: str, mch_arch: str, file_name: str) -> str:
    return f"{mch_sources.COLLECTIONS_BLOB_ROOT}{mch_sources.collections_prefix(guid, target_os, mch_arch)}{file_name}"


# ---------------------------------------------------------------- download

def download_command(args: argparse.Namespace) -> int:
    settings = _start(args)
    with fsutil.temporary_directory(prefix="spmi-download-", keep=args.skip_cleanup) as scratch:
        paths = mch_sources.resolve_collections(shared.collection_query(args), settings,
                                                keep_archives_in=scratch if args.skip_cleanup else None)
        if args.skip_cleanup:
            kept = sorted(p.name for p in scratch.iterdir())
            log.info("--skip_cleanup: %s", f"kept {len(kept)} downloaded archive(s) in {scratch}" if kept
                     else f"nothing was extracted, nothing to keep (folder {scratch} is empty)")
    log.info("Collections available (%d):", len(paths))
    for path in paths:
        log.info("  %s", path)
    return 0


# ---------------------------------------------------------------- upload

def upload_command(args: argparse.Namespace) -> int:
    credentials = shared.storage_credentials(args)  # registers the secrets before anything is logged
    settings = _start(args)
    guid = _known_jit_ee_version(settings, args.jit_ee_version)
    files = collections_to_publish(args.mch_files)
    explicit_url = args.storage_url or os.environ.get(blobs.STORAGE_URL_ENV)
    writer = uploads.StorageWriter(credentials, blobs.resolve_account_url(explicit_url) if explicit_url else None)
    log.info("Uploading %d files to %s/%s/%s", len(files), writer.account_url, blobs.COLLECTIONS_CONTAINER,
             mch_sources.COLLECTIONS_BLOB_ROOT + mch_sources.collections_prefix(guid, settings.target_os,
                                                                                 settings.mch_arch))
    with fsutil.temporary_directory(prefix="spmi-upload-", keep=args.skip_cleanup) as scratch:
        for source in files:
            archive = scratch / (source.name + ".zip")
            compressed = zip_single_file(source, archive)
            log.info("Compressed %d to %d bytes", source.stat().st_size, compressed)
            name = collection_blob_name(guid, settings.target_os, settings.mch_arch, archive.name)
            writer.upload_file(blobs.COLLECTIONS_CONTAINER, name, archive)
            if not args.skip_cleanup:
                archive.unlink()
        if args.skip_cleanup:
            log.info("--skip_cleanup: kept the %d compressed file(s) in %s", len(files), scratch)
    log.info("Uploaded %d files", len(files))
    return 0


# ---------------------------------------------------------------- upload-private

def upload_private_command(args: argparse.Namespace) -> int:
    settings = _start(args)
    stores = [args.private_store] if args.private_store else mch_sources.private_stores(None)
    if not stores:
        raise SuiteError(f"no private store: pass -private_store DIR or set {mch_sources.PRIVATE_STORE_ENV}")
    guid = _known_jit_ee_version(settings, args.jit_ee_version)
    files = collections_to_publish(args.mch_files)
    target = Path(stores[0]) / guid / settings.target_os / settings.mch_arch
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SuiteError(f"cannot create {target}: {exc.strerror}; check -private_store") from None
    if args.skip_cleanup:
        log.info("--skip_cleanup: nothing to keep (upload-private copies straight into %s)", target)
    for source in files:
        destination = target / source.name
        if destination.exists():
            log.warning("Warning: replacing existing %s", destination)
        log.info("Copying %s -> %s", source, destination)
        mch_sources.copy_file_atomically(source, destination)
    log.info("Copied %d files to %s", len(files), target)
    return 0


# ---------------------------------------------------------------- list-collections

def remote_collection_blobs(blob_names: Iterable[str], prefix: Optional[str]) -> List[str]:
    """`.mch`/`.mch.zip` blobs (no TOCs), under `collections/<prefix>` compared lower-case."""
    wanted = (mch_sources.COLLECTIONS_BLOB_ROOT + (prefix or "")).lower()
    return sorted(n for n in blob_names
                  if n.lower().startswith(wanted) and n.lower().endswith((".mch", ".mch.zip")))


def list_collections_command(args: argparse.Namespace) -> int:
    settings = _start(args)
    prefix = None
    if not args.all:
        guid = config.resolve_jit_ee_version(settings, args.jit_ee_version)
        prefix = mch_sources.collections_prefix(guid, settings.target_os, settings.mch_arch)
    if args.local:
        lines = _local_listing(settings, prefix)
    else:
        account_url = blobs.resolve_account_url(args.storage_url)
        names = blobs.list_blobs(blobs.COLLECTIONS_CONTAINER, mch_sources.COLLECTIONS_BLOB_ROOT, account_url)
        remote = remote_collection_blobs(names, prefix)
        lines = [_count_line(len(remote), prefix)]
        lines += [blobs.blob_url(blobs.COLLECTIONS_CONTAINER, name, account_url) for name in remote]
    for line in lines:
        log.debug("%s", line)
        print(untrusted.console_line(line), flush=True)
    return 0


def _count_line(count: int, prefix: Optional[str]) -> str:
    return f"{count} collections for {prefix}" if prefix else f"{count} collections"


def _local_listing(settings: config.Settings, prefix: Optional[str]) -> List[str]:
    root = settings.spmi_location / "mch"
    if prefix:
        guid, target_os, mch_arch = prefix.rstrip("/").split("/")
        root = root / mch_sources.cache_dir_name(guid, target_os, mch_arch)
    if not root.is_dir():
        raise SuiteError(f'Local dir "{root}" not found')
    files = [p for p in mch_sources.find_collection_files(root) if p.suffix.lower() == ".mch"]
    return [_count_line(len(files), prefix)] + [untrusted.one_line(str(p)) for p in files]


# ---------------------------------------------------------------- merge-mch

is_zero_length_marker = mch_merge.is_zero_length_marker
remove_zero_length_markers = mch_merge.remove_zero_length_markers


def merge_mch_command(args: argparse.Namespace) -> int:
    settings = _start(args)
    mcs = config.find_tool("mcs", settings)
    assert mcs is not None
    output = Path(args.output_mch_path).resolve()
    pattern = args.pattern
    if args.ci:
        removed = mch_merge.remove_zero_length_markers(Path(os.path.dirname(pattern) or "."))
        log.info("Removed %d ZEROLENGTH placeholder(s)", len(removed))
    output.parent.mkdir(parents=True, exist_ok=True)
    log.info("Merging %s into %s", pattern, output)
    toc_file = mch_merge.merge_and_index(mcs, output, pattern)
    log.info("Merged into %s (%d bytes) with table of contents %s", output, output.stat().st_size, toc_file)
    return 0


__all__ = ["register", "collections_to_publish", "zip_single_file", "collection_blob_name",
           "remote_collection_blobs", "is_zero_length_marker", "remove_zero_length_markers",
           "download_command", "upload_command", "upload_private_command", "list_collections_command",
           "merge_mch_command"]
