"""Azure Blob Storage basics (docs/contracts.md §11): the account URL, blob and listing
URLs, anonymous listing (every page, within the limits of §12.21), HEAD, retries with
backoff, the redirect policy, and the error kinds.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import socket
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple, Type

from spmi.base import platforms
from spmi.base.errors import SuiteError

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    pass
from spmi.base.redaction import redact
from spmi.base.untrusted import clip, one_line

log = logging.getLogger("superpmi")
DEFAULT_ACCOUNT_URL = "https://clrjit2.blob.core.windows.net"
STORAGE_URL_ENV = "SUPERPMI_STORAGE_URL"
CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"
DEVELOPMENT_STORAGE_URL = "http://127.0.0.1:10000/devstoreaccount1"
COLLECTIONS_CONTAINER = "superpmi"
ROLLING_BUILD_CONTAINER = "jitrollingbuild"
TEMP_DIR_PREFIX = ".spmi-tmp"
PART_SUFFIX = ".part"
PART_META_SUFFIX = ".part.json"
X_MS_VERSION = "2020-10-02"


class StorageError(SuiteError):
    """A storage operation failed; the message is already free of secrets."""


class StorageUnreachable(StorageError):
    """Storage could not be reached at all (no network, DNS failure, connection refused)."""


class BlobNotFound(StorageError):
    """HTTP 404: the blob (or container) is not there."""


class AccessDenied(StorageError):
    """HTTP 403 or an authentication failure."""


class DownloadError(StorageError):
    """A download could not be completed or verified."""


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


def blob_url(container: str, name: str, account_url: Optional[str] = None) -> str:
    """`<account>/<container>/<url-encoded name>` (slashes kept).

    A name the HTTP client would rewrite (a `.` or `..` segment) is refused here, before
    any request (docs/contracts.md §12.21)."""
    reason = url_rewriting_reason(name)
    if reason:
        raise StorageError(f"refusing blob name {one_line(repr(name))} in container {container}: it has {reason}, "
                           "which would fetch another blob; check the listing or the name given")
    base = resolve_account_url(None) if account_url is None else account_url.rstrip("/")
    return f"{base}/{container}/{urllib.parse.quote(name, safe='/')}"


def url_rewriting_reason(name: str) -> Optional[str]:
    """Why a blob name would not reach the server as itself (None when it would)."""
    segments = name.replace("\\", "/").split("/")
    if any(segment == ".." for segment in segments):
        return "a '..' component"
    if any(segment == "." for segment in segments):
        return "a '.' component"
    return None


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


DEFAULT_TIMEOUT = (15.0, 60.0)


class _Transient(Exception):
    """A failure worth retrying (connection trouble, 5xx, a short body)."""


def _transient_exceptions() -> Tuple[Type[BaseException], ...]:
    import requests
    import urllib3.exceptions
    return (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError, urllib3.exceptions.HTTPError, ConnectionError,
            TimeoutError)


def _is_transient_status(status: int) -> bool:
    return status >= 500 or status in (408, 429)


SMALL_BODY_DEADLINE = 120.0  # seconds for a whole listing page (docs/contracts.md §12.21)
MAX_SMALL_BODY_BYTES = 64 * 1024 * 1024


class BlobTimeout(StorageError):
    """A small answer did not arrive within the time it was given (`time_limit`)."""


class ReadsStopped(StorageError):
    """The reads were stopped (`OpenResponses.shut_down_all`, on Ctrl-C or SIGTERM)."""


def shut_down_response(response: Any) -> None:
    """Shut down the socket under a `requests` response, from any thread: a read blocked on it
    returns at once (both directions, which also wakes a reader on Windows)."""
    raw: Any = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "_connection", None), "sock", None)  # urllib3 2.x
    if sock is None:  # urllib3 1.x: the http.client response's socket
        sock = getattr(getattr(getattr(getattr(raw, "_fp", None), "fp", None), "raw", None), "_sock", None)
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        elif getattr(raw, "shutdown", None) is not None:
            raw.shutdown()
    except (OSError, ValueError, RuntimeError):
        pass


class OpenResponses:
    """The small answers other threads are reading; `shut_down_all` (on Ctrl-C) makes those reads
    return at once and every later request of theirs fail with `ReadsStopped`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._responses: Dict[int, Any] = {}
        self.stopped = False

    @contextmanager
    def reading(self, response: Any) -> Iterator[None]:
        with self._lock:
            self._responses[id(response)] = response
            stopped = self.stopped
        if stopped:
            shut_down_response(response)
        try:
            yield
        finally:
            with self._lock:
                self._responses.pop(id(response), None)

    def check(self, url: str) -> None:
        if self.stopped:
            raise ReadsStopped(f"stopped before reading {redact(url)}")

    def shut_down_all(self) -> None:
        with self._lock:
            self.stopped = True
            responses = list(self._responses.values())
        for response in responses:
            shut_down_response(response)


def _request_with_retries(session, method: str, url: str, retry: RetryPolicy, what: str,  # type: ignore[no-untyped-def]
                          body_deadline: float = SMALL_BODY_DEADLINE, max_body_bytes: int = MAX_SMALL_BODY_BYTES,
                          time_limit: Optional[float] = None, watched: Optional[OpenResponses] = None,
                          **kwargs: Any) -> Tuple[Any, bytes]:
    """One small request, retried on transient failures; the final response and its body,
    read within `body_deadline` seconds (a slower body is a failed attempt) and at most
    `max_body_bytes` long. With `time_limit`, every attempt and wait fits in that many seconds
    from now, else `BlobTimeout`; with `watched`, another thread can stop it (`ReadsStopped`)."""
    give_up_at = None if time_limit is None else time.monotonic() + time_limit
    watch = watched or OpenResponses()
    failures = 0
    problem = ""
    while True:
        watch.check(url)
        remaining = _remaining(give_up_at)
        if remaining is not None and remaining <= 0:
            raise _timed_out(what, url, time_limit, problem)
        unreachable = False
        try:
            with refused_redirects(url):
                response = session.request(method, url, timeout=_timeouts(remaining), stream=True, **kwargs)
            with response, watch.reading(response):
                if not _is_transient_status(response.status_code):
                    deadline = body_deadline if remaining is None else min(body_deadline, remaining)
                    return response, _read_small_body(response, url, deadline, max_body_bytes,
                                                      has_body=method != "HEAD")
            problem = f"HTTP {response.status_code} {response.reason}"
        except _SlowSmallBody as exc:
            problem = str(exc)
        except _transient_exceptions() as exc:
            watch.check(url)
            problem = _describe_exception(exc)
            unreachable = _is_connection_failure(exc)
            if never_connected(exc):
                raise StorageUnreachable(f"{what} failed: storage cannot be reached ({problem}): {redact(url)}; "
                                         "check the network and -storage_url") from None
        failures += 1
        if failures >= retry.attempts:
            kind = StorageUnreachable if unreachable else StorageError
            raise kind(f"{what} failed after {failures} attempts ({problem}): {redact(url)}; "
                       "check the network and -storage_url")
        remaining = _remaining(give_up_at)
        if remaining is not None and remaining <= retry.delay(failures):
            raise _timed_out(what, url, time_limit, problem)
        log.debug("%s: %s; retrying (%d/%d)", what, problem, failures, retry.attempts)
        time.sleep(retry.delay(failures))


def _remaining(give_up_at: Optional[float]) -> Optional[float]:
    return None if give_up_at is None else give_up_at - time.monotonic()


def _timeouts(remaining: Optional[float]) -> Tuple[float, float]:
    """The connect and per-read timeouts, no longer than the time left."""
    if remaining is None:
        return DEFAULT_TIMEOUT
    return (min(DEFAULT_TIMEOUT[0], remaining), min(DEFAULT_TIMEOUT[1], remaining))


def _timed_out(what: str, url: str, time_limit: Optional[float], problem: str) -> BlobTimeout:
    return BlobTimeout(f"{what} did not finish within {time_limit or 0:g} s{f' ({problem})' if problem else ''}: "
                       f"{redact(url)}")


class _SlowSmallBody(Exception):
    """A small body that did not arrive within `SMALL_BODY_DEADLINE`."""


def _read_small_body(response, url: str, deadline: float,  # type: ignore[no-untyped-def]
                     max_bytes: int = MAX_SMALL_BODY_BYTES, has_body: bool = True) -> bytes:
    """The whole body, read as it arrives, within the deadline and the size limit: a body whose
    Content-Length says it is larger is refused unread (`has_body` False: a HEAD answer, whose
    length is the blob's), any other stops being read at the limit."""
    announced = response.headers.get("Content-Length", "")
    if has_body and announced.isdigit() and int(announced) > max_bytes:
        raise StorageError(f"{redact(url)} is {int(announced):,} bytes, more than the {max_bytes:,} allowed; "
                           "not read")
    started = time.monotonic()
    raw = response.raw
    read = getattr(raw, "read1", None) or raw.read
    pieces: List[bytes] = []
    size = 0
    while True:
        piece = read(64 * 1024, decode_content=False)
        if not piece:
            return b"".join(pieces)
        size += len(piece)
        if size > max_bytes:
            raise StorageError(f"{redact(url)} answered with more than {max_bytes:,} bytes; not read further")
        if time.monotonic() - started > deadline:
            raise _SlowSmallBody(f"the body took longer than {deadline:g} s")
        pieces.append(piece)


def never_connected(exc: BaseException) -> bool:
    """No connection was made at all: the host name does not resolve, or the connection was
    refused or has no route. Retrying that only delays the answer (an offline machine, a wrong
    -storage_url), so it is final at once; a connect *timeout*, a reset or a cut body is not.
    docs/contracts.md §12.21."""
    import urllib3.exceptions
    for cause in _causes(exc):
        if isinstance(cause, urllib3.exceptions.NewConnectionError):
            return True
        if isinstance(cause, (socket.gaierror, ConnectionRefusedError)):
            return True
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return True
    return False


def _is_connection_failure(exc: BaseException) -> bool:
    """No answer at all: connection refused, DNS failure, no route, connect timeout."""
    import requests
    return isinstance(exc, (requests.ConnectionError, ConnectionError))


# ---------------------------------------------------------------- redirects (docs/contracts.md §12.21)

MAX_REDIRECTS = 10


def new_session(pool_size: int = 16):  # type: ignore[no-untyped-def]
    """A `requests` session with a connection pool big enough for the download workers; it
    follows redirects only to the same scheme, host and port (`refused_redirect_reason`)."""
    import requests
    from requests.adapters import HTTPAdapter

    class _Session(requests.Session):
        def get_redirect_target(self, resp):  # type: ignore[no-untyped-def]
            target = super().get_redirect_target(resp)
            if target is not None:
                absolute = urllib.parse.urljoin(resp.url, target)
                reason = refused_redirect_reason(resp.url, absolute)
                if reason:
                    raise StorageError(f"{redact(resp.url)} redirects to {one_line(redact(absolute))}: {reason}; "
                                       "refusing to follow it (pass the final URL if you trust it)")
            return target

    session = _Session()
    session.max_redirects = MAX_REDIRECTS
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(4, pool_size), max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers.update({"x-ms-version": X_MS_VERSION, "Accept-Encoding": "identity"})
    return session


def refused_redirect_reason(source: str, target: str) -> Optional[str]:
    """Why a redirect from `source` to `target` is not followed (None when it is)."""
    before, after = urllib.parse.urlsplit(source), urllib.parse.urlsplit(target)
    if after.scheme.lower() not in ("http", "https"):
        return f"a {after.scheme or 'schemeless'} URL is not storage"
    if after.scheme.lower() != before.scheme.lower():
        return "another scheme"
    if (after.hostname, after.port) != (before.hostname, before.port):
        return "another host"
    return None


@contextmanager
def refused_redirects(url: str) -> Iterator[None]:
    """A redirect loop (more than `MAX_REDIRECTS`) as one line naming `url`."""
    import requests
    try:
        yield
    except requests.TooManyRedirects:
        raise StorageError(f"{redact(url)} redirects more than {MAX_REDIRECTS} times (a redirect loop); "
                           "check the URL and -storage_url") from None


def _describe_exception(exc: BaseException) -> str:
    """A short description: the innermost OS error (e.g. connection refused) when there is one."""
    root = _root_os_error(exc)
    if root is not None:
        return f"{type(root).__name__}: {root.strerror or root}"
    text = clip(str(exc) or type(exc).__name__, 200)
    return redact(f"{type(exc).__name__}: {text}")


def _root_os_error(exc: BaseException) -> Optional[OSError]:
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno is not None and cause.strerror:
            return cause
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps, outermost first (requests and urllib3 wrap the OS error in
    `reason`, the first argument, `__cause__` or `__context__`)."""
    seen: Set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        first_arg = current.args[0] if current.args and isinstance(current.args[0], BaseException) else None
        current = (reason if isinstance(reason, BaseException) else None) or current.__cause__ \
            or current.__context__ or first_arg


MAX_LISTING_PAGES = 1000  # 5 million names at 5000 a page (docs/contracts.md §12.21)


def list_blobs(container: str, prefix: str = "", account_url: Optional[str] = None,
               max_results: Optional[int] = None, session=None,  # type: ignore[no-untyped-def]
               retry: Optional[RetryPolicy] = None, max_pages: int = MAX_LISTING_PAGES,
               page_deadline: float = SMALL_BODY_DEADLINE) -> List[str]:
    """Every blob name under `prefix`, following `NextMarker` to the end (§11.2).

    A marker that comes back a second time, or more than `max_pages` pages, ends the
    listing with an error (docs/contracts.md §12.21): a listing that never ends is broken."""
    account_url = resolve_account_url(None) if account_url is None else account_url.rstrip("/")
    session = session or new_session()
    retry = retry or default_retry_policy()
    names: List[str] = []
    marker: Optional[str] = None
    seen_markers: Set[str] = set()
    for page_number in range(1, max_pages + 1):
        url = listing_url(account_url, container, prefix, marker, max_results)
        response, body = _request_with_retries(session, "GET", url, retry, "Listing", page_deadline)
        if response.status_code != 200:
            raise StorageError(f"listing {redact(url)} failed: HTTP {response.status_code} {response.reason}"
                               f"{_error_code_suffix(response)}; check -storage_url and the container name")
        try:
            page, marker = parse_listing_page(body)
        except SyntaxError as exc:  # xml.etree.ElementTree.ParseError
            raise StorageError(f"listing {redact(url)} returned unreadable XML ({exc})") from exc
        names.extend(page)
        log.debug("Listed %d blobs from %s", len(page), redact(url))
        if marker is None:
            return names
        if marker in seen_markers:
            raise StorageError(f"listing {redact(url)} never ends: page {page_number} gives the marker "
                               f"{one_line(repr(marker))} a second time; check -storage_url (the server is not "
                               "Azure Blob Storage or is broken)")
        seen_markers.add(marker)
    raise StorageError(f"listing {redact(listing_url(account_url, container, prefix))} did not end within "
                       f"{max_pages} pages; check -storage_url (the server is not Azure Blob Storage or is broken)")


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
    response, _ = _request_with_retries(session, "HEAD", url, retry, "Reading blob properties")
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


def read_small_blob(url: str, max_bytes: int, session=None,  # type: ignore[no-untyped-def]
                    retry: Optional[RetryPolicy] = None, time_limit: Optional[float] = None,
                    watched: Optional[OpenResponses] = None) -> bytes:
    """The whole body of a small blob (a record, a manifest). One larger than `max_bytes` is refused:
    unread when its Content-Length says so, else read no further than the limit. With `time_limit`
    it must arrive within that many seconds, retries included (else `BlobTimeout`); `watched` lets
    another thread stop the read at once."""
    session = session or new_session()
    retry = retry or default_retry_policy()
    response, body = _request_with_retries(session, "GET", url, retry, "Reading a blob",
                                           max_body_bytes=max_bytes, time_limit=time_limit, watched=watched)
    _raise_for_final_status(response.status_code, response.reason, url)
    return body
