"""Steps every replaying command shares (docs/contracts.md §12.6, §12.7): interpreting a
superpmi run, counting contexts, reporting asserts and failures, and repro commands.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from spmi.base import cioutput, config, runner
from spmi.base.errors import SuiteError
from spmi.formats import details
from spmi.reports import asm_analysis
from spmi.tools import superpmi_tool
from spmi.tools.superpmi_tool import AssertInstance, ResultKind, SuperpmiInvocation, Verdict

log = logging.getLogger("superpmi")


@dataclass
class CollectionOutcome:
    """What one collection's replay produced (shared with asmdiffs)."""

    mch: Path
    verdict: Verdict
    asserts: List[AssertInstance] = field(default_factory=list)
    failing_contexts: List[int] = field(default_factory=list)  # superpmi's `-f` list: errors and misses
    missing_contexts: List[int] = field(default_factory=list)  # of those, the ones that only missed data
    error_sides: Mapping[int, Tuple[bool, bool]] = field(default_factory=dict)  # two JITs: (base, diff) Error
    repros: List[Path] = field(default_factory=list)
    repro_lines: List[str] = field(default_factory=list)
    counts: superpmi_tool.ContextCounts = field(default_factory=superpmi_tool.ContextCounts)
    exit_code: Optional[int] = None  # superpmi's own code (-1, -2 restored); None after a timeout or crash

    @property
    def failed(self) -> bool:
        return self.verdict.failed

    def failure_line(self) -> str:
        return f"{self.mch}: {self.verdict.message}"


def first_error_line(stderr: str) -> str:
    """The first `ERROR: ` line superpmi printed (the reason behind -1/-2), if any."""
    for line in stderr.splitlines():
        if line.startswith("ERROR: "):
            return line[len("ERROR: "):].strip()
    return ""


def verdict_with_reason(verdict: Verdict, stderr: str) -> Verdict:
    """Append superpmi's own error text to a fatal / JIT-init verdict (one line)."""
    reason = first_error_line(stderr)
    if verdict.failed and verdict.kind.explained_in_stderr and reason:
        return Verdict(verdict.failed, f"{verdict.message} ({reason})", verdict.kind, verdict.warning)
    return verdict


def log_verdict(verdict: Verdict) -> None:
    if verdict.failed and not verdict.warning:
        log.error("%s", verdict.message)
    elif verdict.warning:
        log.warning("%s", verdict.message)
    else:
        log.info("%s", verdict.message)


def summarize_contexts(numbers: Sequence[int], shown: int = 20) -> str:
    text = ", ".join(str(n) for n in numbers[:shown])
    if len(numbers) > shown:
        text += f", ... ({len(numbers)} in all)"
    return text


def report_asserts(asserts: Sequence[AssertInstance], two_jits: bool = False,
                   error_sides: Optional[Mapping[Tuple[str, int], Tuple[bool, bool]]] = None) -> None:
    """The assert block on the console: each context once; with two JITs, its hits per JIT
    (attributed as the summaries do, from the details CSV's Error sides keyed by
    (collection name, context))."""
    hits_text = per_jit_hits_text(error_sides or {}) if two_jits else superpmi_tool.plain_hits_text
    for line in superpmi_tool.format_assert_report(asserts, hits_text=hits_text):
        log.info("%s", line)


def per_jit_hits_text(error_sides: Mapping[Tuple[str, int], Tuple[bool, bool]]) -> superpmi_tool.HitsText:
    def text(mch: str, context: int, hits: int) -> str:
        sides = error_sides.get((mch, context))
        split = asm_analysis.attribute_assert_hits([context] * hits, {context: sides} if sides else {})
        if split.base is None or split.diff is None:
            return f" ({hits} hit{'' if hits == 1 else 's'}, JIT unknown)"
        parts = [f"{name} JIT {count}" for name, count in (("base", split.base), ("diff", split.diff)) if count]
        return f" ({', '.join(parts)})"
    return text


def outcome_error_sides(outcomes: Sequence[CollectionOutcome]) -> Dict[Tuple[str, int], Tuple[bool, bool]]:
    """The Error sides of every collection's failing contexts, keyed by (collection name, context)."""
    return {(o.mch.name, context): sides for o in outcomes for context, sides in o.error_sides.items()}


def report_outcome_asserts(outcomes: Sequence[CollectionOutcome], two_jits: bool) -> None:
    report_asserts([a for o in outcomes for a in o.asserts], two_jits, outcome_error_sides(outcomes))


def emit_azdo_issues(outcome: CollectionOutcome) -> None:
    """AzDO timeline entries for asserts and replay failures (only under AzDO)."""
    if not cioutput.running_under_azdo() or not outcome.failed:
        return
    groups = superpmi_tool.group_asserts(outcome.asserts)
    for group in groups:
        print(cioutput.azdo_log_issue("error", f"JIT assert in {outcome.mch.name} ({group.count}x): {group.key}"),
              flush=True)
    if not groups:
        print(cioutput.azdo_log_issue("error", outcome.failure_line()), flush=True)


def replay_summary_lines(outcomes: Sequence[CollectionOutcome]) -> List[str]:
    """The end of `replay`: failures, then collections where nothing was compiled (every context
    missed data), else "All replays clean"."""
    failed = [o for o in outcomes if o.failed]
    unreplayed = [o for o in outcomes if not o.failed and superpmi_tool.all_missing(o.counts)]
    lines = ["Replay summary:"]
    if failed:
        lines.append(f"  Replay failures in {len(failed)} MCH files:")
        lines += [f"    {o.mch}" for o in failed]
    if unreplayed:
        lines.append(f"  Nothing replayed in {len(unreplayed)} MCH files ({superpmi_tool.ALL_MISSING_HINT}):")
        lines += [f"    {o.mch}" for o in unreplayed]
    if not failed and not unreplayed:
        lines.append("  All replays clean")
    return lines


@dataclass(frozen=True)
class ShortfallCheck:
    """Parallel mode: how many contexts the collection holds, to tell a crashed worker."""

    expected: Optional[int]
    error_limit: Optional[int]


def shortfall_check(options: superpmi_tool.RunOptions, mch: Path) -> Optional[ShortfallCheck]:
    if not options.uses_parallel:
        return None
    return ShortfallCheck(superpmi_tool.count_contexts(mch), options.error_limit)


def finish_run(run: superpmi_tool.SuperpmiRun, mch: Path, files: superpmi_tool.RunFiles, diff_mode: bool,
               timeout: Optional[float], diff_with_release: bool = False,
               table: Optional["details.DetailsTable"] = None,
               counts: Optional[superpmi_tool.ContextCounts] = None,
               shortfall: Optional[ShortfallCheck] = None, timeout_flag: str = "--timeout",
               missing_only: Optional[Set[int]] = None,
               error_sides: Optional[Mapping[int, Tuple[bool, bool]]] = None) -> CollectionOutcome:
    """Interpret one superpmi run: verdict, counts, asserts, failing contexts (logged).
    `missing_only` (of the failing contexts, those that only missed data) and `error_sides`
    come from a caller that read the details CSV already; else the CSV is read for them."""
    if run.timed_out:
        verdict = superpmi_tool.timeout_verdict(timeout or 0, run.reached, run.not_started, timeout_flag)
        log.error("Error: %s: %s", mch.name, verdict.message)
        return CollectionOutcome(mch, verdict)
    assert run.result is not None
    if counts is None:
        counts = counts_from_table(table, diff_mode) if table is not None else read_counts(files.details_csv, diff_mode)
    verdict = superpmi_tool.interpret_exit(run.result.outcome, diff_mode, counts, diff_with_release)
    unreadable = superpmi_tool.unreadable_collection_verdict(verdict, run.stderr, mch)
    verdict = unreadable or verdict_with_reason(verdict, run.stderr)
    # superpmi said why it stopped (-1 with an ERROR line): that, not a crashed worker, is the reason
    explained = verdict.kind is ResultKind.FATAL and bool(first_error_line(run.stderr))
    if shortfall is not None and not explained:
        failures = len(superpmi_tool.read_mcl(files.fail_mcl))
        verdict = superpmi_tool.parallel_shortfall_verdict(verdict, counts.total, shortfall.expected, failures,
                                                           shortfall.error_limit)
    log_verdict(verdict)
    log_missing_data(verdict, counts, diff_mode)
    code = None if run.result.outcome.crashed else run.result.code
    outcome = CollectionOutcome(mch, verdict, counts=counts, exit_code=code, error_sides=dict(error_sides or {}))
    outcome.asserts = superpmi_tool.parse_asserts(run.stdout, mch.name)
    if verdict.kind is ResultKind.FAILURES:
        outcome.failing_contexts = superpmi_tool.read_mcl(files.fail_mcl)
        if missing_only is None:
            missing_only = read_missing_only(files.details_csv, outcome.failing_contexts) if counts.missing else set()
        outcome.missing_contexts = [c for c in outcome.failing_contexts if c in missing_only]
        log_failing_contexts(outcome)
        report_outcome_asserts([outcome], diff_mode)
    return outcome


def log_missing_data(verdict: Verdict, counts: superpmi_tool.ContextCounts, diff_mode: bool) -> None:
    """The missing-data line whenever contexts missed data and the exit code did not say so
    already (exit 3): exit 2 and exit 1 take precedence over 3 (docs/contracts.md §2.9)."""
    if verdict.kind in (ResultKind.CLEAN, ResultKind.DIFFS, ResultKind.FAILURES) and counts.missing:
        log.warning("%s", superpmi_tool.missing_message(counts, diff_mode))


def log_failing_contexts(outcome: CollectionOutcome) -> None:
    """superpmi's failing list split: the contexts that failed, then those that only missed data."""
    missing = set(outcome.missing_contexts)
    failed = [c for c in outcome.failing_contexts if c not in missing]
    if failed:
        log.info("Failing contexts: %s", summarize_contexts(failed))
    if outcome.missing_contexts:
        log.info("Contexts with missing data: %s", summarize_contexts(outcome.missing_contexts))


def read_missing_only(details_csv: Path, contexts: Sequence[int]) -> Set[int]:
    """Of `contexts`, those whose details rows only missed data (a Miss, no Error, docs/contracts.md
    §3.2); empty when the CSV cannot be read."""
    watched = set(contexts)
    missed: Set[int] = set()
    erred: Set[int] = set()

    def note(table: "details.DetailsTable") -> None:
        c = table.columns
        for context, base, diff in zip(c.context, c.base_result, c.diff_result):
            if context in watched:
                if details.ERROR in (base, diff):
                    erred.add(context)
                elif details.MISS in (base, diff):
                    missed.add(context)

    try:
        details.stream_details_csv(details_csv, note, metrics=())
    except details.DetailsError as exc:
        log.debug("Could not read %s: %s", details_csv, exc)
        return set()
    return missed - erred


def read_counts(details_csv: Path, diff_mode: bool) -> superpmi_tool.ContextCounts:
    """Rows and misses from the details CSV; zeros when it is missing or unreadable."""
    sums = [0, 0, 0, 0]

    def count(table: "details.DetailsTable") -> None:
        part = counts_from_table(table, diff_mode)
        for index, value in enumerate((part.total, part.missing, part.missing_base, part.missing_diff)):
            sums[index] += value

    try:
        details.stream_details_csv(details_csv, count, metrics=())
    except details.DetailsError as exc:
        log.debug("Could not read %s: %s", details_csv, exc)
        return superpmi_tool.ContextCounts()
    return superpmi_tool.ContextCounts(*sums)


def counts_from_table(table: "details.DetailsTable", diff_mode: bool) -> superpmi_tool.ContextCounts:
    rows = table.rows
    base = sum(1 for r in rows if r.base_result == details.MISS)
    diff = sum(1 for r in rows if r.diff_result == details.MISS)
    if not diff_mode:
        return superpmi_tool.ContextCounts(len(rows), base, base, base)
    either = sum(1 for r in rows if details.MISS in (r.base_result, r.diff_result))
    return superpmi_tool.ContextCounts(len(rows), either, base, diff)


def repro_command_prefix(call: SuperpmiInvocation, jit_options: Sequence[str], jit: Path) -> List[str]:
    """`<superpmi> <repro flags> <jit>`: target, altjit and JIT options as replayed."""
    argv = [str(call.superpmi)]
    argv += call.target_flags()
    if call.altjit:
        argv += superpmi_tool.altjit_flags(two_jits=False)
    argv += superpmi_tool.option_flags("-jitoption", jit_options)
    return argv + [str(jit)]


def attach_repros(outcome: CollectionOutcome, temp_dir: Path, settings: config.Settings, mch: Path,
                  command_prefix: Sequence[str], tag: Optional[str]) -> None:
    if not outcome.failing_contexts:
        return
    outcome.repros = superpmi_tool.collect_repros(temp_dir, settings.spmi_location, mch, tag)
    outcome.repro_lines = superpmi_tool.repro_report(outcome.repros, command_prefix, settings.host_os)
    for line in outcome.repro_lines:
        log.info("%s", line)


# ---------------------------------------------------------------- JITs superpmi cannot load

def stop_if_jit_unloadable(run: superpmi_tool.SuperpmiRun, jits: Sequence[Tuple[str, Path]], superpmi: Path,
                           mch: Path, core_root: Path, settings: config.Settings) -> None:
    """A JIT superpmi cannot load fails every collection alike: stop now with one line naming it.

    `jits` are (role, path), e.g. ("base JIT", ...); with two, each is probed alone on the
    collection's first context to tell which one superpmi cannot load (§2.8.5 names neither).
    """
    error = superpmi_tool.jit_load_error(run.stdout + "\n" + run.stderr)
    if error is None:
        return
    culprits: List[Tuple[str, Path, str]] = []
    for role, path in jits:
        own = error if len(jits) == 1 else probe_jit_load(superpmi, path, mch, core_root, settings)
        if own:
            culprits.append((role, path, own))
    if not culprits:  # the probes loaded both: name the pair with the first run's message
        culprits = [(role, path, error) for role, path in jits]
    raise SuiteError(unloadable_jit_message(culprits, mch))


def probe_jit_load(superpmi: Path, jit: Path, mch: Path, core_root: Path, settings: config.Settings) -> Optional[str]:
    """The load error superpmi reports for `jit` alone (None when it loads)."""
    argv = superpmi_tool.build_load_probe_argv(superpmi, jit, mch, settings.arch, settings.target_arch)
    result = runner.run(argv, cwd=core_root, log_output=False)
    return superpmi_tool.jit_load_error(result.stdout + "\n" + result.stderr)


def unloadable_jit_message(culprits: Sequence[Tuple[str, Path, str]], mch: Path) -> str:
    named = " and ".join(f"the {role} '{path}' ({error})" for role, path, error in culprits)
    return (f"superpmi cannot load {named}; stopped after {mch.name}. Pass a JIT built for this host and "
            "the target, with the same JIT-EE version as superpmi")
