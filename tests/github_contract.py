"""GitHub's published REST contract on loopback, for the PR bot's tests (docs/contracts.md §15).

`cut_description` takes the operations the bot uses out of `@octokit/openapi`'s
`api.github.com.deref.json` (refs already resolved), so Prism loads them in seconds.
`FakeGitHub` is a small stateful server (permissions, PRs, comments, reactions, dispatches) whose
answers start from the description's own examples. `start_prism` runs Prism as a validating proxy
in front of it on a free 127.0.0.1 port: every request the bot makes and every answer the fake
gives is checked against the description, and each `Violation:` line Prism logs is collected.
"""
from __future__ import annotations

import copy
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
OPENAPI = REPO_ROOT / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.deref.json"
WEBHOOK_EXAMPLES = REPO_ROOT / "node_modules" / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"
PRISM = REPO_ROOT / "node_modules" / ".bin" / "prism"

#: the operations the bot calls (docs/contracts.md §15)
OPERATIONS: Dict[str, Tuple[str, ...]] = {
    "/repos/{owner}/{repo}/collaborators/{username}/permission": ("get",),
    "/repos/{owner}/{repo}/pulls/{pull_number}": ("get",),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": ("post",),
    "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches": ("post",),
    "/repos/{owner}/{repo}/issues/{issue_number}/comments": ("get", "post"),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": ("patch",),
}


class ContractToolsMissing(RuntimeError):
    pass


def require_node_tools() -> None:
    for path in (OPENAPI, WEBHOOK_EXAMPLES, PRISM):
        if not path.exists():
            raise ContractToolsMissing(f"{path} is missing; run `npm ci` in {REPO_ROOT} (needs Node.js)")


def cut_description(out: Path) -> Dict[str, Any]:
    """The bot's operations of GitHub's description, written to `out`; returns the cut description."""
    whole = json.loads(OPENAPI.read_text(encoding="utf-8"))
    cut = {key: whole[key] for key in ("openapi", "info", "servers") if key in whole}
    cut["paths"] = {path: {method: whole["paths"][path][method] for method in methods}
                    for path, methods in OPERATIONS.items()}
    out.write_text(json.dumps(cut), encoding="utf-8")
    return cut


def example(description: Dict[str, Any], path: str, method: str, status: str) -> Any:
    """The first example answer the description gives for an operation."""
    content = description["paths"][path][method]["responses"][status]["content"]["application/json"]
    examples = content.get("examples") or {}
    first = next(iter(examples.values()))
    return copy.deepcopy(first["value"])


def webhook_example(name: str, action: str) -> Dict[str, Any]:
    """A payload of `@octokit/webhooks-examples` for event `name` with `action`."""
    for event in json.loads(WEBHOOK_EXAMPLES.read_text(encoding="utf-8")):
        if event["name"] == name:
            for payload in event["examples"]:
                if payload.get("action") == action:
                    return copy.deepcopy(payload)
    raise KeyError(f"no {name}/{action} example")


# ---------------------------------------------------------------- the stateful fake

@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: Dict[str, str]
    body: Any


@dataclass
class FakeState:
    permissions: Dict[str, str] = field(default_factory=dict)  # login -> admin/write/read (absent: 404)
    pulls: Dict[int, Dict[str, Any]] = field(default_factory=dict)  # number -> {"sha", "state"}
    comments: Dict[int, List[Dict[str, Any]]] = field(default_factory=dict)  # issue -> comments
    requests: List[Recorded] = field(default_factory=list)
    page_size: int = 100
    #: answers given before the real one: (method, path suffix) -> [(status, headers)]
    throttles: Dict[Tuple[str, str], List[Tuple[int, Dict[str, str]]]] = field(default_factory=dict)
    next_id: int = 9000


class FakeGitHub:
    """A loopback GitHub holding what the bot reads and writes; its answers are the description's
    examples with the state's values filled in."""

    def __init__(self, description: Dict[str, Any]) -> None:
        self.description = description
        self.state = FakeState()
        self.public_url = ""  # Prism's URL, for Link headers
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                parts = urllib.parse.urlsplit(self.path)
                fake.state.requests.append(Recorded(self.command, parts.path, parts.query,
                                                    {k.lower(): v for k, v in self.headers.items()}, body))
                status, headers, data = fake.answer(self.command, parts.path, urllib.parse.parse_qs(parts.query), body)
                payload = b"" if data is None else json.dumps(data).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if data is not None:
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> FakeState:
        self.state = FakeState()
        return self.state

    # -------------------------------------------------------- answers

    def answer(self, method: str, path: str, query: Dict[str, List[str]], body: Any) -> Tuple[int, Dict[str, str], Any]:
        for (throttled_method, suffix), queue in self.state.throttles.items():
            if method == throttled_method and path.endswith(suffix) and queue:
                status, headers = queue.pop(0)
                return status, headers, {"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com"}
        parts = path.strip("/").split("/")
        if len(parts) < 4 or parts[0] != "repos":
            return 404, {}, {"message": "Not Found"}
        owner, repo, rest = parts[1], parts[2], parts[3:]
        if rest[:1] == ["collaborators"] and len(rest) == 3:
            return self._permission(rest[1])
        if rest[:1] == ["pulls"] and len(rest) == 2:
            return self._pull(owner, repo, int(rest[1]))
        if rest[:2] == ["issues", "comments"] and len(rest) == 4 and rest[3] == "reactions":
            return self._reaction(int(rest[2]), body)
        if rest[:2] == ["actions", "workflows"] and len(rest) == 4:
            return 204, {}, None
        if rest[:1] == ["issues"] and len(rest) == 3 and rest[2] == "comments":
            number = int(rest[1])
            if method == "GET":
                return self._list_comments(owner, repo, number, query)
            return self._create_comment(number, body)
        if rest[:2] == ["issues", "comments"] and len(rest) == 3 and method == "PATCH":
            return self._edit_comment(int(rest[2]), body)
        return 404, {}, {"message": "Not Found"}

    def _permission(self, login: str) -> Tuple[int, Dict[str, str], Any]:
        permission = self.state.permissions.get(login)
        if permission is None:
            return 404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com"}
        data = example(self.description, "/repos/{owner}/{repo}/collaborators/{username}/permission", "get", "200")
        data["permission"] = "write" if permission == "maintain" else ("read" if permission == "triage" else permission)
        data["role_name"] = permission
        data["user"]["login"] = login
        data["user"].setdefault("role_name", permission)
        return 200, {}, data

    def _pull(self, owner: str, repo: str, number: int) -> Tuple[int, Dict[str, str], Any]:
        pull = self.state.pulls.get(number)
        if pull is None:
            return 404, {}, {"message": "Not Found", "documentation_url": "https://docs.github.com"}
        data = example(self.description, "/repos/{owner}/{repo}/pulls/{pull_number}", "get", "200")
        data["number"], data["state"] = number, pull["state"]
        data["head"]["sha"] = pull["sha"]
        data["requested_teams"] = []  # the example's team lacks the `type` its own schema requires
        return 200, {}, data

    def _reaction(self, comment_id: int, body: Any) -> Tuple[int, Dict[str, str], Any]:
        data = example(self.description, "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "post", "201")
        data["content"] = body.get("content") if isinstance(body, dict) else None
        return 201, {}, data

    def _comment_json(self, number: int, item: Dict[str, Any]) -> Dict[str, Any]:
        data = example(self.description, "/repos/{owner}/{repo}/issues/comments/{comment_id}", "patch", "200")
        data["id"], data["body"] = item["id"], item["body"]
        data["user"]["login"] = item["login"]
        data["user"]["type"] = "Bot" if item["login"].endswith("[bot]") else "User"
        return data

    def _list_comments(self, owner: str, repo: str, number: int, query: Dict[str, List[str]]) -> Tuple[int, Dict[str, str], Any]:
        items = self.state.comments.get(number, [])
        page = int((query.get("page") or ["1"])[0])
        size = self.state.page_size
        chunk = items[(page - 1) * size: page * size]
        headers = {}
        if page * size < len(items):
            headers["Link"] = (f'<{self.public_url}/repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page={page + 1}>;'
                               ' rel="next"')
        return 200, headers, [self._comment_json(number, c) for c in chunk]

    def _create_comment(self, number: int, body: Any) -> Tuple[int, Dict[str, str], Any]:
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or len(text) > 65536:
            return 422, {}, {"message": "Body is too long (maximum is 65536 characters)",
                             "documentation_url": "https://docs.github.com"}
        self.state.next_id += 1
        item = {"id": self.state.next_id, "body": text, "login": "github-actions[bot]"}
        self.state.comments.setdefault(number, []).append(item)
        return 201, {"Location": f"{self.public_url}/repos/o/r/issues/comments/{item['id']}"}, \
            self._comment_json(number, item)

    def _edit_comment(self, comment_id: int, body: Any) -> Tuple[int, Dict[str, str], Any]:
        for number, items in self.state.comments.items():
            for item in items:
                if item["id"] == comment_id:
                    text = body.get("body") if isinstance(body, dict) else None
                    if not isinstance(text, str) or len(text) > 65536:
                        return 422, {}, {"message": "Body is too long", "documentation_url": "https://docs.github.com"}
                    item["body"] = text
                    return 200, {}, self._comment_json(number, item)
        return 404, {}, {"message": "Not Found"}

    # -------------------------------------------------------- what the bot did

    def calls(self, method: str, suffix: str) -> List[Recorded]:
        return [r for r in self.state.requests if r.method == method and re.search(suffix, r.path)]


# ---------------------------------------------------------------- Prism

@dataclass
class Prism:
    process: "subprocess.Popen[bytes]"
    url: str
    output: List[str]

    def mark(self) -> int:
        return len(self.output)

    def violations_since(self, mark: int, settle: float = 0.4, timeout: float = 5.0) -> List[str]:
        """`Violation:` lines logged after `mark`, once the log has been quiet for `settle` seconds."""
        deadline = time.monotonic() + timeout
        seen = len(self.output)
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if len(self.output) != seen:
                seen, quiet_since = len(self.output), time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                break
        return [line for line in self.output[mark:] if "Violation:" in line]

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_prism(description_file: Path, upstream: str, timeout: float = 60.0) -> Prism:
    """`prism proxy` on a free loopback port in front of `upstream`; waits until it listens."""
    require_node_tools()
    port = _free_port()
    argv = [str(PRISM), "proxy", str(description_file), upstream, "-h", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, env=dict(os.environ, NO_COLOR="1", FORCE_COLOR="0"))
    output: List[str] = []
    listening = threading.Event()

    def drain() -> None:
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            output.append(line)
            if "Prism is listening on" in line:
                listening.set()
        listening.set()

    threading.Thread(target=drain, name="prism-output", daemon=True).start()
    prism = Prism(process, f"http://127.0.0.1:{port}", output)
    if not listening.wait(timeout) or process.poll() is not None:
        prism.stop()
        raise RuntimeError(f"Prism did not start within {timeout:g} s: {' | '.join(output[-10:])}")
    return prism


@dataclass
class GitHubContract:
    """The session's Prism proxy and the fake behind it."""

    prism: Prism
    fake: FakeGitHub
    description: Dict[str, Any]
    extra: Optional[Dict[str, Any]] = None
