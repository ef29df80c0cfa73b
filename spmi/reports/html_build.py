"""What the HTML diff explorer shows, taken from asmdiffs' own records (docs/contracts.md §12.9, §12.13).

Pure: `diff_rows_of` keeps a collection's diff list (every context with diffs)
compactly for the summary; `report_from_summary` / `report_from_merged` turn one
run's summary, or the merged summaries of several runs, into an `HtmlReport`
(listings, which need files, are passed in by the caller).
"""
from __future__ import annotations

from operator import eq
from typing import Any, Callable, List, Sequence

from spmi.base.columns import Labels, Numbers, Texts, numbers, taken
from spmi.base.untrusted import one_line
from spmi.formats.details import CODE_BYTES, PERFSCORE, DetailsTable
from spmi.reports import significance
from spmi.reports.asm_analysis import diff_positions
from spmi.reports.asm_model import AsmDiffsSummary, AssertGroup, CollectionReport, DiffRows, MergedSummary
from spmi.reports.html_report import CollectionCounts, Failure, HtmlReport, Listing, MetricVerdict, ReportHeader

#: Failing-context commands shown with one failure entry.
REPRO_COMMANDS_SHOWN = 5


def diff_rows_of(table: DetailsTable) -> DiffRows:
    """The diff list of a details table (both JITs succeeded, a difference found), by context.

    Compact columns of a table that holds only the diff list in that order (the kept table of
    `asm_analysis.DetailsDigest`) are shared, not copied; other columns are taken row by row."""
    positions = diff_positions(table)
    whole = len(positions) == table.row_count and all(map(eq, positions, range(table.row_count)))
    c = table.columns

    def column(values: Sequence[Any], convert: Callable[[Any], Any], typecode: str = "") -> Sequence[Any]:
        if whole and (isinstance(values, (Texts, Labels)) or isinstance(values, Numbers) and values.typecode == typecode
                      or isinstance(values, list) and not typecode):
            return values
        if not typecode:
            return taken(values, positions)
        converted = list(map(convert, map(values.__getitem__, positions)))
        try:
            return numbers(typecode, converted)  # type: ignore[arg-type]
        except OverflowError:  # beyond 64 bits
            return converted

    return DiffRows(column(c.context, int, "q"), column(c.method_name, str), column(c.tier, str),
                    column(c.minopts, bool), column(table.base_column(CODE_BYTES), int, "q"),
                    column(table.diff_column(CODE_BYTES), int, "q"),
                    column(table.base_column(PERFSCORE), float, "d"),
                    column(table.diff_column(PERFSCORE), float, "d"))


def collection_counts(label: str, collection: CollectionReport) -> CollectionCounts:
    """Contexts compared, with diffs, MISSING (the larger of the side counts) and failed compiles."""
    overall = collection.aggregates.overall
    missing = max(collection.status.missing_contexts, overall.base_misses, overall.diff_misses)
    failures = max(overall.base_failures, overall.diff_failures, collection.assert_contexts)
    if collection.status.failed and not failures:
        failures = 1
    return CollectionCounts(label, overall.diffed_contexts, overall.contexts_with_diffs, missing, failures,
                            overall.base_code_bytes, overall.diff_code_bytes, overall.base_perfscore,
                            overall.diff_perfscore)


def collection_failures(label: str, collection: CollectionReport) -> List[Failure]:
    """Replay failure, no data, assert groups and MISSING contexts, each with the repro commands."""
    repro = "\n".join(collection.repro_commands[:REPRO_COMMANDS_SHOWN])
    status = collection.status
    found: List[Failure] = []
    if status.failed:
        found.append(Failure(label, "replay failed", status.reason or "superpmi failed", 1,
                             "" if collection.asserts else repro))
    if status.no_data:
        found.append(Failure(label, "no data", "superpmi wrote no details: nothing was compared"))
    for group in collection.asserts:
        contexts = ", ".join(str(instance.context) for instance in group.instances)
        text = group.key + (f"\ncontexts: {contexts}" if contexts else "") + _hits_line(group)
        found.append(Failure(label, "assert", text, group.context_count, repro))
        repro = ""  # once per collection
    missing = collection_counts(label, collection).missing
    if missing:
        found.append(Failure(label, "MISSING", f"{missing:,} contexts lack data the JIT asked for", missing))
    return found


def _hits_line(group: AssertGroup) -> str:
    """`\nhits: 12 (base 6, diff 6)` when the hits (assert lines) are not one per context."""
    if group.count == group.context_count:
        return ""
    split = (f" (base {group.base_hits}, diff {group.diff_hits})"
             if group.base_hits is not None and group.diff_hits is not None else "")
    return f"\nhits: {group.count}{split}"


def header_of(summary: AsmDiffsSummary, collections: Sequence[str]) -> ReportHeader:
    return ReportHeader(summary.target_os, summary.target_arch, summary.host_os, summary.host_arch,
                        summary.base_jit_path, summary.diff_jit_path, summary.baseline,
                        list(summary.jit_options.base_options), list(summary.jit_options.diff_options),
                        list(collections), summary.repro_command)


def metric_verdicts(label: str, collection: CollectionReport,
                    rules: significance.Significance) -> List[MetricVerdict]:
    """A collection's metric totals judged by the significance rules (asmdiffs: the rule alone)."""
    found = []
    for metric, (base, diff) in collection.metric_totals.items():
        verdict = rules.judge(metric, base, diff)
        text = "significant" if verdict.flagged else "within noise" if verdict.quiet_change else "unchanged"
        found.append(MetricVerdict(label, metric, base, diff, text, rules.min_pct(metric)))
    return found


def _fill(report: HtmlReport, summary: AsmDiffsSummary, prefix: str) -> None:
    rules = significance.Significance(dict(summary.significance))
    for collection in summary.collections:
        label = prefix + collection.name
        report.counts.append(collection_counts(label, collection))
        report.failures.extend(collection_failures(label, collection))
        report.rows.add(label, collection.diff_rows)
        report.metrics.extend(metric_verdicts(label, collection, rules))
    metrics = list(dict.fromkeys(m.metric for m in report.metrics))
    report.significance_rule = significance.rule_line(rules, metrics, one_line) if metrics else ""


def report_from_summary(summary: AsmDiffsSummary, listings: Sequence[Listing] = ()) -> HtmlReport:
    """One run: the collections under their own names; `listings` name them the same way."""
    report = HtmlReport(header_of(summary, [c.name for c in summary.collections]), listings=list(listings))
    _fill(report, summary, "")
    return report


def _joined(values: Sequence[str]) -> str:
    return "; ".join(dict.fromkeys(v for v in values if v))


def report_from_merged(merged: MergedSummary) -> HtmlReport:
    """Several runs: one target keeps plain collection names; several targets prefix `<os> <arch>: `."""
    platforms = merged.platforms
    if len(platforms) == 1:
        return report_from_summary(platforms[0])
    prefixes = [f"{summary.platform}: " for summary in platforms]
    first = platforms[0]
    header = header_of(first, [p + c.name for p, s in zip(prefixes, platforms) for c in s.collections])
    header.target_os = " + ".join(summary.platform for summary in platforms)
    header.target_arch = f"({len(platforms)} targets)"
    header.host_os, header.host_arch = _joined([f"{s.host_os} {s.host_arch}".strip() for s in platforms]), ""
    header.base_jit_path = _joined([s.base_jit_path for s in platforms])
    header.diff_jit_path = _joined([s.diff_jit_path for s in platforms])
    header.baseline = _joined([s.baseline for s in platforms])
    header.repro_command = "\n".join(dict.fromkeys(s.repro_command for s in platforms if s.repro_command))
    report = HtmlReport(header)
    for prefix, summary in zip(prefixes, platforms):
        _fill(report, summary, prefix)
    return report


__all__ = ["collection_counts", "collection_failures", "diff_rows_of", "report_from_merged",
           "report_from_summary"]
