"""The one PR comment per diff type (docs/pr_bot.md, "The reply"): a hidden marker to find it
again, the commit it reflects, the short summaries, as much of the full ones as fits, and a link
to the run's artifacts; always under GitHub's 65,536 characters (docs/contracts.md §12.18, §15).

Summary files are untrusted (a diff JIT writes the method names): read with a size cap, kept to
the tags a comment may carry, mentions and references made inert (`untrusted.sanitize_for_github`).
Pure functions but `read_summaries`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spmi.base import untrusted
from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline

#: GitHub refuses a longer comment body (characters)
COMMENT_LIMIT = 65536
#: kept free below the limit, for whatever GitHub counts differently
COMMENT_MARGIN = 64
#: at most this much of a summary file is read
MAX_SUMMARY_BYTES = 2 * 1024 * 1024
MAX_SUMMARY_FILES = 32
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
TITLES = {"asmdiffs": "asmdiffs", "tpdiff": "throughput (tpdiff)", "memdiff": "memory (memdiff)",
          "metricdiff": "JIT metrics (metricdiff)"}


@dataclass
class TypeSummaries:
    """The summary texts of one diff type, per host queue (`windows x64`), short and full."""

    type_name: str
    short: Dict[str, str] = field(default_factory=dict)
    full: Dict[str, str] = field(default_factory=dict)
    cut_on_read: List[str] = field(default_factory=list)


def marker(type_name: str) -> str:
    """The hidden line that marks the bot's comment for `type_name`."""
    return f"<!-- superpmi-pr-bot:{type_name} -->"


def is_bot_comment(body: str, type_name: str) -> bool:
    return body.startswith(marker(type_name) + "\n")


def checked_sha(text: str, what: str) -> str:
    sha = text.strip().lower()
    if not _SHA_RE.match(sha):
        raise SuiteError(f"{what} '{untrusted.console_line(text)[:80]}' is not a 40-digit commit hash")
    return sha


def read_summaries(paths: Sequence[Path]) -> List[TypeSummaries]:
    """The files given to `post -summaries`, by diff type (in tab order); each name must be an overall
    summary's (`1_overall_asmdiffs_short_summary_windows_x64.md`)."""
    if len(paths) > MAX_SUMMARY_FILES:
        raise SuiteError(f"-summaries: more than {MAX_SUMMARY_FILES} files; pass the overall summaries only")
    by_type: Dict[str, TypeSummaries] = {}
    for path in paths:
        name = pipeline.parse_overall_summary_name(path.name)
        if name is None:
            raise SuiteError(f"-summaries: '{untrusted.console_line(path.name)}' is not an overall summary "
                             "(<n>_overall_<type>_[short_]summary_<os>_<arch>.md)")
        if not path.is_file():
            raise SuiteError(f"-summaries: '{untrusted.console_line(path)}' is not a file")
        text, cut = read_capped(path)
        group = by_type.setdefault(name.type_name, TypeSummaries(name.type_name))
        host = f"{name.platform} {name.arch}"
        (group.short if name.short else group.full)[host] = text
        if cut:
            group.cut_on_read.append(host)
    order = {t: pipeline.DIFF_TYPES[t].order for t in by_type}
    return [by_type[t] for t in sorted(by_type, key=lambda t: (order[t], t))]


def read_capped(path: Path) -> "tuple[str, bool]":
    """At most MAX_SUMMARY_BYTES of a file, as text; True when there was more."""
    with path.open("rb") as handle:
        data = handle.read(MAX_SUMMARY_BYTES + 1)
    cut = len(data) > MAX_SUMMARY_BYTES
    return data[:MAX_SUMMARY_BYTES].decode("utf-8", errors="replace").lstrip("\ufeff"), cut


@dataclass(frozen=True)
class CommentFacts:
    """What the comment says about where the results come from (the suite's own values)."""

    head_sha: str
    run_url: Optional[str] = None
    pr_head_sha: Optional[str] = None  # the PR's head now, when it moved on since the run


def render_comment(summaries: TypeSummaries, facts: CommentFacts, limit: int = COMMENT_LIMIT) -> str:
    """The comment body: marker, heading, short summaries, as much of the full ones as fits, artifacts link."""
    head = _heading(summaries.type_name, facts)
    notes = _cut_on_read_note(summaries.cut_on_read)
    tail = notes + _tail(facts)
    full_hosts = sorted(summaries.full)
    reserve = len(_not_shown(full_hosts, facts)) if full_hosts else 0
    room = limit - COMMENT_MARGIN - len(head) - len(tail) - reserve
    parts: List[str] = []
    for _host, text in sorted(summaries.short.items()):
        piece = _fitted(text, room, facts)
        parts.append(piece)
        room -= len(piece)
    for index, host in enumerate(full_hosts):
        opening = f"<details>\n<summary>Full {untrusted.escape_html_inline(TITLES[summaries.type_name])} summary, " \
                  f"{untrusted.escape_html_inline(host)}</summary>\n\n"
        closing = "\n\n</details>\n\n"
        if room <= len(opening) + len(closing) + 200:
            parts.append(_not_shown(full_hosts[index:], facts))
            break
        piece = _fitted(summaries.full[host], room - len(opening) - len(closing), facts)
        parts.append(opening + piece + closing)
        room -= len(parts[-1])
    body = head + "".join(parts) + tail
    if len(body) > limit:  # cannot happen: every piece was fitted into the room left
        raise SuiteError(f"the {summaries.type_name} comment is {len(body):,} characters, over {limit:,}")
    return body


def _heading(type_name: str, facts: CommentFacts) -> str:
    run = f" ([run]({facts.run_url}))" if facts.run_url else ""
    lines = [marker(type_name), f"### SuperPMI {TITLES[type_name]}", "",
             f"Results for commit {facts.head_sha}{run}."]
    if facts.pr_head_sha and facts.pr_head_sha != facts.head_sha:
        lines.append(f"The PR's head is now {facts.pr_head_sha}; a new `/spmi {type_name}` command "
                     "brings these results up to date.")
    return "\n".join(lines) + "\n\n"


def _tail(facts: CommentFacts) -> str:
    if not facts.run_url:
        return "All files (full summaries, HTML reports, listings): the run's artifacts.\n"
    return f"All files (full summaries, HTML reports, listings): [the run's artifacts]({facts.run_url}#artifacts).\n"


def _not_shown(hosts: Sequence[str], facts: CommentFacts) -> str:
    where = f"[the run's artifacts]({facts.run_url}#artifacts)" if facts.run_url else "the run's artifacts"
    names = ", ".join(untrusted.escape_md_inline(h) for h in hosts)
    return f"*The full summaries of {names} do not fit here; they are in {where}.*\n\n"


def _cut_on_read_note(hosts: Sequence[str]) -> str:
    if not hosts:
        return ""
    return (f"*Summaries larger than {MAX_SUMMARY_BYTES // (1024 * 1024)} MiB were cut "
            f"({', '.join(untrusted.escape_md_inline(h) for h in hosts)}).*\n\n")


def _fitted(text: str, room: int, facts: CommentFacts) -> str:
    """`text` made safe for the comment, cut at a line so that it fits `room` (with a note when cut)."""
    whole = untrusted.sanitize_for_github(text).rstrip("\n") + "\n\n"
    if len(whole) <= room:
        return whole
    where = f"[the run's artifacts]({facts.run_url}#artifacts)" if facts.run_url else "the run's artifacts"
    note = f"\n\n*Cut here to fit GitHub's {COMMENT_LIMIT:,}-character limit; the rest is in {where}.*\n\n"
    lines = text.split("\n")
    low, high = 0, len(lines)
    best = ""
    while low <= high:  # the most lines whose safe rendering fits
        middle = (low + high) // 2
        candidate = untrusted.sanitize_for_github("\n".join(lines[:middle])).rstrip("\n") + note
        if len(candidate) <= room:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    if best:
        return best
    return note if len(note) <= room else ""
