"""Markdown helpers for the pipeline's overall summaries (docs/contracts.md §12.16, §12.18).

Pure text functions: rewriting ` ```diff ` fences as coloured HTML for Azure DevOps,
the pipeline's form of fitting a document made of sections into a size budget
(the engine is `spmi.reports.budget`), and pointing at each platform's HTML
diff explorer.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from spmi.base.untrusted import escape_md_code, escape_md_inline
from spmi.reports import budget
from spmi.reports.budget import Section

__all__ = ["ReportLink", "Section", "char_size", "diff_block_html", "diff_fences_to_html", "fit_sections", "hard_cut",
           "html_reports_section", "utf8_size"]

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


def html_reports_section(links: Sequence[ReportLink], artifacts_url: str = "") -> str:
    """A short list naming each platform's `.html` report and the artifact it is in ('' for none)."""
    if not links:
        return ""
    where = f" ([artifacts of this run]({artifacts_url}))" if artifacts_url else ""
    text = (f"**HTML diff explorer** of each platform: every context with diffs, sortable and filterable, with the "
            f"listings of the disassembled ones. Download the artifact{where} and open the file in a browser "
            "(it needs no network).\n\n")
    text += "".join(f"* {escape_md_inline(link.platform)}: {escape_md_code(link.file_name)} "
                    f"in the artifact {escape_md_code(link.artifact)}\n" for link in links)
    return text + "\n"


# ---------------------------------------------------------------- size budgets
# The fitting itself is `spmi.reports.budget`; these keep the pipeline's form of
# the call: a budget the text stays strictly under, measured by `utf8_size` or
# `char_size`.

def utf8_size(text: str) -> int:
    return budget.measure_bytes(text)


def char_size(text: str) -> int:
    return budget.measure_chars(text)


def _under(limit: int, measure: Callable[[str], int]) -> budget.Limit:
    unit = budget.Unit.CHARACTERS if measure is char_size or measure is budget.measure_chars else budget.Unit.BYTES
    return budget.Limit(limit - 1, unit)


def fit_sections(sections: Sequence[Section], limit: int, note: Callable[[List[str]], str],
                 measure: Callable[[str], int] = utf8_size,
                 transform: Callable[[str], str] = lambda text: text) -> str:
    """`budget.fit_sections` for a text that must stay under `limit`."""
    return budget.fit_sections(sections, _under(limit, measure), note, transform)


def hard_cut(text: str, limit: int, note_text: str, measure: Callable[[str], int] = utf8_size) -> str:
    """`budget.hard_cut` at a line end so that text, a blank line and the note stay under `limit`."""
    return budget.hard_cut(text, _under(limit, measure), "\n" + note_text)
