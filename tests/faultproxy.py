"""A loopback HTTP proxy in front of Azurite that can inject network faults.

Point a client at `proxy.account_url` instead of Azurite's; every request is forwarded
unchanged unless a rule matches. Rules (each fires `times` times, then passes):

* `fail_status(status)`  - answer with an HTTP error status instead of forwarding
* `reset_mid_body(after)` - send the headers and `after` body bytes, then reset the connection
* `short_body(missing)`  - keep Content-Length but send `missing` fewer bytes and close
* `wrong_md5()`          - replace the Content-MD5 response header with a wrong one
* `corrupt_body()`       - flip the bits of the first body byte (headers unchanged)
* `trickle(interval)`    - send the real headers, then the body one byte per `interval` seconds
* `fake_listing(names, marker)` - answer a listing with `names` and `NextMarker` = `marker`
                           ("" ends the listing; None: a new marker on every page), never forwarding it
* `redirect(location)`   - answer with HTTP 302 to `location` (`{path}` becomes the request's path)

`per_connection_bytes_per_second` and `latency_seconds` throttle every response (each
connection on its own, like a long-distance TCP stream) for benchmarks;
`total_bytes_per_second` shares one rate among all connections (a machine's link).

`requests` records (method, path, status, Range header) of everything seen, so tests can
count downloads and see where a resumed download started.
"""
from __future__ import annotations

import base64
import http.client
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional, Tuple
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Rule:
    kind: str
    times: int
    method: Optional[str] = "GET"
    path_contains: str = ""
    status: int = 500
    after: int = 0
    missing: int = 1
    interval: float = 0.5
    text: Optional[str] = None
    names: List[str] = field(default_factory=list)
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.fired < self.times and (self.method is None or self.method == method)
                and self.path_contains in path)


@dataclass
class FaultProxy:
    upstream: str  # e.g. http://127.0.0.1:41234 (Azurite's blob endpoint)
    account: str = "devstoreaccount1"
    rules: List[Rule] = field(default_factory=list)
    requests: List[Tuple[str, str, int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Optional[ThreadingHTTPServer] = None
    per_connection_bytes_per_second: Optional[float] = None
    latency_seconds: float = 0.0
    total_bytes_per_second: Optional[float] = None
    _link_free_at: float = 0.0  # when the shared link has sent everything handed to it so far

    def wait_for_link(self, count: int) -> None:
        """Block until the shared link (`total_bytes_per_second`) has carried `count` more bytes,
        after everything other connections handed it first."""
        if not self.total_bytes_per_second:
            return
        with self.lock:
            done_at = max(time.monotonic(), self._link_free_at) + count / self.total_bytes_per_second
            self._link_free_at = done_at
        time.sleep(max(0.0, done_at - time.monotonic()))

    # ------------------------------------------------------------ rules

    def add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def fail_status(self, status: int = 500, times: int = 1, method: Optional[str] = "GET",
                    path_contains: str = "") -> Rule:
        return self.add(Rule("status", times, method, path_contains, status=status))

    def reset_mid_body(self, after: int, times: int = 1, path_contains: str = "") -> Rule:
        return self.add(Rule("reset", times, "GET", path_contains, after=after))

    def short_body(self, missing: int = 1, times: int = 1, path_contains: str = "") -> Rule:
        return self.add(Rule("short", times, "GET", path_contains, missing=missing))

    def wrong_md5(self, times: int = 1000, method: Optional[str] = None, path_contains: str = "") -> Rule:
        return self.add(Rule("md5", times, method, path_contains))

    def corrupt_body(self, times: int = 1, path_contains: str = "") -> Rule:
        return self.add(Rule("corrupt", times, "GET", path_contains))

    def trickle(self, interval: float = 0.5, times: int = 1000, path_contains: str = "") -> Rule:
        return self.add(Rule("trickle", times, "GET", path_contains, interval=interval))

    def fake_listing(self, names: List[str], marker: Optional[str] = None, times: int = 1_000_000) -> Rule:
        return self.add(Rule("listing", times, "GET", "comp=list", text=marker, names=list(names)))

    def redirect(self, location: str, times: int = 1000, method: Optional[str] = None,
                 path_contains: str = "") -> Rule:
        return self.add(Rule("redirect", times, method, path_contains, text=location))

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.requests.clear()

    def take_rule(self, method: str, path: str) -> Optional[Rule]:
        with self.lock:
            for rule in self.rules:
                if rule.matches(method, path):
                    rule.fired += 1
                    return rule
        return None

    def record(self, method: str, path: str, status: int, range_header: str = "") -> None:
        with self.lock:
            self.requests.append((method, path, status, range_header))

    def count(self, method: str, path_contains: str = "") -> int:
        with self.lock:
            return sum(1 for m, p, _, _ in self.requests if m == method and path_contains in p)

    def ranges(self, path_contains: str = "") -> List[str]:
        """Range headers of the GETs for matching paths, in arrival order."""
        with self.lock:
            return [r for m, p, _, r in self.requests if m == "GET" and path_contains in p]

    # ------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    @property
    def account_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.account}"

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="faultproxy",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:
        self._forward()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def _forward(self) -> None:
        proxy = self.owner
        rule = proxy.take_rule(self.command, self.path)
        body = self._read_request_body()
        if rule is not None and rule.kind == "status":
            proxy.record(self.command, self.path, rule.status, self.headers.get("Range", ""))
            self._send_error_status(rule.status)
            return
        if rule is not None and rule.kind == "listing":
            proxy.record(self.command, self.path, 200)
            marker = rule.text if rule.text is not None else f"page{rule.fired}"
            blobs = "".join(f"<Blob><Name>{escape(name)}</Name></Blob>" for name in rule.names)
            self._send_body(200, "application/xml", (
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults>"
                f"<Blobs>{blobs}</Blobs><NextMarker>{escape(marker)}</NextMarker></EnumerationResults>").encode("utf-8"))
            return
        if rule is not None and rule.kind == "redirect":
            proxy.record(self.command, self.path, 302)
            self.send_response(302)
            self.send_header("Location", (rule.text or "").replace("{path}", self.path))
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return
        if proxy.latency_seconds:
            time.sleep(proxy.latency_seconds)
        upstream = urlsplit(proxy.upstream)
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
            headers["Host"] = upstream.netloc
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            proxy.record(self.command, self.path, response.status, self.headers.get("Range", ""))
            self._relay(response, rule)
        finally:
            conn.close()

    def _read_request_body(self) -> Optional[bytes]:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def _send_body(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def _send_error_status(self, status: int) -> None:
        payload = b"<?xml version=\"1.0\"?><Error><Code>InjectedFault</Code></Error>"
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(payload) if self.command != "HEAD" else 0))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.close_connection = True

    def _relay(self, response: http.client.HTTPResponse, rule: Optional[Rule]) -> None:
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() in _HOP_BY_HOP:
                continue
            if rule is not None and rule.kind == "md5" and key.lower() == "content-md5":
                value = base64.b64encode(b"\0" * 16).decode("ascii")
            self.send_header(key, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        length = int(response.getheader("Content-Length") or 0)
        limit = None
        if rule is not None and rule.kind == "reset":
            limit = min(rule.after, length)
        elif rule is not None and rule.kind == "short":
            limit = max(0, length - rule.missing)
        sent = 0
        started = time.monotonic()
        rate = self.owner.per_connection_bytes_per_second
        while True:
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            block = response.read(64 * 1024)
            if not block:
                break
            self.owner.wait_for_link(len(block))
            if limit is not None and sent + len(block) > limit:
                block = block[:limit - sent]
            if rule is not None and rule.kind == "corrupt" and sent == 0 and block:
                block = bytes([block[0] ^ 0xFF]) + block[1:]
            if block and rule is not None and rule.kind == "trickle":
                if not self._trickle(block, rule.interval):
                    return
                sent += len(block)
            elif block:
                self.wfile.write(block)
                sent += len(block)
            if limit is not None and sent >= limit:
                break
        self.wfile.flush()
        if rule is not None and rule.kind == "reset":
            time.sleep(0.3)  # let the client read what was sent; a reset discards unread data
            self._reset_connection()

    def _trickle(self, block: bytes, interval: float) -> bool:
        """One byte per `interval`; False once the client has gone."""
        for index in range(len(block)):
            try:
                self.wfile.write(block[index:index + 1])
                self.wfile.flush()
            except OSError:
                return False
            time.sleep(interval)
        return True

    def _reset_connection(self) -> None:
        """Close with SO_LINGER 0, so the client sees a TCP reset, not an orderly end."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass
