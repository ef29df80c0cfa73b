"""The `/spmi` command a PR comment carries, checked word by word (docs/pr_bot.md, "The command").

`find_command_line` picks the first line that starts with `/spmi`; `parse_command` turns its words
into a `RunRequest` (or `HELP`), refusing anything it does not know with a `Refused`; nothing a
comment says is passed on except the enumerated values chosen here. `dispatch_inputs` renders a
request as the diffs workflow's `workflow_dispatch` inputs (strings). Pure functions.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from spmi.pipeline import common as pipeline

PREFIX = "/spmi"
DIFF_TYPES = ("asmdiffs", "tpdiff", "memdiff", "metricdiff")
#: a command line longer than this is refused whole (nothing in it is read)
MAX_LINE_CHARS = 400
MAX_SIGNIFICANCE = 8
MAX_PCT = 1000.0
#: only these characters make up a word; anything else (`;`, `$`, quotes, NBSP, ...) refuses the command
_WORD_RE = re.compile(r"^[A-Za-z0-9_.=-]+$")
_METRIC_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_PCT_RE = re.compile(r"^[0-9]{1,4}(?:\.[0-9]{1,6})?$")
# A line starting with the prefix: only ASCII spaces/tabs before it, a space, tab or the end after it.
_COMMAND_LINE_RE = re.compile(r"^[ \t]*/spmi(?=[ \t]|$)(.*)$")

TARGETS: Tuple[str, ...] = tuple(p.name for host in pipeline.HOST_ARCHES for p in pipeline.PARTITIONS[host])
ARCHES: Tuple[str, ...] = tuple(sorted({p.target_arch for host in pipeline.HOST_ARCHES
                                        for p in pipeline.PARTITIONS[host]}))


@dataclass(frozen=True)
class RunRequest:
    """A run the command asks for: one diff type, the chosen targets (in pipeline order)."""

    diff_type: str
    targets: Tuple[str, ...]
    include_noise: bool = False
    significance: Tuple[Tuple[str, float], ...] = ()

    @property
    def hosts(self) -> Tuple[str, ...]:
        """The host queues (x64, x86) whose payloads the chosen targets need."""
        return tuple(host for host in pipeline.HOST_ARCHES
                     if any(p.name in self.targets for p in pipeline.PARTITIONS[host]))


@dataclass(frozen=True)
class Help:
    """`/spmi help`."""


@dataclass(frozen=True)
class Refused:
    """A command that is not understood; `reason` is the suite's own words (it quotes nothing)."""

    reason: str


HELP = Help()
Parsed = Union[RunRequest, Help, Refused]


def help_text() -> str:
    """The grammar, as the reply to `/spmi help` and to any refused command shows it (markdown)."""
    return "\n".join([
        "```",
        "/spmi TYPE [-target NAME]... [-arch ARCH]... [-all] [-include_noise] [-significance METRIC=PCT]...",
        "/spmi help",
        "```",
        "",
        f"* `TYPE`: one of {', '.join(f'`{t}`' for t in DIFF_TYPES)}.",
        f"* `-target NAME`: one target ({', '.join(f'`{t}`' for t in TARGETS)}); repeatable.",
        f"* `-arch ARCH`: every target of an architecture ({', '.join(f'`{a}`' for a in ARCHES)}); repeatable.",
        "* `-all`: every target (the default when no target is named).",
        "* `-include_noise`: asmdiffs examples keep the diffs of known noise.",
        f"* `-significance METRIC=PCT`: minimum meaningful change of a metric in % (at most {MAX_SIGNIFICANCE}).",
        "",
        "Only a collaborator with write access starts a run; the results arrive as one comment per diff type, "
        "edited by later runs.",
    ])


def find_command_line(body: str) -> Optional[str]:
    """The words after `/spmi` on the first line that starts with it (None when no line does)."""
    for line in body.split("\n"):
        match = _COMMAND_LINE_RE.match(line.rstrip("\r"))
        if match:
            return match.group(1)
    return None


def parse_command(rest: str) -> Parsed:
    """The words after `/spmi`; every word must be one the grammar knows."""
    if len(rest) > MAX_LINE_CHARS:
        return Refused(f"the command line is longer than {MAX_LINE_CHARS} characters")
    words = [w for w in re.split(r"[ \t]+", rest) if w]
    if not words:
        return Refused("no diff type given")
    if any(not _WORD_RE.match(w) for w in words):
        return Refused("the command has characters the grammar does not use")
    if words == ["help"]:
        return HELP
    return _parse_run(words)


@dataclass
class _Choices:
    types: List[str] = field(default_factory=list)
    targets: List[str] = field(default_factory=list)
    include_noise: bool = False
    significance: Dict[str, float] = field(default_factory=dict)


def _parse_run(words: Sequence[str]) -> Parsed:
    choices = _Choices()
    position = 0
    while position < len(words):
        word = words[position]
        value = words[position + 1] if position + 1 < len(words) else None
        problem, used = _take(choices, word, value)
        if problem:
            return Refused(problem)
        position += used
    if len(choices.types) != 1:
        return Refused("give exactly one diff type" if choices.types else "no diff type given")
    targets = tuple(t for t in TARGETS if t in choices.targets) if choices.targets else TARGETS
    return RunRequest(choices.types[0], targets, choices.include_noise, tuple(sorted(choices.significance.items())))


def _take(choices: _Choices, word: str, value: Optional[str]) -> Tuple[Optional[str], int]:
    """(problem or None, words used) for one word of the command."""
    if word in DIFF_TYPES:
        choices.types.append(word)
        return None, 1
    if word == "-all":
        choices.targets.extend(TARGETS)
        return None, 1
    if word == "-include_noise":
        choices.include_noise = True
        return None, 1
    if word in ("-target", "-arch", "-significance"):
        if value is None:
            return f"{word} needs a value", 1
        return _take_valued(choices, word, value), 2
    return "unknown word in the command", 1


def _take_valued(choices: _Choices, option: str, value: str) -> Optional[str]:
    if option == "-target":
        if value not in TARGETS:
            return "unknown -target"
        choices.targets.append(value)
        return None
    if option == "-arch":
        chosen = [p.name for host in pipeline.HOST_ARCHES for p in pipeline.PARTITIONS[host] if p.target_arch == value]
        if not chosen:
            return "unknown -arch"
        choices.targets.extend(chosen)
        return None
    return _take_significance(choices, value)


def _take_significance(choices: _Choices, value: str) -> Optional[str]:
    metric, equals, pct_text = value.partition("=")
    if not equals or not _METRIC_RE.match(metric) or not _PCT_RE.match(pct_text):
        return "-significance is not METRIC=PCT"
    pct = float(pct_text)
    if not math.isfinite(pct) or pct > MAX_PCT:
        return f"-significance percentage above {MAX_PCT:g}"
    choices.significance[metric] = pct
    if len(choices.significance) > MAX_SIGNIFICANCE:
        return f"more than {MAX_SIGNIFICANCE} -significance values"
    return None


def dispatch_inputs(request: RunRequest, pr_number: int, head_sha: str) -> Dict[str, str]:
    """The diffs workflow's `workflow_dispatch` inputs for `request` (all values strings)."""
    return {
        "type": request.diff_type,
        "targets": ",".join(request.targets),
        "hosts": ",".join(request.hosts),
        "include_noise": "true" if request.include_noise else "false",
        "significance": " ".join(f"{metric}={pct:g}" for metric, pct in request.significance),
        "pr": str(pr_number),
        "head_sha": head_sha,
    }


def describe(request: RunRequest) -> str:
    """One line saying what was started (the suite's own words and enumerated values only)."""
    extras = []
    if request.include_noise:
        extras.append("known noise included")
    extras.extend(f"{metric} significance {pct:g}%" for metric, pct in request.significance)
    targets = "all targets" if request.targets == TARGETS else ", ".join(request.targets)
    return f"{request.diff_type} on {targets}" + (f" ({'; '.join(extras)})" if extras else "")
