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

A REGEX is a bounded form of a regular expression (`safe_regex`): characters, `.`, classes, the
`\\d \\s \\w` escapes, anchors, and quantifiers on one item each, which take all they can and give
nothing back. No groups, alternation or backreferences: matching one line takes time in proportion to
its length, whatever the pattern, so a pattern file cannot stall a run. A file holds at most
`MAX_PATTERNS` entries.
"""
from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, List, Optional, Sequence, Tuple

from spmi.base.errors import SuiteError


class PatternKind(Enum):
    LINE = "line"        # a changed line that fully matches is noise
    COMMENT = "comment"  # text matching inside a line's `;` comment is ignored when comparing lines


@dataclass(frozen=True)
class NoisePattern:
    kind: PatternKind
    expression: str  # as written in the file
    regex: "re.Pattern[str]"  # its bounded translation (`safe_regex`)

    @property
    def text(self) -> str:
        return f"{self.kind.value} {self.expression}"


#: the largest `-noise_patterns` file read, in bytes (1 MiB)
MAX_PATTERNS_FILE_BYTES = 1 << 20
#: the most entries a patterns file may hold (each changed line is tried against each pattern)
MAX_PATTERNS = 1000
#: the longest expression of one entry, in characters
MAX_EXPRESSION_LENGTH = 500
#: the largest count a `{m,n}` quantifier may give
MAX_REPEAT = 1000
#: a changed line longer than this is never explained by a pattern (it counts as changed code)
MAX_LINE_LENGTH = 2048

_ESCAPED_CLASSES = "dDsSwW"
_ZERO_WIDTH_ESCAPES = "bB"
_QUANTIFIER_RE = re.compile(r"\*|\+|\?|\{(\d+)(,(\d*))?\}")
_REFUSED = {"(": "groups are not allowed (write one entry per alternative)",
            ")": "groups are not allowed (write one entry per alternative)",
            "|": "alternation is not allowed (write one entry per alternative)",
            "{": "a '{' that is not a quantifier {m}, {m,} or {m,n} after an item (write \\{ for the character)",
            "}": "a '}' outside a quantifier (write \\} for the character)"}


class UnsafePattern(ValueError):
    """An expression outside the bounded form `safe_regex` accepts."""


def _class_end(expression: str, start: int) -> int:
    """The index just past the `]` closing the class that opens at `start`."""
    i = start + 1
    if i < len(expression) and expression[i] == "^":
        i += 1
    if i < len(expression) and expression[i] == "]":
        i += 1  # a leading ']' is a member
    while i < len(expression):
        char = expression[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            raise UnsafePattern("a '[' inside a class (write \\[ for the character)")
        if char == "]":
            return i + 1
        i += 1
    raise UnsafePattern("a class '[' without its closing ']'")


def _next_item(expression: str, i: int) -> Tuple[str, bool, int]:
    """(the item at `i` as a Python regex, whether a quantifier may follow it, the index after it)."""
    char = expression[i]
    if char == "\\":
        if i + 1 == len(expression):
            raise UnsafePattern("a '\\' at the end")
        escaped = expression[i + 1]
        if escaped in _ESCAPED_CLASSES:
            return expression[i:i + 2], True, i + 2
        if escaped in _ZERO_WIDTH_ESCAPES:
            return expression[i:i + 2], False, i + 2
        if escaped == "t":
            return "\\t", True, i + 2
        if escaped.isascii() and not escaped.isalnum():
            return re.escape(escaped), True, i + 2
        raise UnsafePattern(f"the escape '\\{escaped}' (allowed: \\d \\D \\s \\S \\w \\W \\b \\B \\t and "
                            "a backslash before punctuation; no backreferences)")
    if char == "[":
        end = _class_end(expression, i)
        return expression[i:end], True, end
    if char in _REFUSED:
        raise UnsafePattern(_REFUSED[char])
    if char in "^$":
        return char, False, i + 1
    if char in "*+?":
        raise UnsafePattern(f"a '{char}' with nothing to repeat")
    return ("." if char == "." else re.escape(char)), True, i + 1


def _quantifier_at(expression: str, i: int) -> Tuple[Optional[str], bool, int]:
    """(the quantifier at `i` or None, whether it is unbounded, the index after it)."""
    found = _QUANTIFIER_RE.match(expression, i)
    if found is None:
        return None, False, i
    text = found.group(0)
    if found.group(1) is not None:
        counts = [int(found.group(1))] + ([int(found.group(3))] if found.group(3) else [])
        if max(counts) > MAX_REPEAT:
            raise UnsafePattern(f"the count in '{text}' is more than {MAX_REPEAT}")
        if len(counts) == 2 and counts[1] < counts[0]:
            raise UnsafePattern(f"'{text}' counts down")
        unbounded = found.group(2) is not None and not found.group(3)
    else:
        unbounded = text in "*+"
    end = found.end()
    if end < len(expression) and _QUANTIFIER_RE.match(expression, end):
        raise UnsafePattern(f"a quantifier after '{text}' (one per item; no lazy or possessive forms: every "
                            "quantifier already takes all it can and gives nothing back)")
    return text, unbounded, end


def safe_regex(expression: str) -> str:
    """The Python regular expression an entry's REGEX stands for, in its bounded form (docs/signal.md §4):
    a sequence of items (a character, `\\` before punctuation, `.`, a class `[...]`, `\\d \\D \\s \\S \\w
    \\W \\t`, the anchors `^ $ \\b \\B`), each but the anchors with at most one quantifier (`? * + {m}
    {m,} {m,n}`, counts up to MAX_REPEAT). A quantifier takes all it can and gives nothing back (each
    becomes an atomic lookahead and a backreference to it), so there is nothing to backtrack into and
    one attempt is linear in the line. For the same reason a `.` repeated without bound only ends the
    pattern: anything after it could never match. Raises UnsafePattern."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise UnsafePattern(f"longer than {MAX_EXPRESSION_LENGTH} characters")
    out: List[str] = []
    groups = 0
    i = 0
    while i < len(expression):
        item, repeatable, i = _next_item(expression, i)
        quantifier, unbounded, after = _quantifier_at(expression, i)
        if quantifier is None:
            out.append(item)
            continue
        if not repeatable:
            raise UnsafePattern(f"'{item}{quantifier}': an anchor cannot repeat")
        if item == "." and unbounded and expression[after:] not in ("", "$"):
            raise UnsafePattern(f"'.{quantifier}' before more of the pattern (it takes the rest of the line and "
                                "gives nothing back, so what follows could never match; end the pattern with it, "
                                "or repeat a class such as [^;] instead)")
        groups += 1
        out.append(f"(?=({item}{quantifier}))\\{groups}")
        i = after
    return "".join(out)


def _compiled(expression: str) -> "re.Pattern[str]":
    """`safe_regex(expression)` compiled; a warning of the compiler (a doubtful class) refuses it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return re.compile(safe_regex(expression))
        except (re.error, FutureWarning, DeprecationWarning) as exc:
            raise UnsafePattern(str(exc)) from None


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
    """The entries of a patterns file (at most MAX_PATTERNS); a bad entry is a `SuiteError` naming the
    file and line."""
    patterns: List[NoisePattern] = []
    kinds = {kind.value: kind for kind in PatternKind}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, expression = line.partition(" ")
        expression = expression.strip()
        if word not in kinds or not expression:
            raise SuiteError(f"{source} line {number}: '{line[:80]}' is not 'line REGEX' or 'comment REGEX'")
        if len(patterns) == MAX_PATTERNS:
            raise SuiteError(f"{source} line {number}: more than {MAX_PATTERNS:,} patterns; keep the file to "
                             f"{MAX_PATTERNS:,} entries at most")
        try:
            regex = _compiled(expression)
        except UnsafePattern as exc:
            raise SuiteError(f"{source} line {number}: bad regular expression '{expression[:80]}' ({exc}); "
                             "see docs/signal.md §4 for the forms allowed") from None
        patterns.append(NoisePattern(kinds[word], expression, regex))
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
        kept = [line for line in lines
                if len(line) > MAX_LINE_LENGTH or not any(p.regex.fullmatch(line.strip()) for p in line_patterns)]
        return Counter(line.strip() if len(line) > MAX_LINE_LENGTH else _masked(line, comment_patterns)
                       for line in kept)

    return unexplained(removed) == unexplained(added)


def describe(patterns: Sequence[NoisePattern], source: str) -> str:
    """`<n> known-noise patterns (<source>)` for the summary's note."""
    return f"{len(patterns)} known-noise pattern{'s' if len(patterns) != 1 else ''} ({source})"
