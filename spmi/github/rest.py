"""A small GitHub REST client (docs/contracts.md §15): the headers GitHub's published description
accepts, answers capped in size, rate limits waited out (bounded), every failure one line.

The token is registered with `redaction` before the first request, so no log line or error can
carry it; answers are untrusted text (an error message is put on one line and cut short).
"""
from __future__ import annotations

import logging
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from spmi.base import redaction, schema, untrusted
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
#: the media type GitHub's published description declares (GitHub also answers it; docs/contracts.md §15)
ACCEPT = "application/json"
MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_PAGES = 50
#: rate-limited answers waited out at most this often, each wait at most this long
MAX_RATE_LIMIT_WAITS = 3
MAX_RATE_LIMIT_WAIT_SECONDS = 60.0
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
#: a whole answer's body arrives within this
ANSWER_DEADLINE_SECONDS = 120.0
_NEXT_LINK_RE = re.compile(r"<([^<>\s]+)>\s*;\s*rel=\"?next\"?")


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    data: Any


@dataclass
class GitHubClient:
    """REST calls under `api_url` with `token`; `sleep` waits out rate limits (tests pass their own clock)."""

    api_url: str
    token: str
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time
    _session: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.api_url = checked_api_url(self.api_url)
        if not self.token:
            raise SuiteError("no GitHub token: set GITHUB_TOKEN (the workflow passes secrets.GITHUB_TOKEN)")
        redaction.register_secret(self.token)

    def session(self) -> Any:
        if self._session is None:
            import requests
            self._session = requests.Session()
            self._session.headers.update({
                "Accept": ACCEPT, "X-GitHub-Api-Version": API_VERSION,
                "Authorization": f"Bearer {self.token}", "User-Agent": "superpmi-pr-bot"})
        return self._session

    def url(self, path: str) -> str:
        return self.api_url + path

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
             params: Optional[Dict[str, Any]] = None, ok: tuple = (200, 201, 204)) -> Answer:
        """One request (a rate-limited answer waited out and repeated); SuiteError unless its status is in `ok`."""
        return self.call_url(method, self.url(path), body, params, ok)

    def call_url(self, method: str, url: str, body: Optional[Dict[str, Any]] = None,
                 params: Optional[Dict[str, Any]] = None, ok: tuple = (200, 201, 204)) -> Answer:
        waits = 0
        while True:
            answer = self._send(method, url, body, params)
            delay = rate_limit_delay(answer.status, answer.headers, self.now())
            if delay is None or answer.status in ok:
                break
            if waits >= MAX_RATE_LIMIT_WAITS or delay > MAX_RATE_LIMIT_WAIT_SECONDS:
                raise SuiteError(f"GitHub rate limit on {method} {_shown(url)}: retry in {delay:.0f} s "
                                 f"(gave up after {waits} wait(s)); run again later")
            waits += 1
            log.info("GitHub rate limit on %s %s; waiting %.0f s", method, _shown(url), delay)
            self.sleep(delay)
        if answer.status not in ok:
            raise SuiteError(f"GitHub answered {answer.status} to {method} {_shown(url)}: {error_message(answer.data)}")
        return answer

    def _send(self, method: str, url: str, body: Optional[Dict[str, Any]], params: Optional[Dict[str, Any]]) -> Answer:
        import requests
        try:
            response = self.session().request(method, url, json=body, params=params, stream=True,
                                              timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), allow_redirects=False)
            with response:
                raw = _read_capped(response)
        except requests.RequestException as exc:
            raise SuiteError(f"cannot reach GitHub at {_shown(url)} ({type(exc).__name__}); "
                             "check GITHUB_API_URL and the network") from None
        return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, _decoded(raw))

    def pages(self, path: str, params: Optional[Dict[str, Any]] = None) -> Iterator[Any]:
        """Every item of a listed resource, following the `Link: rel="next"` pages (at most MAX_PAGES)."""
        url: Optional[str] = self.url(path)
        query: Optional[Dict[str, Any]] = dict(params or {}, per_page=100)
        for _ in range(MAX_PAGES):
            assert url is not None
            answer = self.call_url("GET", url, params=query, ok=(200,))
            if not isinstance(answer.data, list):
                raise SuiteError(f"GitHub's answer to GET {_shown(url)} is not a list")
            yield from answer.data
            url = next_page_url(answer.headers.get("link", ""), self.api_url)
            query = None
            if url is None:
                return
        raise SuiteError(f"GitHub listed more than {MAX_PAGES} pages at {_shown(self.url(path))}")


def checked_api_url(text: str) -> str:
    url = (text or DEFAULT_API_URL).strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise SuiteError(f"GITHUB_API_URL '{untrusted.console_line(text)}' is not an http(s) URL; "
                         f"use e.g. {DEFAULT_API_URL}")
    return url


def next_page_url(link_header: str, api_url: str) -> Optional[str]:
    """The `rel="next"` target of a `Link` header, only when it stays under `api_url`."""
    match = _NEXT_LINK_RE.search(link_header or "")
    if not match:
        return None
    target = match.group(1)
    if not target.startswith(api_url + "/"):
        raise SuiteError("GitHub's next-page link leaves GITHUB_API_URL; refused")
    return target


def rate_limit_delay(status: int, headers: Mapping[str, str], now: float) -> Optional[float]:
    """Seconds to wait before repeating a rate-limited answer (403/429), None when it is not one."""
    if status not in (403, 429):
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    retry_after = lowered.get("retry-after", "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if lowered.get("x-ratelimit-remaining", "").strip() == "0":
        reset = lowered.get("x-ratelimit-reset", "").strip()
        if reset.isdigit():
            return max(0.0, float(reset) - now) + 1.0
        return MAX_RATE_LIMIT_WAIT_SECONDS
    if status == 429:
        return MAX_RATE_LIMIT_WAIT_SECONDS
    return None


def error_message(data: Any) -> str:
    """GitHub's `message` (untrusted: one line, at most 200 characters)."""
    message = data.get("message") if isinstance(data, dict) else None
    text = untrusted.console_line(message if isinstance(message, str) else "no message")
    return text[:200]


def _read_capped(response: Any, deadline_seconds: float = ANSWER_DEADLINE_SECONDS) -> bytes:
    """The answer's body: at most MAX_ANSWER_BYTES, read within one deadline (a body that trickles
    in is refused, however short each wait between its pieces)."""
    chunks: List[bytes] = []
    size = 0
    deadline = time.monotonic() + deadline_seconds
    for chunk in response.iter_content(64 * 1024):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise SuiteError(f"GitHub's answer is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB; refused")
        if time.monotonic() > deadline:
            raise SuiteError(f"GitHub's answer took more than {deadline_seconds:g} s to arrive; refused")
        chunks.append(chunk)
    return b"".join(chunks)


def _decoded(raw: bytes) -> Any:
    """The answer's JSON value (bounded: no NaN, no huge number, no deep nesting), or None."""
    if not raw:
        return None
    try:
        return schema.parse_json(raw, MAX_ANSWER_BYTES)
    except schema.SchemaError:
        return None


def _shown(url: str) -> str:
    """The URL's path as messages show it (no query)."""
    return untrusted.console_line(urllib.parse.urlsplit(url).path)
