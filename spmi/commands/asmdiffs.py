"""`superpmi.py asmdiffs`: compare the code a baseline and a diff JIT generate (docs/contracts.md §12.6–§12.10).

Per collection: one `superpmi -a` run with `-details` and `-f`; the details CSV is
aggregated and contexts are picked (`asmdiffs_report`); listings of the picked
contexts are generated in batches (`dasm_gen`) into a new
`asm.[<tag>.]<mch base>[.N]/base|diff/`; jit-analyze (the real one on PATH, else
`jitanalyze.py`) writes `summary.md`; example diffs come from `git diff`. At the
end `diff_summary[.N].md` and `diff_short_summary[.N].md` (or `.json`), and beside them
the HTML diff explorer `diff_report[.N].html` (every context with diffs, the listings;
`--no_html` skips it).

Exit 0 when every replay was clean (diffs and missing data are not failures),
1 when any failed, with the reason in one line.
"""
from __future__ import annotations

import argparse
import io
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from spmi.analyzer import cli as analyzer_cli
from spmi.base import config, fsutil, logs, platforms, runner
from spmi.base.errors import SuiteError
from spmi.formats import details
from spmi.reports import asm_analysis, asm_markdown, asm_model, asm_overall, html_build, noise_patterns, significance
from spmi.reports.asm_model import IMPROVEMENT, REGRESSION
from spmi.sources import baseline, collection_feed
from spmi.steps import asmdiffs_steps as steps
from spmi.steps import coredistools, html_step, jit_pair, outputs, preflight, replay_steps
from spmi.steps.replay_steps import CollectionOutcome
from spmi.tools import dasm_gen, jit_build, superpmi_tool
from spmi.tools.superpmi_tool import JitPairOptions, RunOptions

log = logging.getLogger("superpmi")

#: asmdiffs reads every metric column: the analyzer totals and the "Other metrics" table use them.
ANALYSED_METRICS = None


HELP_DESCRIPTION = """\
examples:
  in a dotnet/runtime enlistment with a built Core_Root (baseline: the rolling build of the merge-base):
    python superpmi.py asmdiffs -filter libraries
  any two JITs and collections on disk (`python sample/demo.py` makes a sample toolchain and prints its runs):
    python superpmi.py asmdiffs -base_jit_path base/libclrjit.so -diff_jit_path diff/libclrjit.so \\
        -core_root path/to/Core_Root -mch_files libraries.pmi.linux.x64.checked.mch

Replays collections through a baseline and a diff JIT; summarises code size and PerfScore diffs
with .dasm listings of interesting methods. The console shows progress and where the summaries
are (diff_summary.md, diff_report.html); details go to the log file (-v shows them here too).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "asmdiffs", parents=[config.common_options(), config.target_options(),
                             config.significance_options(calibration=False)],
        help="compare the code a baseline and a diff JIT generate",
        usage="%(prog)s [options]", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=HELP_DESCRIPTION)
    jit_pair.add_jit_pair_options(parser)
    group = parser.add_argument_group("asmdiffs options")
    group.add_argument("-metrics", action="append", metavar="METRIC",
                       help="jit-analyze metrics (repeatable or comma-separated; default CodeSize): "
                            + ", ".join(steps.ANALYZE_METRICS))
    group.add_argument("--alignloops", action="store_true", help="keep loop alignment (no JitAlignLoops=0)")
    group.add_argument("--gcinfo", action="store_true", help="include GC info in the listings")
    group.add_argument("--debuginfo", action="store_true", help="include debug info in the listings")
    group.add_argument("--diff_jit_dump", action="store_true",
                       help="also write JitDump text of the picked contexts to jitdump.<collection>/")
    group.add_argument("--diff_with_release", action="store_true",
                       help="compare with a release JIT: -ignoreStoredConfig, diffs are failures, no listings")
    group.add_argument("--git_diff", action="store_true", help="write asm_diffs.diff (git diff of base and diff)")
    group.add_argument("--dasm_all_diffs", action="store_true",
                       help="write .dasm listings of every context with diffs, not only the picked ones (the same "
                            "batched superpmi runs; the analyzer's summary.md covers them all; the summaries and the "
                            "HTML report stay as without it)")
    group.add_argument("-tag", help="name part for the asm/jitdump/repro directories")
    group.add_argument("--summary_as_json", action="store_true",
                       help="write diff_summary.json (for `summarize`) instead of markdown")
    group.add_argument("--no_html", action="store_true",
                       help="do not write the HTML diff explorer diff_report.html beside the summary")
    group.add_argument("-noise_patterns", metavar="FILE",
                       help="known-noise patterns replacing the default list (docs/signal.md): example diffs whose "
                            "changed lines all match them are skipped, and the summary says how many")
    group.add_argument("--include_noise", action="store_true",
                       help="keep example diffs whose changed lines all match known-noise patterns")
    baseline.add_baseline_options(parser, base_jit_path=False)
    superpmi_tool.add_run_options(parser)
    collection_feed.add_collection_options(parser)
    parser.set_defaults(func=run_asmdiffs)


# ---------------------------------------------------------------- configuration

@dataclass(frozen=True)
class AsmdiffsFlags:
    metrics: Tuple[str, ...] = ()
    align_loops: bool = False
    gcinfo: bool = False
    debuginfo: bool = False
    diff_jit_dump: bool = False
    diff_with_release: bool = False
    git_diff: bool = False
    dasm_all_diffs: bool = False  # listings of every context with diffs, not only the picked ones
    tag: Optional[str] = None
    summary_as_json: bool = False
    html: bool = True
    #: `-significance` overrides for the "Other metrics" table (reports/significance)
    significance: Tuple[Tuple[str, float], ...] = ()
    #: known-noise patterns example diffs skip (empty with --include_noise), and where they come from
    noise_patterns: Tuple["noise_patterns.NoisePattern", ...] = ()
    noise_source: str = ""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "AsmdiffsFlags":
        return cls(metrics=tuple(steps.parse_metrics(args.metrics)),
                   align_loops=bool(args.alignloops), gcinfo=bool(args.gcinfo), debuginfo=bool(args.debuginfo),
                   diff_jit_dump=bool(args.diff_jit_dump), diff_with_release=bool(args.diff_with_release),
                   git_diff=bool(args.git_diff), dasm_all_diffs=bool(args.dasm_all_diffs), tag=args.tag,
                   summary_as_json=bool(args.summary_as_json),
                   html=not args.no_html, significance=tuple(args.significance),
                   **example_noise_options(args.noise_patterns, bool(args.include_noise)))


@dataclass
class Job:
    """Everything a collection's processing needs."""

    settings: config.Settings
    options: RunOptions
    flags: AsmdiffsFlags
    superpmi: Path
    core_root: Path
    base_jit: Path
    diff_jit: Path
    jit_options: JitPairOptions
    choice: baseline.BaselineChoice
    base_info: Optional[jit_build.BuildInfo]
    diff_info: Optional[jit_build.BuildInfo]
    temp_dir: Path
    analyzer: str = ""
    override_form: Optional[steps.OverrideForm] = None  # of an external jit-analyze, read once

    @property
    def invocation(self) -> superpmi_tool.SuperpmiInvocation:
        return superpmi_tool.SuperpmiInvocation(self.superpmi, self.settings.arch, self.settings.target_arch,
                                                self.options)


@dataclass
class CollectionDiff:
    """One collection's results, for the console and the summaries."""

    mch: Path
    outcome: CollectionOutcome
    table: Optional[details.DetailsTable] = None  # the diff-list rows only, while the collection is analysed
    data_problem: str = ""
    asm_dir: Optional[Path] = None
    aggregates: Optional["asm_model.CollectionAggregates"] = None
    metric_sums: Dict[str, List[float]] = field(default_factory=dict)  # DetailsDigest.metric_sums
    missing_only: Set[int] = field(default_factory=set)  # DetailsDigest.missing_only
    error_sides: Dict[int, Tuple[bool, bool]] = field(default_factory=dict)  # DetailsDigest.error_sides
    pick: Optional["asm_analysis.ContextPick"] = None
    examples: List["asm_model.ExampleDiff"] = field(default_factory=list)
    analyze_markdown: str = ""
    listing_failures: List[dasm_gen.ListingFailure] = field(default_factory=list)
    has_diffs: bool = False
    noise_contexts: Set[int] = field(default_factory=set)  # picked contexts whose diff is known noise
    diff_rows: Optional["asm_model.DiffRows"] = None  # what the summaries keep of `table` (None: no data)

    @property
    def failed(self) -> bool:
        return self.outcome.failed or bool(self.data_problem) or bool(self.listing_failures)

    def failure_reason(self) -> str:
        if self.outcome.failed:
            return self.outcome.verdict.message
        if self.data_problem:
            return self.data_problem
        if self.listing_failures:
            return f"{len(self.listing_failures)} listing(s) could not be generated"
        return ""


# ---------------------------------------------------------------- the command

def run_asmdiffs(args: argparse.Namespace) -> int:
    significance.check_override_names(args.significance)
    preflight.check_inputs(args, "asmdiffs", {"-base_jit_path": args.base_jit_path,
                                              "-diff_jit_path": args.diff_jit_path})
    settings = config.resolve_settings(args, "Checked")
    options = RunOptions.from_args(args)
    flags = AsmdiffsFlags.from_args(args)
    config.start_logging(args, settings)
    superpmi = config.find_tool("superpmi", settings)
    coredistools.ensure_beside_superpmi(superpmi, settings, args.storage_url)
    jits = jit_pair.resolve_jit_pair(args, settings, options.jit_name)
    pair = jit_pair.user_jit_options(args, superpmi_tool.asmdiffs_replay_options(flags.align_loops))
    log.info("Base JIT: %s", jits.base)
    log.info("Diff JIT: %s", jits.diff)
    results: List[CollectionDiff] = []
    collections: List[Path] = []
    with collection_feed.collection_feed(args, settings) as feed, \
            fsutil.temporary_directory(prefix="spmi-asmdiffs-", keep=options.skip_cleanup) as temp_dir:
        job = Job(settings, options, flags, superpmi, settings.core_root or superpmi.parent, jits.base, jits.diff,
                  pair, jits.baseline, jits.base_info, jits.diff_info, temp_dir)
        for index, mch in enumerate(feed):
            collections.append(mch)
            work = temp_dir / str(index)
            work.mkdir()
            results.append(diff_collection(job, mch, work))
        summary_files: List[Path] = []
        verdicts: List[str] = []
        if results and not flags.diff_with_release:
            summary = build_summary(job, results, collections)
            warn_unmatched_overrides(summary)
            summary_files = write_summaries(job, summary)
            verdicts.append(asm_markdown.verdict_line(summary, markdown=False))
            if flags.html:
                summary_files.append(write_html_report(job, results, summary, summary_files[0]))
    code = finish(results, summary_files)
    outputs.log_verdicts(verdicts)
    return code


OUTPUT_KINDS = {".md": "Summary Markdown file", ".json": "Summary JSON file", ".html": "HTML diff report"}


def finish(results: Sequence[CollectionDiff], summary_files: Sequence[Path]) -> int:
    if any(r.outcome.asserts for r in results):
        log.info("")
        log.info("All asserts:")
        replay_steps.report_outcome_asserts([r.outcome for r in results], two_jits=True)
    log.info("")
    log.info("Asm diffs summary:")
    for path in summary_files:
        log.info("  %s: %s", OUTPUT_KINDS.get(path.suffix, "Summary file"), path)
    failed = [r for r in results if r.failed]
    if failed:
        log.info("  Replay failures in %d MCH files:", len(failed))
        for r in failed:
            log.info("    %s", r.mch)
    with_diffs = [r for r in results if r.has_diffs]
    if with_diffs:
        log.info("  Asm diffs in %d MCH files:", len(with_diffs))
        for r in with_diffs:
            log.info("    %s%s", r.mch, contexts_with_diffs_note(r))
    else:
        log.info("  No asm diffs")
    if failed:
        reasons = "; ".join(f"{r.mch.name}: {r.failure_reason()}" for r in failed)
        log.error("asmdiffs failed for %d of %d collections (%s)", len(failed), len(results), reasons)
        return 1
    return 0


def contexts_with_diffs_note(result: CollectionDiff) -> str:
    if result.aggregates is None:
        return ""
    count = result.aggregates.diff_stats.contexts_with_diffs
    return f" ({count} context{'s' if count != 1 else ''} with diffs)"


# ---------------------------------------------------------------- one collection

def diff_collection(job: Job, mch: Path, work: Path) -> CollectionDiff:
    files = superpmi_tool.run_files(work, mch, job.options)
    argv = superpmi_tool.build_asmdiffs_argv(job.invocation, job.base_jit, job.diff_jit, mch, files, job.jit_options,
                                             ignore_stored_config=job.flags.diff_with_release)
    log.info("")
    log.info("Running asm diffs of %s", mch)  # the command line: runner's "Invoking:" in the log
    timeout = job.options.run_timeout()
    run = superpmi_tool.run_superpmi(argv, job.core_root, timeout)
    replay_steps.stop_if_jit_unloadable(run, [("base JIT", job.base_jit), ("diff JIT", job.diff_jit)],
                                        job.superpmi, mch, job.core_root, job.settings)
    # the failing contexts, so that the digest notes which of them only missed data
    digest, problem = load_digest(files.details_csv, run, superpmi_tool.read_mcl(files.fail_mcl))
    counts = None
    if digest is not None:
        counts = superpmi_tool.ContextCounts(digest.rows, digest.either_misses, digest.base_misses,
                                             digest.diff_misses)
    outcome = replay_steps.finish_run(run, mch, files, diff_mode=True, timeout=timeout,
                                      diff_with_release=job.flags.diff_with_release, counts=counts,
                                      shortfall=replay_steps.shortfall_check(job.options, mch),
                                      timeout_flag=job.options.timeout_flag(timeout),
                                      missing_only=digest.missing_only if digest is not None else None,
                                      error_sides=digest.error_sides if digest is not None else None)
    del run  # superpmi's output (megabytes for big collections) is not kept through the analysis
    table = digest.diff_table() if digest is not None else None
    result = CollectionDiff(mch, outcome, table, problem, aggregates=digest.aggregates if digest else None,
                            metric_sums=digest.metric_sums if digest else {},
                            missing_only=digest.missing_only if digest else set(),
                            error_sides=digest.error_sides if digest else {})
    if problem:
        (log.error if not outcome.failed else log.warning)("%s", problem)
    if outcome.verdict.kind is superpmi_tool.ResultKind.FAILURES and job.options.produce_repro:
        command = replay_steps.repro_command_prefix(job.invocation, job.jit_options.side("diff"), job.diff_jit)
        replay_steps.attach_repros(outcome, work, job.settings, mch, command, job.flags.tag)
    replay_steps.emit_azdo_issues(outcome)
    if table is None:
        return result
    analyze_collection(job, result, work)
    result.diff_rows, result.table = html_build.diff_rows_of(table), None  # the rows' other fields are let go
    return result


def load_digest(path: Path, run: superpmi_tool.SuperpmiRun,
                failing: Sequence[int] = ()) -> Tuple[Optional[asm_analysis.DetailsDigest], str]:
    """The details CSV read once (aggregates, counts, diff-list rows, which `failing` contexts only
    missed data), or None with a reason: missing/malformed fail the collection, header-only is "no data"."""
    digest = asm_analysis.DetailsDigest(failing)
    try:
        details.stream_details_csv(path, digest.add, metrics=ANALYSED_METRICS)
        return digest, ""
    except details.DetailsError as exc:
        if exc.kind == "empty":
            log.warning("No data: %s", exc)
            return None, ""
        if run.timed_out or (run.result is not None and (run.result.outcome.crashed or run.result.code < 0)):
            log.debug("%s", exc)
            return None, ""  # the exit verdict is the reason
        return None, f"details CSV unusable: {exc}"


def analyze_collection(job: Job, result: CollectionDiff, work: Path) -> None:
    """Console totals, then (when there are diffs) listings, jit-analyze, git diff and example diffs."""
    assert result.table is not None and result.aggregates is not None
    aggregates = result.aggregates
    for line in steps.totals_lines(console_totals(aggregates)):  # the console totals of docs/contracts.md §12.9
        log.info("%s", line)
    diff_count = result.table.row_count  # the table holds the diff list only
    if not diff_count:
        return
    result.has_diffs = True
    if job.flags.diff_with_release:
        return
    pick = asm_analysis.pick_contexts(result.table, list(job.flags.metrics))
    result.pick = pick
    listed = listed_contexts(job, result.table, pick)
    result.asm_dir = new_output_dir(job, "asm", result.mch)
    env = dasm_gen.listing_env(job.flags.gcinfo, job.flags.debuginfo)
    with fsutil.marked_incomplete_until_done(result.asm_dir, "the .dasm listings"):
        listings = generate(job, result, work, listed, env, result.asm_dir, ".dasm", batched=True)
    result.listing_failures = list(listings.failures)
    for failure in listings.failures:
        log.error("Listing failed: %s", failure.describe())
    log.info("Listings of %d contexts in %s (%d superpmi processes)", len(listed), result.asm_dir,
             listings.processes)
    if job.flags.diff_jit_dump:
        dump_dir = new_output_dir(job, "jitdump", result.mch)
        dump_env = dasm_gen.listing_env(job.flags.gcinfo, job.flags.debuginfo, jitdump=True)
        with fsutil.marked_incomplete_until_done(dump_dir, "the JitDump files"):
            dumps = generate(job, result, work, pick.contexts, dump_env, dump_dir, ".txt", batched=False)
        result.listing_failures += dumps.failures
        log.info("JitDump files in %s", dump_dir)
    for line in steps.replay_instruction_lines(env, job.superpmi, listing_flags(job), job.diff_jit, result.mch,
                                               job.settings.host_os):
        log.debug("%s", line)
    base_files, diff_files = listings.files("base"), listings.files("diff")
    picked_base, picked_diff = of_contexts(base_files, pick.contexts), of_contexts(diff_files, pick.contexts)
    subset = len(pick.contexts) < diff_count
    every_diff_listed = len(listed) > len(pick.contexts)  # --dasm_all_diffs listed more than the picks
    if not textual_diff_contexts(picked_base, picked_diff):
        log.warning("%s", steps.NO_TEXTUAL_DIFFS)
    elif not every_diff_listed:
        result.analyze_markdown = run_jit_analyze(job, result, result.asm_dir, subset)
    else:  # the summaries embed the analysis of the picks, as without --dasm_all_diffs
        picked_dir = copy_listings(work / "picked_listings", picked_base, picked_diff)
        result.analyze_markdown = run_jit_analyze(job, result, picked_dir, subset)
    if every_diff_listed:
        run_jit_analyze(job, result, result.asm_dir, subset=False)  # <asm dir>/summary.md: every context with diffs
    if job.flags.git_diff:
        run_git_diff(job, result.asm_dir)
    result.examples = collect_examples(job, result, pick, base_files, diff_files, env)


def listed_contexts(job: Job, table: details.DetailsTable, pick: "asm_analysis.ContextPick") -> List[int]:
    """The contexts that get `.dasm` listings: the picked ones, or with --dasm_all_diffs every context
    with diffs (sorted, unique)."""
    if not job.flags.dasm_all_diffs:
        return pick.contexts
    context = table.columns.context
    return sorted({context[position] for position in asm_analysis.diff_positions(table)})


def of_contexts(files: Mapping[int, Path], contexts: Sequence[int]) -> Dict[int, Path]:
    """The files of the given contexts."""
    return {context: files[context] for context in contexts if context in files}


def copy_listings(folder: Path, base_files: Mapping[int, Path], diff_files: Mapping[int, Path]) -> Path:
    """`<folder>/base|diff/` holding copies of the given listings (the analyzer takes folders)."""
    for side, files in (("base", base_files), ("diff", diff_files)):
        (folder / side).mkdir(parents=True, exist_ok=True)
        for path in files.values():
            shutil.copyfile(path, folder / side / path.name)
    return folder


def textual_diff_contexts(base_files: Dict[int, Path], diff_files: Dict[int, Path]) -> List[int]:
    """Contexts whose base and diff listings differ byte-wise (both present)."""
    return [context for context in sorted(set(base_files) & set(diff_files))
            if base_files[context].read_bytes() != diff_files[context].read_bytes()]


def console_totals(aggregates: "asm_model.CollectionAggregates") -> steps.ConsoleTotals:
    overall, stats = aggregates.overall, aggregates.diff_stats
    return steps.ConsoleTotals(overall.base_code_bytes, overall.diff_code_bytes, overall.base_perfscore,
                               overall.diff_perfscore, overall.relative_geomean, overall.relative_geomean_diffs,
                               stats.contexts_with_diffs, stats.size_improvements, stats.size_regressions,
                               stats.size_same)


def listing_flags(job: Job) -> List[str]:
    flags = job.invocation.target_flags()
    if job.options.altjit:
        flags += superpmi_tool.altjit_flags(two_jits=False)
    return flags


def new_output_dir(job: Job, kind: str, mch: Path) -> Path:
    path = fsutil.unique_dir_path(job.settings.spmi_location / superpmi_tool.output_dir_name(kind, mch, job.flags.tag))
    for _attempt in range(100):
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:  # another run took the name meanwhile
            path = fsutil.unique_dir_path(path)
    raise SuiteError(f"cannot create a new directory like {path}")


def generate(job: Job, result: CollectionDiff, work: Path, contexts: Sequence[int], env: Dict[str, str],
             out_dir: Path, extension: str, batched: bool) -> dasm_gen.ListingReport:
    assert result.table is not None
    wanted = set(contexts)
    rows = result.table.columns  # a context's rows in file order: the first names its method, the last its size
    expected: Dict[int, dasm_gen.ExpectedMethod] = {}
    for context, method, tier in zip(rows.context, rows.method_name, rows.tier):
        if context in wanted and context not in expected:
            expected[context] = dasm_gen.ExpectedMethod(method, tier)
    setup = dasm_gen.ListingSetup(superpmi=job.superpmi, core_root=job.core_root, mch=result.mch,
                                  host_arch=job.settings.arch, target_arch=job.settings.target_arch,
                                  altjit=job.options.altjit, forced=job.jit_options.forced, env=env,
                                  scratch_dir=work / f"listings{extension}", timeout=job.options.timeout,
                                  extension=extension)
    base_sizes = {context: int(size) for context, size in zip(rows.context, result.table.base_column(details.CODE_BYTES))
                  if context in wanted}
    sides = [dasm_gen.JitSide("base", job.base_jit, job.jit_options.side("base"), out_dir / "base",
                              strict_names=False, sizes=base_sizes),
             dasm_gen.JitSide("diff", job.diff_jit, job.jit_options.side("diff"), out_dir / "diff")]
    return dasm_gen.generate_listings(setup, sides, contexts, expected, job.options.worker_count(), batched=batched)


def jit_analyze_tool(host_os: str) -> Optional[str]:
    return shutil.which(platforms.exe_name("jit-analyze", host_os)) or shutil.which("jit-analyze")


def external_override_form(job: Job, tool: str) -> steps.OverrideForm:
    """What the external jit-analyze accepts for total overrides, read once from its `--help` (§8.8)."""
    if job.override_form is None:
        try:
            run = runner.run([tool, "--help"], log_output=False, timeout=60)
            job.override_form = steps.override_form_from_help(run.stdout + run.stderr)
        except SuiteError as exc:
            log.warning("Warning: cannot read `%s --help` (%s); passing no total overrides", tool, exc)
            job.override_form = steps.OverrideForm.NONE
    return job.override_form


def run_jit_analyze(job: Job, result: CollectionDiff, asm_dir: Path, subset: bool) -> str:
    """jit-analyze (or the built-in analyzer, spread over the suite's worker count) over
    `<asm_dir>/base|diff`, writing `<asm_dir>/summary.md`; returns that markdown."""
    metrics = steps.analyzed_metrics(job.flags.metrics)
    totals = asm_analysis.analyzer_totals(result.metric_sums, metrics)
    real = jit_analyze_tool(job.settings.host_os)
    form = external_override_form(job, real) if real else steps.OverrideForm.PER_METRIC
    plan = steps.plan_overrides(job.flags.metrics, totals, form)
    argv = steps.jit_analyze_argv(real or "jit-analyze", asm_dir, job.flags.metrics or (), plan.argv, subset)
    job.analyzer = "jit-analyze" if real else "built-in"
    if real:
        log.debug("Using jit-analyze from PATH: %s", real)
        log.debug("Analyzer totals: %s", plan.description)
        log.debug("Invoking: %s", runner.format_command(argv, job.settings.host_os))
        run = runner.run(argv)
        output = run.stdout + run.stderr
    else:
        log.debug("jit-analyze is not on PATH; using the built-in equivalent (jitanalyze.py)")
        argv += ["--parallelism", str(job.options.worker_count())]
        log.debug("Analyzer totals: %s", plan.description)
        log.debug("Invoking (built-in): %s", runner.format_command(argv, job.settings.host_os))
        out, err = io.StringIO(), io.StringIO()
        analyzer_cli.run_cli(argv[1:], stdout=out, stderr=err)
        output = out.getvalue() + err.getvalue()
    logs.log_block(logging.DEBUG, "", output.rstrip("\n"))  # per-method lists: the log (and the console with -v)
    summary = asm_dir / "summary.md"
    try:
        return summary.read_text(encoding="utf-8")
    except OSError:
        log.warning("jit-analyze wrote no %s", summary)
        return ""


def run_git_diff(job: Job, asm_dir: Path) -> None:
    git = shutil.which("git")
    if git is None:
        log.warning("--git_diff: %s", steps.GIT_NOT_FOUND)
        return
    run = runner.run(steps.git_diff_argv(git, asm_dir))
    if run.code in (0, 1):
        log.info("Git diff written to %s", asm_dir / "asm_diffs.diff")
    else:
        log.warning("git diff failed (%s): %s", run.outcome.describe(), run.stderr.strip().splitlines()[:1])


def collect_examples(job: Job, result: CollectionDiff, pick: "asm_analysis.ContextPick", base_files: Dict[int, Path],
                     diff_files: Dict[int, Path], env: Dict[str, str]) -> List["asm_model.ExampleDiff"]:
    """Example diffs (§12.10 item 3) with their `superpmi -c N` command lines: per side the largest
    size change first, then candidates whose diff touches code, then the others."""
    git = shutil.which("git")
    diffs: Dict[int, Optional[Tuple[str, bool]]] = {}

    def diff_of(row: details.DetailsRow) -> Optional[Tuple[str, bool]]:
        if row.context not in diffs:
            diffs[row.context] = example_diff(git, base_files.get(row.context), diff_files.get(row.context))
        return diffs[row.context]

    examples: List[asm_model.ExampleDiff] = []
    taken: set = set()
    noisy = known_noise_contexts(job, pick, base_files, diff_files)
    result.noise_contexts = noisy
    if noisy:
        log.info("Skipped %d picked context(s) as examples and HTML listings: their changed lines all match %s "
                 "(--include_noise shows them)", len(noisy), job.flags.noise_source)
    sides = ((IMPROVEMENT, pick.improvement_examples + pick.spare_improvements, pick.largest_improvement),
             (REGRESSION, pick.regression_examples + pick.spare_regressions, pick.largest_regression))
    for kind, rows, largest in sides:
        candidates = [(row, found[1]) for row in rows
                      if row.context not in taken and row.context not in noisy and (found := diff_of(row)) is not None]
        required = largest if (largest is not None and largest.context not in taken and largest.context not in noisy
                               and diff_of(largest)) else None
        for row in asm_analysis.choose_examples(candidates, asm_analysis.EXAMPLE_COUNT, required):
            taken.add(row.context)
            text, code = diff_of(row) or ("", True)
            base = base_files[row.context]
            title = asm_analysis.listing_title(base.read_bytes().split(b"\n", 1)[0].decode("utf-8", errors="replace"))
            command = steps.example_superpmi_command(
                job.invocation, job.diff_jit, result.mch, row.context, job.jit_options.forced,
                job.jit_options.side("diff"), env, job.settings.host_os)
            examples.append(asm_analysis.example_from_row(row, kind, title, text, command, code))
    return examples


def example_noise_options(patterns_file: Optional[str], include_noise: bool) -> Dict[str, Any]:
    """The known-noise patterns example diffs skip: the default list, or `-noise_patterns FILE`."""
    if include_noise:
        return {"noise_patterns": (), "noise_source": ""}
    if not patterns_file:
        return {"noise_patterns": noise_patterns.DEFAULT_PATTERNS,
                "noise_source": noise_patterns.describe(noise_patterns.DEFAULT_PATTERNS, noise_patterns.DEFAULT_SOURCE)}
    try:
        text = fsutil.read_small_regular_file(patterns_file, noise_patterns.MAX_PATTERNS_FILE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError, fsutil.UnsuitableFile) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise SuiteError(f"-noise_patterns {patterns_file}: cannot read it ({reason}); give a text file of at most "
                         f"{noise_patterns.MAX_PATTERNS_FILE_BYTES:,} bytes of 'line REGEX' / 'comment REGEX' "
                         "entries") from None
    patterns = tuple(noise_patterns.parse_patterns(text, f"-noise_patterns {patterns_file}"))
    return {"noise_patterns": patterns, "noise_source": noise_patterns.describe(patterns, patterns_file)}


def known_noise_contexts(job: Job, pick: "asm_analysis.ContextPick", base_files: Dict[int, Path],
                         diff_files: Dict[int, Path]) -> Set[int]:
    """The picked contexts whose listings differ only in known noise (none with --include_noise)."""
    patterns = job.flags.noise_patterns
    if not patterns:
        return set()
    noisy = set()
    for context in pick.contexts:
        base, diff = base_files.get(context), diff_files.get(context)
        if base is None or diff is None:
            continue
        base_text = base.read_text(encoding="utf-8", errors="replace")
        diff_text = diff.read_text(encoding="utf-8", errors="replace")
        if noise_patterns.is_known_noise(base_text, diff_text, patterns):
            noisy.add(context)
    return noisy


def example_diff(git: Optional[str], base: Optional[Path], diff: Optional[Path]) -> Optional[Tuple[str, bool]]:
    """(the example body's diff text, whether the diff touches code); None without both listings."""
    if base is None or diff is None:
        return None
    if git is None:
        return asm_markdown.example_diff_text(None, None, git_found=False), True
    run = runner.run(steps.example_diff_argv(git, base, diff), log_output=False)
    return asm_markdown.example_diff_text(run.stdout, run.code), asm_analysis.touches_code(run.stdout)


# ---------------------------------------------------------------- summaries

def collection_report(job: Job, result: CollectionDiff) -> "asm_model.CollectionReport":
    outcome = result.outcome
    status = asm_model.ReplayStatus(failed=result.failed, reason=result.failure_reason(),
                                 exit_code=outcome.exit_code if outcome.failed else None,
                                 missing_contexts=outcome.counts.missing, no_data=result.diff_rows is None)
    groups = [assert_group(g, result.error_sides) for g in superpmi_tool.group_asserts(outcome.asserts)]
    return asm_model.CollectionReport(name=result.mch.name,
                                   aggregates=result.aggregates or asm_model.CollectionAggregates(),
                                   examples=list(result.examples), jit_analyze_markdown=result.analyze_markdown,
                                   status=status, asserts=groups, repro_commands=failure_repro_commands(job, result),
                                   diff_rows=result.diff_rows if result.diff_rows is not None else asm_model.DiffRows(),
                                   failing_contexts=reproducible_failures(result),
                                   metric_totals=asm_analysis.metric_totals(result.metric_sums),
                                   asserting_contexts=len({a.context for a in outcome.asserts}),
                                   noise_skipped=len(result.noise_contexts))


def assert_group(group: superpmi_tool.AssertGroup,
                 error_sides: Mapping[int, Tuple[bool, bool]]) -> "asm_model.AssertGroup":
    """An assert for the summaries: its first instances, its contexts and its hits per JIT."""
    shown = superpmi_tool.ASSERT_INSTANCES_SHOWN
    hits = asm_analysis.attribute_assert_hits([a.context for a in group.instances], error_sides)
    return asm_model.AssertGroup(group.key, group.count,
                                 [asm_model.AssertInstance(a.context, a.il_size)
                                  for a in group.sorted_instances()[:shown]],
                                 contexts=hits.contexts, base_hits=hits.base, diff_hits=hits.diff)


def reproducible_failures(result: CollectionDiff) -> List[int]:
    """The failing contexts worth a repro: a MISSING context (no data recorded) reproduces nothing."""
    return asm_analysis.without_missing(result.outcome.failing_contexts, result.missing_only)


def failure_repro_commands(job: Job, result: CollectionDiff) -> List[str]:
    """Paste-ready commands for the failing contexts: the repro `.mc` files, else `-c N` runs."""
    outcome = result.outcome
    if outcome.repros:
        prefix = replay_steps.repro_command_prefix(job.invocation, job.jit_options.side("diff"), job.diff_jit)
        return [runner.format_command(prefix + [str(path)], job.settings.host_os) for path in outcome.repros]
    return [runner.format_command(steps.context_repro_argv(job.invocation, job.base_jit, job.diff_jit, result.mch,
                                                           context, job.jit_options),
                                   job.settings.host_os)
            for context in reproducible_failures(result)]


def build_summary(job: Job, results: Sequence[CollectionDiff], collections: Sequence[Path]) -> "asm_model.AsmDiffsSummary":
    settings, flags = job.settings, job.flags
    inputs = steps.ReproInputs(arch=settings.arch, target_os=settings.target_os, target_arch=settings.target_arch,
                               diff_jit=job.diff_jit, base_jit=job.base_jit, base_git_hash=job.choice.git_hash,
                               collections=collections, jit_options=list(job.jit_options.shared),
                               base_jit_options=list(job.jit_options.base_only),
                               diff_jit_options=list(job.jit_options.diff_only),
                               metrics=flags.metrics, align_loops=flags.align_loops, altjit=job.options.altjit,
                               jit_name=job.options.jit_name, gcinfo=flags.gcinfo, debuginfo=flags.debuginfo,
                               core_root=settings.core_root)
    return asm_model.AsmDiffsSummary(
        target_os=settings.target_os, target_arch=settings.target_arch, host_os=settings.host_os,
        host_arch=settings.arch, base_jit_path=str(job.base_jit), diff_jit_path=str(job.diff_jit),
        jit_options=asm_model.JitOptions(list(job.jit_options.shared), list(job.jit_options.base_only),
                                      list(job.jit_options.diff_only)),
        baseline=describe_baseline(job), analyzer=job.analyzer,
        repro_command=steps.asmdiffs_command_line(inputs, settings.host_os),
        significance=dict(flags.significance), noise_source=flags.noise_source,
        collections=[collection_report(job, r) for r in results])


def warn_unmatched_overrides(summary: "asm_model.AsmDiffsSummary") -> None:
    """A warning for each `-significance` naming no metric of the collections' details."""
    metrics = list(dict.fromkeys(m for c in summary.collections for m in c.metric_totals))
    for line in significance.unmatched_overrides(summary.significance, metrics):
        log.warning("Warning: %s", line)


def describe_baseline(job: Job) -> str:
    text = job.choice.describe()
    if job.choice.git_hash and job.choice.tried:
        text += f"; hashes tried: {' '.join(job.choice.tried)}"
    for what, info in (("base", job.base_info), ("diff", job.diff_info)):
        if info is not None:
            text += f"; {what} JIT built by {info.describe()}"
    return text


def write_summaries(job: Job, summary: "asm_model.AsmDiffsSummary") -> List[Path]:
    """`diff_summary[.N].md` + `diff_short_summary[.N].md` (or one `.json`), new names, temp-then-rename."""
    directory = job.settings.spmi_location
    directory.mkdir(parents=True, exist_ok=True)
    long_path, short_path = outputs.summary_paths(directory, "diff", job.flags.summary_as_json)
    if job.flags.summary_as_json:
        fsutil.atomic_write_text(long_path, summary.to_json())
        return [long_path]
    assert short_path is not None
    fsutil.atomic_write_text(long_path, asm_overall.render_long_within(summary))
    fsutil.atomic_write_text(short_path, asm_overall.render_short_within(summary))
    return [long_path, short_path]


# ---------------------------------------------------------------- the HTML diff explorer

def write_html_report(job: Job, results: Sequence[CollectionDiff], summary: "asm_model.AsmDiffsSummary",
                      summary_path: Path) -> Path:
    """`diff_report[.N].html` beside the summary: every context with diffs, the listings of the picked ones
    (also with --dasm_all_diffs)."""
    budget = html_step.ListingBudget()
    env = dasm_gen.listing_env(job.flags.gcinfo, job.flags.debuginfo)
    listings = []
    for result in results:
        if result.asm_dir is None:
            continue

        def repro(context: int, mch: Path = result.mch) -> str:
            return steps.example_superpmi_command(job.invocation, job.diff_jit, mch, context, job.jit_options.forced,
                                                  job.jit_options.side("diff"), env, job.settings.host_os)

        picked = set(result.pick.contexts) if result.pick is not None else set()
        listings += [listing for listing in html_step.read_listings(result.mch.name, result.asm_dir, repro, budget,
                                                                    picked)
                     if listing.context not in result.noise_contexts]
    report = html_build.report_from_summary(summary, listings)
    return html_step.write_report(report, html_step.report_path(summary_path), budget)
