"""`superpmi_pr_bot.py command` against GitHub's published REST description (Prism on loopback,
docs/contracts.md §15), with `@octokit/webhooks-examples` issue_comment payloads changed per case."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from github_contract import GitHubContract, webhook_example

REPO = Path(__file__).resolve().parent.parent
TOKEN = "ghs_secretTokenValue0123456789abcdef"
HEAD_SHA = "5a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
PR = 17


@pytest.fixture
def github(github_contract: GitHubContract) -> GitHubContract:
    state = github_contract.fake.reset()
    state.permissions.update({"jit-dev": "write", "lead": "maintain", "owner": "admin", "reader": "read",
                              "triager": "triage"})
    state.pulls[PR] = {"sha": HEAD_SHA, "state": "open"}
    return github_contract


def comment_event(tmp_path: Path, body: str, login: str = "jit-dev", on_pr: bool = True,
                  action: str = "created") -> Path:
    event = webhook_example("issue_comment", "created")
    event["action"] = action
    event["comment"]["body"] = body
    event["comment"]["user"]["login"] = login
    event["comment"]["user"]["type"] = "User"
    event["comment"]["author_association"] = "OWNER"  # never trusted: the permission endpoint decides
    event["issue"]["number"] = PR
    if on_pr:
        event["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/Codertocat/Hello-World/pulls/{PR}"}
    else:
        event["issue"].pop("pull_request", None)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    return path


def run_bot(github: GitHubContract, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GITHUB_API_URL=github.prism.url, GITHUB_TOKEN=TOKEN, PYTHONPATH=str(REPO))
    env.pop("GITHUB_EVENT_PATH", None)
    mark = github.prism.mark()
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_pr_bot.py"), *argv], env=env,
                          capture_output=True, text=True, timeout=120)
    violations = github.prism.violations_since(mark)
    assert not violations, "\n".join(violations)
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def command(github: GitHubContract, tmp_path: Path, body: str, **kwargs) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    return run_bot(github, "command", "-event", str(comment_event(tmp_path, body, **kwargs)))


def dispatches(github: GitHubContract) -> List[Dict]:
    return [r.body for r in github.fake.calls("POST", r"/actions/workflows/[^/]+/dispatches$")]


def replies(github: GitHubContract) -> List[str]:
    return [r.body["body"] for r in github.fake.calls("POST", rf"/issues/{PR}/comments$")]


def test_a_collaborators_command_checks_permission_reacts_and_dispatches_once(github, tmp_path) -> None:
    proc = command(github, tmp_path, "Looks good.\n/spmi asmdiffs -target linux-arm64\nthanks")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    requests = github.fake.state.requests
    assert [(r.method, r.path) for r in requests] == [
        ("GET", "/repos/Codertocat/Hello-World/collaborators/jit-dev/permission"),
        ("POST", "/repos/Codertocat/Hello-World/issues/comments/492700400/reactions"),
        ("GET", f"/repos/Codertocat/Hello-World/pulls/{PR}"),
        ("POST", "/repos/Codertocat/Hello-World/actions/workflows/superpmi-asmdiffs.yml/dispatches"),
    ]
    assert requests[1].body == {"content": "eyes"}
    assert dispatches(github) == [{"ref": "master", "inputs": {
        "type": "asmdiffs", "targets": "linux-arm64", "hosts": "x64", "include_noise": "false", "significance": "",
        "pr": str(PR), "head_sha": HEAD_SHA}}]
    for request in requests:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        assert request.headers["accept"] == "application/json"
    assert replies(github) == []


@pytest.mark.parametrize("login", ["lead", "owner"])
def test_maintain_and_admin_may_start_a_run_with_every_choice(github, tmp_path, login) -> None:
    body = "/spmi tpdiff -arch arm64 -target win-x86 -include_noise -significance instructions=0.01"
    proc = command(github, tmp_path, body, login=login)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [d["inputs"] for d in dispatches(github)] == [{
        "type": "tpdiff", "targets": "win-arm64,linux-arm64,osx-arm64,win-x86", "hosts": "x64,x86",
        "include_noise": "true", "significance": "instructions=0.01", "pr": str(PR), "head_sha": HEAD_SHA}]


def test_no_target_means_every_target(github, tmp_path) -> None:
    assert command(github, tmp_path, "/spmi memdiff").returncode == 0
    assert dispatches(github)[0]["inputs"]["targets"] == "win-x64,win-arm64,linux-x64,linux-arm64,osx-arm64,win-x86,linux-arm"


@pytest.mark.parametrize("login", ["reader", "triager", "stranger"])
def test_without_write_permission_one_short_reply_and_nothing_runs(github, tmp_path, login) -> None:
    proc = command(github, tmp_path, "/spmi asmdiffs -target linux-arm64", login=login)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dispatches(github) == []
    assert github.fake.calls("POST", "/reactions$") == []
    assert len(replies(github)) == 1 and "write access" in replies(github)[0]
    assert "/spmi" not in replies(github)[0]


HOSTILE = {
    "semicolon": "/spmi asmdiffs; rm -rf /",
    "substitution": "/spmi asmdiffs -target $(id)",
    "backticks": "/spmi asmdiffs -target `id`",
    "long line": "/spmi asmdiffs -target linux-arm64 " + "A" * 100_000,
    "nbsp": "/spmi asmdiffs\u00a0-target linux-arm64",
    "workflow command": "/spmi asmdiffs -target ::set-output",
    "unknown target": "/spmi asmdiffs -target linux-riscv64",
    "unknown type": "/spmi sizediffs",
    "two types": "/spmi asmdiffs tpdiff",
    "no type": "/spmi -target linux-arm64",
    "value missing": "/spmi asmdiffs -target",
    "bad significance": "/spmi tpdiff -significance instructions=1e400",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_command_from_a_collaborator_is_refused_with_the_help(github, tmp_path, case) -> None:
    proc = command(github, tmp_path, HOSTILE[case])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dispatches(github) == []
    [text] = replies(github)
    assert text.startswith("Not run: ") and "/spmi TYPE" in text
    for bad in ("rm -rf", "$(id)", "`id`", "AAAA", "::set-output", "riscv64", "sizediffs"):
        assert bad not in text
    assert "##vso[" not in proc.stdout + proc.stderr
    assert not any(line.lstrip().startswith("::") for line in (proc.stdout + proc.stderr).splitlines())


def test_a_hundred_kilobytes_of_text_with_nbsp_and_command_lines_starts_nothing(github, tmp_path) -> None:
    body = ("\u00a0::warning::x\n##vso[task.setvariable variable=a]b\n" + "text " * 20_000 +
            "\n\u00a0/spmi asmdiffs\n")
    proc = command(github, tmp_path, body)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert github.fake.state.requests == []  # no /spmi line (NBSP is not a space here): nothing is asked


def test_help_replies_with_the_grammar(github, tmp_path) -> None:
    assert command(github, tmp_path, "/spmi help").returncode == 0
    [text] = replies(github)
    assert "/spmi TYPE [-target NAME]" in text and "`linux-arm64`" in text and "`metricdiff`" in text
    assert dispatches(github) == []


@pytest.mark.parametrize("case", ["not a pr", "edited", "no command", "bot"])
def test_nothing_to_do_asks_github_nothing(github, tmp_path, case) -> None:
    kwargs: Dict[str, object] = {"not a pr": {"on_pr": False}, "edited": {"action": "edited"},
                                 "no command": {}, "bot": {"login": "some-app[bot]"}}[case]
    body = "please run /spmi asmdiffs" if case == "no command" else "/spmi asmdiffs -target linux-arm64"
    event = comment_event(tmp_path, body, **kwargs)  # type: ignore[arg-type]
    if case == "bot":
        data = json.loads(event.read_text())
        data["comment"]["user"]["type"] = "Bot"
        event.write_text(json.dumps(data))
    proc = run_bot(github, "command", "-event", str(event))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert github.fake.state.requests == []


def test_a_closed_pr_is_not_run(github, tmp_path) -> None:
    github.fake.state.pulls[PR]["state"] = "closed"
    assert command(github, tmp_path, "/spmi asmdiffs").returncode == 0
    assert dispatches(github) == [] and replies(github) == ["Not run: the pull request is not open."]


def test_a_rate_limited_reply_waits_for_the_reset_and_goes_through(github, tmp_path) -> None:
    github.fake.state.throttles[("POST", f"/issues/{PR}/comments")] = [
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"}), (403, {"Retry-After": "1"})]
    proc = command(github, tmp_path, "/spmi help")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(github.fake.calls("POST", f"/issues/{PR}/comments$")) == 3
    assert proc.stdout.count("GitHub rate limit") == 2


def test_a_rate_limit_too_far_away_is_one_line_and_exit_1(github, tmp_path) -> None:
    github.fake.state.throttles[("POST", f"/issues/{PR}/comments")] = [(403, {"Retry-After": "3600"})]
    proc = command(github, tmp_path, "/spmi help")
    assert proc.returncode == 1
    assert "GitHub rate limit" in proc.stdout and "run again later" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_errors_are_one_line_without_the_token(github, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_bot(github, "command", "-event", str(bad))
    assert proc.returncode == 1 and "is not a GitHub event: not valid JSON" in proc.stdout and "Traceback" not in proc.stderr
    env = dict(os.environ, GITHUB_API_URL="http://127.0.0.1:9", GITHUB_TOKEN=TOKEN, PYTHONPATH=str(REPO))
    event = comment_event(tmp_path, "/spmi help")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_pr_bot.py"), "command", "-event", str(event)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "cannot reach GitHub" in proc.stdout
    assert TOKEN not in proc.stdout + proc.stderr
    env.pop("GITHUB_TOKEN")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_pr_bot.py"), "command", "-event", str(event)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no GitHub token" in proc.stdout


def test_the_contract_check_sees_a_request_github_would_refuse(github) -> None:
    import requests
    mark = github.prism.mark()
    requests.post(f"{github.prism.url}/repos/o/r/actions/workflows/x.yml/dispatches",
                  json={"inputs": {"type": "asmdiffs"}}, headers={"Accept": "application/json"}, timeout=30)
    requests.get(f"{github.prism.url}/repos/o/r/issues/1/comments", params={"per_page": "many"},
                 headers={"Accept": "application/json"}, timeout=30)
    found = github.prism.violations_since(mark)
    assert any("Violation: request.body" in line and "'ref'" in line for line in found), found
    assert any("Violation: request.query.per_page" in line for line in found), found
