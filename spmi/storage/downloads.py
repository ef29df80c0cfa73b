"""Downloads (docs/contracts.md §11.3): several blobs and ranges of large blobs in
parallel, resumable `.part` files, length and Content-MD5 checks, temporary name
then rename, and `.zip` extraction on arrival.

A body slower than `SlowBodyRule` allows is cut and retried; Ctrl-C and SIGTERM cut every
body being read at once and remove the `.part` files (docs/contracts.md §12.21). A caller in
another thread stops a download the same way by setting the `stop` event it passed
(`DownloadStopped` is then raised).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from spmi.base.fsutil import atomic_write_text, confined_path
from spmi.base.progress import progress_bar

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    from concurrent.futures import Future, ThreadPoolExecutor
from spmi.base.redaction import redact
from spmi.base.untrusted import one_line
from spmi.storage.archives import ExtractionStopped, NotAZip, UnsafeArchive, extract_zip
from spmi.storage.blobs import (
    DEFAULT_TIMEOUT,
    PART_META_SUFFIX,
    PART_SUFFIX,
    BlobInfo,
    BlobNotFound,
    DownloadError,
    RetryPolicy,
    _describe_exception,
    _is_transient_status,
    _raise_for_final_status,
    _Transient,
    _transient_exceptions,
    default_retry_policy,
    head_blob,
    new_session,
    refused_redirects,
    shut_down_response,
)

log = logging.getLogger("superpmi")


@dataclass
class DownloadItem:
    """One blob to fetch into `target_dir` (a `.zip` is extracted there by default)."""

    url: str
    target_dir: Path
    file_name: Optional[str] = None
    optional: bool = False
    extract: Optional[bool] = None
    #: keep a downloaded archive here after extracting it (`--skip_cleanup`), instead of deleting it
    keep_archive_in: Optional[Path] = None

    @property
    def name(self) -> str:
        if self.file_name:
            return self.file_name
        path = urllib.parse.urlsplit(self.url).path
        return urllib.parse.unquote(path.rstrip("/").rsplit("/", 1)[-1])

    def check_name(self) -> Path:
        """The file this item writes; a name that would leave `target_dir` is refused (§12.20)."""
        return confined_path(self.target_dir, self.name, f"the file name of {redact(self.url)}", single_segment=True)

    @property
    def should_extract(self) -> bool:
        return self.extract if self.extract is not None else self.name.lower().endswith(".zip")


DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
DEFAULT_MAX_WORKERS = 8
_READ_SIZE = 256 * 1024
CORRUPT_BODY_RETRIES = 1  # a body whose MD5 does not match is downloaded once more within the run
_WATCH_INTERVAL = 0.2  # seconds between looks at the bodies being read (cancel, slow bodies)


@dataclass(frozen=True)
class SlowBodyRule:
    """A body must bring at least `min_bytes_per_second` on average over every `window_seconds`;
    a slower one is cut and counts as a failed attempt even when some bytes came, so a
    trickling server ends the download after the retry policy's attempts
    (docs/contracts.md §12.21)."""

    window_seconds: float = 60.0
    min_bytes_per_second: float = 1024.0

    def describe(self) -> str:
        return f"less than {self.min_bytes_per_second:g} bytes/s over {self.window_seconds:g} s"


DEFAULT_SLOW_BODY_RULE = SlowBodyRule()


def download_files(items: Sequence[DownloadItem], show_progress: bool = False,
                   max_workers: int = DEFAULT_MAX_WORKERS, chunk_size: int = DEFAULT_CHUNK_SIZE,
                   retry: Optional[RetryPolicy] = None, session=None,  # type: ignore[no-untyped-def]
                   slow_body: SlowBodyRule = DEFAULT_SLOW_BODY_RULE,
                   stop: Optional[threading.Event] = None) -> List[Optional[List[Path]]]:
    """Download `items` in parallel; per item the files produced (extracted files for a
    `.zip`), or None for an optional item that does not exist.

    Blobs larger than `chunk_size` are fetched as parallel ranges. An interrupted file
    resumes from `<name>.part` (+ `<name>.part.json`) on the next call. Setting `stop`
    (from another thread) ends the call like Ctrl-C does, raising `DownloadStopped`.
    """
    if not items:
        return []
    for item in items:
        item.check_name()
    refuse_shared_targets(items)
    downloader = _Downloader(session or new_session(max_workers * 2), max(1, max_workers),
                             max(64 * 1024, chunk_size), retry or default_retry_policy(), show_progress, slow_body,
                             stop)
    return downloader.run(list(items))


def refuse_shared_targets(items: Sequence[DownloadItem]) -> None:
    """Two items that would write one local file (names compared without case, as Windows and
    macOS do) are refused with one line naming both, before anything is fetched."""
    seen: Dict[str, DownloadItem] = {}
    for item in items:
        key = os.path.normcase(os.path.abspath(item.target_dir / item.name)).lower()
        other = seen.get(key)
        if other is not None:
            raise DownloadError(f"{one_line(redact(other.url))} and {one_line(redact(item.url))} would both be "
                                f"saved as {one_line(str(item.target_dir / item.name))}; refusing to download "
                                "either (check the listing or the URLs)")
        seen[key] = item


class _Cancelled(Exception):
    pass


class DownloadStopped(Exception):
    """`download_files` ended because its `stop` event was set; unfinished files were removed."""


class _Body:
    """A response body being read, watched from the waiting thread (cancel, slow bodies)."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.received = 0
        self.window_start = time.monotonic()
        self.window_received = 0
        self.too_slow = False
        self.aborted = False

    def abort(self) -> None:
        """Stop a read in progress (and every later one) by shutting the socket down."""
        if self.aborted:
            return
        self.aborted = True
        shut_down_response(self.response)

    def check_speed(self, rule: SlowBodyRule, now: float) -> None:
        if now - self.window_start < rule.window_seconds:
            return
        if self.received - self.window_received < rule.min_bytes_per_second * (now - self.window_start):
            self.too_slow = True
            self.abort()
        self.window_start, self.window_received = now, self.received


class _FileJob:
    """One blob being written to `<target>/<name>.part`, in chunks, with resumable metadata."""

    def __init__(self, item: DownloadItem, info: BlobInfo, chunk_size: int) -> None:
        self.item = item
        self.info = info
        self.chunk_size = chunk_size
        self.part = item.target_dir / (item.name + PART_SUFFIX)
        self.meta = item.target_dir / (item.name + PART_META_SUFFIX)
        self.lock = threading.Lock()
        self.done: Dict[int, int] = {}
        self.remaining_chunks = 0
        self.result: Optional[List[Path]] = None
        # Content-MD5 is checked over the whole blob; finished chunks at the front of the
        # file are hashed while later ones still download (one thread at a time).
        self.md5 = hashlib.md5() if info.content_md5 else None
        self.hashed_chunks = 0
        self.hash_lock = threading.Lock()
        self.written: Set[int] = set()  # chunks complete in the file (their writer closed it)
        self.body_retries = 0  # whole downloads repeated because the MD5 did not match

    def restart(self) -> int:
        """Forget everything downloaded (the `.part` is gone) and start the file afresh."""
        self.body_retries += 1
        self.md5 = hashlib.md5() if self.info.content_md5 else None
        self.hashed_chunks = 0
        return self.prepare()

    @property
    def chunk_count(self) -> int:
        return (self.info.length + self.chunk_size - 1) // self.chunk_size

    def bounds(self, index: int) -> Tuple[int, int]:
        start = index * self.chunk_size
        return start, min(self.info.length, start + self.chunk_size) - 1

    def chunk_length(self, index: int) -> int:
        start, end = self.bounds(index)
        return end - start + 1

    def identity(self) -> Dict[str, Any]:
        return {"url": _url_without_query(self.item.url), "etag": self.info.etag, "length": self.info.length,
                "chunk_size": self.chunk_size}

    def prepare(self) -> int:
        """Reuse a matching `.part` or start a fresh one; returns the bytes already there."""
        self.item.target_dir.mkdir(parents=True, exist_ok=True)
        previous = _read_json(self.meta)
        reusable = (previous is not None and self.info.etag is not None
                    and {k: previous.get(k) for k in self.identity()} == self.identity()
                    and self.part.is_file() and self.part.stat().st_size == self.info.length)
        if reusable:
            self.done = {int(k): int(v) for k, v in (previous or {}).get("done", {}).items()}
            self.done = {k: min(v, self.chunk_length(k)) for k, v in self.done.items() if 0 <= k < self.chunk_count}
            resumed = sum(self.done.values())
            if resumed:
                log.info("Resuming %s from %d of %d bytes", one_line(self.item.name), resumed, self.info.length)
        else:
            _remove_quietly(self.part)
            try:
                with self.part.open("wb") as handle:
                    handle.truncate(self.info.length)
            except OSError as exc:
                raise DownloadError(cannot_write_message(self.part, exc)) from None
            self.done = {}
            self.save()
        pending = self.pending_chunks()
        self.written = set(range(self.chunk_count)).difference(pending)
        self.remaining_chunks = len(pending)
        return sum(self.done.values())

    def pending_chunks(self) -> List[int]:
        return [i for i in range(self.chunk_count) if self.done.get(i, 0) < self.chunk_length(i)]

    def progress(self, index: int) -> int:
        with self.lock:
            return self.done.get(index, 0)

    def add_progress(self, index: int, count: int) -> None:
        with self.lock:
            self.done[index] = self.done.get(index, 0) + count

    def chunk_complete(self, index: int) -> bool:
        with self.lock:
            return index in self.written

    def hash_finished_front(self, wait: bool) -> None:
        """Feed the MD5 the finished chunks that follow the hashed ones. Without `wait`, do
        nothing while another thread is at it; with it (all chunks finished), hash to the end."""
        if self.md5 is None or not self.hash_lock.acquire(blocking=wait):
            return
        try:
            if self.hashed_chunks >= self.chunk_count or not self.chunk_complete(self.hashed_chunks):
                return
            with self.part.open("rb") as handle:
                handle.seek(self.bounds(self.hashed_chunks)[0])
                while self.hashed_chunks < self.chunk_count and self.chunk_complete(self.hashed_chunks):
                    self.md5.update(handle.read(self.chunk_length(self.hashed_chunks)))
                    self.hashed_chunks += 1
        finally:
            self.hash_lock.release()

    def save(self) -> None:
        with self.lock:
            record = dict(self.identity(), done={str(k): v for k, v in sorted(self.done.items())})
            atomic_write_text(self.meta, json.dumps(record))

    def chunk_finished(self, index: int) -> bool:
        """Record a chunk whose bytes are all in the file; True for the call that finished the last one."""
        self.save()
        with self.lock:
            self.written.add(index)
            self.remaining_chunks -= 1
            return self.remaining_chunks == 0


class _TooSlow(_Transient):
    """A body the watcher cut for being slower than `SlowBodyRule` allows."""


def _pieces(raw: Any) -> Iterator[bytes]:
    """The body as it arrives (`read1`: whatever came, up to `_READ_SIZE`), so progress is seen at once."""
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 1.x
        yield from raw.stream(64 * 1024, decode_content=False)
        return
    while True:
        piece = read1(_READ_SIZE, decode_content=False)
        if not piece:
            return
        yield piece


def _url_without_query(url: str) -> str:
    return url.split("?", 1)[0]


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        return value if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None


def _keep_archive(part: Path, kept: Path) -> None:
    """Move a finished archive aside (maybe to another file system); a failure only warns."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(part), str(kept))
        log.debug("Kept %s", kept)
    except OSError as exc:
        log.warning("Warning: could not keep %s in %s: %s", kept.name, kept.parent, exc.strerror or exc)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class _Downloader:
    def __init__(self, session, workers: int, chunk_size: int, retry: RetryPolicy,  # type: ignore[no-untyped-def]
                 show_progress: bool, slow_body: SlowBodyRule = DEFAULT_SLOW_BODY_RULE,
                 stop: Optional[threading.Event] = None) -> None:
        self.session = session
        self.workers = workers
        self.chunk_size = chunk_size
        self.retry = retry
        self.show_progress = show_progress
        self.slow_body = slow_body
        self.cancel = threading.Event()
        self.stop = stop or threading.Event()  # set by the caller, from another thread
        self.bar: Any = None
        self.bar_lock = threading.Lock()
        self.bodies: Set[_Body] = set()
        self.bodies_lock = threading.Lock()
        self.jobs: List[_FileJob] = []

    # ---------------------------------------------------------------- orchestration

    def run(self, items: List[DownloadItem]) -> List[Optional[List[Path]]]:
        started = time.monotonic()
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="download") as pool:
            infos = self._gather(pool, [pool.submit(self._probe, item) for item in items])
            jobs: List[Optional[_FileJob]] = [None if info is None else _FileJob(item, info, self.chunk_size)
                                              for item, info in zip(items, infos)]
            present = [job for job in jobs if job is not None]
            self.jobs = present
            already = sum(job.prepare() for job in present)
            total = sum(job.info.length for job in present)
            for job in present:
                log.info("Download: %s -> %s", redact(job.item.url), one_line(str(job.item.target_dir / job.item.name)))
            self.bar = progress_bar(total, "Downloading", enabled=self.show_progress)
            try:
                self.bar.update(already)
                tasks = [pool.submit(self._finish, job) for job in present if not job.pending_chunks()]
                tasks += [pool.submit(self._fetch_chunk, job, index)
                          for job in present for index in job.pending_chunks()]
                self._gather(pool, tasks)
            finally:
                self.bar.close()
        seconds = max(time.monotonic() - started, 1e-6)
        log.debug("Downloaded %d bytes (%d resumed) in %.2f s (%.1f MB/s)", total - already, already, seconds,
                  (total - already) / seconds / 1e6)
        return [None if job is None else job.result for job in jobs]

    def _gather(self, pool: ThreadPoolExecutor, futures: List["Future[Any]"]) -> List[Any]:
        """Wait for all; on the first failure (or Ctrl-C) stop the others and re-raise it."""
        try:
            self._watch_until_done(futures)
            failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
            if failed:
                self._stop_all(futures)
                errors = [f.exception() for f in futures
                          if f.done() and not f.cancelled() and f.exception() is not None]
                real = [e for e in errors if not isinstance(e, _Cancelled)]
                raise (real or errors)[0]  # type: ignore[misc]
            return [f.result() for f in futures]
        except (KeyboardInterrupt, DownloadStopped):
            self._stop_all(futures)
            for job in self.jobs:  # an interrupted run leaves no partial file (§12.20)
                if job.result is None:
                    self._discard(job)
            raise

    def _watch_until_done(self, futures: List["Future[Any]"]) -> None:
        """Wait for all (or the first failure), cutting bodies that are too slow meanwhile."""
        from concurrent.futures import FIRST_EXCEPTION, wait
        while True:
            _, pending = wait(futures, timeout=_WATCH_INTERVAL, return_when=FIRST_EXCEPTION)
            if self.stop.is_set():
                raise DownloadStopped()
            if not pending or any(f.done() and not f.cancelled() and f.exception() is not None for f in futures):
                return
            now = time.monotonic()
            with self.bodies_lock:
                for body in self.bodies:
                    body.check_speed(self.slow_body, now)

    def _stop_all(self, futures: List["Future[Any]"]) -> None:
        """Cancel what has not started and cut every body being read; wait for the threads."""
        from concurrent.futures import wait
        self.cancel.set()
        for future in futures:
            future.cancel()
        with self.bodies_lock:
            for body in self.bodies:
                body.abort()
        wait(futures)

    def _probe(self, item: DownloadItem) -> Optional[BlobInfo]:
        info = head_blob(item.url, self.session, self.retry)
        if info is None:
            if item.optional:
                log.debug("Optional %s not found (HTTP 404); skipping", redact(item.url))
                return None
            raise BlobNotFound(f"{one_line(item.name)} not found (HTTP 404): {redact(item.url)}")
        return info

    # ---------------------------------------------------------------- one range

    def _fetch_chunk(self, job: _FileJob, index: int) -> None:
        start, end = job.bounds(index)
        failures = 0
        try:
            while True:
                if self.cancel.is_set():
                    raise _Cancelled()
                offset = start + job.progress(index)
                if offset > end:
                    break
                before = offset
                try:
                    self._stream_range(job, index, offset, end)
                except _Transient as exc:
                    made_progress = start + job.progress(index) > before
                    failures = 1 if made_progress and not isinstance(exc, _TooSlow) else failures + 1
                    if failures >= self.retry.attempts:
                        raise DownloadError(f"downloading {one_line(job.item.name)} failed after {failures} attempts "
                                            f"({exc}): {redact(job.item.url)}; run again to resume") from None
                    log.debug("%s bytes %d-%d: %s; retrying (%d/%d)", one_line(job.item.name), offset, end, exc,
                              failures, self.retry.attempts)
                    self._sleep(self.retry.delay(failures))
        except BaseException:
            job.save()
            raise
        if job.chunk_finished(index):
            self._finish(job)
        else:
            job.hash_finished_front(wait=False)

    def _sleep(self, seconds: float) -> None:
        if self.cancel.wait(seconds):
            raise _Cancelled()

    def _stream_range(self, job: _FileJob, index: int, offset: int, end: int) -> None:
        headers = {"Range": f"bytes={offset}-{end}"}
        if job.info.etag:
            headers["If-Match"] = job.info.etag
        expected = end - offset + 1
        try:
            with refused_redirects(job.item.url):
                response = self.session.get(job.item.url, headers=headers, stream=True, timeout=DEFAULT_TIMEOUT)
        except _transient_exceptions() as exc:
            raise _Transient(_describe_exception(exc)) from None
        body = _Body(response)
        with response, self._watched(body):
            self._check_range_response(job, response, offset, end)
            written = 0
            try:
                with job.part.open("r+b") as handle:
                    handle.seek(offset)
                    for piece in _pieces(response.raw):
                        if self.cancel.is_set():
                            raise _Cancelled()
                        if written + len(piece) > expected:
                            raise DownloadError(f"{one_line(job.item.name)}: server sent more than the {expected} bytes "
                                                f"asked for: {redact(job.item.url)}")
                        try:
                            handle.write(piece)
                        except OSError as exc:
                            raise DownloadError(cannot_write_message(job.part, exc)) from None
                        written += len(piece)
                        body.received = written
                        job.add_progress(index, len(piece))
                        self._advance(len(piece))
            except _transient_exceptions() as exc:
                self._raise_if_cut(body)
                raise _Transient(_describe_exception(exc)) from None
        if written < expected:
            self._raise_if_cut(body)
            raise _Transient(f"body ended after {written} of {expected} bytes")

    @contextmanager
    def _watched(self, body: _Body) -> Iterator[None]:
        with self.bodies_lock:
            self.bodies.add(body)
        if self.cancel.is_set():
            body.abort()
        try:
            yield
        finally:
            with self.bodies_lock:
                self.bodies.discard(body)

    def _raise_if_cut(self, body: _Body) -> None:
        """A body cut by the watcher: cancelled, or too slow (a failed attempt)."""
        if self.cancel.is_set():
            raise _Cancelled()
        if body.too_slow:
            raise _TooSlow(f"body slower than the minimum ({self.slow_body.describe()})")

    def _check_range_response(self, job: _FileJob, response, offset: int, end: int) -> None:  # type: ignore[no-untyped-def]
        status = response.status_code
        whole = offset == 0 and end == job.info.length - 1
        if status == 206 or (status == 200 and whole):
            length_text = response.headers.get("Content-Length")
            if length_text is not None and int(length_text) != end - offset + 1:
                raise _Transient(f"Content-Length {length_text} does not match the {end - offset + 1} bytes asked for")
            return
        if _is_transient_status(status):
            raise _Transient(f"HTTP {status} {response.reason}")
        if status == 412:
            raise DownloadError(f"{one_line(job.item.name)} changed on the server during the download: "
                                f"{redact(job.item.url)}; run again")
        if status == 200:
            raise DownloadError(f"the server ignored the range request for {redact(job.item.url)}")
        _raise_for_final_status(status, response.reason, job.item.url)

    def _advance(self, count: int) -> None:
        with self.bar_lock:
            self.bar.update(count)

    # ---------------------------------------------------------------- completion

    def _finish(self, job: _FileJob) -> None:
        """Verify the finished `.part`, then rename it (or extract it) into place."""
        actual = job.part.stat().st_size
        if actual != job.info.length:
            self._discard(job)
            raise DownloadError(f"{one_line(job.item.name)}: got {actual} bytes, Content-Length says {job.info.length}: "
                                f"{redact(job.item.url)}; run again")
        if job.md5 is not None:
            job.hash_finished_front(wait=True)
            digest = _base64(job.md5.digest())
            if digest != job.info.content_md5:
                self._discard(job)
                if job.body_retries < CORRUPT_BODY_RETRIES:
                    log.warning("Warning: %s: MD5 %s does not match Content-MD5 %s; downloading it again",
                                one_line(job.item.name), digest, job.info.content_md5)
                    self._download_again(job)
                    return
                raise DownloadError(f"{one_line(job.item.name)}: MD5 {digest} does not match Content-MD5 "
                                    f"{job.info.content_md5}: {redact(job.item.url)}; the download was "
                                    f"discarded after {job.body_retries + 1} attempts, run again")
        target = job.item.target_dir / job.item.name
        if job.item.should_extract:
            try:
                job.result = extract_zip(job.part, job.item.target_dir, display_name=job.item.name, stop=self.cancel)
            except ExtractionStopped:
                raise _Cancelled() from None
            except (UnsafeArchive, NotAZip) as exc:
                self._discard(job)
                raise type(exc)(f"{exc}; the download was discarded") from None
            if job.item.keep_archive_in is not None:
                _keep_archive(job.part, job.item.keep_archive_in / job.item.name)
            self._discard(job)
        else:
            os.replace(job.part, target)
            _remove_quietly(job.meta)
            job.result = [target]

    def _download_again(self, job: _FileJob) -> None:
        """Fetch the whole blob once more in this thread (its body arrived corrupted)."""
        job.restart()
        pending = job.pending_chunks()
        for index in pending:
            self._fetch_chunk(job, index)  # the last one finishes (and checks) the file
        if not pending:
            self._finish(job)

    @staticmethod
    def _discard(job: _FileJob) -> None:
        _remove_quietly(job.part)
        _remove_quietly(job.meta)


def cannot_write_message(path: Path, exc: OSError) -> str:
    """One line for a failed write (no space, file size limit, permissions), naming the file."""
    return f"cannot write {path}: {exc.strerror or exc}; free some disk space (or fix its permissions) and run again"


def _base64(data: bytes) -> str:
    import base64
    return base64.b64encode(data).decode("ascii")


def _file_md5(path: Path) -> bytes:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.digest()
