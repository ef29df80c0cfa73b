"""`superpmi.py replay`: replay collections through one JIT (CONTRACTS §12.6, §12.7).

Per collection: one superpmi run (cwd Core_Root), the exit code interpreted
(missing data is a warning, -1/-2/crash/unknown/timeout are failures), JIT asserts
grouped, repro `.mc` files moved to a unique `repro.<mch base>` directory. At the
end all asserts once more and a `Replay summary:` block. Exit 0 when every
replay was clean (or only missed data), else 1.
"""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import details
import jit_build
import jitutil
import mch_sources
import spmi_config
import superpmi_tool
from superpmi_tool import AssertInstance, RunOptions, Verdict

log = logging.getLogger("superpmi")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", parents=[spmi_config.common_options(), spmi_config.target_options()],
        help="replay collections through one JIT and report failures and asserts",
        description="Replay SuperPMI collections through a JIT; report compile failures, asserts and repros.")
    parser.add_argument("-jit_path", metavar="FILE",
                        help="JIT to replay (default: the native or cross JIT for the target in Core_Root)")
    parser.add_argument("-jitoption", action="append", metavar="KEY=VALUE",
                        help="JIT option without DOTNET_ (repeatable)")
    superpmi_tool.add_run_options(parser)
    mch_sources.add_collection_options(parser)
    parser.set_defaults(func=run_replay)


# ---------------------------------------------------------------- results

@dataclass
class CollectionOutcome:
    """What one collection's replay produced (shared with asmdiffs)."""

    mch: Path
    verdict: Verdict
    asserts: List[AssertInstance] = field(default_factory=list)
    failing_contexts: List[int] = field(default_factory=list)
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
    if verdict.failed and verdict.kind in ("fatal", "jit_init", "unknown") and reason:
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


def report_asserts(asserts: Sequence[AssertInstance]) -> None:
    for line in superpmi_tool.format_assert_report(asserts):
        log.info("%s", line)


def emit_azdo_issues(outcome: CollectionOutcome) -> None:
    """AzDO timeline entries for asserts and replay failures (only under AzDO)."""
    if not jitutil.running_under_azdo() or not outcome.failed:
        return
    groups = superpmi_tool.group_asserts(outcome.asserts)
    for group in groups:
        print(jitutil.azdo_log_issue("error", f"JIT assert in {outcome.mch.name} ({group.count}x): {group.key}"),
              flush=True)
    if not groups:
        print(jitutil.azdo_log_issue("error", outcome.failure_line()), flush=True)


def replay_summary_lines(outcomes: Sequence[CollectionOutcome]) -> List[str]:
    failed = [o for o in outcomes if o.failed]
    lines = ["Replay summary:"]
    if not failed:
        lines.append("  All replays clean")
    else:
        lines.append(f"  Replay failures in {len(failed)} MCH files:")
        lines += [f"    {o.mch}" for o in failed]
    return lines


# ---------------------------------------------------------------- the command

@dataclass
class ReplayContext:
    settings: spmi_config.Settings
    options: RunOptions
    superpmi: Path
    jit: Path
    jit_options: List[str]
    temp_dir: Path


def resolve_jit(args: argparse.Namespace, settings: spmi_config.Settings, options: RunOptions) -> Path:
    if getattr(args, "jit_path", None):
        return jit_build.validate_jit_file(Path(args.jit_path), "-jit_path")
    return jit_build.validate_jit_file(spmi_config.find_default_jit(settings, options.jit_name), "JIT")


def run_replay(args: argparse.Namespace) -> int:
    settings = spmi_config.resolve_settings(args, "Checked")
    options = RunOptions.from_args(args)
    spmi_config.start_logging(args, settings)
    superpmi = spmi_config.find_tool("superpmi", settings)
    jit = resolve_jit(args, settings, options)
    jit_build.check_jit_target(jit, "JIT", settings.target_os, settings.target_arch)
    jit_options = spmi_config.split_option_values(getattr(args, "jitoption", None), "-jitoption")
    core_root = _core_root(settings, superpmi)
    collections = mch_sources.resolve_collections(args, settings)
    log.info("SuperPMI replay with %s", jit)
    outcomes: List[CollectionOutcome] = []
    with jitutil.temporary_directory(prefix="spmi-replay-", keep=options.skip_cleanup) as temp_dir:
        for index, mch in enumerate(collections):
            ctx = ReplayContext(settings, options, superpmi, jit, jit_options, temp_dir / str(index))
            ctx.temp_dir.mkdir()
            outcomes.append(replay_collection(ctx, mch, core_root))
    all_asserts = [a for o in outcomes for a in o.asserts]
    if all_asserts:
        log.info("")
        log.info("All asserts:")
        report_asserts(all_asserts)
    log.info("")
    for line in replay_summary_lines(outcomes):
        log.info("%s", line)
    return 1 if any(o.failed for o in outcomes) else 0


def _core_root(settings: spmi_config.Settings, superpmi: Path) -> Path:
    return settings.core_root or superpmi.parent


def replay_collection(ctx: ReplayContext, mch: Path, core_root: Path) -> CollectionOutcome:
    files = superpmi_tool.run_files(ctx.temp_dir, mch, ctx.options)
    argv = superpmi_tool.build_replay_argv(ctx.superpmi, ctx.jit, mch, files, ctx.options,
                                           ctx.settings.arch, ctx.settings.target_arch, ctx.jit_options)
    log.info("")
    log.info("Replaying %s", mch)
    log.info("Invoking: %s", jitutil.format_command(argv, ctx.settings.host_os))
    run = superpmi_tool.run_superpmi(argv, core_root, ctx.options.timeout)
    outcome = finish_run(run, mch, files, diff_mode=False, timeout=ctx.options.timeout)
    if outcome.verdict.kind == superpmi_tool.FAILURES and ctx.options.produce_repro:
        repro_cmd = repro_command_prefix(ctx.superpmi, ctx.settings, ctx.options, ctx.jit_options, ctx.jit)
        attach_repros(outcome, ctx.temp_dir, ctx.settings, mch, repro_cmd, tag=None)
    emit_azdo_issues(outcome)
    return outcome


def finish_run(run: superpmi_tool.SuperpmiRun, mch: Path, files: superpmi_tool.RunFiles, diff_mode: bool,
               timeout: Optional[float], diff_with_release: bool = False,
               table: Optional["details.DetailsTable"] = None) -> CollectionOutcome:
    """Interpret one superpmi run: verdict, counts, asserts, failing contexts (logged)."""
    if run.timed_out:
        verdict = superpmi_tool.timeout_verdict(timeout or 0)
        log_verdict(verdict)
        return CollectionOutcome(mch, verdict)
    assert run.result is not None
    counts = counts_from_table(table, diff_mode) if table is not None else read_counts(files.details_csv, diff_mode)
    verdict = superpmi_tool.interpret_exit(run.result.outcome, diff_mode, counts, diff_with_release)
    verdict = verdict_with_reason(verdict, run.stderr)
    log_verdict(verdict)
    if verdict.kind in (superpmi_tool.CLEAN, superpmi_tool.DIFFS) and counts.missing:
        log.warning("%s", superpmi_tool.missing_message(counts, diff_mode))  # exit 2 hides missing data
    code = None if run.result.outcome.crashed else run.result.code
    outcome = CollectionOutcome(mch, verdict, counts=counts, exit_code=code)
    outcome.asserts = superpmi_tool.parse_asserts(run.stdout, mch.name)
    if verdict.kind == superpmi_tool.FAILURES:
        outcome.failing_contexts = superpmi_tool.read_mcl(files.fail_mcl)
        if outcome.failing_contexts:
            log.info("Failing contexts: %s", summarize_contexts(outcome.failing_contexts))
        report_asserts(outcome.asserts)
    return outcome


def read_counts(details_csv: Path, diff_mode: bool) -> superpmi_tool.ContextCounts:
    """Rows and misses from the details CSV; zeros when it is missing or unreadable."""
    try:
        table = details.read_details_csv(details_csv, metrics=())
    except details.DetailsError as exc:
        log.debug("Could not read %s: %s", details_csv, exc)
        return superpmi_tool.ContextCounts()
    return counts_from_table(table, diff_mode)


def counts_from_table(table: "details.DetailsTable", diff_mode: bool) -> superpmi_tool.ContextCounts:
    rows = table.rows
    base = sum(1 for r in rows if r.base_result == details.MISS)
    diff = sum(1 for r in rows if r.diff_result == details.MISS)
    if not diff_mode:
        return superpmi_tool.ContextCounts(len(rows), base, base, base)
    either = sum(1 for r in rows if details.MISS in (r.base_result, r.diff_result))
    return superpmi_tool.ContextCounts(len(rows), either, base, diff)


def repro_command_prefix(superpmi: Path, settings: spmi_config.Settings, options: RunOptions,
                         jit_options: Sequence[str], jit: Path) -> List[str]:
    """`<superpmi> <repro flags> <jit>`: target, altjit and JIT options as replayed."""
    argv = [str(superpmi)]
    argv += superpmi_tool.target_flags(settings.arch, settings.target_arch)
    if options.altjit:
        argv += superpmi_tool.altjit_flags(two_jits=False)
    argv += superpmi_tool.option_flags("-jitoption", jit_options)
    return argv + [str(jit)]


def attach_repros(outcome: CollectionOutcome, temp_dir: Path, settings: spmi_config.Settings, mch: Path,
                  command_prefix: Sequence[str], tag: Optional[str]) -> None:
    if not outcome.failing_contexts:
        return
    outcome.repros = superpmi_tool.collect_repros(temp_dir, settings.spmi_location, mch, tag)
    outcome.repro_lines = superpmi_tool.repro_report(outcome.repros, command_prefix, settings.host_os)
    for line in outcome.repro_lines:
        log.info("%s", line)
