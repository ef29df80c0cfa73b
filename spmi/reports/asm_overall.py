"""Several platforms in one summary, and summaries that fit GitHub's limits (docs/contracts.md §12.18).

`render_overall` renders the summaries of one host's platforms: every failure in
one box at the top, one impact table across platforms, then per platform a
heading, a one-line result ("No diffs" or the totals), the repro command and the
platform's summary collapsed. The `*_within` functions drop whole sections —
example diffs first, then Details, then the extra sections, then (merged only)
per-platform bodies — until the text fits, and say so in a `Truncated:` note;
the failures box and the impact table are never dropped. Pure functions.
"""
from __future__ import annotations

from typing import Callable, FrozenSet, List, Optional, Sequence, Tuple

from spmi.base.cioutput import GITHUB_COMMENT_LIMIT, GITHUB_STEP_SUMMARY_LIMIT
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
)
from spmi.reports.asm_model import AsmDiffsSummary, MergedSummary

FILE_LIMIT_BYTES = GITHUB_STEP_SUMMARY_LIMIT       # 1 MiB per step summary
SHORT_LIMIT_CHARS = GITHUB_COMMENT_LIMIT           # 65,536 characters per comment

EXAMPLES = "examples"
DETAILS = "details"
EXTRAS = "extras"
BODY = "body"

# What can be left out: (kind, platform, collection); platform "" for a single summary.
DropKey = Tuple[str, str, str]
Measure = Callable[[str], int]


def measure_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def measure_chars(text: str) -> int:
    return len(text)


# ---------------------------------------------------------------- fitting

def fit_to_budget(render: Callable[[FrozenSet[DropKey]], str], candidates: Sequence[DropKey], limit: int,
                  measure: Measure, cut_note: str) -> str:
    """Render with the fewest leading `candidates` dropped that fits `limit`.

    If even dropping all of them is not enough, the text is cut at a line
    boundary and `cut_note` appended, so the result always fits.
    """
    text = render(frozenset())
    if measure(text) <= limit:
        return text
    smallest = render(frozenset(candidates))
    if not candidates or measure(smallest) > limit:
        return hard_cut(smallest, limit, measure, cut_note)
    low, high = 1, len(candidates)
    best = smallest                         # always render(first `high` candidates), which fits
    while low < high:
        middle = (low + high) // 2
        attempt = render(frozenset(candidates[:middle]))
        if measure(attempt) <= limit:
            high, best = middle, attempt
        else:
            low = middle + 1
    return best


def hard_cut(text: str, limit: int, measure: Measure, note: str) -> str:
    """The first whole lines of `text` that leave room for `note`, then the note."""
    room = limit - measure(note)
    kept: List[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        size = measure(line)
        if used + size > room:
            break
        kept.append(line)
        used += size
    return "".join(kept) + note


def limit_text(limit: int, measure: Measure) -> str:
    if measure is measure_chars:
        return f"{limit:,} characters"
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    return f"{limit:,} bytes"


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


def _cut_note(limit: int, measure: Measure, artifact: str) -> str:
    where = f"see the artifact `{artifact}` for the full summary" if artifact else "see the full summary file"
    return f"\n\n**Truncated:** the rest was cut to stay within {limit_text(limit, measure)}; {where}.\n"


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

    def render(dropped: FrozenSet[DropKey]) -> str:
        note = truncation_note(describe_drops(dropped, False), limit_text(limit, measure), artifact) if dropped else ""
        return render_long(summary, _options_for(dropped, "", note=note))

    return fit_to_budget(render, candidates, limit, measure, _cut_note(limit, measure, artifact))


def render_short_within(summary: AsmDiffsSummary, limit: int = SHORT_LIMIT_CHARS, artifact: str = "",
                        measure: Measure = measure_chars) -> str:
    """`render_short` that fits `limit` (default 65,536 characters)."""
    def render(dropped: FrozenSet[DropKey]) -> str:
        note = truncation_note(describe_drops(dropped, False), limit_text(limit, measure), artifact) if dropped else ""
        return render_short(summary, _options_for(dropped, "", note=note))

    return fit_to_budget(render, [(EXTRAS, "", "")], limit, measure, _cut_note(limit, measure, artifact))


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
        base_ps, diff_ps = sum(a.base_perfscore for a in overall), sum(a.diff_perfscore for a in overall)
        changed = sum(1 for c in collections if c.has_diffs)
        line = (f"{plural(with_diffs, 'context')} with diffs in {changed} of {plural(len(collections), 'collection')}: "
                f"{fmt_delta(base, diff)} bytes ({fmt_percent(pct(base, diff))}), "
                f"PerfScore {fmt_percent(pct(base_ps, diff_ps))}.")
    if summary.has_problems:
        line += f" {colored('red', 'Replay problems')}: see the top of this summary."
    return line + "\n"


def _platform_section(summary: AsmDiffsSummary, dropped: FrozenSet[DropKey], short: bool) -> str:
    platform = summary.platform
    text = f"## {platform}\n\n{platform_headline(summary)}"
    if summary.repro_command:
        text += f"\nTo reproduce:\n\n```\n{summary.repro_command}\n```\n"
    if (BODY, platform, "") not in dropped:
        options = _options_for(dropped, platform, failures_box=False, impact_table=False, repro=False)
        body = render_short(summary, options) if short else render_long(summary, options)
        text += details_block(f"{platform} summary", body.rstrip("\n"))
    return text + "\n---\n\n"


def _render_overall(merged: MergedSummary, dropped: FrozenSet[DropKey], short: bool, title: str, note: str) -> str:
    entries = [(s.platform, c) for s in merged.platforms for c in s.collections]
    parts = [f"# {title}\n\n" if title else "", failures_box(entries, show_platform=True), note]
    if not merged.has_diffs:
        parts.append(f"No diffs found on any platform ({plural(len(merged.platforms), 'platform')}, "
                     f"{plural(len(entries), 'collection')}).\n\n")
    else:
        parts.append(impact_table(entries, show_platform=True).lstrip("\n") + "\n")
    parts.extend(_platform_section(summary, dropped, short) for summary in merged.platforms)
    return "".join(parts)


def render_overall(merged: MergedSummary, budget: Optional[int] = None, artifact: str = "",
                   short: bool = False, title: str = "") -> str:
    """One markdown file for all platforms of a host, within `budget`.

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

    def render(dropped: FrozenSet[DropKey]) -> str:
        note = truncation_note(describe_drops(dropped, True), limit_text(limit, measure), artifact) if dropped else ""
        return _render_overall(merged, dropped, short, title, note)

    return fit_to_budget(render, candidates, limit, measure, _cut_note(limit, measure, artifact))
