"""Getting collections (CONTRACTS §12.5): which `.mch`/`.mc` files a command replays.

`add_collection_options(parser)` adds the options; `resolve_collections(args, settings)`
turns them into a list of local files:

1. `-mch_files` given: exactly those. Local files as is, directories searched
   recursively, URLs downloaded into the cache (the `.mch.mct` companion tried).
2. Otherwise the cache `spmi_location/mch/<guid>.<target_os>.<mch_arch>/` when it holds a
   complete earlier download (a manifest written last records completion), else the
   matching blobs under `collections/` are downloaded into it.
3. Private stores `<store>/<guid>/<target_os>/<mch_arch>/` are added when they exist.

`-filter` (case-insensitive substring, OR) applies to every file name found.
"""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import platforms
from jitutil import SuiteError

log = logging.getLogger("superpmi")

MC_RECORD_MAGIC = b"mc"
COLLECTION_SUFFIXES = (".mch", ".mc")
PRIVATE_STORE_ENV = "SUPERPMI_PRIVATE_STORE"
#: Directories the suite creates while extracting; never searched for collections.
TEMP_DIR_PREFIX = ".spmi-tmp"


# ---------------------------------------------------------------- options

def add_collection_options(parser: argparse.ArgumentParser) -> None:
    """Add `-mch_files`, `-filter`, `--force_download`, `-jit_ee_version`,
    `-private_store` and `-storage_url` (the last only if the parser lacks it)."""
    group = parser.add_argument_group("collection options")
    group.add_argument("-mch_files", nargs="+", metavar="FILE_DIR_OR_URL",
                       help="collections to use: files, directories (searched recursively) or URLs")
    group.add_argument("-filter", nargs="+", metavar="TEXT",
                       help="use only collections whose file name contains one of these (case-insensitive)")
    group.add_argument("--force_download", action="store_true",
                       help="download collections even if the cache holds a complete earlier download")
    group.add_argument("-jit_ee_version", metavar="GUID",
                       help="JIT-EE version GUID selecting the collections (default: from the source tree or mcs)")
    group.add_argument("-private_store", action="append", metavar="DIR",
                       help=f"extra collection store (repeatable; default: ${PRIVATE_STORE_ENV}, ';'-separated)")
    if not _has_option(parser, "-storage_url"):
        group.add_argument("-storage_url", metavar="URL",
                           help="storage account URL (default: $SUPERPMI_STORAGE_URL, else the public account)")


def _has_option(parser: argparse.ArgumentParser, option: str) -> bool:
    return option in getattr(parser, "_option_string_actions", {})


def private_stores(flag_values: Optional[Sequence[str]], environ: Optional[dict] = None) -> List[str]:
    """`-private_store` values, else `$SUPERPMI_PRIVATE_STORE` split on `;`."""
    if flag_values:
        return [v for v in flag_values if v]
    environ = dict(os.environ) if environ is None else environ
    return [part.strip() for part in environ.get(PRIVATE_STORE_ENV, "").split(";") if part.strip()]


# ---------------------------------------------------------------- pure helpers

def matches_filters(file_name: str, filters: Optional[Sequence[str]]) -> bool:
    """True when no filters are given or the name contains one of them (case-insensitive)."""
    if not filters:
        return True
    lowered = file_name.lower()
    return any(f.lower() in lowered for f in filters)


def is_collection_name(file_name: str) -> bool:
    return file_name.lower().endswith(COLLECTION_SUFFIXES)


def is_remote(spec: str) -> bool:
    """URLs (and Windows UNC paths) are fetched into the cache, not used in place."""
    return platforms.is_url(spec)


def cache_dir_name(jit_ee_version: str, target_os: str, mch_arch: str) -> str:
    return f"{jit_ee_version}.{target_os}.{mch_arch}"


# ---------------------------------------------------------------- local files

def find_collection_files(directory: Path) -> List[Path]:
    """Every `.mch`/`.mc` below `directory`, sorted, skipping the suite's temp dirs."""
    found: List[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(TEMP_DIR_PREFIX))
        found.extend(Path(root) / name for name in sorted(files) if is_collection_name(name))
    return found


def expand_local_spec(spec: str) -> List[Path]:
    """A local `-mch_files` value: a file as is, a directory searched recursively."""
    path = Path(spec)
    if path.is_dir():
        return find_collection_files(path)
    if path.is_file():
        return [path]
    raise SuiteError(f"-mch_files '{spec}' is neither a file, a directory nor a URL; check the path")


def check_collection_file(path: Path) -> None:
    """Fail clearly when a file cannot be a collection (no `mc` record magic)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(MC_RECORD_MAGIC))
    except OSError as exc:
        raise SuiteError(f"cannot read collection '{path}': {exc.strerror}") from exc
    if not head:
        raise SuiteError(f"collection '{path}' is empty; remove it or pass other -mch_files")
    if head != MC_RECORD_MAGIC:
        raise SuiteError(f"'{path}' is not a method-context file (it does not start with the 'mc' "
                         "record magic); remove it or pass other -mch_files")


def select_collections(paths: Iterable[Path], filters: Optional[Sequence[str]]) -> List[Path]:
    """Keep files whose name matches a filter; drop duplicates, keep order."""
    seen = set()
    selected: List[Path] = []
    for path in paths:
        key = os.path.normcase(os.path.abspath(path))
        if key in seen or not matches_filters(path.name, filters):
            continue
        seen.add(key)
        selected.append(path)
    return selected


def finish_selection(paths: Iterable[Path], filters: Optional[Sequence[str]], where: str) -> List[Path]:
    selected = select_collections(paths, filters)
    if not selected:
        suffix = f" matching -filter {' '.join(filters)}" if filters else ""
        raise SuiteError(f"No MCH files found to replay{suffix} (looked in {where}); "
                         "pass -mch_files or check -filter")
    for path in selected:
        check_collection_file(path)
    return selected


# ---------------------------------------------------------------- entry point

def resolve_collections(args: argparse.Namespace, settings) -> List[Path]:  # type: ignore[no-untyped-def]
    """The collections a command should use, downloading what is needed (§12.5)."""
    filters = getattr(args, "filter", None)
    mch_files = getattr(args, "mch_files", None)
    if mch_files:
        paths: List[Path] = []
        for spec in mch_files:
            if is_remote(spec):
                paths.extend(_fetch_url_spec(spec, args, settings))
            else:
                paths.extend(expand_local_spec(spec))
        return finish_selection(paths, filters, "-mch_files " + " ".join(mch_files))
    paths = []
    where = []
    cache_dir = _collections_from_cache_or_storage(args, settings)
    if cache_dir is not None:
        paths.extend(find_collection_files(cache_dir))
        where.append(str(cache_dir))
    for store_dir in _existing_private_store_dirs(args, settings):
        paths.extend(find_collection_files(store_dir))
        where.append(str(store_dir))
    return finish_selection(paths, filters, ", ".join(where) or "no cache or store")


# The remote half (URLs, the Azure cache, private stores) follows below.

def _fetch_url_spec(spec: str, args: argparse.Namespace, settings) -> List[Path]:  # type: ignore[no-untyped-def]
    raise SuiteError(f"-mch_files URL '{spec}': downloading is not available yet; download it by hand")


def _collections_from_cache_or_storage(args: argparse.Namespace, settings) -> Optional[Path]:  # type: ignore[no-untyped-def]
    import spmi_config
    guid = spmi_config.resolve_jit_ee_version(settings, getattr(args, "jit_ee_version", None))
    cache_dir = settings.spmi_location / "mch" / cache_dir_name(guid, settings.target_os, settings.mch_arch)
    return cache_dir if cache_dir.is_dir() else None


def _existing_private_store_dirs(args: argparse.Namespace, settings) -> List[Path]:  # type: ignore[no-untyped-def]
    import spmi_config
    stores = private_stores(getattr(args, "private_store", None))
    if not stores:
        return []
    guid = spmi_config.resolve_jit_ee_version(settings, getattr(args, "jit_ee_version", None))
    dirs = []
    for store in stores:
        candidate = Path(store) / guid / settings.target_os / settings.mch_arch
        if candidate.is_dir():
            dirs.append(candidate)
        else:
            log.debug("Private store directory %s not found; skipping", candidate)
    return dirs
