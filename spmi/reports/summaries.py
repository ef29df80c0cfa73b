"""asmdiffs summaries as a whole: loading JSON summaries, merging several runs or
platforms (docs/contracts.md §12.13), and rendering them within the size budgets.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union

from spmi.base.errors import SuiteError
from spmi.reports import asm_model as model
from spmi.reports.asm_model import AsmDiffsSummary, MergedSummary
from spmi.reports.asm_overall import render_long_within, render_overall, render_short_within

SummaryLike = Union[AsmDiffsSummary, Dict[str, Any], str]


def as_summary(item: SummaryLike, source: str = "<json>") -> AsmDiffsSummary:
    """An `AsmDiffsSummary` from itself, its parsed JSON document, or JSON text."""
    if isinstance(item, AsmDiffsSummary):
        return item
    if isinstance(item, str):
        return AsmDiffsSummary.from_json(item, source)
    return AsmDiffsSummary.from_document(item, source)


def merge_summaries(items: Iterable[SummaryLike]) -> MergedSummary:
    """Merge summaries (objects, JSON documents or texts): one entry per platform, partitions
    of a platform combined with their collections sorted by name (§12.13)."""
    return model.merge_summaries(as_summary(item) for item in items)


def render_long_summary(merged: Union[MergedSummary, AsmDiffsSummary], artifact: str = "") -> str:
    """The long markdown: one platform renders exactly as a single run would; several
    platforms render as one overall file. Within 1 MiB either way."""
    single = _single(merged)
    if single is not None:
        return render_long_within(single, artifact=artifact)
    assert isinstance(merged, MergedSummary)  # a lone AsmDiffsSummary is always `single`
    return render_overall(merged, artifact=artifact)


def render_short_summary(merged: Union[MergedSummary, AsmDiffsSummary], artifact: str = "") -> str:
    """The short markdown, within 65,536 characters (see `render_long_summary`)."""
    single = _single(merged)
    if single is not None:
        return render_short_within(single, artifact=artifact)
    assert isinstance(merged, MergedSummary)
    return render_overall(merged, artifact=artifact, short=True)


def _single(merged: Union[MergedSummary, AsmDiffsSummary]) -> Optional[AsmDiffsSummary]:
    if isinstance(merged, AsmDiffsSummary):
        return merged
    return merged.platforms[0] if len(merged.platforms) == 1 else None


def read_json_summaries(paths: Iterable[Path]) -> List[AsmDiffsSummary]:
    """Load `diff_summary*.json` files (§12.13); unreadable or foreign files raise `SuiteError`."""
    summaries = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SuiteError(f"cannot read the JSON summary {path}: {exc.strerror}") from None
        summaries.append(AsmDiffsSummary.from_json(text, str(path)))
    return summaries
