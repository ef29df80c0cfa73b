"""What `superpmi_pr_bot.py` does (docs/pr_bot.md): `handle_comment` answers an `issue_comment`
event (permission check, reaction, one `workflow_dispatch` with enumerated inputs, or one short
reply), `post_results` creates or edits the one comment per PR and diff type.

Everything in an event payload is untrusted; only values checked here reach a request.
"""
from __future__ import annotations

import logging
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spmi.base import fsutil, schema
from spmi.base.errors import SuiteError
from spmi.base.untrusted import console_line
from spmi.github import comment, grammar
from spmi.github.rest import GitHubClient

log = logging.getLogger("superpmi")

DIFFS_WORKFLOW = "superpmi-asmdiffs.yml"
DEFAULT_BOT_LOGIN = "github-actions[bot]"
#: GitHub delivers at most 25 MB of payload
MAX_EVENT_BYTES = 25 * 1024 * 1024
#: GitHub's own limit of a comment body; a longer one is not a comment GitHub wrote
MAX_BODY_CHARS = 65536
WRITE_PERMISSIONS = ("admin", "maintain", "write")
_REPOSITORY_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_BRANCH_RE = re.compile(r"^[A-Za-z0-9._/-]{1,200}$")
_RUN_URL_RE = re.compile(r"^https?://[A-Za-z0-9.:-]+/[A-Za-z0-9._~/%-]*$")
_DISPLAY_TITLE_RE = re.compile(r"^superpmi-asmdiffs: PR ([0-9]{1,9}) at ([0-9a-f]{40})$")

NOT_ALLOWED_REPLY = ("Only a collaborator with write access to this repository can start a SuperPMI run; "
                     "ask one to comment the command.")


def read_event(path: Path) -> Dict[str, Any]:
    """An event payload (`$GITHUB_EVENT_PATH`): a regular file of at most 25 MB, read as bounded JSON."""
    try:
        data = fsutil.read_small_regular_file(path, MAX_EVENT_BYTES)
    except fsutil.UnsuitableFile as exc:
        raise SuiteError(f"the event file {console_line(path)} is {exc}; not a GitHub event") from None
    except OSError as exc:
        raise SuiteError(f"cannot read the event file {console_line(path)} ({exc.strerror or exc}); "
                         "pass -event FILE or set GITHUB_EVENT_PATH") from None
    try:
        event = schema.parse_json(data, MAX_EVENT_BYTES)
    except schema.SchemaError as exc:
        raise SuiteError(f"the event file {console_line(path)} is not a GitHub event: {exc}; "
                         "pass the event payload") from None
    if not isinstance(event, dict):
        raise SuiteError(f"the event file {console_line(path)} is not a JSON object")
    return event


def _field(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def checked_repository(text: Any) -> str:
    if not isinstance(text, str) or not _REPOSITORY_RE.match(text) or ".." in text:
        raise SuiteError("the event names no repository as owner/name; pass an issue_comment event payload")
    return text


@dataclass(frozen=True)
class CommentEvent:
    """The checked facts of an `issue_comment` event the bot may act on."""

    repository: str
    default_branch: str
    pr_number: int
    comment_id: int
    login: str
    body: str


def comment_event(event: Dict[str, Any]) -> Optional[CommentEvent]:
    """The event's facts, or None (with a log line) when the bot has nothing to do with it."""
    if event.get("action") != "created":
        log.info("Not a new comment (action %s); nothing to do", console_line(event.get("action"))[:40])
        return None
    issue = event.get("issue")
    if not isinstance(issue, dict) or not isinstance(issue.get("pull_request"), dict):
        log.info("The comment is on an issue, not a pull request; nothing to do")
        return None
    login = _field(event, "comment", "user", "login")
    if _field(event, "comment", "user", "type") == "Bot" or not isinstance(login, str) or not _LOGIN_RE.match(login):
        log.info("The comment is not a user's; nothing to do")
        return None
    body = _field(event, "comment", "body")
    number: Any = issue.get("number")
    comment_id: Any = _field(event, "comment", "id")
    if not isinstance(body, str) or not _positive_int(number) or not _positive_int(comment_id):
        raise SuiteError("the event has no comment body, issue number or comment id; pass an issue_comment payload")
    branch = _field(event, "repository", "default_branch")
    if not isinstance(branch, str) or not _BRANCH_RE.match(branch) or ".." in branch:
        raise SuiteError("the event names no default branch of the repository")
    return CommentEvent(checked_repository(_field(event, "repository", "full_name")), branch, number, comment_id,
                        login, body)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2 ** 53


def _repo_path(repository: str) -> str:
    owner, name = repository.split("/")
    return f"/repos/{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"


def has_write_permission(client: GitHubClient, repository: str, login: str) -> bool:
    """The collaborator-permission endpoint says admin, maintain or write (404: not a collaborator)."""
    answer = client.call("GET", f"{_repo_path(repository)}/collaborators/{urllib.parse.quote(login, safe='')}"
                                "/permission", ok=(200, 404))
    if answer.status == 404:
        return False
    permission, role = _field(answer.data, "permission"), _field(answer.data, "role_name")
    return permission in WRITE_PERMISSIONS or role in WRITE_PERMISSIONS


def reply(client: GitHubClient, repository: str, number: int, body: str) -> None:
    client.call("POST", f"{_repo_path(repository)}/issues/{number}/comments", body={"body": body}, ok=(201,))


def handle_comment(client: GitHubClient, event: Dict[str, Any], workflow: str = DIFFS_WORKFLOW) -> int:
    """Answer one `issue_comment` event; 0 unless a request to GitHub failed."""
    facts = comment_event(event)
    if facts is None:
        return 0
    rest = grammar.find_command_line(facts.body[:MAX_BODY_CHARS])
    if rest is None:
        log.info("No /spmi command in the comment; nothing to do")
        return 0
    if not has_write_permission(client, facts.repository, facts.login):
        log.info("%s has no write access; replying, nothing runs", facts.login)
        reply(client, facts.repository, facts.pr_number, NOT_ALLOWED_REPLY)
        return 0
    client.call("POST", f"{_repo_path(facts.repository)}/issues/comments/{facts.comment_id}/reactions",
                body={"content": "eyes"}, ok=(200, 201))
    parsed = grammar.parse_command(rest) if len(facts.body) <= MAX_BODY_CHARS else \
        grammar.Refused("the comment is longer than GitHub allows")
    if isinstance(parsed, grammar.Help):
        reply(client, facts.repository, facts.pr_number, "SuperPMI commands:\n\n" + grammar.help_text())
        return 0
    if isinstance(parsed, grammar.Refused):
        log.info("Command refused: %s", parsed.reason)
        reply(client, facts.repository, facts.pr_number,
              f"Not run: {parsed.reason}. The commands are:\n\n" + grammar.help_text())
        return 0
    return dispatch(client, facts, parsed, workflow)


def dispatch(client: GitHubClient, facts: CommentEvent, request: grammar.RunRequest, workflow: str) -> int:
    pull = client.call("GET", f"{_repo_path(facts.repository)}/pulls/{facts.pr_number}", ok=(200,)).data
    head_sha = comment.checked_sha(str(_field(pull, "head", "sha") or ""), "the PR's head.sha")
    if _field(pull, "state") != "open":
        reply(client, facts.repository, facts.pr_number, "Not run: the pull request is not open.")
        return 0
    inputs = grammar.dispatch_inputs(request, facts.pr_number, head_sha)
    client.call("POST", f"{_repo_path(facts.repository)}/actions/workflows/{urllib.parse.quote(workflow, safe='')}"
                        "/dispatches", body={"ref": facts.default_branch, "inputs": inputs}, ok=(204,))
    log.info("Dispatched %s for PR %d at %s: %s", workflow, facts.pr_number, head_sha, grammar.describe(request))
    return 0


# ---------------------------------------------------------------- post

@dataclass(frozen=True)
class PostTarget:
    repository: str
    pr_number: int
    head_sha: Optional[str]
    run_url: Optional[str]


def checked_run_url(text: Optional[str]) -> Optional[str]:
    if text is None:
        return None
    if not _RUN_URL_RE.match(text) or len(text) > 500:
        raise SuiteError(f"-run_url '{console_line(text)[:80]}' is not a plain http(s) URL")
    return text


def target_from_workflow_run(event: Dict[str, Any]) -> Optional[PostTarget]:
    """The PR a completed diffs run belongs to: GitHub's own `pull_requests[]` for a `pull_request`
    run, the run name the default branch's workflow gave a `workflow_dispatch` run; None otherwise
    (a fork's PR, a scheduled run)."""
    run = event.get("workflow_run")
    if not isinstance(run, dict):
        raise SuiteError("the event has no workflow_run; pass a workflow_run payload")
    repository = checked_repository(_field(event, "repository", "full_name"))
    run_url = run.get("html_url") if isinstance(run.get("html_url"), str) else None
    if run.get("event") == "workflow_dispatch":
        match = _DISPLAY_TITLE_RE.match(str(run.get("display_title") or ""))
        if match:
            return PostTarget(repository, int(match.group(1)), match.group(2), checked_run_url(run_url))
    elif run.get("event") == "pull_request":
        pulls = run.get("pull_requests")
        if isinstance(pulls, list) and pulls and _positive_int(_field(pulls[0], "number")):
            sha = comment.checked_sha(str(run.get("head_sha") or ""), "workflow_run.head_sha")
            return PostTarget(repository, pulls[0]["number"], sha, checked_run_url(run_url))
    log.info("The run belongs to no pull request this bot can name (event %s); nothing to post",
             console_line(run.get("event"))[:40])
    return None


def post_results(client: GitHubClient, target: PostTarget, summary_files: Sequence[Path],
                 bot_login: str = DEFAULT_BOT_LOGIN) -> int:
    """One comment per diff type of `summary_files`: the bot's earlier one edited, else a new one."""
    groups = comment.read_summaries(summary_files)
    if not groups:
        raise SuiteError("-summaries: no summary files given")
    path = _repo_path(target.repository)
    pull = client.call("GET", f"{path}/pulls/{target.pr_number}", ok=(200,)).data
    pr_head = comment.checked_sha(str(_field(pull, "head", "sha") or ""), "the PR's head.sha")
    facts = comment.CommentFacts(target.head_sha or pr_head, target.run_url, pr_head)
    existing = _bot_comments(client, path, target.pr_number, bot_login)
    for group in groups:
        body = comment.render_comment(group, facts)
        found = next((c for c in existing if comment.is_bot_comment(c[1], group.type_name)), None)
        if found is None:
            client.call("POST", f"{path}/issues/{target.pr_number}/comments", body={"body": body}, ok=(201,))
            log.info("Created the %s comment on PR %d (%d characters)", group.type_name, target.pr_number, len(body))
        else:
            client.call("PATCH", f"{path}/issues/comments/{found[0]}", body={"body": body}, ok=(200,))
            log.info("Edited the %s comment on PR %d (%d characters)", group.type_name, target.pr_number, len(body))
    return 0


def _bot_comments(client: GitHubClient, path: str, number: int, bot_login: str) -> List["tuple[int, str]"]:
    """(id, body) of the PR's comments written by the bot (a marker in someone else's comment is ignored)."""
    found = []
    for item in client.pages(f"{path}/issues/{number}/comments"):
        if _field(item, "user", "login") == bot_login and _positive_int(_field(item, "id")) \
                and isinstance(_field(item, "body"), str):
            found.append((item["id"], item["body"]))
    return found
