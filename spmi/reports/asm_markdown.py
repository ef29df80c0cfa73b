"""Markdown for the asmdiffs summary files (docs/contracts.md §12.10) and the suite's additions.

`render_long` / `render_short` produce `diff_summary.md` / `diff_short_summary.md`
from an `AsmDiffsSummary`. The §12.10 content is rendered exactly; the suite's
additions (failures box, truncation note, impact table, PerfScore sections,
repro commands, run information) go before item 1 or after item 2 and can be
switched off (`RenderOptions(additions=False)`) for golden comparisons.
All functions are pure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from spmi.base.columns import in_order_sum
from spmi.base.untrusted import (
    code_block,
    console_line,
    escape_html_inline,
    escape_md_inline,
    one_line,
    sanitize_markdown,
)
from spmi.reports import significance
from spmi.reports.asm_model import (
    IMPROVEMENT,
    REGRESSION,
    ROW_NAMES,
    AsmDiffsSummary,
    CollectionReport,
    ExampleDiff,
    JitOptions,
)

BLUE = "#1460aa"
ORANGE = "#d35400"
EXAMPLE_DIFF_MAX_LINES = 250
GIT_HEADER_LINES = 4
NO_DIFFS_FOUND = "No diffs found."
NO_GIT_DIFFS = "No diffs found?"
NO_GIT = "Could not find a git executable in PATH"
MAX_ASSERT_GROUPS = 10
MAX_REPRO_LINES = 5

# An entry of a cross-collection table: (platform label or "", collection).
Entry = Tuple[str, CollectionReport]


# ---------------------------------------------------------------- building blocks (§12.10)

def colored(color: str, text: str) -> str:
    """C(c,t)."""
    return f'<span style="color:{color}">{text}</span>'


def fmt_int(value: int) -> str:
    """N(x): thousands separators."""
    return f"{value:,}"


def fmt_delta(base: int, diff: int) -> str:
    """Δ(b,d): signed difference, red when it grew, green when it shrank."""
    text = ("+" if diff >= base else "") + fmt_int(diff - base)
    if diff > base:
        return colored("red", text)
    if diff < base:
        return colored("green", text)
    return text


def fmt_percent(value: float, decimals: int = 2) -> str:
    """P(p,k): signed percentage, red when positive, green when negative; a change that would
    show as zero at k decimals gets more (`significance.fmt_change`)."""
    value = value + 0.0  # no "-0.00%"
    text = significance.fmt_change(value, decimals)
    if value > 0:
        return colored("red", text)
    if value < 0:
        return colored("green", text)
    return text


def pct(base: float, diff: float) -> float:
    """(d−b)/b×100 when b > 0, else 0."""
    return (diff - base) / base * 100 if base > 0 else 0.0


def details_block(title: str, body: str) -> str:
    """D(title){body}: a collapsed section (the empty line after the div lets markdown render)."""
    return f'\n<details>\n<summary>{title}</summary>\n<div style="margin-left:1em">\n\n{body}\n\n</div></details>\n'


def share(count: int, total: int) -> str:
    """`x.xx%` of a total, `N/A` when the total is 0."""
    return f"{count / total * 100:.2f}%" if total else "N/A"


# ---------------------------------------------------------------- example diff text (§12.10 item 3)

def example_diff_text(git_output: Optional[str], exit_code: Optional[int], git_found: bool = True,
                      max_lines: int = EXAMPLE_DIFF_MAX_LINES) -> str:
    """The body of an example: `git diff --no-index` output minus its header, fenced.

    Without git: the note `Could not find a git executable in PATH`; when git
    exits 0 or prints nothing after its 4 header lines: `No diffs found?`. More
    than `max_lines` lines keep their head and tail around a `... N lines ...` line.
    """
    if not git_found:
        return NO_GIT
    lines = (git_output or "").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines[GIT_HEADER_LINES:]]
    if exit_code == 0 or not lines:
        return NO_GIT_DIFFS
    if len(lines) > max_lines:
        head = max_lines // 2
        tail = max_lines - head
        lines = lines[:head] + [f"... {len(lines) - max_lines} lines ..."] + lines[-tail:]
    return "```diff\n" + "\n".join(lines) + "\n```"


# ---------------------------------------------------------------- §12.10 items

def top_section(collections: Sequence[CollectionReport], jit_options: JitOptions) -> str:
    """Item 1: context counts, MISSED line, JIT options lines."""
    overall = [c.aggregates.overall for c in collections]
    minopts = sum(c.aggregates.minopts.diffed_contexts for c in collections)
    fullopts = sum(c.aggregates.fullopts.diffed_contexts for c in collections)
    total = sum(a.diffed_contexts for a in overall)
    text = (f"Diffs are based on {colored(BLUE, fmt_int(total))} contexts ({colored(BLUE, fmt_int(minopts))} "
            f"MinOpts, {colored(BLUE, fmt_int(fullopts))} FullOpts).\n\n")
    base_missed, diff_missed = sum(a.base_misses for a in overall), sum(a.diff_misses for a in overall)
    base_total, diff_total = sum(a.base_total for a in overall), sum(a.diff_total for a in overall)
    if base_missed or diff_missed:
        text += _missed_line(base_missed, base_total, diff_missed, diff_total)
    if jit_options.base_options:
        text += f"Base JIT options: {escape_md_inline(';'.join(jit_options.base_options))}\n\n"
    if jit_options.diff_options:
        text += f"Diff JIT options: {escape_md_inline(';'.join(jit_options.diff_options))}\n\n"
    return text


def _missed_line(base_missed: int, base_total: int, diff_missed: int, diff_total: int) -> str:
    label = colored(ORANGE, "MISSED")
    if base_missed == diff_missed:
        return f"{label} contexts: {colored(ORANGE, f'{fmt_int(base_missed)} ({share(base_missed, base_total)})')}\n\n"

    def side(missed: int, total: int) -> str:
        return colored(ORANGE if missed > 0 else "green", f"{fmt_int(missed)} ({share(missed, total)})")

    return f"{label} contexts: base: {side(base_missed, base_total)}, diff: {side(diff_missed, diff_total)}\n\n"


def pivot_section(collections: Sequence[CollectionReport], row: str) -> str:
    """Item 2 for one row (Overall, MinOpts or FullOpts); empty when no collection has diffs in it."""
    with_diffs = [c for c in collections if c.aggregates.row(row).contexts_with_diffs > 0]
    if not with_diffs:
        return ""
    base = sum(c.aggregates.row(row).base_code_bytes for c in collections)
    diff = sum(c.aggregates.row(row).diff_code_bytes for c in collections)
    body = "|Collection|Base size (bytes)|Diff size (bytes)|PerfScore in Diffs\n|---|--:|--:|--:|\n"
    for collection in with_diffs:
        agg = collection.aggregates.row(row)
        body += (f"|{escape_md_inline(collection.name)}|{fmt_int(agg.base_code_bytes)}|"
                 f"{fmt_delta(agg.base_code_bytes, agg.diff_code_bytes)}|"
                 f"{fmt_percent(agg.relative_geomean_diffs * 100 - 100)}|\n")
    return details_block(f"{row} ({fmt_delta(base, diff)} bytes)", body)


def example_title(example: ExampleDiff) -> str:
    return (f"{fmt_delta(example.base_bytes, example.diff_bytes)} "
            f"({fmt_percent(pct(example.base_bytes, example.diff_bytes))}) : "
            f"{escape_html_inline(example.display_name)}")


def ordered_examples(collection: CollectionReport) -> List[ExampleDiff]:
    """Improvement examples first, then regression examples (each in picking order)."""
    return ([e for e in collection.examples if e.kind == IMPROVEMENT]
            + [e for e in collection.examples if e.kind == REGRESSION]
            + [e for e in collection.examples if e.kind not in (IMPROVEMENT, REGRESSION)])


EXAMPLE_LABELS = {IMPROVEMENT: colored("green", "Size improvement"), REGRESSION: colored("red", "Size regression"),
                  "same size": colored("blue", "Same size") + " (the code changed)",
                  "text-only": "Text-only (only header, locals or footer lines changed)"}


def example_body(example: ExampleDiff) -> str:
    """The example's label line, then its diff text (untrusted: sanitized)."""
    return f"{EXAMPLE_LABELS.get(example.label, escape_md_inline(example.label))}\n\n{sanitize_markdown(example.diff_text)}"


def collection_examples_block(collection: CollectionReport, labels: bool = True) -> str:
    body = "".join(details_block(example_title(e), example_body(e) if labels else sanitize_markdown(e.diff_text))
                   for e in ordered_examples(collection))
    return details_block(escape_html_inline(collection.name), body)


def example_diffs_section(collections: Sequence[CollectionReport], dropped: FrozenSet[str] = frozenset(),
                          labels: bool = True, noise_source: str = "") -> str:
    """Item 3 (long file): per collection with examples, per example its (labelled) diff text; then
    how many candidates were skipped as known noise (suite addition)."""
    kept = [c for c in collections if c.examples and c.name not in dropped]
    note = noise_skip_note(collections, noise_source) if labels else ""
    if not kept:
        return note
    return details_block("Example diffs", "".join(collection_examples_block(c, labels) for c in kept)) + note


def noise_skip_note(collections: Sequence[CollectionReport], noise_source: str) -> str:
    """`Skipped N example diffs …`: the candidates whose changed lines all match known-noise patterns."""
    skipped = [(c.name, c.noise_skipped) for c in collections if c.noise_skipped]
    if not skipped:
        return ""
    total = sum(count for _, count in skipped)
    where = ", ".join(f"{escape_md_inline(name)}: {count}" for name, count in skipped)
    return (f"\nSkipped {plural(total, 'example diff')} ({where}): every changed line matches "
            f"{escape_md_inline(noise_source or 'the known-noise patterns')}; their listings stay in the asm folder but not in "
            "the examples or the HTML report; `--include_noise` shows them.\n")


def details_section(collections: Sequence[CollectionReport]) -> str:
    """Item 5 (long file): size, PerfScore and context tables, jit-analyze output."""
    any_diffs = any(c.has_diffs for c in collections)
    body = ""
    if any_diffs:
        body += _size_table(collections) + "\n---\n\n" + _perfscore_table(collections) + "\n---\n\n"
    body += _context_table(collections) + "\n\n"
    if any_diffs:
        body += "---\n\n#### jit-analyze output\n"
        body += "".join(details_block(escape_html_inline(c.name), sanitize_markdown(c.jit_analyze_markdown))
                        for c in collections if c.has_diffs and c.jit_analyze_markdown)
    return details_block("Details", body)


def _with_total_row(rows: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """The rows, plus a total row with an empty name when there is more than one."""
    if len(rows) <= 1:
        return rows
    total = rows[0][1]
    for _, item in rows[1:]:
        total = total.plus(item)
    return rows + [("", total)]


def _size_table(collections: Sequence[CollectionReport]) -> str:
    text = ("#### Size improvements/regressions per collection\n\n"
            "|Collection|Contexts with diffs|Improvements|Regressions|Same size|Improvements (bytes)|"
            "Regressions (bytes)|\n"
            "|---|--:|--:|--:|--:|--:|--:|\n")
    stats = _with_total_row([(c.name, c.aggregates.diff_stats) for c in collections])
    for name, s in stats:
        text += (f"|{escape_md_inline(name)}|{fmt_int(s.contexts_with_diffs)}|{colored('green', fmt_int(s.size_improvements))}|"
                 f"{colored('red', fmt_int(s.size_regressions))}|{colored('blue', fmt_int(s.size_same))}|"
                 f"{colored('green', '-' + fmt_int(s.bytes_improved))}|"
                 f"{colored('red', '+' + fmt_int(s.bytes_regressed))}|\n")
    return text


def _perfscore_table(collections: Sequence[CollectionReport]) -> str:
    text = ("#### PerfScore improvements/regressions per collection\n\n"
            "|Collection|Contexts with diffs|Improvements|Regressions|Same PerfScore|Improvements (PerfScore)|"
            "Regressions (PerfScore)|PerfScore Overall in FullOpts|\n"
            "|---|--:|--:|--:|--:|--:|--:|--:|\n")
    rows = _with_total_row([(c.name, c.aggregates) for c in collections])
    for name, agg in rows:
        s = agg.diff_stats
        text += (f"|{escape_md_inline(name)}|{fmt_int(s.contexts_with_diffs)}|{colored('green', fmt_int(s.perfscore_improvements))}|"
                 f"{colored('red', fmt_int(s.perfscore_regressions))}|{colored('blue', fmt_int(s.perfscore_same))}|"
                 f"{fmt_percent(s.improvement_geomean * 100)}|{fmt_percent(s.regression_geomean * 100)}|"
                 f"{fmt_percent(agg.fullopts.relative_geomean * 100 - 100, 4)}|\n")
    return text


def _context_table(collections: Sequence[CollectionReport]) -> str:
    text = ("#### Context information\n\n"
            "|Collection|Diffed contexts|MinOpts|FullOpts|Missed, base|Missed, diff|\n"
            "|---|--:|--:|--:|--:|--:|\n")
    rows = _with_total_row([(c.name, c.aggregates) for c in collections])
    for name, agg in rows:
        overall = agg.overall
        text += (f"|{escape_md_inline(name)}|{fmt_int(overall.diffed_contexts)}|{fmt_int(agg.minopts.diffed_contexts)}|"
                 f"{fmt_int(agg.fullopts.diffed_contexts)}|"
                 f"{fmt_int(overall.base_misses)} ({share(overall.base_misses, overall.base_total)})|"
                 f"{fmt_int(overall.diff_misses)} ({share(overall.diff_misses, overall.diff_total)})|\n")
    return text


# ---------------------------------------------------------------- suite additions

def plural(count: int, word: str) -> str:
    return f"{fmt_int(count)} {word}{'' if count == 1 else 's'}"


def fmt_float(value: float) -> str:
    return f"{value:,.2f}"


def fmt_float_delta(base: float, diff: float) -> str:
    """Δ for PerfScore values: signed, 2 decimals, coloured like Δ."""
    change = diff - base + 0.0
    text = ("+" if change >= 0 else "") + fmt_float(change)
    if change > 0:
        return colored("red", text)
    if change < 0:
        return colored("green", text)
    return text


def failures_box(entries: Sequence[Entry], show_platform: bool = False) -> str:
    """Replay failures, asserts and missing data, never collapsed (suite addition, before item 1)."""
    problems = [(p, c) for p, c in entries if c.has_problems]
    if not problems:
        return ""
    text = _failures_headline(problems, len(entries))
    text += _failures_table(problems, show_platform)
    text += _asserts_table(problems, show_platform)
    text += _failure_repros(problems, show_platform)
    return text


def _failures_headline(problems: Sequence[Entry], total: int) -> str:
    failed = sum(1 for _, c in problems if c.status.failed)
    asserts = assert_counts_text(sum(c.assert_contexts for _, c in problems), sum(c.assert_count for _, c in problems))
    no_data = sum(1 for _, c in problems if c.status.no_data)
    missing = sum(1 for _, c in problems if _missing_text(c) != "0")
    parts = []
    if failed:
        parts.append(f"{fmt_int(failed)} failed")
    if asserts:
        parts.append(asserts)
    if no_data:
        parts.append(f"no data for {plural(no_data, 'collection')}")
    if missing:
        parts.append(f"missing data in {plural(missing, 'collection')}")
    return (f"**{colored('red', 'Replay problems')}** in {fmt_int(len(problems))} of {plural(total, 'collection')}: "
            f"{', '.join(parts)}.\n\n")


def assert_counts_text(contexts: int, hits: int) -> str:
    """`JIT asserts in 6 contexts (12 hits)`: contexts first, hits (assert lines, one per JIT) when they differ."""
    if not contexts:
        return ""
    text = f"JIT asserts in {plural(contexts, 'context')}"
    return text + (f" ({plural(hits, 'hit')})" if hits != contexts else "")


def _missing_text(collection: CollectionReport) -> str:
    overall = collection.aggregates.overall
    if overall.base_misses or overall.diff_misses:
        return (f"base {fmt_int(overall.base_misses)} ({share(overall.base_misses, overall.base_total)}), "
                f"diff {fmt_int(overall.diff_misses)} ({share(overall.diff_misses, overall.diff_total)})")
    if collection.status.missing_contexts:
        return fmt_int(collection.status.missing_contexts)
    return "0"


def _result_text(collection: CollectionReport) -> str:
    status = collection.status
    if status.failed:
        code = f" (exit code {status.exit_code})" if status.exit_code is not None else ""
        return colored("red", "failed") + (f": {escape_md_inline(status.reason)}" if status.reason else "") + code
    if status.no_data:
        return colored(ORANGE, "no data") + (f": {escape_md_inline(status.reason)}" if status.reason else "")
    return "ok"


def _failures_table(problems: Sequence[Entry], show_platform: bool) -> str:
    lead = "|Platform" if show_platform else ""
    text = (f"{lead}|Collection|Result|Asserting contexts|Assert hits|Missing contexts|\n"
            f"{'|---' if show_platform else ''}|---|---|--:|--:|---|\n")
    for platform, collection in problems:
        lead = f"|{escape_md_inline(platform)}" if show_platform else ""
        text += (f"{lead}|{escape_md_inline(collection.name)}|{_result_text(collection)}|"
                 f"{fmt_int(collection.assert_contexts)}|{fmt_int(collection.assert_count)}|{_missing_text(collection)}|\n")
    return text + "\n"


@dataclass
class AssertRow:
    """One assert (text and location) over every collection and platform it hit."""

    key: str
    count: int = 0
    contexts: int = 0
    base_hits: Optional[int] = 0  # None once a group's hits could not be split by JIT
    diff_hits: Optional[int] = 0
    platforms: List[str] = field(default_factory=list)
    collections: List[str] = field(default_factory=list)
    context: Optional[int] = None
    il_size: Optional[int] = None
    repro: str = ""


def repro_for_context(collection: CollectionReport, context: int) -> str:
    """The collection's repro line for `context` (`-c N …` or a `…-N.mc` file), else ''."""
    pattern = re.compile(rf"(?:-c {context}(?:\s|$))|(?:-{context}\.mc\b)")
    return next((line for line in collection.repro_commands if pattern.search(line)), "")


def group_asserts(entries: Sequence[Entry]) -> List[AssertRow]:
    """Identical asserts (same text and location) merged across collections and platforms, most hits first."""
    rows: Dict[str, AssertRow] = {}
    for platform, collection in entries:
        for group in collection.asserts:
            row = rows.setdefault(group.key, AssertRow(group.key))
            row.count += group.count
            row.contexts += group.context_count
            if row.base_hits is None or row.diff_hits is None or group.base_hits is None or group.diff_hits is None:
                row.base_hits = row.diff_hits = None
            else:
                row.base_hits, row.diff_hits = row.base_hits + group.base_hits, row.diff_hits + group.diff_hits
            if platform and platform not in row.platforms:
                row.platforms.append(platform)
            if collection.name not in row.collections:
                row.collections.append(collection.name)
            if not row.repro:
                for instance in group.instances:
                    repro = repro_for_context(collection, instance.context)
                    if repro or row.context is None:
                        row.context, row.il_size, row.repro = instance.context, instance.il_size, repro
                    if repro:
                        break
    return sorted(rows.values(), key=lambda row: (-row.contexts, -row.count, row.key))


def hits_text(row: AssertRow) -> str:
    """`12 (6 / 6)`: all hits, then base / diff when every hit was placed."""
    if row.base_hits is None or row.diff_hits is None:
        return fmt_int(row.count)
    return f"{fmt_int(row.count)} ({fmt_int(row.base_hits)} / {fmt_int(row.diff_hits)})"


def _asserts_table(problems: Sequence[Entry], show_platform: bool) -> str:
    rows = group_asserts(problems)
    if not rows:
        return ""
    lead = "|Platforms" if show_platform else ""
    text = ("Asserts (identical ones grouped; a context asserting in both JITs is two hits):\n\n"
            f"|Assert|Contexts|Hits (base / diff){lead}|Collections|Example context|Repro|\n"
            f"|---|--:|--:{'|---' if show_platform else ''}|---|--:|---|\n")
    for row in rows[:MAX_ASSERT_GROUPS]:
        platforms = f"|{escape_md_inline(', '.join(row.platforms))}" if show_platform else ""
        context = "" if row.context is None else f"{fmt_int(row.context)} (IL size {fmt_int(row.il_size or 0)})"
        repro = f"<code>{escape_md_inline(row.repro)}</code>" if row.repro else ""
        text += (f"|{escape_md_inline(row.key)}|{fmt_int(row.contexts)}|{hits_text(row)}{platforms}|"
                 f"{escape_md_inline(', '.join(row.collections))}|"
                 f"{context}|{repro}|\n")
    text += "\n"
    if len(rows) > MAX_ASSERT_GROUPS:
        text += f"... and {plural(len(rows) - MAX_ASSERT_GROUPS, 'more distinct assert')} (see the log).\n\n"
    return text


def _failure_repros(problems: Sequence[Entry], show_platform: bool) -> str:
    lines: List[str] = []
    for platform, collection in problems:
        commands = collection.repro_commands[:MAX_REPRO_LINES]
        if commands:
            where = one_line(f"{platform} {collection.name}" if show_platform else collection.name)
            lines.append(f"# {where}")
            lines.extend(commands)
            if len(collection.repro_commands) > MAX_REPRO_LINES:
                lines.append(f"# ... {len(collection.repro_commands) - MAX_REPRO_LINES} more")
    if not lines:
        return ""
    return "To reproduce the failures:\n\n" + code_block(lines) + "\n\n"


def impact_entries(entries: Iterable[Entry]) -> List[Entry]:
    """Largest absolute code size change first, then largest absolute PerfScore change."""
    def key(entry: Entry) -> Tuple[int, float, str, str]:
        overall = entry[1].aggregates.overall
        return (-abs(overall.diff_code_bytes - overall.base_code_bytes),
                -abs(overall.diff_perfscore - overall.base_perfscore), entry[0], entry[1].name)
    return sorted(entries, key=key)


def impact_table(entries: Sequence[Entry], show_platform: bool = False) -> str:
    """Every collection with its size and PerfScore change side by side (suite addition)."""
    if not entries:
        return ""
    lead = "|Platform" if show_platform else ""
    text = ("\n**Impact by collection** (largest absolute change first):\n\n"
            f"{lead}|Collection|Contexts with diffs|Base bytes|Δ bytes|Δ bytes %|"
            "Base PerfScore|Δ PerfScore|Δ PerfScore %|\n"
            f"{'|---' if show_platform else ''}|---|--:|--:|--:|--:|--:|--:|--:|\n")
    for platform, collection in impact_entries(entries):
        o = collection.aggregates.overall
        lead = f"|{escape_md_inline(platform)}" if show_platform else ""
        text += (f"{lead}|{escape_md_inline(collection.name)}|{fmt_int(o.contexts_with_diffs)}|{fmt_int(o.base_code_bytes)}|"
                 f"{fmt_delta(o.base_code_bytes, o.diff_code_bytes)}|"
                 f"{fmt_percent(pct(o.base_code_bytes, o.diff_code_bytes))}|"
                 f"{fmt_float(o.base_perfscore)}|{fmt_float_delta(o.base_perfscore, o.diff_perfscore)}|"
                 f"{fmt_percent(pct(o.base_perfscore, o.diff_perfscore))}|\n")
    return text


def perfscore_sections(collections: Sequence[CollectionReport]) -> str:
    """PerfScore per row as one-line summaries that expand (suite addition)."""
    text = ""
    for row in ROW_NAMES:
        with_diffs = [c for c in collections if c.aggregates.row(row).contexts_with_diffs > 0]
        if not with_diffs:
            continue
        aggs = [c.aggregates.row(row) for c in collections]
        base, diff = in_order_sum(a.base_perfscore for a in aggs), in_order_sum(a.diff_perfscore for a in aggs)
        body = ("|Collection|Base PerfScore|Diff PerfScore|Δ PerfScore|Δ %|Geomean|Geomean in diffs|\n"
                "|---|--:|--:|--:|--:|--:|--:|\n")
        for collection in with_diffs:
            a = collection.aggregates.row(row)
            body += (f"|{escape_md_inline(collection.name)}|{fmt_float(a.base_perfscore)}|{fmt_float(a.diff_perfscore)}|"
                     f"{fmt_float_delta(a.base_perfscore, a.diff_perfscore)}|"
                     f"{fmt_percent(pct(a.base_perfscore, a.diff_perfscore))}|"
                     f"{fmt_percent(a.relative_geomean * 100 - 100, 4)}|"
                     f"{fmt_percent(a.relative_geomean_diffs * 100 - 100)}|\n")
        text += details_block(f"PerfScore {row} ({fmt_float_delta(base, diff)}, {fmt_percent(pct(base, diff))})", body)
    return text


#: metrics with tables of their own in the summary
OWN_TABLE_METRICS = ("ActualCodeBytes", "PerfScore")


def changed_metrics(collections: Sequence[CollectionReport],
                    rules: Optional[significance.Significance] = None) -> List[str]:
    """Metric columns (first-seen order) whose totals change significantly in some collection
    (reports/significance), besides code size and PerfScore."""
    return [metric for metric, flagged in _metric_verdicts(collections, rules).items() if flagged]


def _metric_verdicts(collections: Sequence[CollectionReport],
                     rules: Optional[significance.Significance]) -> Dict[str, bool]:
    """Every other metric that changed somewhere (first-seen order) -> whether any change is significant."""
    judge = rules or significance.Significance()
    verdicts: Dict[str, bool] = {}
    for collection in collections:
        for metric, (base, diff) in collection.metric_totals.items():
            if metric in OWN_TABLE_METRICS or base == diff:
                continue
            verdicts[metric] = verdicts.get(metric, False) or judge.judge(metric, base, diff).flagged
    return verdicts


def unchanged_metrics(collections: Sequence[CollectionReport]) -> List[str]:
    """The other metric columns (first-seen order) whose totals are equal in every collection that has them."""
    changed = set(_metric_verdicts(collections, None))
    names: List[str] = []
    for collection in collections:
        for metric in collection.metric_totals:
            if metric not in OWN_TABLE_METRICS and metric not in changed and metric not in names:
                names.append(metric)
    return names


def fmt_number(value: float) -> str:
    return fmt_float(value) if isinstance(value, float) and not value.is_integer() else fmt_int(int(value))


def metric_percent(metric: str, value: float) -> str:
    """P(p) coloured by the metric's direction: green an improvement, red a regression, no colour for a
    neutral metric (a counter such as CseCount) or no change."""
    text = significance.fmt_change(value + 0.0)
    way = significance.direction(metric)
    if value == 0 or way == significance.NEUTRAL:
        return text
    better = value < 0 if way == significance.LOWER else value > 0
    return colored("green" if better else "red", text)


def other_metrics_section(collections: Sequence[CollectionReport],
                          rules: Optional[significance.Significance] = None) -> str:
    """Every other metric of the details CSV that changed significantly somewhere: base, diff, % per
    collection (collapsed), the rule applied, and how many changed only within noise; then a
    `Metrics with no diffs:` line naming the ones that changed nowhere."""
    verdicts = _metric_verdicts(collections, rules)
    metrics = [metric for metric, flagged in verdicts.items() if flagged]
    unchanged = unchanged_metrics(collections)
    quiet_line = f"Metrics with no diffs: {escape_md_inline(', '.join(unchanged))}.\n\n" if unchanged else ""
    if not verdicts:
        return quiet_line
    rule = significance.rule_line(rules or significance.Significance(), list(verdicts))
    quiet = [metric for metric, flagged in verdicts.items() if not flagged]
    quiet_note = f"Within noise ({len(quiet)}): {', '.join(escape_md_inline(m) for m in quiet)}.\n\n" if quiet else ""
    if not metrics:
        return details_block(f"Other metrics (none changed significantly; {len(quiet)} within noise)",
                             rule + "\n\n" + quiet_note.rstrip("\n")) + quiet_line
    body = rule + "\n\n" + quiet_note + "|Metric|Collection|Base|Diff|Δ %|\n|---|---|--:|--:|--:|\n"
    for metric in metrics:
        for collection in collections:
            if metric not in collection.metric_totals:
                continue
            base, diff = collection.metric_totals[metric]
            body += (f"|{escape_md_inline(metric)}|{escape_md_inline(collection.name)}|{fmt_number(base)}|{fmt_number(diff)}|"
                     f"{metric_percent(metric, pct(base, diff)) if base else ('+∞' if diff else '0.00%')}|\n")
    return details_block(f"Other metrics ({plural(len(metrics), 'metric')} changed)", body) + quiet_line


def repro_line(summary: AsmDiffsSummary) -> str:
    if not summary.repro_command:
        return ""
    return f"\nTo reproduce these diffs:\n\n{code_block([summary.repro_command])}\n"


def example_repro_section(collections: Sequence[CollectionReport], dropped: FrozenSet[str] = frozenset()) -> str:
    """The raw superpmi command line of every example (suite addition)."""
    body = ""
    for collection in collections:
        commands = [f"{e.repro_command}" for e in ordered_examples(collection) if e.repro_command]
        if commands and collection.name not in dropped:
            body += f"{escape_md_inline(collection.name, line_start=True)}:\n\n" + code_block(commands) + "\n\n"
    return details_block("Repro commands for the example diffs", body.rstrip("\n")) if body else ""


def run_info_section(summary: AsmDiffsSummary) -> str:
    items = [("Target", summary.platform),
             ("Host", f"{summary.host_os} {summary.host_arch}".strip()),
             ("Base JIT", summary.base_jit_path), ("Diff JIT", summary.diff_jit_path),
             ("Baseline", summary.baseline),
             ("Base JIT options", ";".join(summary.jit_options.base_options)),
             ("Diff JIT options", ";".join(summary.jit_options.diff_options)),
             ("Analyzer", summary.analyzer)]
    rows = "".join(f"|{name}|{escape_md_inline(value)}|\n" for name, value in items if value)
    return details_block("Run information", "|Item|Value|\n|---|---|\n" + rows)


def no_diffs_statement(summary: AsmDiffsSummary) -> str:
    contexts = sum(c.aggregates.overall.diffed_contexts for c in summary.collections)
    return (f"No diffs found in {plural(len(summary.collections), 'collection')} "
            f"({plural(contexts, 'context')} diffed).\n")


def verdict_line(summary: AsmDiffsSummary, markdown: bool = True) -> str:
    """The one line a reviewer acts on (docs/signal.md §6): `<os> <arch>: <n> of <N> contexts with diffs,
    <Δ> bytes (<%>), PerfScore <%>; no failures` (or `no diffs in <N> contexts`, or the replay problems).
    `markdown`: escaped and coloured for a summary; otherwise plain, for the console."""
    overall = [c.aggregates.overall for c in summary.collections]
    contexts, with_diffs = sum(a.diffed_contexts for a in overall), sum(a.contexts_with_diffs for a in overall)
    name = escape_md_inline(summary.platform) if markdown else console_line(summary.platform)
    if with_diffs:
        base, diff = sum(a.base_code_bytes for a in overall), sum(a.diff_code_bytes for a in overall)
        base_ps, diff_ps = sum(a.base_perfscore for a in overall), sum(a.diff_perfscore for a in overall)
        delta = fmt_delta(base, diff) if markdown else ("+" if diff >= base else "") + fmt_int(diff - base)
        change = fmt_percent if markdown else significance.fmt_change
        text = (f"{name}: {fmt_int(with_diffs)} of {plural(contexts, 'context')} with diffs, {delta} bytes "
                f"({change(pct(base, diff))}), PerfScore {change(pct(base_ps, diff_ps))}")
    else:
        text = f"{name}: no diffs in {plural(contexts, 'context')}"
    problems = sum(1 for c in summary.collections if c.has_problems)
    if not problems:
        return text + "; no failures"
    trouble = f"replay problems in {problems} of {plural(len(summary.collections), 'collection')}"
    return text + "; " + (colored("red", trouble) if markdown else trouble)


def truncation_note(what: str, limit: str, artifact: str) -> str:
    where = f"see the artifact `{artifact}` for the full summary" if artifact else "see the full summary file"
    return f"**Truncated:** {what} left out to stay within {limit}; {where}.\n\n"


# ---------------------------------------------------------------- whole files

@dataclass(frozen=True)
class RenderOptions:
    """What to render besides the §12.10 content.

    `additions=False` gives exactly §12.10. The drop fields serve size budgets:
    example sections of the named collections, the Details section, and the
    extras (PerfScore sections, example repro lines, run information).
    """

    additions: bool = True
    failures_box: bool = True
    impact_table: bool = True
    dropped_examples: FrozenSet[str] = frozenset()
    drop_details: bool = False
    drop_extras: bool = False
    repro: bool = True
    note: str = ""
    verdict: bool = True


def render_long(summary: AsmDiffsSummary, options: Optional[RenderOptions] = None) -> str:
    """`diff_summary.md`."""
    o = options or RenderOptions()
    collections = summary.collections
    parts = [_head(summary, o), top_section(collections, summary.jit_options)]
    if summary.has_diffs:
        parts.extend(pivot_section(collections, row) for row in ROW_NAMES)
        if o.additions:
            parts.append(_extras_after_pivots(summary, o))
        parts.append(example_diffs_section(collections, o.dropped_examples, labels=o.additions,
                                           noise_source=summary.noise_source))
    else:
        parts.append(NO_DIFFS_FOUND + "\n")
    if not o.drop_details:
        parts.append(details_section(collections))
    parts.append("\n")
    if o.additions and not summary.has_diffs:
        if o.repro:
            parts.append(repro_line(summary))
        if not o.drop_extras:
            parts.append(run_info_section(summary))
    return "".join(parts)


def render_short(summary: AsmDiffsSummary, options: Optional[RenderOptions] = None) -> str:
    """`diff_short_summary.md`: items 1–2; with additions never empty (a "No diffs" line)."""
    o = options or RenderOptions()
    if not summary.has_diffs:
        if not o.additions:
            return ""
        return _head(summary, o) + no_diffs_statement(summary)
    collections = summary.collections
    parts = [_head(summary, o), top_section(collections, summary.jit_options)]
    parts.extend(pivot_section(collections, row) for row in ROW_NAMES)
    if o.additions:
        parts.append(_extras_after_pivots(summary, RenderOptions(
            impact_table=o.impact_table, drop_extras=o.drop_extras, repro=o.repro,
            dropped_examples=frozenset(c.name for c in collections))))
    return "".join(parts)


def _head(summary: AsmDiffsSummary, o: RenderOptions) -> str:
    if not o.additions:
        return ""
    verdict = verdict_line(summary) + "\n\n" if o.verdict else ""
    box = failures_box([("", c) for c in summary.collections]) if o.failures_box else ""
    return verdict + box + o.note


def _extras_after_pivots(summary: AsmDiffsSummary, o: RenderOptions) -> str:
    collections = summary.collections
    parts = []
    if o.impact_table:
        parts.append(impact_table([("", c) for c in collections]))
    if not o.drop_extras:
        parts.append(perfscore_sections(collections))
        parts.append(other_metrics_section(collections, significance.Significance(dict(summary.significance))))
    if o.repro:
        parts.append(repro_line(summary))
    if not o.drop_extras:
        parts.append(example_repro_section(collections, o.dropped_examples))
        parts.append(run_info_section(summary))
    return "".join(parts)
