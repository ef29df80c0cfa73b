"""Markdown helpers for the pipeline's overall summaries (docs/contracts.md §12.16, §12.18).

Pure text functions: rewriting ` ```diff ` fences as coloured HTML for Azure DevOps,
fitting a document made of sections into a size budget by dropping whole
detail sections (never the ones marked as kept) and saying what was cut, and
pointing at each platform's HTML diff explorer.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

ADDED_STYLE = '<div style="background-color:rgba(46,160,67,0.15)">'
REMOVED_STYLE = '<div style="background-color:rgba(248,81,73,0.15)">'
PLAIN_DIV = "<div>"


# ---------------------------------------------------------------- diff fences → HTML

def _line_class(line: str) -> str:
    if line.startswith("+"):
        return "+"
    if line.startswith("-"):
        return "-"
    return " "


def diff_block_html(lines: Sequence[str]) -> str:
    """One fenced diff as `<pre><code>…</code></pre>` on one line (groups joined by `\\n` inside)."""
    groups: List[List[str]] = []
    classes: List[str] = []
    for line in lines:
        kind = _line_class(line)
        if not classes or classes[-1] != kind:
            classes.append(kind)
            groups.append([])
        groups[-1].append(html.escape(line, quote=False))
    opening = {"+": ADDED_STYLE, "-": REMOVED_STYLE, " ": PLAIN_DIV}
    body = "".join(opening[kind] + "\n".join(group) + "</div>" for kind, group in zip(classes, groups))
    return f"<pre><code>{body}</code></pre>"


def diff_fences_to_html(markdown: str) -> str:
    """Rewrite every ` ```diff ` … ` ``` ` block as HTML (AzDO does not highlight diff fences)."""
    out: List[str] = []
    block: Optional[List[str]] = None
    for line in markdown.split("\n"):
        stripped = line.strip()
        if block is None:
            if stripped == "```diff":
                block = []
            else:
                out.append(line)
        elif stripped == "```":
            out.append(diff_block_html(block))
            block = None
        else:
            block.append(line)
    if block is not None:  # unterminated fence: keep it as it was
        out.append("```diff")
        out.extend(block)
    return "\n".join(out)


# ---------------------------------------------------------------- HTML reports

@dataclass(frozen=True)
class ReportLink:
    """Where a platform's HTML diff explorer is: its file name inside a pipeline artifact."""

    platform: str       # "<os> <arch>"
    file_name: str
    artifact: str


def _code(text: str) -> str:
    """Inline code that stays one span (no backticks or line ends inside)."""
    return "`" + " ".join(text.replace("`", "'").split()) + "`"


def html_reports_section(links: Sequence[ReportLink], artifacts_url: str = "") -> str:
    """A short list naming each platform's `.html` report and the artifact it is in ('' for none)."""
    if not links:
        return ""
    where = f" ([artifacts of this run]({artifacts_url}))" if artifacts_url else ""
    text = (f"**HTML diff explorer** of each platform: every context with diffs, sortable and filterable, with the "
            f"listings of the disassembled ones. Download the artifact{where} and open the file in a browser "
            "(it needs no network).\n\n")
    text += "".join(f"* {link.platform}: {_code(link.file_name)} in the artifact {_code(link.artifact)}\n"
                    for link in links)
    return text + "\n"


# ---------------------------------------------------------------- size budgets

@dataclass(frozen=True)
class Section:
    """A piece of a document. `drop_rank` > 0 marks a section that may be dropped:
    higher ranks go first. `title` names it in the truncation note."""

    text: str
    drop_rank: int = 0
    title: str = ""


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def char_size(text: str) -> int:
    return len(text)


def fit_sections(sections: Sequence[Section], budget: int, note: Callable[[List[str]], str],
                 measure: Callable[[str], int] = utf8_size,
                 transform: Callable[[str], str] = lambda text: text) -> str:
    """Join the sections; while the (transformed) result exceeds `budget`, drop the
    droppable section with the highest rank (last first among equals) and insert
    `note(dropped titles)` where the first dropped section was. Kept sections that
    alone exceed the budget are cut hard with the note at the end."""
    kept = list(sections)
    dropped: List[Section] = []

    def render() -> str:
        parts: List[str] = []
        noted = False
        for section in sections:
            if section in kept:
                parts.append(section.text)
            elif not noted:
                parts.append(note([s.title for s in sections if s in dropped]))
                noted = True
        return transform("".join(parts))

    text = render()
    while measure(text) >= budget:
        candidates = [s for s in kept if s.drop_rank > 0]
        if not candidates:
            return hard_cut(text, budget, note([s.title for s in dropped] + ["the end of the summary"]), measure)
        victim = max(reversed(candidates), key=lambda s: s.drop_rank)
        kept.remove(victim)
        dropped.append(victim)
        text = render()
    return text


def hard_cut(text: str, budget: int, note_text: str, measure: Callable[[str], int] = utf8_size) -> str:
    """Cut at a line end so that text + note stays under the budget."""
    room = budget - measure(note_text) - 2
    if room <= 0:
        return note_text[: max(0, budget - 1)]
    lines = text.split("\n")
    kept: List[str] = []
    used = 0
    for line in lines:
        size = measure(line) + 1
        if used + size > room:
            break
        kept.append(line)
        used += size
    return "\n".join(kept) + "\n\n" + note_text
