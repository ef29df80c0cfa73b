"""Several platforms in one summary, and summaries that fit GitHub's limits (docs/contracts.md §12.18).

`render_overall` renders the summaries of one host's platforms: every failure in
one box at the top, one impact table across platforms, then per platform a
heading, a one-line result ("No diffs" or the totals), the repro command and the
platform's summary collapsed. The `*_within` functions drop whole sections —
example diffs first, then Details, then the extra sections, then (merged only)
per-platform bodies — until the text fits, and say so in a `Truncated:` note.
The fitting is `spmi.reports.budget`: the failures box and the impact table are
never dropped with the sections, and a last-resort cut never cuts the impact
table. Pure functions.
"""
from __future__ import annotations

from typing import Callable, FrozenSet, List, Optional, Sequence, Tuple

from spmi.base.cioutput import GITHUB_COMMENT_LIMIT, GITHUB_STEP_SUMMARY_LIMIT
from spmi.base.columns import in_order_sum
from spmi.base.untrusted import code_block, escape_html_inline, escape_md_inline
from spmi.reports import budget
from spmi.reports.asm_markdown import (
    RenderOptions,
    collection_examples_block,
    colored,
    details_block,
    failures_box,
    fmt_delta,
    fmt_percent,
    impact_table,
    pct,
    plural,
    render_long,
    render_short,
    truncation_note,
    verdict_line,
)
from spmi.reports.asm_model import AsmDiffsSummary, MergedSummary
from spmi.reports.budget import Limit

FILE_LIMIT_BYTES = GITHUB_STEP_SUMMARY_LIMIT       # 1 MiB per step summary
SHORT_LIMIT_CHARS = GITHUB_COMMENT_LIMIT           # 65,536 characters per comment

EXAMPLES = "examples"
DETAILS = "details"
EXTRAS = "extras"
BODY = "body"

# What can be left out: (kind, platform, collection); platform "" for a single summary.
DropKey = Tuple[str, str, str]
Measure = Callable[[str], int]
measure_bytes = budget.measure_bytes
measure_chars = budget.measure_chars


def _limit(amount: int, measure: Measure) -> Limit:
    return Limit.characters(amount) if measure is measure_chars else Limit.bytes(amount)


def describe_drops(dropped: FrozenSet[DropKey], merged: bool) -> str:
    """What a `Truncated:` note says was left out."""
    def count(kind: str) -> int:
        return sum(1 for key in dropped if key[0] == kind)
    parts = []
    if count(EXAMPLES):
        parts.append(f"the example diffs of {plural(count(EXAMPLES), 'collection')}")
    if count(DETAILS):
        parts.append(f"the Details sections of {plural(count(DETAILS), 'platform')}" if merged
                     else "the Details section")
    if count(EXTRAS):
        parts.append(f"the PerfScore, repro and run information sections of {plural(count(EXTRAS), 'platform')}"
                     if merged else "the PerfScore, repro and run information sections")
    if count(BODY):
        parts.append(f"the collapsed summaries of {plural(count(BODY), 'platform')}")
    return ", ".join(parts) if parts else "nothing"


def _cut_note(limit: Limit, artifact: str) -> str:
    where = f"see the artifact `{artifact}` for the full summary" if artifact else "see the full summary file"
    return f"\n\n**Truncated:** the rest was cut to stay within {limit.describe()}; {where}.\n"


def _impact_gone_note(limit: Limit, artifact: str) -> str:
    where = f"see the artifact `{artifact}`" if artifact else "see the full summary file"
    return f"_The impact table was omitted to fit the {limit.describe()} limit; {where}._\n\n"


def _fit(render: Callable[[FrozenSet[DropKey]], str], candidates: Sequence[DropKey], limit: Limit,
         artifact: str, impact: str) -> str:
    """The engine, with the impact table as the block a last-resort cut keeps whole."""
    def cut(smallest: str) -> str:
        return budget.hard_cut(smallest, limit, _cut_note(limit, artifact), whole=[impact] if impact else [],
                               whole_note=_impact_gone_note(limit, artifact))
    return budget.fit(render, candidates, limit, cut)


def _note(dropped: FrozenSet[DropKey], merged: bool, limit: Limit, artifact: str) -> str:
    return truncation_note(describe_drops(dropped, merged), limit.describe(), artifact) if dropped else ""


def _single_impact(summary: AsmDiffsSummary) -> str:
    return impact_table([("", c) for c in summary.collections]) if summary.has_diffs else ""


def _options_for(dropped: FrozenSet[DropKey], platform: str, **extra: object) -> RenderOptions:
    return RenderOptions(
        dropped_examples=frozenset(key[2] for key in dropped if key[0] == EXAMPLES and key[1] == platform),
        drop_details=(DETAILS, platform, "") in dropped,
        drop_extras=(EXTRAS, platform, "") in dropped,
        **extra)  # type: ignore[arg-type]


def _example_candidates(summary: AsmDiffsSummary, platform: str) -> List[Tuple[int, DropKey]]:
    return [(len(collection_examples_block(c)), (EXAMPLES, platform, c.name))
            for c in summary.collections if c.examples]


def _by_size(sized: List[Tuple[int, DropKey]]) -> List[DropKey]:
    return [key for _, key in sorted(sized, key=lambda item: -item[0])]


# ---------------------------------------------------------------- one summary

def render_long_within(summary: AsmDiffsSummary, limit: int = FILE_LIMIT_BYTES, artifact: str = "",
                       measure: Measure = measure_bytes) -> str:
    """`render_long` that fits `limit` (default 1 MiB)."""
    candidates = _by_size(_example_candidates(summary, "")) + [(DETAILS, "", ""), (EXTRAS, "", "")]
    within = _limit(limit, measure)

    def render(dropped: FrozenSet[DropKey]) -> str:
        return render_long(summary, _options_for(dropped, "", note=_note(dropped, False, within, artifact)))

    return _fit(render, candidates, within, artifact, _single_impact(summary))


def render_short_within(summary: AsmDiffsSummary, limit: int = SHORT_LIMIT_CHARS, artifact: str = "",
                        measure: Measure = measure_chars) -> str:
    """`render_short` that fits `limit` (default 65,536 characters)."""
    within = _limit(limit, measure)

    def render(dropped: FrozenSet[DropKey]) -> str:
        return render_short(summary, _options_for(dropped, "", note=_note(dropped, False, within, artifact)))

    return _fit(render, [(EXTRAS, "", "")], within, artifact, _single_impact(summary))


# ---------------------------------------------------------------- several platforms

def platform_headline(summary: AsmDiffsSummary) -> str:
    """One line: "No diffs ..." or the contexts with diffs and the size/PerfScore change."""
    collections = summary.collections
    overall = [c.aggregates.overall for c in collections]
    if not summary.has_diffs:
        contexts = sum(a.diffed_contexts for a in overall)
        line = f"No diffs ({plural(len(collections), 'collection')}, {plural(contexts, 'context')} diffed)."
    else:
        with_diffs = sum(a.contexts_with_diffs for a in overall)
        base, diff = sum(a.base_code_bytes for a in overall), sum(a.diff_code_bytes for a in overall)
        base_ps, diff_ps = in_order_sum(a.base_perfscore for a in overall), in_order_sum(a.diff_perfscore for a in overall)
        changed = sum(1 for c in collections if c.has_diffs)
        line = (f"{plural(with_diffs, 'context')} with diffs in {changed} of {plural(len(collections), 'collection')}: "
                f"{fmt_delta(base, diff)} bytes ({fmt_percent(pct(base, diff))}), "
                f"PerfScore {fmt_percent(pct(base_ps, diff_ps))}.")
    if summary.has_problems:
        line += f" {colored('red', 'Replay problems')}: see the top of this summary."
    return line + "\n"


def _platform_section(summary: AsmDiffsSummary, dropped: FrozenSet[DropKey], short: bool) -> str:
    platform = summary.platform
    text = f"## {escape_md_inline(platform)}\n\n{platform_headline(summary)}"
    if summary.repro_command:
        text += f"\nTo reproduce:\n\n{code_block([summary.repro_command])}\n"
    if (BODY, platform, "") not in dropped:
        options = _options_for(dropped, platform, failures_box=False, impact_table=False, repro=False, verdict=False)
        body = render_short(summary, options) if short else render_long(summary, options)
        text += details_block(escape_html_inline(f"{platform} summary"), body.rstrip("\n"))
    return text + "\n---\n\n"


def _overall_impact(merged: MergedSummary) -> str:
    entries = [(s.platform, c) for s in merged.platforms for c in s.collections]
    return impact_table(entries, show_platform=True).lstrip("\n") + "\n" if merged.has_diffs else ""


def verdict_lines(merged: MergedSummary) -> str:
    """One verdict line per platform (`asm_markdown.verdict_line`), each its own paragraph."""
    return "".join(verdict_line(summary) + "\n\n" for summary in merged.platforms)


def _render_overall(merged: MergedSummary, dropped: FrozenSet[DropKey], short: bool, title: str, note: str,
                    verdicts: bool = True) -> str:
    entries = [(s.platform, c) for s in merged.platforms for c in s.collections]
    parts = [f"# {title}\n\n" if title else "", verdict_lines(merged) if verdicts else "",
             failures_box(entries, show_platform=True), note]
    if not merged.has_diffs:
        parts.append(f"No diffs found on any platform ({plural(len(merged.platforms), 'platform')}, "
                     f"{plural(len(entries), 'collection')}).\n\n")
    else:
        parts.append(_overall_impact(merged))
    parts.extend(_platform_section(summary, dropped, short) for summary in merged.platforms)
    return "".join(parts)


def render_overall(merged: MergedSummary, budget: Optional[int] = None, artifact: str = "",
                   short: bool = False, title: str = "", verdicts: bool = True) -> str:
    """One markdown file for all platforms of a host, within `budget`, opening with one verdict line
    per platform (`verdicts=False`: the caller wrote them).

    `budget` is bytes for the long form (default 1 MiB) and characters for
    `short=True` (default 65,536); platform bodies are the long or short summaries.
    """
    measure = measure_chars if short else measure_bytes
    limit = budget if budget is not None else (SHORT_LIMIT_CHARS if short else FILE_LIMIT_BYTES)
    candidates: List[DropKey] = []
    if not short:
        sized = [item for s in merged.platforms for item in _example_candidates(s, s.platform)]
        candidates += _by_size(sized)
        candidates += [(DETAILS, s.platform, "") for s in merged.platforms]
    candidates += [(EXTRAS, s.platform, "") for s in merged.platforms]
    bodies = [(len(render_short(s) if short else render_long(s)), (BODY, s.platform, "")) for s in merged.platforms]
    candidates += _by_size(bodies)

    within = _limit(limit, measure)

    def render(dropped: FrozenSet[DropKey]) -> str:
        return _render_overall(merged, dropped, short, title, _note(dropped, True, within, artifact), verdicts)

    return _fit(render, candidates, within, artifact, _overall_impact(merged))
