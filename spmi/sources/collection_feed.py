"""Collections handed to a command as each becomes ready (docs/contracts.md §12.5, step 6).

`collection_feed(query, settings)` gives the same collections, in the same order, as
`mch_sources.resolve_collections`; when collections must be downloaded from storage it
does not wait for all of them: the first is handed out as soon as it is downloaded,
verified and extracted, while the next ones download in the background, one collection
at a time (its ranges and its `.mct` in parallel: the link serves the collection needed
next), each extracted while the next one downloads. The cache lock is
held until the feed ends, the manifest is written once every download is checked, and
`--no_overlap` (or `-mch_files`) keeps the download-everything-first behaviour.

A download failure names its collection and is raised when the command reaches that
collection (no further download starts). Ctrl-C, SIGTERM or any error in the
command stops every download (bodies cut, partial files removed) before the feed returns.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spmi.base import fsutil
from spmi.sources import mch_sources
from spmi.sources.mch_sources import CollectionDownload, StoragePlan
from spmi.storage import archives, blobs, downloads

if TYPE_CHECKING:
    from spmi.base.config import Settings

log = logging.getLogger("superpmi")

_POLL_SECONDS = 0.2  # waits wake this often, so Ctrl-C is seen on every OS


@contextmanager
def collection_feed(query: mch_sources.CollectionQuery, settings: "Settings",
                    overlap: bool = True) -> Iterator[Iterable[Path]]:
    """The collections a command uses, as an iterable to walk once (see the module docstring);
    without `overlap` (`--no_overlap`) every download finishes first."""
    if query.mch_files or not overlap:
        yield mch_sources.resolve_collections(query, settings)
        return
    from spmi.base import config
    guid = config.resolve_jit_ee_version(settings, query.jit_ee_version)
    store_dirs = mch_sources.existing_private_store_dirs(mch_sources.private_stores(query.private_stores), guid,
                                                         settings.target_os, settings.mch_arch)
    store_files = [p for d in store_dirs for p in mch_sources.find_collection_files(d)]
    cache_dir = mch_sources.storage_cache_dir(settings, guid)
    where = ", ".join([str(cache_dir)] + [str(d) for d in store_dirs])
    filters = query.filters
    with fsutil.directory_lock(cache_dir):
        plan = mch_sources.plan_storage_download(
            cache_dir, settings, guid, filters, query.force_download, blobs.resolve_account_url(query.storage_url),
            allow_empty=bool(mch_sources.select_collections(store_files, filters)))
        if plan is None or plan.complete or not plan.pending:
            if plan is not None and not plan.complete:
                plan.log_start()
                plan.finish([])
            cached = mch_sources.find_collection_files(cache_dir) if plan is not None else []
            where = where if plan is not None else ", ".join(str(d) for d in store_dirs) or "no cache or store"
            yield mch_sources.finish_selection(cached + store_files, filters, where)
            return
        for path in store_files:
            mch_sources.check_collection_file(path)
        plan.pending.sort(key=lambda c: walk_order(c.expected, cache_dir))  # needed first, fetched first
        with OverlappedDownload(plan) as background:
            yield _ordered_collections(background, store_files, filters, where)


def walk_order(path: Path, root: Path) -> Tuple[Tuple[int, str], ...]:
    """Where `find_collection_files(root)` lists `path`: a folder's files (sorted) before its
    sub-folders (sorted, each walked in turn)."""
    parts = path.relative_to(root).parts
    return tuple((1, part) for part in parts[:-1]) + ((0, parts[-1]),)


def expected_order(existing: Sequence[Path], pending: Sequence[CollectionDownload], root: Path) -> List[Path]:
    """The cache's collection files once every pending download has arrived as expected."""
    files = {os.path.normcase(str(p)): p for p in existing}
    files.update({os.path.normcase(str(c.expected)): c.expected for c in pending
                  if mch_sources.is_collection_name(c.expected.name)})
    return sorted(files.values(), key=lambda p: walk_order(p, root))


def _ordered_collections(background: "OverlappedDownload", store_files: List[Path],
                         filters: Optional[Sequence[str]], where: str) -> Iterator[Path]:
    """Each collection when it is ready, in the order the download-first path would use;
    if an archive held other files than its name says, the rest waits for every download
    and follows the listing of the finished cache."""
    plan = background.plan
    existing = mch_sources.find_collection_files(plan.cache_dir)
    expected = mch_sources.select_collections(
        expected_order(existing, plan.pending, plan.cache_dir) + store_files, filters)
    given: List[Path] = []
    for path in expected:
        download = background.download_for(path)
        if download is not None and not arrived_as_expected(background.wait(download), path):
            log.debug("%s did not hold just %s; waiting for every download", download.items[0].name, path.name)
            break
        if download is not None:
            background.finish_when_all_arrived()  # the cache is complete before the last replay
        given.append(path)
        yield path
    background.finish()
    if given and len(given) == len(expected):
        return
    finished = mch_sources.finish_selection(mch_sources.find_collection_files(plan.cache_dir) + store_files,
                                            filters, where)
    seen = {_key(p) for p in given}
    yield from (p for p in finished if _key(p) not in seen)


def arrived_as_expected(produced: Sequence[Path], expected: Path) -> bool:
    """A download brought the collection its name promised and no other one."""
    return all(_key(p) == _key(expected) for p in produced) and expected.is_file()


def _key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


class OverlappedDownload:
    """The pending downloads of a plan in two background stages: one thread downloads the
    collections one after the other (each with its ranges and its companion in parallel), a
    second extracts and checks each archive while the next one downloads."""

    def __init__(self, plan: StoragePlan) -> None:
        self.plan = plan
        self.stop = threading.Event()
        self.failure: Optional[BaseException] = None
        self.finished = False
        self._by_path: Dict[str, CollectionDownload] = {_key(c.expected): c for c in plan.pending}
        self._results: Dict[int, "Future[List[Path]]"] = {id(c): Future() for c in plan.pending}
        self._arrived: "queue.Queue[Optional[Tuple[CollectionDownload, List[Path], float]]]" = queue.Queue()
        self._threads = [threading.Thread(target=self._download_all, name="collection-download", daemon=True),
                         threading.Thread(target=self._extract_all, name="collection-extract", daemon=True)]

    def __enter__(self) -> "OverlappedDownload":
        self.plan.log_start()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is not None:
            self.stop.set()  # the command stopped (an error, Ctrl-C, SIGTERM): so do the downloads
        for thread in self._threads:
            while thread.is_alive():
                thread.join(_POLL_SECONDS)

    def download_for(self, path: Path) -> Optional[CollectionDownload]:
        return self._by_path.get(_key(path))

    # ---------------------------------------------------------------- the two stages

    def _download_all(self) -> None:
        """Stage one: the files of each collection, archives left as they came."""
        try:
            for download in self.plan.pending:
                if self.stop.is_set() or self.failure is not None:
                    break
                started = time.monotonic()
                items = [dataclasses.replace(item, extract=False) for item in download.items]
                try:
                    results = downloads.download_files(items, show_progress=False, stop=self.stop)
                except BaseException as exc:
                    self._fail(download, exc)
                    break
                self._arrived.put((download, [p for paths in results if paths for p in paths], started))
        finally:
            self._arrived.put(None)

    def _extract_all(self) -> None:
        """Stage two: each collection's archives extracted, its files checked, its result set."""
        while True:
            arrived = self._arrived.get()
            if arrived is None:
                break
            download, files, started = arrived
            if self.stop.is_set():
                _remove_archives(files)
                continue
            try:
                produced = [p for f in files for p in self._unpacked(f)]
                mch_sources.refuse_unusable_downloads(produced, self.plan.source)
                size = sum(p.stat().st_size for p in produced)
            except BaseException as exc:
                _remove_archives(files)
                self._fail(download, exc)
                continue
            log.info("Downloaded %s (%.1f MB in %.1f s)", download.expected.name, size / 1e6,
                     time.monotonic() - started)
            self._results[id(download)].set_result(produced)
        for future in self._results.values():  # stopped before they came
            if not future.done():
                future.set_exception(downloads.DownloadStopped())

    def _unpacked(self, file: Path) -> List[Path]:
        if not file.name.lower().endswith(".zip"):
            return [file]
        try:
            files = archives.extract_zip(file, file.parent, display_name=file.name, stop=self.stop)
        except archives.ExtractionStopped:
            raise downloads.DownloadStopped() from None
        except (archives.UnsafeArchive, archives.NotAZip) as exc:
            raise type(exc)(f"{exc}; the download was discarded") from None
        file.unlink()
        return files

    def _fail(self, download: CollectionDownload, exc: BaseException) -> None:
        """`download` failed: no further download starts; the command gets the failure when
        it reaches this collection (collections before it are still handed out)."""
        if not isinstance(exc, downloads.DownloadStopped):
            self.failure = self.failure or exc
        future = self._results[id(download)]
        if not future.done():
            future.set_exception(exc)

    # ---------------------------------------------------------------- the command's side

    def wait(self, download: CollectionDownload) -> List[Path]:
        """The collection files `download` produced, once it is done; its failure (or the
        first failure, when this one was stopped because of it) is raised."""
        return [p for p in self._result(download) if mch_sources.is_collection_name(p.name)]

    def finish_when_all_arrived(self) -> None:
        if all(f.done() for f in self._results.values()):
            self.finish()

    def finish(self) -> None:
        """Wait for every download, then record the cache complete."""
        if not self.finished:
            self.plan.finish([p for c in self.plan.pending for p in self._result(c)])
            self.finished = True

    def _result(self, download: CollectionDownload) -> List[Path]:
        future = self._results[id(download)]
        while True:
            try:
                return future.result(timeout=_POLL_SECONDS)
            except FutureTimeout:
                continue
            except downloads.DownloadStopped:
                if self.failure is not None:
                    raise self.failure from None
                raise


def _remove_archives(files: Sequence[Path]) -> None:
    """Downloaded archives that will not be extracted (the run is stopping)."""
    for file in files:
        if file.name.lower().endswith(".zip"):
            try:
                file.unlink()
            except OSError:
                pass
