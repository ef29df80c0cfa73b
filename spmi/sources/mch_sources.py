"""Getting collections (docs/contracts.md §12.5): which `.mch`/`.mc` files a command replays.

`resolve_collections(query, settings)` turns a `CollectionQuery` (the collection options,
defined in `spmi/commands/shared.py`) into a list of local files:

1. `-mch_files` given: exactly those. Local files as is, directories searched
   recursively, URLs downloaded into the cache (the `.mch.mct` companion tried).
2. Otherwise the cache `spmi_location/mch/<guid>.<target_os>.<mch_arch>/` when it holds a
   complete earlier download (a manifest written last records completion, and only after
   every downloaded collection passed its check), else the matching blobs under
   `collections/` are downloaded into it (two blobs for one local file are refused).
3. Private stores `<store>/<guid>/<target_os>/<mch_arch>/` are added when they exist; with
   collections there, storage that cannot be reached is a warning (docs/contracts.md §12.5).

`-filter` (case-insensitive substring, OR) applies to every file name found.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

from spmi.base import fsutil, platforms, redaction
from spmi.base.errors import SuiteError
from spmi.base.untrusted import one_line
from spmi.storage import blobs, downloads

if TYPE_CHECKING:
    from spmi.base.config import Settings

log = logging.getLogger("superpmi")

MC_RECORD_MAGIC = b"mc"
COLLECTION_SUFFIXES = (".mch", ".mc")
PRIVATE_STORE_ENV = "SUPERPMI_PRIVATE_STORE"
#: Directories the suite creates while extracting; never searched for collections.
TEMP_DIR_PREFIX = blobs.TEMP_DIR_PREFIX


# ---------------------------------------------------------------- the query

@dataclass(frozen=True)
class CollectionQuery:
    """Which collections a command uses, as the collection options give them (empty / None: not given)."""
    mch_files: Tuple[str, ...] = ()
    filters: Tuple[str, ...] = ()
    force_download: bool = False
    jit_ee_version: Optional[str] = None
    private_stores: Tuple[str, ...] = ()  # -private_store (default: $SUPERPMI_PRIVATE_STORE)
    storage_url: Optional[str] = None


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
    return platforms.is_url(spec) or platforms.is_unc_path(spec)


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
    """A local `-mch_files` value: a file as is, a directory searched recursively; absolute
    (superpmi runs in Core_Root, so a relative path would name another file there)."""
    path = Path(os.path.abspath(spec))
    if path.is_dir():
        return find_collection_files(path)
    if path.is_file():
        return [path]
    raise SuiteError(f"-mch_files '{spec}' is neither a file, a directory nor a URL; check the path")


def collection_file_problem(path: Path) -> Optional[str]:
    """Why a file cannot be a collection (None when it starts with the `mc` record magic)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(MC_RECORD_MAGIC))
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not head:
        return "is empty"
    if head != MC_RECORD_MAGIC:
        return "is not a method-context file (it does not start with the 'mc' record magic)"
    return None


def check_collection_file(path: Path) -> None:
    """Fail clearly when a file cannot be a collection (no `mc` record magic)."""
    problem = collection_file_problem(path)
    if problem:
        raise SuiteError(f"collection '{path}' {problem}; remove it or pass other -mch_files")


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

def resolve_collections(query: CollectionQuery, settings: "Settings",
                        keep_archives_in: Optional[Path] = None) -> List[Path]:
    """The collections a command should use, downloading what is needed (§12.5); downloaded
    archives are kept in `keep_archives_in` when given (`download --skip_cleanup`)."""
    filters = query.filters
    mch_files = query.mch_files
    if mch_files:
        paths: List[Path] = []
        for spec in mch_files:
            if is_remote(spec):
                paths.extend(_fetch_url_spec(spec, query.force_download, settings, keep_archives_in))
            else:
                paths.extend(expand_local_spec(spec))
        return finish_selection(paths, filters, "-mch_files " + " ".join(mch_files))
    from spmi.base import config
    guid = config.resolve_jit_ee_version(settings, query.jit_ee_version)
    store_dirs = existing_private_store_dirs(private_stores(query.private_stores), guid,
                                             settings.target_os, settings.mch_arch)
    store_files = [p for d in store_dirs for p in find_collection_files(d)]
    account_url = blobs.resolve_account_url(query.storage_url)
    cache_dir = download_from_storage(settings, guid, filters, query.force_download,
                                      account_url, allow_empty=bool(select_collections(store_files, filters)),
                                      keep_archives_in=keep_archives_in)
    paths = find_collection_files(cache_dir) if cache_dir is not None else []
    where = ([str(cache_dir)] if cache_dir is not None else []) + [str(d) for d in store_dirs]
    return finish_selection(paths + store_files, filters, ", ".join(where) or "no cache or store")


# ---------------------------------------------------------------- the download cache

MANIFEST_NAME = "superpmi_download_complete.json"


@dataclass
class CacheManifest:
    """Written last into a cache directory: what a finished download put there."""

    source: str
    files: Dict[str, int] = field(default_factory=dict)  # path relative to the cache dir -> size
    filters: Optional[List[str]] = None  # None: everything the source had

    def to_json(self) -> str:
        return json.dumps({"source": self.source, "filters": self.filters, "files": self.files},
                          indent=1, sort_keys=True)


def read_manifest(cache_dir: Path) -> Optional[CacheManifest]:
    try:
        data = json.loads((cache_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        filters = data.get("filters")
        return CacheManifest(source=str(data["source"]), files={str(k): int(v) for k, v in data["files"].items()},
                             filters=None if filters is None else [str(f) for f in filters])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_manifest(cache_dir: Path, manifest: CacheManifest) -> None:
    fsutil.atomic_write_text(cache_dir / MANIFEST_NAME, manifest.to_json())


def manifest_covers(recorded: Optional[Sequence[str]], requested: Optional[Sequence[str]]) -> bool:
    """Did a download made with filters `recorded` fetch everything `requested` selects?"""
    if recorded is None:
        return True
    if not requested:
        return False
    have = {f.lower() for f in recorded}
    return all(f.lower() in have for f in requested)


def manifest_files_intact(cache_dir: Path, manifest: CacheManifest) -> bool:
    for relative, size in manifest.files.items():
        path = cache_dir / relative
        try:
            if path.stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def cache_is_complete(cache_dir: Path, filters: Optional[Sequence[str]]) -> bool:
    manifest = read_manifest(cache_dir)
    return (manifest is not None and manifest_covers(manifest.filters, filters)
            and manifest_files_intact(cache_dir, manifest))


def merged_manifest(cache_dir: Path, source: str, new_files: Sequence[Path],
                    filters: Optional[Sequence[str]]) -> CacheManifest:
    """The manifest after a download: earlier intact downloads keep counting."""
    files = {p.relative_to(cache_dir).as_posix(): p.stat().st_size for p in new_files}
    new_filters = None if not filters else sorted({f.lower() for f in filters})
    old = read_manifest(cache_dir)
    if old is not None and old.source == source and manifest_files_intact(cache_dir, old):
        files = dict(old.files, **files)
        if old.filters is None or new_filters is None:
            new_filters = None
        else:
            new_filters = sorted(set(old.filters) | set(new_filters))
    return CacheManifest(source=source, files=files, filters=new_filters)


def log_cache_hit(cache_dir: Path) -> None:
    log.info('Found download cache directory "%s" and --force_download not set; skipping download', cache_dir)


# ---------------------------------------------------------------- Azure Storage collections

def collections_prefix(jit_ee_version: str, target_os: str, mch_arch: str) -> str:
    """The part of a blob name after `collections/` that selects one target."""
    return f"{jit_ee_version}/{target_os}/{mch_arch}/"


def is_primary_collection_blob(name: str) -> bool:
    lowered = name.lower()
    return lowered.endswith((".mch", ".mch.zip", ".mc", ".mc.zip"))


def companion_name(name: str) -> Optional[str]:
    """`x.mch.zip` -> `x.mch.mct.zip`; `x.mch` -> `x.mch.mct` (None for other names)."""
    lowered = name.lower()
    if lowered.endswith(".mch.zip"):
        return name[:-len(".zip")] + ".mct.zip"
    if lowered.endswith(".mch"):
        return name + ".mct"
    return None


def select_collection_blobs(blob_names: Iterable[str], jit_ee_version: str, target_os: str, mch_arch: str,
                            filters: Optional[Sequence[str]]) -> List[str]:
    """Blobs under `collections/<guid>/<os>/<arch>/` (compared lower-case) whose file name
    matches a filter, each followed by its `.mct` companion when there is one."""
    wanted = (COLLECTIONS_BLOB_ROOT + collections_prefix(jit_ee_version, target_os, mch_arch)).lower()
    in_target = [n for n in blob_names if n.lower().startswith(wanted)]
    present = set(in_target)
    selected: List[str] = []
    for name in sorted(in_target):
        base = name.rsplit("/", 1)[-1]
        if not is_primary_collection_blob(base) or not matches_filters(base, filters):
            continue
        selected.append(name)
        companion = companion_name(name)
        if companion and companion in present:
            selected.append(companion)
    return selected


COLLECTIONS_BLOB_ROOT = "collections/"


def extracted_name(blob_file_name: str) -> str:
    return blob_file_name[:-len(".zip")] if blob_file_name.lower().endswith(".zip") else blob_file_name


@dataclass
class CollectionDownload:
    """One collection blob to fetch (with its `.mct` companion when that is missing too) and
    the cache file it becomes."""

    expected: Path
    items: List[downloads.DownloadItem]


@dataclass
class StoragePlan:
    """What filling the cache from `collections/` takes (docs/contracts.md §12.5): the files
    already there (`kept`) and the collections to download, in listing order."""

    cache_dir: Path
    source: str
    filters: Optional[List[str]]
    selected: int
    kept: List[Path] = field(default_factory=list)
    pending: List[CollectionDownload] = field(default_factory=list)
    complete: bool = False  # the cache already held a complete download: nothing to do

    @property
    def item_count(self) -> int:
        return sum(len(c.items) for c in self.pending)

    def log_start(self) -> None:
        log.info("Downloading %d of %d collection files into %s", self.item_count, self.selected, self.cache_dir)

    def finish(self, downloaded: Sequence[Path]) -> None:
        """Check every file and record the cache complete (the manifest is written last)."""
        refuse_unusable_downloads(self.kept + list(downloaded), self.source)
        write_manifest(self.cache_dir, merged_manifest(self.cache_dir, self.source, self.kept + list(downloaded),
                                                       self.filters))


def storage_cache_dir(settings, jit_ee_version: str) -> Path:  # type: ignore[no-untyped-def]
    return settings.spmi_location / "mch" / cache_dir_name(jit_ee_version, settings.target_os, settings.mch_arch)


def download_from_storage(settings, jit_ee_version: str, filters: Optional[Sequence[str]],  # type: ignore[no-untyped-def]
                          force: bool, account_url: str, allow_empty: bool = False,
                          keep_archives_in: Optional[Path] = None) -> Optional[Path]:
    """Fill `spmi_location/mch/<guid>.<os>.<arch>/` from `collections/` unless already complete.

    Nothing to download is an error, unless `allow_empty` (other collections exist): then a
    warning and None."""
    cache_dir = storage_cache_dir(settings, jit_ee_version)
    with fsutil.directory_lock(cache_dir):
        plan = plan_storage_download(cache_dir, settings, jit_ee_version, filters, force, account_url,
                                     allow_empty, keep_archives_in)
        if plan is None:
            return None
        if not plan.complete:
            plan.log_start()
            items = [item for c in plan.pending for item in c.items]
            results = downloads.download_files(items, settings.show_progress)
            plan.finish([path for paths in results if paths for path in paths])
    return cache_dir


def plan_storage_download(cache_dir: Path, settings, jit_ee_version: str,  # type: ignore[no-untyped-def]
                          filters: Optional[Sequence[str]], force: bool, account_url: str,
                          allow_empty: bool = False, keep_archives_in: Optional[Path] = None) -> Optional[StoragePlan]:
    """The download that fills `cache_dir` (the caller holds its lock); None when storage has
    nothing for this target and `allow_empty` (a warning is logged)."""
    prefix = collections_prefix(jit_ee_version, settings.target_os, settings.mch_arch)
    source = blobs.blob_url(blobs.COLLECTIONS_CONTAINER, COLLECTIONS_BLOB_ROOT + prefix, account_url)
    wanted = None if not filters else list(filters)
    if not force and cache_is_complete(cache_dir, filters):
        log_cache_hit(cache_dir)
        return StoragePlan(cache_dir, source, wanted, 0, complete=True)
    try:
        names = blobs.list_blobs(blobs.COLLECTIONS_CONTAINER, COLLECTIONS_BLOB_ROOT, account_url)
    except blobs.StorageUnreachable as exc:
        if not allow_empty:
            raise
        log.warning("Warning: Azure Storage cannot be reached (%s); going on with the private stores only", exc)
        return None
    selected = select_collection_blobs(names, jit_ee_version, settings.target_os, settings.mch_arch, filters)
    if not selected:
        suffix = f" matching -filter {' '.join(filters)}" if filters else ""
        if allow_empty:
            log.warning("Warning: No Azure Storage MCH files to download from %s%s", source, suffix)
            return None
        raise SuiteError(f"No Azure Storage MCH files to download from {source}{suffix}; "
                         "check -jit_ee_version, -target_os, -mch_arch and -filter, or pass -mch_files")
    local_files = local_file_names(selected, cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    plan = StoragePlan(cache_dir, source, wanted, len(selected))
    for name in selected:
        existing = local_files[name]
        if not force and existing.is_file():
            log.debug("Already downloaded: %s", one_line(str(existing)))
            plan.kept.append(existing)
            continue
        item = downloads.DownloadItem(blobs.blob_url(blobs.COLLECTIONS_CONTAINER, name, account_url),
                                      cache_dir, keep_archive_in=keep_archives_in)
        if is_primary_collection_blob(name.rsplit("/", 1)[-1]):
            plan.pending.append(CollectionDownload(existing, [item]))
            continue
        primary = local_files[_primary_of(name)]
        if plan.pending and plan.pending[-1].expected == primary:
            plan.pending[-1].items.append(item)
        else:  # the companion of a collection that is already here
            plan.pending.append(CollectionDownload(primary, [item]))
    return plan


def _primary_of(companion: str) -> str:
    """`x.mch.mct.zip` -> `x.mch.zip`; `x.mch.mct` -> `x.mch` (the inverse of `companion_name`)."""
    if companion.lower().endswith(".mct.zip"):
        return companion[:-len(".mct.zip")] + ".zip"
    return companion[:-len(".mct")]


def local_file_names(selected: Sequence[str], cache_dir: Path) -> Dict[str, Path]:
    """The cache file each selected blob becomes; two blobs for one file (`x.mch` beside
    `sub/x.mch` or `x.mch.zip`, or names equal up to case) are refused, naming both."""
    files: Dict[str, Path] = {}
    owners: Dict[str, str] = {}
    for name in selected:
        local = extracted_name(name.rsplit("/", 1)[-1])
        path = fsutil.confined_path(cache_dir, local, "blob name", single_segment=True)
        key = local.lower()
        if key in owners:
            raise SuiteError(f"the listing has two blobs for one cache file {one_line(local)!r}: "
                             f"{one_line(owners[key])!r} and {one_line(name)!r}; refusing to download them "
                             "(remove one from storage, or pass -mch_files with the one you want)")
        owners[key] = name
        files[name] = path
    return files


def refuse_unusable_downloads(files: Sequence[Path], source: str) -> None:
    """Before the cache is recorded complete: each collection file is there once and starts
    with the record magic; an unusable one is removed (so the next run fetches it again)."""
    seen = set()
    for path in files:
        if path in seen:
            raise SuiteError(f"two downloaded archives both hold {one_line(str(path))}; the cache is left "
                             "incomplete (remove one of the blobs from storage)")
        seen.add(path)
        problem = collection_file_problem(path) if is_collection_name(path.name) else None
        if problem:
            path.unlink(missing_ok=True)
            raise SuiteError(f"collection {one_line(path.name)!r} downloaded from {redaction.redact(source)} "
                             f"{problem}; it was removed and the cache left incomplete; check the blob in storage "
                             "or pass -mch_files")


# ---------------------------------------------------------------- URLs and UNC paths in -mch_files

def url_cache_dir(settings, spec: str) -> Path:  # type: ignore[no-untyped-def]
    """Each URL (query string ignored) gets its own directory under `mch/urls/`."""
    key = hashlib.sha256(spec.split("?", 1)[0].encode("utf-8")).hexdigest()[:16]
    return settings.spmi_location / "mch" / "urls" / key


def companion_url(url: str) -> Optional[str]:
    base, query = (url.split("?", 1) + [""])[:2]
    companion = companion_name(base)
    if companion is None:
        return None
    return companion + ("?" + query if query else "")


def fetch_url(spec: str, settings, force: bool,  # type: ignore[no-untyped-def]
              keep_archives_in: Optional[Path] = None) -> List[Path]:
    """Download one `-mch_files` URL (and its optional `.mct`) into the cache."""
    target = url_cache_dir(settings, spec)
    with fsutil.directory_lock(target):
        if not force and cache_is_complete(target, None):
            log_cache_hit(target)
            return find_collection_files(target)
        items = [downloads.DownloadItem(spec, target, keep_archive_in=keep_archives_in)]
        companion = companion_url(spec)
        if companion:
            items.append(downloads.DownloadItem(companion, target, optional=True, keep_archive_in=keep_archives_in))
        results = downloads.download_files(items, settings.show_progress)
        files = [path for paths in results if paths for path in paths]
        refuse_unusable_downloads(files, spec)
        write_manifest(target, CacheManifest(source=redaction.redact(spec.split("?", 1)[0]),
                                             files={p.relative_to(target).as_posix(): p.stat().st_size
                                                    for p in files}))
    return [p for p in files if is_collection_name(p.name)]


def copy_unc_path(spec: str, settings, force: bool) -> List[Path]:  # type: ignore[no-untyped-def]
    """Copy a collection (or a directory of them) from a network share into the cache."""
    source = Path(spec)
    target = settings.spmi_location / "mch" / "unc" / hashlib.sha256(spec.encode("utf-8")).hexdigest()[:16]
    if source.is_dir():
        originals = find_collection_files(source)
        base = source
    elif source.is_file():
        originals, base = [source], source.parent
    else:
        raise SuiteError(f"-mch_files '{spec}' cannot be read (network path not found); check the share")
    with fsutil.directory_lock(target):
        if not force and cache_is_complete(target, None):
            log_cache_hit(target)
            return find_collection_files(target)
        copied: List[Path] = []
        for original in originals:
            for candidate in (original, Path(str(original) + ".mct")):
                if candidate.is_file():
                    destination = target / candidate.relative_to(base)
                    log.info("Copying %s -> %s", candidate, destination)
                    copy_file_atomically(candidate, destination)
                    copied.append(destination)
        write_manifest(target, CacheManifest(source=spec, files={p.relative_to(target).as_posix(): p.stat().st_size
                                                                 for p in copied}))
    return [p for p in copied if is_collection_name(p.name)]


def copy_file_atomically(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    temp = destination.with_name(destination.name + blobs.PART_SUFFIX)
    try:
        shutil.copyfile(source, temp)
        os.replace(temp, destination)
    except OSError as exc:
        try:
            temp.unlink()
        except OSError:
            pass
        raise SuiteError(f"copying {source} to {destination} failed: {exc.strerror or exc}") from None


def _fetch_url_spec(spec: str, force: bool, settings: "Settings",
                    keep_archives_in: Optional[Path]) -> List[Path]:
    if platforms.is_unc_path(spec):
        return copy_unc_path(spec, settings, force)
    return fetch_url(spec, settings, force, keep_archives_in)


def existing_private_store_dirs(stores: Sequence[str], jit_ee_version: str, target_os: str,
                                mch_arch: str) -> List[Path]:
    """`<store>/<guid>/<target_os>/<mch_arch>/` for each store where it exists."""
    dirs = []
    for store in stores:
        candidate = Path(store) / jit_ee_version / target_os / mch_arch
        if candidate.is_dir():
            dirs.append(candidate)
        else:
            log.debug("Private store directory %s not found; skipping", candidate)
    return dirs
