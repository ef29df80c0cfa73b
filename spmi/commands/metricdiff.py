"""`superpmi.py tpdiff`, `memdiff` and `metricdiff` (docs/contracts.md §10, §12.6, §12.7, §12.11, §12.12, §12.12a).

Both replay every collection in diff mode through a baseline and a diff release
JIT, read the details CSV and diff metrics per collection:

* tpdiff — instructions executed inside each JIT, counted by PIN
  (`pin -follow_execv -t <pintool> -quiet -- superpmi …`, `JitReportMetrics=0` forced);
* memdiff — every JIT metric (`JitReportMetrics=1` forced), focused on
  `BytesAllocated` (or `-metric NAME`), with a gate: exit 2 when a collection's
  Overall or FullOpts `BytesAllocated` grows by at least `-memdiff_threshold` %;
* metricdiff — the general form: every JIT metric, no focus required, no gate.

Exit codes: 0 ok; 1 a replay without usable data (-1, -2, crash, timeout), no results
at all, or an error; 2 memdiff gate crossed (only when nothing failed).
Aggregation and rendering live in `metricdiff_model` / `metricdiff_report`."""
from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence, Union

from spmi.base import cioutput, config, errors, fsutil, logs, runner
from spmi.base.errors import SuiteError
from spmi.base.untrusted import console_line
from spmi.commands import parsing, shared
from spmi.formats import details
from spmi.reports import metric_markdown as report
from spmi.reports import metric_model as model
from spmi.reports import significance as signal
from spmi.reports.metric_model import BYTES_ALLOCATED, INSTRUCTIONS, MEMDIFF, METRICDIFF, TPDIFF, MetricDiffRun
from spmi.sources import collection_feed
from spmi.steps import coredistools, jit_pair, replay_steps
from spmi.tools import jit_build, superpmi_tool
from spmi.tools import mcs as mcs_tool
from spmi.tools.superpmi_tool import JitPairOptions, RunFiles, RunOptions, SuperpmiInvocation

if TYPE_CHECKING:  # PIN is for tpdiff only: imported where used
    from spmi.tools import pintools
from spmi.steps.outputs import log_verdicts, summary_paths

log = logging.getLogger("superpmi")

EXIT_OK, EXIT_FAILURE, EXIT_GATE = 0, 1, 2


def threshold_value(text: str) -> float:
    """`-memdiff_threshold`: a non-negative finite percentage (0 disables)."""
    return parsing.non_negative_float(text)


def _add_command(subparsers: argparse._SubParsersAction, name: str, help_text: str,
                 description: str) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, parents=[shared.common_options(), shared.target_options(),
                                                  shared.significance_options()],
                                   help=help_text, description=description)
    shared.add_jit_pair_options(parser)
    shared.add_baseline_options(parser, base_jit_path=False)
    shared.add_run_options(parser)
    shared.add_overlapped_collection_options(parser)
    parser.add_argument("--summary_as_json", action="store_true",
                        help=f"write {name}_summary.json (for `summarize`) instead of markdown")
    return parser


def register(subparsers: argparse._SubParsersAction) -> None:
    tp = _add_command(subparsers, TPDIFF, "measure JIT throughput differences with PIN",
                      "Count instructions executed inside the base and diff JITs (PIN clrjit_inscount) "
                      "while replaying collections; x86/x64 hosts only.")
    tp.add_argument("-pin_path", metavar="FILE_OR_DIR",
                    help="pin executable or PIN package directory (default: spmi_location/pintools/1.0/<os>, "
                         "downloaded when missing)")
    tp.set_defaults(func=run_tpdiff)
    mem = _add_command(subparsers, MEMDIFF, "measure JIT memory (and other metric) differences",
                       "Diff the JIT metrics (BytesAllocated first) of the base and diff JITs while replaying "
                       "collections; fail (exit 2) when BytesAllocated grows by -memdiff_threshold % or more.")
    mem.add_argument("-memdiff_threshold", type=threshold_value, default=report.DEFAULT_THRESHOLD, metavar="PCT",
                     help="exit 2 when a collection's Overall or FullOpts BytesAllocated grows by at least "
                          "PCT %% (default 25; 0 disables)")
    mem.add_argument("-metric", metavar="NAME",
                     help="metric to focus on instead of BytesAllocated (any Base X/Diff X column, e.g. PerfScore)")
    mem.set_defaults(func=run_memdiff)
    general = _add_command(subparsers, METRICDIFF, "measure JIT metric differences for every metric in the "
                                                   "details CSV",
                           "Diff every JIT metric the base and diff JITs report (every Base X/Diff X column of "
                           "the details CSV, such as memory allocations, code size or CSE counts) while replaying "
                           "collections.")
    general.add_argument("-metric", metavar="NAME",
                         help="metric whose per-context top lists the long summary shows (default BytesAllocated "
                              "when reported, else none)")
    general.set_defaults(func=run_metricdiff)


def report_metrics_option(enabled: bool) -> str:
    return f"JitReportMetrics={1 if enabled else 0}"


def build_metric_argv(call: SuperpmiInvocation, base_jit: Path, diff_jit: Path, mch: str,
                      details_csv: Optional[Path], jit_options: JitPairOptions, report_metrics: bool,
                      pin: Optional[pintools.PinTool]) -> List[str]:
    """§12.6 tpdiff/memdiff: `[pin … --] superpmi -applyDiff -v ewi -details <csv> [-target] [altjit]
    -jitoption force JitReportMetrics=N [-jitoption …] -jit2option force JitReportMetrics=N [-jit2option …]
    [par] [common] <base jit> <diff jit> <mch>`."""
    argv = pin.command_prefix() if pin is not None else []
    options = call.options
    argv += [str(call.superpmi), "-applyDiff", "-v", "ewi"]
    if details_csv is not None:
        argv += ["-details", str(details_csv)]
    argv += call.target_flags()
    if options.altjit:
        argv += superpmi_tool.altjit_flags(two_jits=True)
    forced = [report_metrics_option(report_metrics)]
    argv += superpmi_tool.option_flags("-jitoption", forced, force=True)
    argv += superpmi_tool.option_flags("-jitoption", jit_options.side("base"))
    argv += superpmi_tool.option_flags("-jit2option", forced, force=True)
    argv += superpmi_tool.option_flags("-jit2option", jit_options.side("diff"))
    argv += superpmi_tool.parallel_flags(options) + superpmi_tool.common_flags(options)
    argv += [str(base_jit), str(diff_jit), mch]
    return argv


def repro_template(call: SuperpmiInvocation, base_jit: Path, diff_jit: Path, jit_options: JitPairOptions,
                   report_metrics: bool, pin: Optional[pintools.PinTool], host_os: str) -> str:
    """`[pin … --] superpmi -applyDiff … -c N <base jit> <diff jit> <collection>` for one context."""
    single = call.with_options(RunOptions(sequential=True, compile_list="N", altjit=call.altjit))
    argv = build_metric_argv(single, base_jit, diff_jit, "", Path("details.csv"), jit_options, report_metrics, pin)
    return runner.format_command(argv[:-1], host_os) + " <collection>"


def summary_options(shared: Sequence[str], specific: Sequence[str]) -> List[str]:
    """Options shown in the summary: `-jitoption` values first, then side-specific ones (§12.10)."""
    return list(shared) + list(specific)


def write_run_summaries(run: MetricDiffRun, directory: Path, as_json: bool) -> List[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    long_path, short_path = summary_paths(directory, run.kind, as_json)
    if as_json:
        fsutil.atomic_write_text(long_path, json.dumps(model.run_to_json(run), indent=1, allow_nan=False) + "\n")
        return [long_path]
    assert short_path is not None
    write_markdown(run, long_path, short_path)
    return [long_path, short_path]


def write_markdown(run: MetricDiffRun, long_path: Path, short_path: Path) -> None:
    """The run's summaries, exactly as `superpmi.py summarize` renders its JSON (which does not name the
    target: the verdict line names the kind only; the console's names the target)."""
    fsutil.atomic_write_text(long_path, report.render(run, True, details.metric_direction))
    fsutil.atomic_write_text(short_path, report.render(run, False, details.metric_direction))


def target_label(settings: config.Settings) -> str:
    """`<os> <arch>` of the run's target, as the summaries name it."""
    return f"{settings.target_os} {settings.target_arch}"


def build_record(path: Path) -> model.BuildRecord:
    info = jit_build.read_build_info(path)
    if info is None:
        return model.BuildRecord(decoded=False)
    return model.BuildRecord(decoded=True, compiler=info.compiler, native_pgo=info.native_pgo,
                             text=info.describe())


def log_build_warnings(base: model.BuildRecord, diff: model.BuildRecord) -> None:
    for kind, message in model.build_warnings(base, diff):
        log.warning("Warning: %s", message)
        if kind == "compiler":
            log.warning("Base JIT's compiler: %s", base.compiler)
            log.warning("Diff JIT's compiler: %s", diff.compiler)


@dataclass
class MetricJob:
    """What a tpdiff/memdiff run needs besides the collections."""

    kind: str
    focus: str
    settings: config.Settings
    options: RunOptions
    superpmi: Path
    core_root: Path
    base_jit: Path
    diff_jit: Path
    jit_options: JitPairOptions
    pin: Optional[pintools.PinTool]

    @property
    def invocation(self) -> SuperpmiInvocation:
        return SuperpmiInvocation(self.superpmi, self.settings.arch, self.settings.target_arch, self.options)

    @property
    def report_metrics(self) -> bool:
        return self.kind in (MEMDIFF, METRICDIFF)


@dataclass(frozen=True)
class KindOptions:
    """The options only some of the commands have: tpdiff's PIN, memdiff's and metricdiff's focus,
    memdiff's threshold."""

    kind: str
    focus: str
    pin_path: Optional[str] = None
    threshold: Optional[float] = None


def apply_significance_options(args: argparse.Namespace, run: MetricDiffRun) -> None:
    """`-significance` overrides and, with `--noise_check`, k into the run (its summaries state them)."""
    run.significance = dict(args.significance)
    run.noise_k = args.noise_k if args.noise_check else None


def run_tpdiff(args: argparse.Namespace) -> int:
    return run_metric_command(args, KindOptions(TPDIFF, INSTRUCTIONS, pin_path=args.pin_path))


def run_memdiff(args: argparse.Namespace) -> int:
    return run_metric_command(args, KindOptions(MEMDIFF, args.metric or BYTES_ALLOCATED,
                                                threshold=args.memdiff_threshold))


def run_metricdiff(args: argparse.Namespace) -> int:
    return run_metric_command(args, KindOptions(METRICDIFF, args.metric or BYTES_ALLOCATED))


def run_metric_command(args: argparse.Namespace, chosen: KindOptions) -> int:
    kind = chosen.kind
    signal.check_override_names(args.significance)
    shared.check_inputs(args, kind, {"-base_jit_path": args.base_jit_path, "-diff_jit_path": args.diff_jit_path})
    settings = shared.settings_from_args(args, "Release")
    if kind == TPDIFF:
        from spmi.tools import pintools
        pintools.check_throughput_host(settings.arch)
    options = shared.run_options(args)
    shared.start_logging(args, settings)
    job = prepare_job(args, settings, options, chosen)
    run = MetricDiffRun(kind=kind, focus=job.focus, target_os=settings.target_os, target_arch=settings.target_arch,
                        base_jit_options=summary_options(job.jit_options.shared, job.jit_options.base_only),
                        diff_jit_options=summary_options(job.jit_options.shared, job.jit_options.diff_only))
    if kind == TPDIFF:
        run.base_build, run.diff_build = build_record(job.base_jit), build_record(job.diff_jit)
        log_build_warnings(run.base_build, run.diff_build)
    elif kind == MEMDIFF:
        run.threshold = chosen.threshold
    apply_significance_options(args, run)
    run.repro = repro_template(job.invocation, job.base_jit, job.diff_jit, job.jit_options, job.report_metrics,
                               job.pin, settings.host_os)
    query = shared.collection_query(args)
    with collection_feed.collection_feed(query, settings, overlap=not args.no_overlap) as collections, \
            fsutil.temporary_directory(prefix=f"spmi-{kind}-", keep=options.skip_cleanup) as temp_dir:
        for index, mch in enumerate(collections):
            work_dir = temp_dir / str(index)
            work_dir.mkdir()
            measured = len(run.collections)
            diff_collection(job, mch, work_dir, run)
            if run.noise_k is not None and len(run.collections) > measured:
                calibrate_collection(job, mch.resolve(), work_dir, run.collections[-1])
    return finish(run, settings, bool(args.summary_as_json))


def prepare_job(args: argparse.Namespace, settings: config.Settings, options: RunOptions,
                chosen: KindOptions) -> MetricJob:
    kind = chosen.kind
    superpmi = config.find_tool("superpmi", settings)
    coredistools.ensure_beside_superpmi(superpmi, settings, args.storage_url)
    core_root = settings.core_root or superpmi.parent
    jits = jit_pair.resolve_jit_pair(args.diff_jit_path, shared.baseline_request(args), settings, options.jit_name)
    base_jit, diff_jit = jits.base, jits.diff
    jit_options = shared.jit_pair_options(args)
    pin = None
    if kind == TPDIFF:
        from spmi.tools import pintools
        pin = pintools.resolve_pin(chosen.pin_path, settings.spmi_location, settings.host_os,
                                   settings.arch, args.storage_url, settings.show_progress)
        log.info("Using pin %s with pintool %s", pin.pin, pin.pintool)
    focus = chosen.focus
    log.info("Base JIT: %s", base_jit)
    log.info("Diff JIT: %s", diff_jit)
    return MetricJob(kind, focus, settings, options, superpmi, core_root, base_jit, diff_jit, jit_options, pin)


def diff_collection(job: MetricJob, mch: Path, work_dir: Path, run: MetricDiffRun) -> None:
    """Replay one collection, interpret the exit code, aggregate the CSV into `run`."""
    # superpmi runs in Core_Root: every path it gets must be absolute
    mch = mch.resolve()
    files = RunFiles(fail_mcl=work_dir / f"{mch.name}_fail.mcl",
                     details_csv=superpmi_tool.details_csv_path(job.options.details, mch, work_dir).resolve())
    argv = build_metric_argv(job.invocation, job.base_jit, job.diff_jit, str(mch), files.details_csv,
                             job.jit_options, job.report_metrics, job.pin)
    log.info("")
    log.info("%s %s", "Measuring throughput of" if job.kind == TPDIFF else "Measuring JIT metrics of", mch)
    context_map = start_context_map(job.settings, mch) if job.kind == TPDIFF else None
    try:
        spmi_run = run_measurement(argv, job.core_root, job.options.timeout)
        replay_steps.stop_if_jit_unloadable(spmi_run, [("base JIT", job.base_jit), ("diff JIT", job.diff_jit)],
                                            job.superpmi, mch, job.core_root, job.settings)
        digest = interpret_run(spmi_run, mch, files, job, run)
        if digest is None:
            return
        if job.kind == TPDIFF:
            diff_throughput(digest, run, context_map)
        elif job.kind == METRICDIFF:
            diff_all_metrics(job.focus, mch, digest, run)
        else:
            diff_memory(job.focus, mch, digest, run)
    finally:
        if context_map is not None:
            context_map.stop()  # a no-op once its rows were taken


def calibrate_collection(job: MetricJob, mch: Path, work_dir: Path, result: model.CollectionResult) -> None:
    """`--noise_check`: the base JIT replayed as both sides (one more replay); the spread it shows
    becomes the collection's noise floor (reports/significance). Without usable data: a warning,
    and the collection is judged by the rule alone."""
    aa_csv = (work_dir / f"{mch.name}_noise_check.csv").resolve()
    same = JitPairOptions(job.jit_options.forced, job.jit_options.shared, job.jit_options.base_only,
                          job.jit_options.base_only)
    argv = build_metric_argv(job.invocation, job.base_jit, job.base_jit, str(mch), aa_csv, same,
                             job.report_metrics, job.pin)
    log.info("Noise check of %s: replaying the base JIT as both sides", mch)
    spmi_run = run_measurement(argv, job.core_root, job.options.timeout)
    verdict = aa_verdict(spmi_run, job.options.timeout)
    if verdict.kind.has_no_data:
        no_noise_data(result, verdict.message)
        return
    digest = signal.SpreadDigest([INSTRUCTIONS] if job.kind == TPDIFF else None)
    try:
        details.stream_details_csv(aa_csv, digest.add, [] if job.kind == TPDIFF else None)
    except details.DetailsError as exc:
        if not details.is_no_data(exc):
            raise
        no_noise_data(result, str(exc))
        return
    result.noise = signal.finite_spreads(digest.spreads())
    result.noise_failed = digest.failed
    if verdict.failed or digest.failed:
        result.noise_problem = verdict.message if verdict.failed else "failed contexts"
        log.warning("Warning: the noise check of %s ended with %s; %s, so its noise floor comes from the contexts "
                    "that compiled", mch.name, result.noise_problem, report.noise_failures_text(digest.failed))
    spread = result.noise.get(job.focus, {}).get("Overall")
    if spread is not None:
        log.info("  A/A spread of %s: %s (Overall)", job.focus, signal.fmt_floor(spread))


def aa_verdict(spmi_run: superpmi_tool.SuperpmiRun, timeout: Optional[float]) -> superpmi_tool.Verdict:
    """How the A/A replay ended (§12.7): a timeout, a crash or a fatal error leaves no data."""
    if spmi_run.timed_out or spmi_run.result is None:
        return superpmi_tool.timeout_verdict(timeout or 0)
    return superpmi_tool.interpret_exit(spmi_run.result.outcome, True, superpmi_tool.ContextCounts())


def no_noise_data(result: model.CollectionResult, why: str) -> None:
    """The A/A replay left nothing to measure noise with: said on the console and in the summary."""
    result.noise_problem = why
    log.warning("Warning: the noise check of %s produced no data (%s); its changes are judged by the rule alone",
                result.name, why)


def run_measurement(argv: Sequence[str], core_root: Path, timeout: Optional[float]) -> superpmi_tool.SuperpmiRun:
    """One superpmi (or pin) process, as `superpmi_tool.run_superpmi`, but its output (hundreds of
    `<ASM_DIFF>` lines per collection) goes to the log as one block instead of a record per line."""
    try:
        result = runner.run(argv, cwd=core_root, timeout=timeout, log_output=False)
    except errors.ToolTimeout as exc:
        log.debug("%s", exc)
        return superpmi_tool.SuperpmiRun(list(argv), None, None, timed_out=True, timeout_message=str(exc))
    for stream in (result.stdout, result.stderr):
        if stream.strip():
            logs.log_block(logging.DEBUG, "", stream.rstrip("\n"))
    return superpmi_tool.SuperpmiRun(list(argv), None, result)


def interpret_run(spmi_run: superpmi_tool.SuperpmiRun, mch: Path, files: RunFiles, job: MetricJob,
                  run: MetricDiffRun) -> Optional[model.MetricDigest]:
    """§12.7 for tpdiff/memdiff: -1/-2/crash/timeout leave no usable data (a failure); otherwise
    the details CSV is read once, in parts, for the result line and the metrics."""
    if spmi_run.timed_out:
        verdict = superpmi_tool.timeout_verdict(job.options.timeout or 0)
        replay_steps.log_verdict(verdict)
        run.failures.append(model.CollectionFailure(mch.name, verdict.message))
        return None
    assert spmi_run.result is not None
    outcome = spmi_run.result.outcome
    verdict = superpmi_tool.interpret_exit(outcome, True, superpmi_tool.ContextCounts())
    if verdict.kind.has_no_data:
        verdict = replay_steps.verdict_with_reason(verdict, spmi_run.stderr)
        replay_steps.log_verdict(verdict)
        run.failures.append(model.CollectionFailure(mch.name, verdict.message))
        return None
    digest = read_digest(files.details_csv, job, mch.name)
    counts = context_counts(digest) if digest is not None else superpmi_tool.ContextCounts()
    verdict = superpmi_tool.interpret_exit(outcome, True, counts, compares_code=False)
    replay_steps.log_verdict(verdict)
    replay_steps.log_missing_data(verdict, counts, diff_mode=True)
    if verdict.kind is superpmi_tool.ResultKind.FAILURES:
        replay_steps.report_asserts(superpmi_tool.parse_asserts(spmi_run.stdout, mch.name), two_jits=True)
    return digest


def context_counts(digest: model.MetricDigest) -> superpmi_tool.ContextCounts:
    """Contexts replayed and missing (either side, base, diff) for the result line."""
    return superpmi_tool.ContextCounts(digest.rows, digest.either_misses, digest.base_misses, digest.diff_misses)


def read_digest(path: Path, job: MetricJob, name: str) -> Optional[model.MetricDigest]:
    """The details CSV read once (tpdiff: no metric columns; memdiff: all it reports); None
    when superpmi left no data."""
    if job.kind == TPDIFF:
        digest = model.MetricDigest(name, [INSTRUCTIONS], INSTRUCTIONS, model.TPDIFF_MIN_EXAMPLE_DELTA)
        columns: Optional[Sequence[str]] = []
    else:
        digest = model.MetricDigest(name, None, job.focus)
        columns = None
    try:
        details.stream_details_csv(path, digest.add, columns)
    except details.DetailsError as exc:
        if details.is_no_data(exc):
            log.warning("Warning: no data: %s", exc)
            return None
        raise
    return digest


def diff_throughput(digest: model.MetricDigest, run: MetricDiffRun,
                    context_map: Optional[mcs_tool.ContextMapJob]) -> None:
    result = digest.result()
    totals = result.total(INSTRUCTIONS)
    for line in report.tpdiff_console_lines(result, INSTRUCTIONS):
        log.info("%s", line)
    if totals.base == 0 or totals.diff == 0:
        log.warning("One compilation failed to produce any results")
        return
    if context_map is not None and any(not example.method for example in result.examples):
        name_examples(result.examples, context_map.rows())
    run.collections.append(result)


def start_context_map(settings: config.Settings, mch: Path) -> Optional[mcs_tool.ContextMapJob]:
    """Release JITs measured without metrics report no method names: `mcs -dumpMap` names them,
    started beside the replay (it reads the same collection; docs/contracts.md §5, §12.11)."""
    mcs = config.find_tool("mcs", settings, required=False)
    if mcs is None:
        log.debug("mcs not found; example contexts stay without method names")
        return None
    return mcs_tool.ContextMapJob(mcs, mch)


def name_examples(examples: Sequence[model.Example], rows: Mapping[int, mcs_tool.DumpMapRow]) -> None:
    """Each unnamed example named as the JIT names it in memdiff's and metricdiff's tables,
    `<class>:<method>(<args>)[:<return>]` from its map row (overloads told apart; docs/contracts.md §5)."""
    for example in examples:
        row = rows.get(example.context)
        if not example.method and row is not None:
            example.method = row.jit_name()


def check_metrics_reported(data: Union[model.MetricDigest, details.DetailsTable], focus: str,
                           source: str) -> List[str]:
    """The metrics to diff (of a digest, or of a whole table); a clear error when the JITs
    do not report the focus metric."""
    digest = data
    if not isinstance(digest, model.MetricDigest):
        digest = model.MetricDigest(source, None, focus)
        digest.add(data)
    metrics = list(digest.metrics or [])
    if focus not in metrics:
        if focus == BYTES_ALLOCATED:
            raise SuiteError(f"the JITs do not report metrics: {source} has no 'Base {BYTES_ALLOCATED}'/"
                             f"'Diff {BYTES_ALLOCATED}' columns; memdiff needs release JITs (and a superpmi) "
                             "that support JitReportMetrics=1")
        names = ", ".join(metrics) or "none"
        raise SuiteError(f"-metric {focus}: {source} has no 'Base {focus}'/'Diff {focus}' columns "
                         f"(metrics reported: {names})")
    if focus == BYTES_ALLOCATED and digest.any_succeeded:
        for side in ("base", "diff"):
            if not digest.focus_nonzero[side]:
                raise SuiteError(f"the {side} JIT does not report metrics: {BYTES_ALLOCATED} is 0 for every "
                                 f"compiled context in {source}; memdiff needs a release JIT that honours "
                                 "JitReportMetrics=1")
    return metrics


def diff_memory(focus: str, mch: Path, digest: model.MetricDigest, run: MetricDiffRun) -> None:
    check_metrics_reported(digest, focus, mch.name)
    result = digest.result()
    for line in report.memdiff_console_lines(result):
        log.info("%s", line)
    run.collections.append(result)


def diff_all_metrics(focus: str, mch: Path, digest: model.MetricDigest, run: MetricDiffRun) -> None:
    """metricdiff (§12.12a): every reported metric; the focus only chooses the example rows
    (the digest kept top candidates of the focus only when the CSV has it)."""
    metrics = list(digest.metrics or [])
    if not metrics:
        raise SuiteError(f"the JITs do not report metrics: {mch.name} has no 'Base X'/'Diff X' metric columns; "
                         "metricdiff needs JITs (and a superpmi) that support JitReportMetrics=1")
    if focus not in metrics and focus != BYTES_ALLOCATED:
        raise SuiteError(f"-metric {focus}: {mch.name} has no 'Base {focus}'/'Diff {focus}' columns "
                         f"(metrics reported: {', '.join(metrics)})")
    result = digest.result()
    if focus not in metrics:
        result.examples = []
    for line in report.memdiff_console_lines(result):
        log.info("%s", line)
    run.collections.append(result)


def judged_metrics(run: MetricDiffRun) -> List[str]:
    """The metrics a summary judges: tpdiff its count, memdiff those with a direction, metricdiff all."""
    if run.kind == TPDIFF:
        return [run.focus]
    if run.kind == MEMDIFF:
        return run.directional_metrics(details.metric_direction)
    return run.all_metrics()


def log_significance(run: MetricDiffRun) -> None:
    """One console line: how many changes were flagged and how many stayed within noise."""
    if not run.collections:
        return
    metrics = judged_metrics(run)
    rows = model.ROWS if run.kind == TPDIFF else ("Overall",)
    flagged = sum(1 for m in metrics for c in run.collections for row in rows if signal.flagged(run, c, m, row))
    quiet = len(signal.quiet_changes(run, metrics, rows))
    if flagged:
        log.info("Significant changes: %d (%d more within noise)", flagged, quiet)
    else:
        log.info("No significant %s differences found (%d changes within noise)",
                 {TPDIFF: "throughput", MEMDIFF: "memory"}.get(run.kind, "metric"), quiet)
    log.info("%s", signal.rule_line(signal.run_significance(run), metrics, console_line))
    for line in signal.unmatched_overrides(run.significance, list(dict.fromkeys(metrics + run.all_metrics()))):
        log.warning("Warning: %s", line)


def finish(run: MetricDiffRun, settings: config.Settings, as_json: bool) -> int:
    """Summaries, the closing console block, and the exit code (0 ok, 1 failure, 2 memory gate)."""
    log.info("")
    if run.collections:
        written = write_run_summaries(run, settings.spmi_location, as_json)
        log.info("%s summary:", run.kind)
        for path in written:
            log.info("  %s", path)
    else:
        log.error("Error: no collection produced %s results; no summary written",
                  "throughput" if run.kind == TPDIFF else "metric")
    log_significance(run)
    if run.failures:
        log.error("  Replay failures in %d MCH files:", len(run.failures))
        for failure in run.failures:
            log.error("    %s (%s)", failure.name, failure.reason)
    breaches = report.gate_breaches(run, run.threshold) if run.kind == MEMDIFF else []
    for breach in breaches:
        log.error("Error: memory gate: %s %s %s grew by %s (threshold %s%%)", breach.collection, breach.row,
                  BYTES_ALLOCATED, report.fmt_pct(breach.pct, direction=report.NEUTRAL),
                  report.fmt_threshold(run.threshold or 0))
    emit_azdo_issues(run, breaches)
    if run.collections:
        log_verdicts([report.verdict_line(run, target_label(settings), markdown=False)])
    if run.failures or not run.collections:
        return EXIT_FAILURE
    return EXIT_GATE if breaches else EXIT_OK


def emit_azdo_issues(run: MetricDiffRun, breaches: Sequence[report.GateBreach]) -> None:
    """Replay failures and gate breaches as AzDO timeline errors (only under AzDO)."""
    if not cioutput.running_under_azdo():
        return
    for failure in run.failures:
        print(cioutput.azdo_log_issue("error", f"{run.kind}: {failure.name}: {failure.reason}"), flush=True)
    for breach in breaches:
        print(cioutput.azdo_log_issue("error", f"memdiff gate: {breach.collection} {breach.row} {BYTES_ALLOCATED} "
                                              f"{report.fmt_pct(breach.pct, direction=report.NEUTRAL)} "
                                              f"(threshold {report.fmt_threshold(run.threshold or 0)}%)"),
              flush=True)
