"""asmdiffs' HTML diff explorer on disk: the listings it shows and the file it writes (docs/contracts.md §12.9).

`read_listings` reads the base/diff `.dasm` pair of each disassembled context of
a collection (each side cut at `MAX_LISTING_LINES` lines / `MAX_LISTING_CHARS`
characters, all listings of a run together within `ListingBudget`);
`report_path` names the page after the summary it accompanies
(`diff_summary.1.md` → `diff_report.1.html`); `write_report` writes it. What the
page holds comes from `spmi.reports.html_build`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Callable, List, Optional, Tuple

from spmi.base import fsutil
from spmi.reports.html_report import HtmlReport, Listing, write_html

log = logging.getLogger("superpmi")

REPORT_PREFIX = "diff_report"
MAX_LISTING_LINES = 8000
MAX_LISTING_CHARS = 256 * 1024
TOTAL_LISTING_CHARS = 32 * 1024 * 1024


@dataclass
class ListingBudget:
    """Characters of listing text the page may still take; what was left out."""

    remaining: int = TOTAL_LISTING_CHARS
    left_out: int = 0

    def take(self, size: int) -> bool:
        if size > self.remaining:
            self.left_out += 1
            return False
        self.remaining -= size
        return True


def cut_listing(text: str, max_lines: int = MAX_LISTING_LINES, max_chars: int = MAX_LISTING_CHARS) -> str:
    """The listing, or its first lines within both limits and a line saying how many were cut."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= max_lines and len(text) <= max_chars:
        return text
    kept: List[str] = []
    used = 0
    for line in lines[:max_lines]:
        if used + len(line) > max_chars:
            break
        kept.append(line)
        used += len(line)
    if kept and not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    return "".join(kept) + f"; ... {len(lines) - len(kept):,} more lines cut from this page (see the .dasm file)\n"


def read_listing(path: Path) -> Optional[str]:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        log.warning("Cannot read %s for the HTML report: %s", path, exc.strerror)
        return None


def listing_pairs(asm_dir: Path, contexts: Optional[AbstractSet[int]] = None) -> List[Tuple[int, Path, Path]]:
    """(context, base file, diff file) for every `<context>.dasm` present on both sides (only those of
    `contexts` when given), by context."""
    def by_context(side: Path) -> dict:
        if not side.is_dir():
            return {}
        return {int(p.stem): p for p in side.glob("*.dasm") if p.stem.isdigit() and p.is_file()}

    base, diff = by_context(asm_dir / "base"), by_context(asm_dir / "diff")
    both = set(base) & set(diff)
    if contexts is not None:
        both &= contexts
    return [(context, base[context], diff[context]) for context in sorted(both)]


def read_listings(collection: str, asm_dir: Path, repro_command: Callable[[int], str],
                  budget: ListingBudget, contexts: Optional[AbstractSet[int]] = None) -> List[Listing]:
    """The collection's listing pairs (only those of `contexts` when given), cut to size, with the
    command that prints each, within `budget`."""
    listings = []
    for context, base_file, diff_file in listing_pairs(asm_dir, contexts):
        base_text, diff_text = read_listing(base_file), read_listing(diff_file)
        if base_text is None or diff_text is None:
            continue
        base_text, diff_text = cut_listing(base_text), cut_listing(diff_text)
        if budget.take(len(base_text) + len(diff_text)):
            listings.append(Listing(collection, context, base_text, diff_text, repro_command(context)))
    return listings


def report_path(summary_path: Path) -> Path:
    """`<dir>/diff_report[.N].html` beside `<dir>/diff_summary[.N].md|json` (a new name if taken)."""
    suffix = summary_path.name[len("diff_summary"):] if summary_path.name.startswith("diff_summary") else ""
    index = suffix[:-len(summary_path.suffix)] if summary_path.suffix else suffix
    return fsutil.unique_file_path(summary_path.with_name(f"{REPORT_PREFIX}{index}.html"))


def write_report(report: HtmlReport, path: Path, budget: Optional[ListingBudget] = None) -> Path:
    """Write the page (temp name, then rename) and say what it holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_html(report, path)
    log.debug("HTML report: %d contexts with diffs, %d with listings, %s bytes", len(report.rows),
              len(report.listings), f"{path.stat().st_size:,}")
    if budget is not None and budget.left_out:
        log.warning("The HTML report holds no listings for %d contexts (over the %d MiB for listings); "
                    "see the .dasm files", budget.left_out, TOTAL_LISTING_CHARS // (1024 * 1024))
    return path


__all__ = ["ListingBudget", "cut_listing", "listing_pairs", "read_listings", "report_path", "write_report"]
