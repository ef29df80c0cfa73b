"""Known-noise patterns: listing diffs that change nothing a reviewer needs to see (docs/signal.md).

A diff between a base and a diff `.dasm` listing is *known noise* when every changed line is
explained by a pattern: the line itself is noise (`line REGEX`: the whole line, stripped, matches),
or it differs from a line on the other side only in text inside its `;` comment that a
`comment REGEX` matches (addresses, handles). Example diffs skip such diffs (the summary says how
many and why); `--include_noise` keeps them. Pure functions; reading a `-noise_patterns FILE` is
the caller's I/O.

The file format, one entry a line (`#` starts a comment line, blank lines are ignored)::

    line ;\\s*Lcl frame size = \\d+
    comment 0x[0-9A-Fa-f]{6,16}
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, List, Sequence, Tuple

from spmi.base.errors import SuiteError


class PatternKind(Enum):
    LINE = "line"        # a changed line that fully matches is noise
    COMMENT = "comment"  # text matching inside a line's `;` comment is ignored when comparing lines


@dataclass(frozen=True)
class NoisePattern:
    kind: PatternKind
    regex: "re.Pattern[str]"

    @property
    def text(self) -> str:
        return f"{self.kind.value} {self.regex.pattern}"


DEFAULT_PATTERNS_TEXT = r"""# Known-noise patterns of example diffs (the suite's default list; -noise_patterns FILE replaces it).
# The locals header a checked JIT prints before the code: frame size and the variable table.
line ;\s*Lcl frame size = \d+
line ;\s+V\d+\s.*
line ;\s*Final local variable assignments
line ;\s*
# Addresses and handles inside comments (they differ between JIT binaries and runs).
comment 0x[0-9A-Fa-f]{6,16}
"""


def parse_patterns(text: str, source: str = "the default noise patterns") -> List[NoisePattern]:
    """The entries of a patterns file; a bad entry is a `SuiteError` naming the file and line."""
    patterns: List[NoisePattern] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, expression = line.partition(" ")
        kinds = {kind.value: kind for kind in PatternKind}
        if word not in kinds or not expression.strip():
            raise SuiteError(f"{source} line {number}: '{line}' is not 'line REGEX' or 'comment REGEX'")
        try:
            regex = re.compile(expression.strip())
        except re.error as exc:
            raise SuiteError(f"{source} line {number}: bad regular expression '{expression.strip()}' ({exc})") from None
        patterns.append(NoisePattern(kinds[word], regex))
    return patterns


DEFAULT_PATTERNS: Tuple[NoisePattern, ...] = tuple(parse_patterns(DEFAULT_PATTERNS_TEXT))
DEFAULT_SOURCE = "the default list: the locals header, addresses and handles in comments"


def _masked(line: str, comment_patterns: Sequence[NoisePattern]) -> str:
    """The line with every comment-pattern match inside its `;` comment replaced by `…`."""
    code, semicolon, comment = line.partition(";")
    if not semicolon:
        return line.strip()
    for pattern in comment_patterns:
        comment = pattern.regex.sub("…", comment)
    return (code + semicolon + comment).strip()


def changed_lines(base_text: str, diff_text: str) -> Tuple[List[str], List[str]]:
    """(lines only the base has, lines only the diff has), as multisets (order ignored)."""
    base, diff = Counter(base_text.splitlines()), Counter(diff_text.splitlines())
    return list((base - diff).elements()), list((diff - base).elements())


def is_known_noise(base_text: str, diff_text: str, patterns: Sequence[NoisePattern] = DEFAULT_PATTERNS) -> bool:
    """Whether the two listings differ, and every difference is explained by a pattern."""
    removed, added = changed_lines(base_text, diff_text)
    if not removed and not added:
        return False
    line_patterns = [p for p in patterns if p.kind is PatternKind.LINE]
    comment_patterns = [p for p in patterns if p.kind is PatternKind.COMMENT]

    def unexplained(lines: Iterable[str]) -> Counter:
        kept = [line for line in lines if not any(p.regex.fullmatch(line.strip()) for p in line_patterns)]
        return Counter(_masked(line, comment_patterns) for line in kept)

    return unexplained(removed) == unexplained(added)


def describe(patterns: Sequence[NoisePattern], source: str) -> str:
    """`<n> known-noise patterns (<source>)` for the summary's note."""
    return f"{len(patterns)} known-noise pattern{'s' if len(patterns) != 1 else ''} ({source})"
