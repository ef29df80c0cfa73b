"""History verdicts as console lines and markdown (docs/history.md). Pure."""
from __future__ import annotations

from typing import List, Sequence, Tuple

from spmi.base.untrusted import escape_md_inline
from spmi.history.judge import HistoryJudgement, Judgement, fmt_pct
from spmi.history.records import HistoryRecord


def skips_text(verdicts: HistoryJudgement) -> str:
    if not verdicts.skipped:
        return ""
    return " (skipped: " + ", ".join(f"{count} with {reason}" for reason, count in sorted(verdicts.skipped.items())) + ")"


def verdict_lines(pr: HistoryRecord, verdicts: HistoryJudgement) -> List[str]:
    head = f"{pr.summary_type} {pr.target_os}/{pr.target_arch}: {verdicts.records_used} main run(s) compared"
    lines = [head + skips_text(verdicts)]
    for item in verdicts.judgements:
        mark = "FLAGGED " if item.verdict.flagged else ""
        lines.append(f"  {mark}{item.collection} {item.metric} {fmt_pct(item.change)}: {item.describe()}")
    return lines


def shown_judgements(pr: HistoryRecord, verdicts: HistoryJudgement) -> Tuple[List[Judgement], int]:
    """The rows worth a reviewer's look (the headline metric, and anything flagged); how many others are within range."""
    shown = [j for j in verdicts.judgements if j.verdict.flagged or not pr.focus or j.metric == pr.focus]
    return shown, len(verdicts.judgements) - len(shown)


def verdict_table(rows: Sequence[Tuple[str, Judgement]]) -> str:
    """`|Platform|Collection|Metric|Change|Verdict|` rows; flagged verdicts in bold."""
    cell = escape_md_inline
    text = "|Platform|Collection|Metric|Change|Verdict|\n|---|---|---|--:|---|\n"
    for platform, item in rows:
        verdict = cell(item.describe())
        if item.verdict.flagged:
            verdict = f"**{verdict}**"
        text += f"|{cell(platform)}|{cell(item.collection)}|{cell(item.metric)}|{fmt_pct(item.change)}|{verdict}|\n"
    return text


def verdict_markdown(pr: HistoryRecord, verdicts: HistoryJudgement) -> str:
    """A markdown section for one PR record: every collection and metric with its verdict."""
    cell = escape_md_inline
    text = (f"#### History: {cell(pr.summary_type)} {cell(pr.target_os)} {cell(pr.target_arch)}\n\n"
            f"Compared with {verdicts.records_used} main run(s){cell(skips_text(verdicts))}.\n\n")
    if not verdicts.judgements:
        return text + "No metric to compare.\n"
    return text + verdict_table([(f"{pr.target_os} {pr.target_arch}", j) for j in verdicts.judgements])


def overall_section(judged: Sequence[Tuple[HistoryRecord, HistoryJudgement]], last: int, notes: Sequence[str] = (),
                    pages: Sequence[str] = ()) -> str:
    """The overall page's history section: one table for every platform, flagged rows first;
    `pages` names the trend pages written beside the page."""
    text = (f"## History\n\nEach change's size against the fence of the sizes of the last {last} main runs' changes; "
            "a change below its metric's rule is never flagged (docs/history.md).\n\n")
    if pages:
        text += "Trend pages (in the results artifact): " + ", ".join(f"`{name}`" for name in pages) + "\n\n"
    for note in notes:
        text += f"- {escape_md_inline(note)}\n"
    if notes:
        text += "\n"
    rows: List[Tuple[str, Judgement]] = []
    hidden = 0
    for pr, verdicts in judged:
        shown, others = shown_judgements(pr, verdicts)
        rows.extend((f"{pr.target_os} {pr.target_arch}", j) for j in shown)
        hidden += others
        if verdicts.skipped:
            text += f"- {escape_md_inline(pr.target_os + ' ' + pr.target_arch)}: main runs{escape_md_inline(skips_text(verdicts))}\n"
    if not rows:
        return text + "No platform had a change to compare.\n\n"
    rows.sort(key=lambda row: not row[1].verdict.flagged)
    flagged = sum(1 for _, j in rows if j.verdict.flagged)
    text += (f"\n{flagged} flagged, {len(rows) - flagged} not flagged"
             + (f"; {hidden} other metric changes, none flagged, not shown" if hidden else "") + ".\n\n")
    return text + verdict_table(rows) + "\n"
