"""Azure Blob Storage for the SuperPMI scripts (CONTRACTS §11).

* Anonymous reading with plain HTTP: listing a container (every page), HEAD, and
  downloads that run several blobs and ranges of large blobs in parallel, resume an
  interrupted file, verify length and MD5, write under a temporary name and rename, and
  extract `.zip` files safely.
* Authenticated writing through the `azure-storage-blob` SDK (connection string, SAS
  token, account key, or `azure-identity` credentials).
* `redact()` and a log filter so that no key, SAS signature or connection string is ever
  printed or logged.
* `directory_lock()`: a cross-process lock around a cache directory.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import platforms
from jitutil import SuiteError, atomic_write_text, progress_bar

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    import zipfile
    from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger("superpmi")

DEFAULT_ACCOUNT_URL = "https://clrjit2.blob.core.windows.net"
STORAGE_URL_ENV = "SUPERPMI_STORAGE_URL"
CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"
DEVELOPMENT_STORAGE_URL = "http://127.0.0.1:10000/devstoreaccount1"
COLLECTIONS_CONTAINER = "superpmi"
ROLLING_BUILD_CONTAINER = "jitrollingbuild"
#: Prefix of the scratch directories made while extracting (never searched for collections).
TEMP_DIR_PREFIX = ".spmi-tmp"
PART_SUFFIX = ".part"
PART_META_SUFFIX = ".part.json"
#: Service version sent with anonymous requests, so old and new accounts answer alike.
X_MS_VERSION = "2020-10-02"
AUTH_HELP = ("pass -connection_string, -sas_token or -account_key (or set AZURE_STORAGE_CONNECTION_STRING), "
             "or use --use_azure_cli / --use_default_credential after signing in")


# ================================================================ errors

class StorageError(SuiteError):
    """A storage operation failed; the message is already free of secrets."""


class BlobNotFound(StorageError):
    """HTTP 404: the blob (or container) is not there."""


class AccessDenied(StorageError):
    """HTTP 403 or an authentication failure."""


class DownloadError(StorageError):
    """A download could not be completed or verified."""


class UnsafeArchive(DownloadError):
    """A zip holds an entry that would land outside the target directory."""


# ================================================================ secrets

_secrets_lock = threading.Lock()
_registered_secrets: Set[str] = set()
#: (word every match contains, in lower case; pattern; replacement)
_SECRET_PATTERNS = [
    ("accountkey", re.compile(r"(AccountKey\s*=\s*)[^;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sharedaccesssignature", re.compile(r"(SharedAccessSignature\s*=\s*)[^;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sig=", re.compile(r"(\bsig=)[^&;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sharedkey", re.compile(r"(SharedKey(?:Lite)?\s+[^:\s]+:)[^\s'\",]+", re.IGNORECASE), r"\1***"),
    ("bearer", re.compile(r"(Bearer\s+)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE), r"\1***"),
]


def register_secret(value: Optional[str]) -> None:
    """Remember a secret so `redact` removes it wherever it appears."""
    if value and len(value) >= 4:
        with _secrets_lock:
            _registered_secrets.add(value)
            _registered_secrets.add(urllib.parse.quote(value, safe=""))


def redact(text: str) -> str:
    """`text` with keys, SAS signatures, connection-string secrets and tokens replaced by `***`."""
    with _secrets_lock:
        secrets = sorted(_registered_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    # In ASCII text a case-insensitive match needs its word in the lower-cased text; skipping
    # the patterns whose word is absent keeps long tool output cheap to log.
    lowered = text.lower() if text.isascii() else None
    for word, pattern, replacement in _SECRET_PATTERNS:
        if lowered is None or word in lowered:
            text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites every record (message, arguments and traceback) through `redact`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not hide the record
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_log_redaction(logger: logging.Logger = log) -> None:
    """Add the redacting filter to `logger` once (done on import for the suite's logger)."""
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())


install_log_redaction()


# ================================================================ account URL

def parse_connection_string(text: str) -> Dict[str, str]:
    """`Key=Value;...` into a dict with lower-case keys (values may contain `=`)."""
    result: Dict[str, str] = {}
    for part in text.split(";"):
        if "=" in part:
            key, value = part.split("=", 1)
            result[key.strip().lower()] = value.strip()
    return result


def connection_string_endpoint(text: str) -> Optional[str]:
    """The blob account URL a connection string points at."""
    fields = parse_connection_string(text)
    if fields.get("blobendpoint"):
        return fields["blobendpoint"].rstrip("/")
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        return DEVELOPMENT_STORAGE_URL
    account = fields.get("accountname")
    if account:
        protocol = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        return f"{protocol}://{account}.blob.{suffix}"
    return None


def resolve_account_url(flag: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                        authenticated: bool = False) -> str:
    """`-storage_url`, else `$SUPERPMI_STORAGE_URL`, else the public account (no trailing slash).

    For authenticated access a connection string's endpoint comes before the default.
    """
    environ = os.environ if environ is None else environ
    if flag:
        return _clean_account_url(flag, "-storage_url")
    from_env = environ.get(STORAGE_URL_ENV)
    if from_env:
        return _clean_account_url(from_env, STORAGE_URL_ENV)
    if authenticated and environ.get(CONNECTION_STRING_ENV):
        endpoint = connection_string_endpoint(environ[CONNECTION_STRING_ENV])
        if endpoint:
            return endpoint
    return DEFAULT_ACCOUNT_URL


def _clean_account_url(value: str, source: str) -> str:
    value = value.strip().rstrip("/")
    if not platforms.is_url(value):
        raise SuiteError(f"{source} '{redact(value)}' is not an http(s) URL; "
                         "use e.g. https://<account>.blob.core.windows.net")
    return value


def add_storage_url_option(parser: argparse.ArgumentParser) -> None:
    """Add `-storage_url` unless the parser has it already."""
    if "-storage_url" not in getattr(parser, "_option_string_actions", {}):
        parser.add_argument("-storage_url", metavar="URL",
                            help=f"storage account URL (default: ${STORAGE_URL_ENV}, else {DEFAULT_ACCOUNT_URL})")


def account_name_from_url(account_url: str) -> str:
    """`https://<name>.blob...` or path-style `http://127.0.0.1:10000/<name>` (emulator)."""
    parsed = urllib.parse.urlsplit(account_url)
    host = parsed.hostname or ""
    path_parts = [p for p in parsed.path.split("/") if p]
    if _is_ip_or_localhost(host) and path_parts:
        return path_parts[0]
    return host.split(".")[0]


def _is_ip_or_localhost(host: str) -> bool:
    return host == "localhost" or bool(re.fullmatch(r"[0-9.]+", host)) or ":" in host


# ================================================================ anonymous reading

def blob_url(container: str, name: str, account_url: Optional[str] = None) -> str:
    """`<account>/<container>/<url-encoded name>` (slashes kept)."""
    base = resolve_account_url(None) if account_url is None else account_url.rstrip("/")
    return f"{base}/{container}/{urllib.parse.quote(name, safe='/')}"


def listing_url(account_url: str, container: str, prefix: str, marker: Optional[str] = None,
                max_results: Optional[int] = None) -> str:
    query = [("restype", "container"), ("comp", "list"), ("prefix", prefix)]
    if marker:
        query.append(("marker", marker))
    if max_results:
        query.append(("maxresults", str(max_results)))
    encoded = "&".join(f"{k}={urllib.parse.quote(v, safe='')}" for k, v in query)
    return f"{account_url.rstrip('/')}/{container}?{encoded}"


def parse_listing_page(xml_bytes: bytes) -> Tuple[List[str], Optional[str]]:
    """Blob names and the next marker (None at the end) of one listing page."""
    import xml.etree.ElementTree as ElementTree
    root = ElementTree.fromstring(xml_bytes)
    names = [el.text or "" for el in root.findall("./Blobs/Blob/Name")]
    marker_el = root.find("NextMarker")
    marker = (marker_el.text or "").strip() if marker_el is not None else ""
    return names, marker or None


@dataclass
class RetryPolicy:
    """Transient failures are retried `attempts` times in all, with exponential back-off."""

    attempts: int = 5
    first_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, failed_attempts: int) -> float:
        return min(self.max_delay, self.first_delay * (2 ** max(0, failed_attempts - 1)))


RETRIES_ENV = "SUPERPMI_STORAGE_RETRIES"


def default_retry_policy(environ: Optional[Mapping[str, str]] = None) -> RetryPolicy:
    """5 attempts, or `$SUPERPMI_STORAGE_RETRIES` attempts (at least 1)."""
    environ = os.environ if environ is None else environ
    text = environ.get(RETRIES_ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise SuiteError(f"{RETRIES_ENV}='{text}' must be a whole number of attempts (1 or more)")
        return RetryPolicy(attempts=int(text))
    return RetryPolicy()


#: (connect, read) timeouts in seconds.
DEFAULT_TIMEOUT = (15.0, 60.0)


class _Transient(Exception):
    """A failure worth retrying (connection trouble, 5xx, a short body)."""


def _transient_exceptions() -> Tuple[type, ...]:
    import requests
    import urllib3.exceptions
    return (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError, urllib3.exceptions.HTTPError, ConnectionError,
            TimeoutError)


def _is_transient_status(status: int) -> bool:
    return status >= 500 or status in (408, 429)


def new_session(pool_size: int = 16):  # type: ignore[no-untyped-def]
    """A `requests` session with a connection pool big enough for the download workers."""
    import requests
    from requests.adapters import HTTPAdapter
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(4, pool_size), max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers.update({"x-ms-version": X_MS_VERSION, "Accept-Encoding": "identity"})
    return session


def _request_with_retries(session, method: str, url: str, retry: RetryPolicy, what: str,  # type: ignore[no-untyped-def]
                          **kwargs: Any):
    """One small request, retried on transient failures; returns the final response."""
    failures = 0
    while True:
        try:
            response = session.request(method, url, timeout=DEFAULT_TIMEOUT, **kwargs)
            if not _is_transient_status(response.status_code):
                return response
            problem = f"HTTP {response.status_code} {response.reason}"
        except _transient_exceptions() as exc:
            problem = _describe_exception(exc)
        failures += 1
        if failures >= retry.attempts:
            raise StorageError(f"{what} failed after {failures} attempts ({problem}): {redact(url)}; "
                               "check the network and -storage_url")
        log.debug("%s: %s; retrying (%d/%d)", what, problem, failures, retry.attempts)
        time.sleep(retry.delay(failures))


def _describe_exception(exc: BaseException) -> str:
    """A short description: the innermost OS error (e.g. connection refused) when there is one."""
    root = _root_os_error(exc)
    if root is not None:
        return f"{type(root).__name__}: {root.strerror or root}"
    text = str(exc) or type(exc).__name__
    if len(text) > 200:
        text = text[:200] + "..."
    return redact(f"{type(exc).__name__}: {text}")


def _root_os_error(exc: BaseException) -> Optional[OSError]:
    seen: Set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None and current.strerror:
            return current
        reason = getattr(current, "reason", None)
        first_arg = current.args[0] if current.args and isinstance(current.args[0], BaseException) else None
        current = (reason if isinstance(reason, BaseException) else None) or current.__cause__ \
            or current.__context__ or first_arg
    return None


def list_blobs(container: str, prefix: str = "", account_url: Optional[str] = None,
               max_results: Optional[int] = None, session=None,  # type: ignore[no-untyped-def]
               retry: Optional[RetryPolicy] = None) -> List[str]:
    """Every blob name under `prefix`, following `NextMarker` to the end (§11.2)."""
    account_url = resolve_account_url(None) if account_url is None else account_url.rstrip("/")
    session = session or new_session()
    retry = retry or default_retry_policy()
    names: List[str] = []
    marker: Optional[str] = None
    while True:
        url = listing_url(account_url, container, prefix, marker, max_results)
        response = _request_with_retries(session, "GET", url, retry, "Listing")
        if response.status_code != 200:
            raise StorageError(f"listing {redact(url)} failed: HTTP {response.status_code} {response.reason}"
                               f"{_error_code_suffix(response)}; check -storage_url and the container name")
        try:
            page, marker = parse_listing_page(response.content)
        except SyntaxError as exc:  # xml.etree.ElementTree.ParseError
            raise StorageError(f"listing {redact(url)} returned unreadable XML ({exc})") from exc
        names.extend(page)
        log.debug("Listed %d blobs from %s", len(page), redact(url))
        if marker is None:
            return names


def _error_code_suffix(response) -> str:  # type: ignore[no-untyped-def]
    code = response.headers.get("x-ms-error-code")
    return f" ({code})" if code else ""


@dataclass
class BlobInfo:
    """What HEAD says about a blob."""

    url: str
    length: int
    etag: Optional[str]
    content_md5: Optional[str]


def head_blob(url: str, session=None, retry: Optional[RetryPolicy] = None) -> Optional[BlobInfo]:  # type: ignore[no-untyped-def]
    """Size, ETag and MD5 of a blob; None when it does not exist (404)."""
    session = session or new_session()
    retry = retry or default_retry_policy()
    response = _request_with_retries(session, "HEAD", url, retry, "Reading blob properties")
    if response.status_code == 404:
        return None
    _raise_for_final_status(response.status_code, response.reason, url)
    length_text = response.headers.get("Content-Length")
    if length_text is None or not length_text.isdigit():
        raise DownloadError(f"no usable Content-Length for {redact(url)}")
    return BlobInfo(url=url, length=int(length_text), etag=response.headers.get("ETag"),
                    content_md5=response.headers.get("Content-MD5"))


def blob_exists(container: str, name: str, account_url: Optional[str] = None, session=None) -> bool:  # type: ignore[no-untyped-def]
    return head_blob(blob_url(container, name, account_url), session) is not None


def _raise_for_final_status(status: int, reason: str, url: str) -> None:
    if 200 <= status < 300:
        return
    if status == 404:
        raise BlobNotFound(f"not found (HTTP 404): {redact(url)}")
    if status in (401, 403):
        raise AccessDenied(f"access denied (HTTP {status} {reason}): {redact(url)}; "
                           "the container may not allow anonymous reading")
    raise DownloadError(f"HTTP {status} {reason} for {redact(url)}")


# ================================================================ downloads

@dataclass
class DownloadItem:
    """One blob to fetch into `target_dir` (a `.zip` is extracted there by default)."""

    url: str
    target_dir: Path
    file_name: Optional[str] = None
    optional: bool = False
    extract: Optional[bool] = None

    @property
    def name(self) -> str:
        if self.file_name:
            return self.file_name
        path = urllib.parse.urlsplit(self.url).path
        return urllib.parse.unquote(path.rstrip("/").rsplit("/", 1)[-1])

    @property
    def should_extract(self) -> bool:
        return self.extract if self.extract is not None else self.name.lower().endswith(".zip")


DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
DEFAULT_MAX_WORKERS = 8
_READ_SIZE = 256 * 1024


def download_files(items: Sequence[DownloadItem], show_progress: bool = False,
                   max_workers: int = DEFAULT_MAX_WORKERS, chunk_size: int = DEFAULT_CHUNK_SIZE,
                   retry: Optional[RetryPolicy] = None, session=None) -> List[Optional[List[Path]]]:  # type: ignore[no-untyped-def]
    """Download `items` in parallel; per item the files produced (extracted files for a
    `.zip`), or None for an optional item that does not exist.

    Blobs larger than `chunk_size` are fetched as parallel ranges. An interrupted file
    resumes from `<name>.part` (+ `<name>.part.json`) on the next call.
    """
    if not items:
        return []
    downloader = _Downloader(session or new_session(max_workers * 2), max(1, max_workers),
                             max(64 * 1024, chunk_size), retry or default_retry_policy(), show_progress)
    return downloader.run(list(items))


def download_file(url: str, target_dir: Path, optional: bool = False, show_progress: bool = False,
                  **kwargs: Any) -> Optional[List[Path]]:
    return download_files([DownloadItem(url, Path(target_dir), optional=optional)], show_progress, **kwargs)[0]


class _Cancelled(Exception):
    pass


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
                log.info("Resuming %s from %d of %d bytes", self.item.name, resumed, self.info.length)
        else:
            _remove_quietly(self.part)
            with self.part.open("wb") as handle:
                handle.truncate(self.info.length)
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


def _url_without_query(url: str) -> str:
    return url.split("?", 1)[0]


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        return value if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class _Downloader:
    def __init__(self, session, workers: int, chunk_size: int, retry: RetryPolicy,  # type: ignore[no-untyped-def]
                 show_progress: bool) -> None:
        self.session = session
        self.workers = workers
        self.chunk_size = chunk_size
        self.retry = retry
        self.show_progress = show_progress
        self.cancel = threading.Event()
        self.bar: Any = None
        self.bar_lock = threading.Lock()

    # ---------------------------------------------------------------- orchestration

    def run(self, items: List[DownloadItem]) -> List[Optional[List[Path]]]:
        started = time.monotonic()
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="download") as pool:
            infos = self._gather(pool, [pool.submit(self._probe, item) for item in items])
            jobs: List[Optional[_FileJob]] = [None if info is None else _FileJob(item, info, self.chunk_size)
                                              for item, info in zip(items, infos)]
            present = [job for job in jobs if job is not None]
            already = sum(job.prepare() for job in present)
            total = sum(job.info.length for job in present)
            for job in present:
                log.info("Download: %s -> %s", redact(job.item.url), job.item.target_dir / job.item.name)
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
        from concurrent.futures import FIRST_EXCEPTION, wait
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
            if failed:
                self.cancel.set()
                for future in futures:
                    future.cancel()
                wait(futures)
                errors = [f.exception() for f in futures
                          if f.done() and not f.cancelled() and f.exception() is not None]
                real = [e for e in errors if not isinstance(e, _Cancelled)]
                raise (real or errors)[0]  # type: ignore[misc]
            return [f.result() for f in futures]
        except KeyboardInterrupt:
            self.cancel.set()
            for future in futures:
                future.cancel()
            wait(futures)
            raise

    def _probe(self, item: DownloadItem) -> Optional[BlobInfo]:
        info = head_blob(item.url, self.session, self.retry)
        if info is None:
            if item.optional:
                log.debug("Optional %s not found (HTTP 404); skipping", redact(item.url))
                return None
            raise BlobNotFound(f"{item.name} not found (HTTP 404): {redact(item.url)}")
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
                    failures = 1 if made_progress else failures + 1
                    if failures >= self.retry.attempts:
                        raise DownloadError(f"downloading {job.item.name} failed after {failures} attempts "
                                            f"({exc}): {redact(job.item.url)}; run again to resume") from None
                    log.debug("%s bytes %d-%d: %s; retrying (%d/%d)", job.item.name, offset, end, exc,
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
            response = self.session.get(job.item.url, headers=headers, stream=True, timeout=DEFAULT_TIMEOUT)
        except _transient_exceptions() as exc:
            raise _Transient(_describe_exception(exc)) from None
        with response:
            self._check_range_response(job, response, offset, end)
            written = 0
            try:
                with job.part.open("r+b") as handle:
                    handle.seek(offset)
                    for piece in response.raw.stream(_READ_SIZE, decode_content=False):
                        if self.cancel.is_set():
                            raise _Cancelled()
                        if written + len(piece) > expected:
                            raise DownloadError(f"{job.item.name}: server sent more than the {expected} bytes "
                                                f"asked for: {redact(job.item.url)}")
                        handle.write(piece)
                        written += len(piece)
                        job.add_progress(index, len(piece))
                        self._advance(len(piece))
            except _transient_exceptions() as exc:
                raise _Transient(_describe_exception(exc)) from None
        if written < expected:
            raise _Transient(f"body ended after {written} of {expected} bytes")

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
            raise DownloadError(f"{job.item.name} changed on the server during the download: "
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
            raise DownloadError(f"{job.item.name}: got {actual} bytes, Content-Length says {job.info.length}: "
                                f"{redact(job.item.url)}; run again")
        if job.md5 is not None:
            job.hash_finished_front(wait=True)
            digest = _base64(job.md5.digest())
            if digest != job.info.content_md5:
                self._discard(job)
                raise DownloadError(f"{job.item.name}: MD5 {digest} does not match Content-MD5 "
                                    f"{job.info.content_md5}: {redact(job.item.url)}; the download was "
                                    "discarded, run again")
        target = job.item.target_dir / job.item.name
        if job.item.should_extract:
            try:
                job.result = extract_zip(job.part, job.item.target_dir, display_name=job.item.name)
            except (UnsafeArchive, NotAZip):
                self._discard(job)
                raise
            self._discard(job)
        else:
            os.replace(job.part, target)
            _remove_quietly(job.meta)
            job.result = [target]

    @staticmethod
    def _discard(job: _FileJob) -> None:
        _remove_quietly(job.part)
        _remove_quietly(job.meta)


def _base64(data: bytes) -> str:
    import base64
    return base64.b64encode(data).decode("ascii")


def _file_md5(path: Path) -> bytes:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.digest()


# ================================================================ zip extraction

class NotAZip(DownloadError):
    """A `.zip` download that is not a readable zip archive."""


def unsafe_archive_path_reason(name: str) -> Optional[str]:
    """Why an archive entry's name may not be extracted (zip or tar; None when it is safe)."""
    if not name:
        return "an empty name"
    normalized = name.replace("\\", "/")
    if normalized.startswith("/") or re.match(r"^[A-Za-z]:", normalized):
        return "an absolute path"
    if any(part == ".." for part in normalized.split("/")):
        return "a '..' component"
    return None


def unsafe_zip_entry_reason(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a zip entry may not be extracted (None when it is safe)."""
    reason = unsafe_archive_path_reason(info.filename)
    if reason:
        return reason
    mode = (info.external_attr >> 16) & 0xFFFF
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "a special file"
    return None


def extract_zip(archive: Path, target_dir: Path, display_name: Optional[str] = None) -> List[Path]:
    """Extract into a scratch directory beside the targets, then rename each file into place.

    Entries that are absolute, contain `..` or are links are rejected before anything is
    written; on failure (e.g. a full disk) nothing partial is left behind.
    """
    import zipfile
    shown = display_name or archive.name
    target_dir.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise NotAZip(f"{shown} is not a valid zip file ({exc}); the download was discarded") from None
    with zf:
        entries = zf.infolist()
        for info in entries:
            reason = unsafe_zip_entry_reason(info)
            if reason:
                raise UnsafeArchive(f"{shown}: entry '{info.filename}' has {reason}; refusing to extract it")
        scratch = Path(tempfile.mkdtemp(prefix=TEMP_DIR_PREFIX + "-extract-", dir=str(target_dir)))
        try:
            staged: List[Tuple[Path, Path]] = []
            for info in entries:
                relative = Path(*[p for p in info.filename.replace("\\", "/").split("/") if p not in ("", ".")])
                if info.is_dir() or not relative.parts:
                    continue
                staging = scratch / relative
                staging.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, staging.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1024 * 1024)
                staged.append((staging, target_dir / relative))
            results = []
            for staging, final in staged:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging, final)
                results.append(final)
            return results
        except zipfile.BadZipFile as exc:
            raise NotAZip(f"{shown} is damaged ({exc}); the download was discarded") from None
        except OSError as exc:
            raise DownloadError(f"extracting {shown} into {target_dir} failed: {exc.strerror or exc}; "
                                "free some disk space and run again") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


# ================================================================ cross-process lock

@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock (`<directory>.lock` beside it) shared by all processes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = directory.parent / (directory.name + ".lock")
    with open(lock_path, "a+b") as handle:
        log.debug("Waiting for lock %s", lock_path)
        platforms.lock_file(handle)
        try:
            yield
        finally:
            platforms.unlock_file(handle)


# ================================================================ authenticated writing

@dataclass
class StorageCredentials:
    """How to authenticate writes. Secrets are registered for redaction on creation."""

    connection_string: Optional[str] = None
    sas_token: Optional[str] = None
    account_key: Optional[str] = None
    use_azure_cli: bool = False
    use_default_credential: bool = False

    def __post_init__(self) -> None:
        if self.sas_token:
            self.sas_token = self.sas_token.lstrip("?")
        for secret in (self.connection_string, self.sas_token, self.account_key):
            register_secret(secret)
        if self.connection_string:
            fields = parse_connection_string(self.connection_string)
            register_secret(fields.get("accountkey"))
            register_secret(fields.get("sharedaccesssignature"))

    @classmethod
    def from_args(cls, args: argparse.Namespace,
                  environ: Optional[Mapping[str, str]] = None) -> "StorageCredentials":
        environ = os.environ if environ is None else environ
        explicit = any(getattr(args, name, None) for name in ("connection_string", "sas_token", "account_key",
                                                               "use_azure_cli", "use_default_credential"))
        return cls(connection_string=getattr(args, "connection_string", None)
                   or (None if explicit else environ.get(CONNECTION_STRING_ENV)),
                   sas_token=getattr(args, "sas_token", None), account_key=getattr(args, "account_key", None),
                   use_azure_cli=bool(getattr(args, "use_azure_cli", False)),
                   use_default_credential=bool(getattr(args, "use_default_credential", False)))

    def kind(self) -> Optional[str]:
        """What kind of credential this is, in words (never the secret)."""
        if self.connection_string:
            return "connection string"
        if self.sas_token:
            return "SAS token"
        if self.account_key:
            return "account key"
        if self.use_azure_cli:
            return "Azure CLI credential"
        if self.use_default_credential:
            return "default Azure credential"
        return None


def add_credential_options(parser: argparse.ArgumentParser) -> None:
    """Options for commands that write to storage."""
    group = parser.add_argument_group("storage credentials (for writing)")
    group.add_argument("-connection_string", metavar="TEXT",
                       help=f"storage connection string (default: ${CONNECTION_STRING_ENV})")
    group.add_argument("-sas_token", metavar="TOKEN", help="SAS token with write permission")
    group.add_argument("-account_key", metavar="KEY", help="storage account key")
    group.add_argument("--use_azure_cli", action="store_true", help="authenticate as the signed-in Azure CLI user")
    group.add_argument("--use_default_credential", action="store_true",
                       help="authenticate with azure-identity's DefaultAzureCredential")


def _token_credential(credentials: StorageCredentials):  # type: ignore[no-untyped-def]
    flag = "--use_azure_cli" if credentials.use_azure_cli else "--use_default_credential"
    try:
        import azure.identity as identity
    except ImportError:
        raise SuiteError(f"{flag} needs the azure-identity package; run: pip install azure-identity") from None
    if credentials.use_azure_cli:
        return identity.AzureCliCredential()
    return identity.DefaultAzureCredential()


class StorageWriter:
    """Authenticated access through the `azure-storage-blob` SDK."""

    def __init__(self, credentials: StorageCredentials, account_url: Optional[str] = None) -> None:
        if credentials.kind() is None:
            raise SuiteError(f"writing to storage needs a credential; {AUTH_HELP}")
        self.credentials = credentials
        self.client = self._make_client(credentials, account_url)
        self.account_url = self.client.url.rstrip("/")

    @staticmethod
    def _make_client(credentials: StorageCredentials, account_url: Optional[str]):  # type: ignore[no-untyped-def]
        from azure.storage.blob import BlobServiceClient, ExponentialRetry
        retries = default_retry_policy().attempts - 1
        options = {"retry_policy": ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=retries,
                                                    random_jitter_range=1),
                   "connection_timeout": 15, "read_timeout": 120}
        try:
            if credentials.connection_string:
                if not connection_string_endpoint(credentials.connection_string):
                    raise ValueError("no BlobEndpoint or AccountName")
                client = BlobServiceClient.from_connection_string(credentials.connection_string, **options)
                if account_url and account_url.rstrip("/") != client.url.rstrip("/"):
                    log.warning("Warning: using the connection string's endpoint %s, not %s",
                                client.url.rstrip("/"), account_url)
                return client
            url = account_url or resolve_account_url(None)
            if credentials.sas_token:
                from azure.core.credentials import AzureSasCredential
                return BlobServiceClient(url, credential=AzureSasCredential(credentials.sas_token), **options)
            if credentials.account_key:
                from azure.core.credentials import AzureNamedKeyCredential
                key = AzureNamedKeyCredential(account_name_from_url(url), credentials.account_key)
                return BlobServiceClient(url, credential=key, **options)
            return BlobServiceClient(url, credential=_token_credential(credentials), **options)
        except SuiteError:
            raise
        except (ValueError, TypeError) as exc:
            raise SuiteError(f"the {credentials.kind()} is not usable ({redact(str(exc))}); {AUTH_HELP}") from None

    def _call(self, action: str, operation: Callable[[], Any]) -> Any:
        """Run one SDK operation, turning its errors into one secret-free line."""
        from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError, ServiceRequestError,
                                           ServiceResponseError)
        try:
            return operation()
        except ClientAuthenticationError as exc:
            raise AccessDenied(f"{action}: authentication to {self.account_url} with the {self.credentials.kind()} "
                               f"failed ({_sdk_reason(exc)}); {AUTH_HELP}") from None
        except HttpResponseError as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                raise AccessDenied(f"{action}: {self.account_url} refused the {self.credentials.kind()} "
                                   f"(HTTP {status} {_sdk_reason(exc)}); {AUTH_HELP}") from None
            raise StorageError(f"{action} failed: HTTP {status} {_sdk_reason(exc)}") from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise StorageError(f"{action}: cannot reach {self.account_url} ({_describe_exception(exc)}); "
                               "check the network and -storage_url") from None

    def create_container(self, container: str, public: bool = True) -> None:
        """Create a container (public-read when `public`); an existing one is fine."""
        from azure.core.exceptions import ResourceExistsError

        def create() -> None:
            try:
                self.client.create_container(container, public_access="container" if public else None)
            except ResourceExistsError:
                pass
        self._call(f"Creating container {container}", create)

    def blob_exists(self, container: str, name: str) -> bool:
        blob = self.client.get_blob_client(container, name)
        return bool(self._call(f"Checking {container}/{name}", blob.exists))

    def upload_file(self, container: str, name: str, path: Path) -> str:
        """Upload `path` as `<container>/<name>` (replacing an existing blob, with a warning)."""
        from azure.storage.blob import ContentSettings
        blob = self.client.get_blob_client(container, name)
        url = blob_url(container, name, self.account_url)
        if self._call(f"Checking {url}", blob.exists):
            log.warning("Warning: replacing existing blob!")
        md5 = _file_md5(path)
        log.info("Uploading %s -> %s", path, url)

        def upload() -> None:
            with path.open("rb") as handle:
                blob.upload_blob(handle, overwrite=True, max_concurrency=4, length=path.stat().st_size,
                                 content_settings=ContentSettings(content_md5=bytearray(md5)))
        self._call(f"Uploading {path.name}", upload)
        return url

    def upload_bytes(self, container: str, name: str, data: bytes) -> str:
        blob = self.client.get_blob_client(container, name)
        self._call(f"Uploading {name}", lambda: blob.upload_blob(data, overwrite=True))
        return blob_url(container, name, self.account_url)


def _sdk_reason(exc: Exception) -> str:
    code = getattr(exc, "error_code", None)
    reason = getattr(exc, "reason", None)
    text = " ".join(str(p) for p in (reason, code) if p)
    if not text:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return redact(text[:200])


def upload_file(container: str, name: str, path: Path, credentials: StorageCredentials,
                account_url: Optional[str] = None) -> str:
    return StorageWriter(credentials, account_url).upload_file(container, name, path)


__all__ = [
    "DEFAULT_ACCOUNT_URL", "COLLECTIONS_CONTAINER", "ROLLING_BUILD_CONTAINER", "TEMP_DIR_PREFIX",
    "StorageError", "BlobNotFound", "AccessDenied", "DownloadError", "UnsafeArchive", "NotAZip",
    "register_secret", "redact", "RedactingFilter", "install_log_redaction",
    "parse_connection_string", "connection_string_endpoint", "resolve_account_url", "add_storage_url_option",
    "account_name_from_url", "blob_url", "listing_url", "parse_listing_page", "list_blobs", "BlobInfo",
    "head_blob", "blob_exists", "RetryPolicy", "default_retry_policy", "DownloadItem", "download_files", "download_file",
    "unsafe_archive_path_reason", "unsafe_zip_entry_reason", "extract_zip", "directory_lock", "StorageCredentials", "add_credential_options",
    "StorageWriter", "upload_file", "new_session",
]
