#!/usr/bin/env python3
"""SuperPMI results on a pull request (docs/pr_bot.md).

  python superpmi_pr_bot.py command [-event FILE] [-workflow NAME]
      answer an issue_comment event: a `/spmi ...` line from a collaborator with write access
      dispatches the diffs workflow for the PR's head commit; anyone else gets one short reply
  python superpmi_pr_bot.py post (-pr N | -event FILE) -summaries FILE... [-head_sha SHA] [-run_url URL]
      create or edit the one comment per PR and diff type with the overall summaries

GitHub REST at $GITHUB_API_URL (default https://api.github.com), token from $GITHUB_TOKEN.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

from spmi.base import logs
from spmi.base.errors import SuiteError
from spmi.commands import parsing
from spmi.commands.parsing import ArgumentParser, positive_int

PROG = "superpmi_pr_bot.py"


def build_parser() -> ArgumentParser:
    parser, commands = parsing.program_parser(PROG, "SuperPMI results on a pull request.")
    command = commands.add_parser("command", help="answer an issue_comment event's /spmi command")
    command.add_argument("-event", help="the event payload (default: $GITHUB_EVENT_PATH)")
    command.add_argument("-workflow", default="superpmi-asmdiffs.yml",
                         help="the diffs workflow to dispatch (default: superpmi-asmdiffs.yml)")
    command.set_defaults(func=_command)
    post = commands.add_parser("post", help="create or edit the PR's result comments")
    post.add_argument("-pr", type=positive_int, help="the pull request's number")
    post.add_argument("-event", help="a workflow_run event payload naming the PR (instead of -pr)")
    post.add_argument("-summaries", nargs="+", required=True, metavar="FILE",
                      help="overall summaries (<n>_overall_<type>_[short_]summary_<os>_<arch>.md)")
    post.add_argument("-head_sha", help="the commit the results are for (default: the run's, else the PR's head)")
    post.add_argument("-run_url", help="the run whose artifacts hold every file")
    post.add_argument("-repository", help="owner/name (default: $GITHUB_REPOSITORY)")
    post.add_argument("-bot_login", default="github-actions[bot]",
                      help="the login the bot's comments carry (default: github-actions[bot])")
    post.set_defaults(func=_post)
    return parser


def _client(environ: Mapping[str, str]):  # type: ignore[no-untyped-def]
    from spmi.github.rest import GitHubClient
    return GitHubClient(environ.get("GITHUB_API_URL", ""), environ.get("GITHUB_TOKEN", ""))


def _event_path(given: Optional[str], environ: Mapping[str, str]) -> Path:
    path = given or environ.get("GITHUB_EVENT_PATH")
    if not path:
        raise SuiteError("no event payload: pass -event FILE or set GITHUB_EVENT_PATH")
    return Path(path)


def _command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from spmi.github import bot
    event = bot.read_event(_event_path(args.event, environ))
    return bot.handle_comment(_client(environ), event, args.workflow)


def _post(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    from spmi.github import bot, comment
    if (args.pr is None) == (args.event is None):
        raise SuiteError("post: pass exactly one of -pr N and -event FILE")
    run_url = bot.checked_run_url(args.run_url)
    head_sha = comment.checked_sha(args.head_sha, "-head_sha") if args.head_sha else None
    if args.event is not None:
        found = bot.target_from_workflow_run(bot.read_event(Path(args.event)))
        if found is None:
            return 0
        target = bot.PostTarget(found.repository, found.pr_number, head_sha or found.head_sha, run_url or found.run_url)
    else:
        repository = bot.checked_repository(args.repository or environ.get("GITHUB_REPOSITORY"))
        target = bot.PostTarget(repository, args.pr, head_sha, run_url)
    return bot.post_results(_client(environ), target, [Path(p) for p in args.summaries], args.bot_login)


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup_logging(logging.INFO, None)
    env = os.environ if environ is None else environ
    return logs.run_guarded(PROG, lambda: args.func(args, env))


if __name__ == "__main__":
    sys.exit(main())
