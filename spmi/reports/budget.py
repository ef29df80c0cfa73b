"""The one size-fitting engine for every summary budget (docs/contracts.md §12.18).

A summary is a document whose parts can be left out in a fixed order (the drop
order: what goes first). `fit` renders it with the fewest leading parts of that
order left out so that it fits a `Limit` — a number of UTF-8 bytes (GitHub step
summaries, 1 MiB) or of characters (pull request comments, 65,536). The rule is
the same for every caller: a text fits when its measure is at most the limit.

Dropping whole parts is always tried first. Only if even the smallest rendering
is too large is the text cut at a line end (`hard_cut`), and then blocks marked
as whole — the impact table — are never cut: they are the last thing to go,
and they go entirely. Whatever is left out is named in the output by a note the
caller supplies (`omission_note` is the plain form), with where to find it.
Pure functions.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, FrozenSet, Hashable, List, Optional, Sequence, Tuple, TypeVar

Key = TypeVar("Key", bound=Hashable)
MIB = 1024 * 1024


class Unit(enum.Enum):
    """What a limit counts."""

    BYTES = "bytes"              # UTF-8 encoded size
    CHARACTERS = "characters"


@dataclass(frozen=True)
class Limit:
    """A size limit: at most `amount` bytes (UTF-8) or characters."""

    amount: int
    unit: Unit = Unit.BYTES

    @classmethod
    def bytes(cls, amount: int) -> "Limit":
        return cls(amount, Unit.BYTES)

    @classmethod
    def characters(cls, amount: int) -> "Limit":
        return cls(amount, Unit.CHARACTERS)

    def measure(self, text: str) -> int:
        return len(text.encode("utf-8")) if self.unit is Unit.BYTES else len(text)

    def fits(self, text: str) -> bool:
        return self.measure(text) <= self.amount

    def describe(self) -> str:
        """"1 MiB", "65,536 characters" or "3,000 bytes"."""
        if self.unit is Unit.CHARACTERS:
            return f"{self.amount:,} characters"
        if self.amount % MIB == 0:
            return f"{self.amount // MIB} MiB"
        return f"{self.amount:,} bytes"

    def smaller_by(self, amount: int) -> "Limit":
        return Limit(self.amount - amount, self.unit)


def measure_bytes(text: str) -> int:
    return Limit.bytes(0).measure(text)


def measure_chars(text: str) -> int:
    return Limit.characters(0).measure(text)


def omission_note(count: int, limit: Limit, artifact: str = "") -> str:
    """The plain note: `_N sections omitted to fit the 1 MiB limit; see <artifact>_`."""
    where = f"see `{artifact}`" if artifact else "see the full summary file"
    noun = "section" if count == 1 else "sections"
    return f"_{count} {noun} omitted to fit the {limit.describe()} limit; {where}_\n\n"


# ---------------------------------------------------------------- dropping whole parts

def fit(render: Callable[[FrozenSet[Key]], str], drop_order: Sequence[Key], limit: Limit,
        last_resort: Callable[[str], str]) -> str:
    """`render(dropped)` with the shortest leading run of `drop_order` dropped that fits `limit`.

    If even dropping everything is not enough, `last_resort` (normally a
    `hard_cut`) gets the smallest rendering; its result must fit.
    """
    text = render(frozenset())
    if limit.fits(text):
        return text
    smallest = render(frozenset(drop_order))
    if not drop_order or not limit.fits(smallest):
        return last_resort(smallest)
    low, high = 1, len(drop_order)
    best = smallest                         # always the rendering with the first `high` parts dropped
    while low < high:
        middle = (low + high) // 2
        attempt = render(frozenset(drop_order[:middle]))
        if limit.fits(attempt):
            high, best = middle, attempt
        else:
            low = middle + 1
    return best


# ---------------------------------------------------------------- the last resort

def _units(text: str, whole: Sequence[str]) -> List[Tuple[str, bool]]:
    """`text` as (piece, is_whole) in order: the `whole` blocks, and single lines between them."""
    spans: List[Tuple[int, int]] = []
    for block in whole:
        start = text.find(block) if block else -1
        if start >= 0 and all(end <= start or start + len(block) <= begin for begin, end in spans):
            spans.append((start, start + len(block)))
    units: List[Tuple[str, bool]] = []
    position = 0
    for start, end in sorted(spans):
        units.extend((line, False) for line in text[position:start].splitlines(keepends=True))
        units.append((text[start:end], True))
        position = end
    units.extend((line, False) for line in text[position:].splitlines(keepends=True))
    return units


def hard_cut(text: str, limit: Limit, note: str, whole: Sequence[str] = (), whole_note: str = "") -> str:
    """Whole lines of `text`, then `note`, within `limit`.

    Blocks listed in `whole` (found in `text`) are never cut: they are kept
    entirely, or — only when they alone leave no room for the note — dropped
    entirely, the last one first, and `whole_note` stands where the first of
    them was. The other lines are kept from the start while they fit.
    """
    room = limit.amount - limit.measure(note)
    if room < 0:
        return _cut_to(note.lstrip("\n"), limit)
    units = _units(text, whole)
    kept_whole = [index for index, (_, is_whole) in enumerate(units) if is_whole]
    all_whole = list(kept_whole)

    def whole_size() -> int:
        noted = limit.measure(whole_note) if len(kept_whole) < len(all_whole) else 0
        return noted + sum(limit.measure(units[i][0]) for i in kept_whole)

    while kept_whole and whole_size() > room:
        kept_whole.pop()
    if len(kept_whole) < len(all_whole) and whole_size() > room:
        return _cut_to(note.lstrip("\n"), limit)
    used = whole_size()
    chosen = set(kept_whole)
    for index, (piece, is_whole) in enumerate(units):
        if is_whole:
            continue
        size = limit.measure(piece)
        if used + size > room:
            break
        chosen.add(index)
        used += size
    first_gone = min((i for i in all_whole if i not in kept_whole), default=-1)
    parts = [whole_note if index == first_gone else piece
             for index, (piece, _) in enumerate(units) if index in chosen or index == first_gone]
    return "".join(parts) + note


def _cut_to(text: str, limit: Limit) -> str:
    if limit.amount <= 0:
        return ""
    if limit.unit is Unit.CHARACTERS:
        return text[:limit.amount]
    return text.encode("utf-8")[:limit.amount].decode("utf-8", errors="ignore")


# ---------------------------------------------------------------- documents made of sections

@dataclass(frozen=True)
class Section:
    """A piece of a document. `drop_rank` > 0 marks a section that may be dropped:
    higher ranks go first, the last first among equals. `title` names it in the
    note. `whole` marks a block that a last-resort cut never cuts."""

    text: str
    drop_rank: int = 0
    title: str = ""
    whole: bool = False


def drop_order(sections: Sequence[Section]) -> List[int]:
    """Indexes of the droppable sections in the order they go."""
    droppable = [index for index, section in enumerate(sections) if section.drop_rank > 0]
    return sorted(droppable, key=lambda index: (-sections[index].drop_rank, -index))


def fit_sections(sections: Sequence[Section], limit: Limit,
                 note: Optional[Callable[[List[str]], str]] = None,
                 transform: Callable[[str], str] = lambda text: text, artifact: str = "") -> str:
    """Join the (transformed) sections within `limit`, dropping sections in `drop_order`.

    `note(titles of the dropped sections)` takes the place of the first dropped
    section; without one, `omission_note` says how many went and where to look.
    If only a cut helps, the cut's note also names "the end of the summary".
    """
    def say(titles: List[str]) -> str:
        return note(titles) if note is not None else omission_note(len(titles), limit, artifact)

    def render(dropped: FrozenSet[int]) -> str:
        parts: List[str] = []
        noted = False
        for index, section in enumerate(sections):
            if index not in dropped:
                parts.append(section.text)
            elif not noted:
                parts.append(say([s.title for i, s in enumerate(sections) if i in dropped]))
                noted = True
        return transform("".join(parts))

    order = drop_order(sections)
    titles = [sections[index].title for index in order]
    whole = [transform(section.text) for section in sections if section.whole]

    def cut(smallest: str) -> str:
        return hard_cut(smallest, limit, "\n" + say(titles + ["the end of the summary"]), whole)

    return fit(render, order, limit, cut)
