"""`superpmi.py replay`: replay collections through one JIT (docs/contracts.md §12.6, §12.7).

Per collection: one superpmi run (cwd Core_Root), the exit code interpreted
(missing data is a warning, -1/-2/crash/unknown/timeout are failures), JIT asserts
grouped, repro `.mc` files moved to a unique `repro.<mch base>` directory. At the
end all asserts once more and a `Replay summary:` block. Exit 0 when every
replay was clean (or only missed data), else 1."""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List

from spmi.base import config, fsutil
from spmi.sources import collection_feed
from spmi.steps import jit_pair, preflight
from spmi.steps.replay_steps import (
    CollectionOutcome,
    attach_repros,
    emit_azdo_issues,
    finish_run,
    replay_summary_lines,
    report_outcome_asserts,
    repro_command_prefix,
    shortfall_check,
    stop_if_jit_unloadable,
)
from spmi.tools import jit_build, superpmi_tool
from spmi.tools.superpmi_tool import RunOptions, SuperpmiInvocation

log = logging.getLogger("superpmi")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", parents=[config.common_options(), config.target_options()],
        help="replay collections through one JIT and report failures and asserts",
        description="Replay SuperPMI collections through a JIT; report compile failures, asserts and repros.")
    parser.add_argument("-jit_path", metavar="FILE",
                        help="JIT to replay (default: the native or cross JIT for the target in Core_Root)")
    jit_pair.add_jitoption_option(parser, "JIT option without DOTNET_ (repeatable)")
    superpmi_tool.add_run_options(parser)
    collection_feed.add_collection_options(parser)
    parser.set_defaults(func=run_replay)


@dataclass
class ReplayContext:
    settings: config.Settings
    options: RunOptions
    superpmi: Path
    jit: Path
    jit_options: List[str]
    temp_dir: Path

    @property
    def invocation(self) -> SuperpmiInvocation:
        return SuperpmiInvocation(self.superpmi, self.settings.arch, self.settings.target_arch, self.options)


def resolve_jit(args: argparse.Namespace, settings: config.Settings, options: RunOptions) -> Path:
    if args.jit_path:
        return jit_build.validate_jit_file(Path(args.jit_path), "-jit_path")
    return jit_build.validate_jit_file(config.find_default_jit(settings, options.jit_name), "JIT")


def run_replay(args: argparse.Namespace) -> int:
    preflight.check_inputs(args, "replay", {"-jit_path": args.jit_path})
    settings = config.resolve_settings(args, "Checked")
    options = RunOptions.from_args(args)
    config.start_logging(args, settings)
    superpmi = config.find_tool("superpmi", settings)
    jit = resolve_jit(args, settings, options)
    jit_build.check_jit_target(jit, "JIT", settings.target_os, settings.target_arch)
    jit_options = config.split_option_values(args.jitoption, "-jitoption")
    core_root = _core_root(settings, superpmi)
    log.info("SuperPMI replay with %s", jit)
    outcomes: List[CollectionOutcome] = []
    with collection_feed.collection_feed(args, settings) as collections, \
            fsutil.temporary_directory(prefix="spmi-replay-", keep=options.skip_cleanup) as temp_dir:
        for index, mch in enumerate(collections):
            ctx = ReplayContext(settings, options, superpmi, jit, jit_options, temp_dir / str(index))
            ctx.temp_dir.mkdir()
            outcomes.append(replay_collection(ctx, mch, core_root))
    if any(o.asserts for o in outcomes):
        log.info("")
        log.info("All asserts:")
        report_outcome_asserts(outcomes, two_jits=False)
    log.info("")
    for line in replay_summary_lines(outcomes):
        log.info("%s", line)
    return 1 if any(o.failed for o in outcomes) else 0


def _core_root(settings: config.Settings, superpmi: Path) -> Path:
    return settings.core_root or superpmi.parent


def replay_collection(ctx: ReplayContext, mch: Path, core_root: Path) -> CollectionOutcome:
    files = superpmi_tool.run_files(ctx.temp_dir, mch, ctx.options)
    argv = superpmi_tool.build_replay_argv(ctx.invocation, ctx.jit, mch, files, ctx.jit_options)
    log.info("")
    log.info("Replaying %s", mch)  # the command line: runner's "Invoking:" in the log
    timeout = ctx.options.run_timeout()
    run = superpmi_tool.run_superpmi(argv, core_root, timeout)
    stop_if_jit_unloadable(run, [("JIT", ctx.jit)], ctx.superpmi, mch, core_root, ctx.settings)
    outcome = finish_run(run, mch, files, diff_mode=False, timeout=timeout,
                         shortfall=shortfall_check(ctx.options, mch), timeout_flag=ctx.options.timeout_flag(timeout))
    if outcome.verdict.kind is superpmi_tool.ResultKind.FAILURES and ctx.options.produce_repro:
        repro_cmd = repro_command_prefix(ctx.invocation, ctx.jit_options, ctx.jit)
        attach_repros(outcome, ctx.temp_dir, ctx.settings, mch, repro_cmd, tag=None)
    emit_azdo_issues(outcome)
    return outcome
