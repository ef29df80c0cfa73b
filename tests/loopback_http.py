"""A tiny loopback HTTP server that answers every path with the same body (HEAD, GET, ranges).

Used to serve URLs whose path a storage emulator would normalise away (e.g. `..%2F` segments).
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List


class _Handler(BaseHTTPRequestHandler):
    server: "LoopbackServer._Server"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def do_HEAD(self) -> None:
        self.server.requests.append(("HEAD", self.path))
        self._headers(200, 0, len(self.server.body) - 1)

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path))
        body = self.server.body
        start, end = 0, len(body) - 1
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            first, _, last = range_header[len("bytes="):].partition("-")
            start, end = int(first), min(int(last or end), end)
            self._headers(206, start, end)
        else:
            self._headers(200, start, end)
        self.wfile.write(body[start:end + 1])

    def _headers(self, status: int, start: int, end: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("ETag", '"fixed"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(self.server.body)}")
        self.end_headers()


class LoopbackServer:
    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        body: bytes = b""
        requests: List[tuple] = []

    def __init__(self, body: bytes) -> None:
        self.httpd = self._Server(("127.0.0.1", 0), _Handler)
        self.httpd.body = body
        self.httpd.requests = []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> List[tuple]:
        return self.httpd.requests

    def __enter__(self) -> "LoopbackServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
