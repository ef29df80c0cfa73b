"""The git queries the suite needs (docs/contracts.md §12.8, §12.14).

Every call goes through `runner.run` with an argument vector. A failure is a
`SuiteError` naming the git command and the repository, with a hint about
what to do (not a git checkout, git not installed, no `*/main` remote branch).
The output parsers are pure functions so they can be tested on their own.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence, Union

from spmi.base import errors, runner
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

PathLike = Union[str, "os.PathLike[str]"]

MAIN_BRANCH_PATTERN = "*/main"
JIT_SOURCE_PATHSPEC = "src/coreclr/jit/*"
JITEE_GUID_PATHSPEC = "src/coreclr/inc/jiteeversionguid.h"
DEFAULT_CANDIDATE_COUNT = 20
DEFAULT_FETCH_DEPTH = 500

# Plain English messages whatever the user's locale; never wait for a password.
_GIT_ENV = {"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"}


# ---------------------------------------------------------------- parsing (pure)

def parse_newest_main(branch_listing: str) -> Optional[str]:
    """The commit of the first line of `git branch -r --sort=-committerdate -v --list "*/main"`.

    Lines look like `  origin/main 1a2b3c4d5 Subject`; the hash is the second
    whitespace-separated token. None when there is no such branch.
    """
    for line in branch_listing.splitlines():
        tokens = line.split()
        if len(tokens) >= 2 and not tokens[0].endswith("HEAD"):
            return tokens[1]
    return None


def parse_hash_list(text: str) -> List[str]:
    """One commit hash per line (`git log --pretty=format:%H`), blank lines dropped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_single_hash(text: str) -> Optional[str]:
    hashes = parse_hash_list(text)
    return hashes[0] if hashes else None


def jit_change_log_args(revision: str, count: int, include_guid_header: bool = True) -> List[str]:
    """Arguments of the `git log` that lists commits touching the JIT (and the JIT-EE GUID)."""
    paths = [JIT_SOURCE_PATHSPEC] + ([JITEE_GUID_PATHSPEC] if include_guid_header else [])
    return ["log", "--pretty=format:%H", revision, f"-{count}", "--", *paths]


def describe_git_failure(command: str, repo: Path, stderr: str) -> str:
    """One line: which git command failed where, git's own reason, and a hint."""
    reason = _first_fatal_line(stderr) or "no error text"
    lowered = stderr.lower()
    if "not a git repository" in lowered:
        hint = "run from a dotnet/runtime clone or pass -runtime_repo"
    elif "dubious ownership" in lowered:
        hint = "mark it safe with 'git config --global --add safe.directory <repo>'"
    elif "unknown revision" in lowered or "bad revision" in lowered or "not a valid object name" in lowered:
        hint = "check the hash (is it fetched? try 'git fetch origin main')"
    else:
        hint = "check the repository state"
    return f"'{command}' failed in {repo}: {reason}; {hint}"


def _first_fatal_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[0] if lines else ""


# ---------------------------------------------------------------- running git

def git_command_text(args: Sequence[str]) -> str:
    return runner.format_command(["git", *args])


def run_git(repo: PathLike, args: Sequence[str], allow_failure: bool = False) -> runner.RunResult:
    """Run `git <args>` in `repo`; a failure (unless allowed) is a one-line SuiteError."""
    path = Path(repo)
    command = git_command_text(args)
    if not path.is_dir():
        raise SuiteError(f"cannot run '{command}': {path} is not a directory; pass -runtime_repo "
                         "pointing at a dotnet/runtime clone")
    env = dict(os.environ)
    env.update(_GIT_ENV)
    try:
        result = runner.run(["git", *args], cwd=path, env=env)
    except errors.ToolTimeout:
        raise
    except SuiteError as exc:
        raise SuiteError(f"cannot run '{command}' in {path}: git is not installed or not on PATH; "
                         "install git and put it on PATH") from exc
    if result.returncode != 0 and not allow_failure:
        raise SuiteError(describe_git_failure(command, path, result.stderr))
    return result


# ---------------------------------------------------------------- queries

def rev_parse_head(repo: PathLike) -> str:
    """`git rev-parse HEAD`: the checked-out commit."""
    args = ["rev-parse", "HEAD"]
    head = parse_single_hash(run_git(repo, args).stdout)
    if head is None:
        raise SuiteError(f"'{git_command_text(args)}' printed nothing in {repo}; is the checkout empty?")
    return head


def newest_remote_main(repo: PathLike) -> str:
    """The commit of the most recently committed `main` of any remote."""
    args = ["branch", "-r", "--sort=-committerdate", "-v", "--list", MAIN_BRANCH_PATTERN]
    newest = parse_newest_main(run_git(repo, args).stdout)
    if newest is None:
        raise SuiteError(f"'{git_command_text(args)}' found no remote branch matching {MAIN_BRANCH_PATTERN} "
                         f"in {repo}; fetch it (git fetch origin main)")
    return newest


def merge_base(repo: PathLike, a: str, b: str) -> str:
    """`git merge-base <a> <b>`: the newest common ancestor."""
    args = ["merge-base", a, b]
    result = run_git(repo, args, allow_failure=True)
    base = parse_single_hash(result.stdout) if result.returncode == 0 else None
    if base is not None:
        return base
    if result.returncode == 1 and not result.stderr.strip():
        raise SuiteError(f"'{git_command_text(args)}' found no common ancestor in {repo}; "
                         "fetch more history (git fetch --unshallow origin main)")
    raise SuiteError(describe_git_failure(git_command_text(args), Path(repo), result.stderr))


def jit_change_candidates(repo: PathLike, baseline: str, count: int = DEFAULT_CANDIDATE_COUNT) -> List[str]:
    """The last `count` commits at or before `baseline` touching the JIT or the JIT-EE GUID."""
    return parse_hash_list(run_git(repo, jit_change_log_args(baseline, count)).stdout)


def latest_jit_change(repo: PathLike, revision: str) -> Optional[str]:
    """The newest commit at or before `revision` touching `src/coreclr/jit/`, or None."""
    args = jit_change_log_args(revision, 1, include_guid_header=False)
    return parse_single_hash(run_git(repo, args).stdout)


def fetch_main(repo: PathLike, depth: int = DEFAULT_FETCH_DEPTH, remote: str = "origin") -> None:
    """`git fetch --depth=<depth> origin main`, so CI clones have a merge-base to find."""
    run_git(repo, ["fetch", f"--depth={depth}", remote, "main"])
