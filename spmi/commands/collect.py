"""`superpmi.py collect`: record a collection with the shim collector (docs/contracts.md §14).

A host program runs with the shim collector in front of the Core_Root JIT (a
command line, PMI over assemblies, crossgen2, or NativeAOT's ILC over test
`.ilc.rsp` files), the `.mc` files it writes are
merged into one `.mch`, optionally cleaned of contexts that fail to replay,
indexed (`.mct`) and verified; the result is moved to `-output_mch_path` only
when every step succeeded. Exit 0 on success, 1 on any error (one line).
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from spmi.base import config, fsutil, platforms, runner, usage
from spmi.base.errors import SuiteError
from spmi.steps import collect_hosts, collect_steps
from spmi.steps.collect_hosts import CollectionMode, Tiering
from spmi.steps.collect_steps import Replayer, WorkFiles
from spmi.tools import superpmi_tool
from spmi.tools.superpmi_tool import MAX_PARALLELISM, RunOptions

log = logging.getLogger("superpmi")


# ---------------------------------------------------------------- registration

def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "collect", parents=[config.common_options(), config.target_options()],
        help="record a collection with the shim collector",
        description="Run a command, PMI, crossgen2 or ILC (NativeAOT) with the shim collector in front of the "
                    "Core_Root JIT, "
                    "merge the recorded .mc files into one .mch, optionally clean and verify it, and index it.")
    parser.add_argument("collection_command", nargs="?",
                        help="command to run (a file, a name in Core_Root, or a program on PATH)")
    parser.add_argument("collection_args", nargs="?", help="its arguments, as one string split on spaces")
    _add_mode_options(parser)
    _add_step_options(parser)
    superpmi_tool.add_superpmi_common_options(parser.add_argument_group(
        "superpmi options (the --clean and verify replays)"))
    parser.set_defaults(func=run_collect)


def _add_mode_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what to run")
    group.add_argument("--pmi", action="store_true", help="run PMI (corerun pmi.dll DRIVEALL) over -assemblies")
    group.add_argument("--crossgen2", action="store_true", help="compile -assemblies with Core_Root/crossgen2")
    group.add_argument("--nativeaot", action="store_true",
                       help="compile the tests of -ilc_rsps with Core_Root/ilc-published/ilc (NativeAOT)")
    group.add_argument("-assemblies", nargs="+", metavar="FILE_OR_DIR",
                       help=".dll/.exe files or directories (searched recursively) for --pmi/--crossgen2")
    group.add_argument("-ilc_rsps", nargs="+", metavar="FILE_OR_DIR",
                       help="for --nativeaot: the tests' *.ilc.rsp files, or directories (searched recursively)")
    group.add_argument("-exclude", nargs="+", default=[], metavar="TEXT",
                       help="skip assemblies (or .ilc.rsp files) whose path contains one of these (case-insensitive)")
    group.add_argument("-pmi_location", metavar="FILE", help="pmi.dll (default: found on PATH, then in Core_Root)")
    group.add_argument("-pmi_path", nargs="+", default=[], metavar="DIR",
                       help="directories PMI searches for referenced assemblies (PMIPATH)")
    group.add_argument("--parallelism", type=config.int_between(1, MAX_PARALLELISM), metavar="N",
                       help="host processes (and superpmi workers, unless --sequential) at once "
                            "(default: one per CPU)")
    group.add_argument("--tiered_compilation", action="store_true", help="collect with TieredCompilation=1")
    group.add_argument("--tiered_pgo", action="store_true", help="collect with TieredCompilation=1 and TieredPGO=1")
    group.add_argument("--disable_r2r", action="store_true", help="collect with ReadyToRun=0 (no precompiled code)")
    usage.add_renamed(group, "--use_zapdisable", "--disable_r2r")
    group.add_argument("--jitoptrepeat_all", action="store_true", help="collect with JitOptRepeat=*")
    group.add_argument("-jit_name", help="file name of the Core_Root JIT behind the shim and in the replays "
                                         "(default: the JIT for -target_os/-target_arch, the host's native one)")


def _add_step_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("steps and outputs")
    group.add_argument("-output_mch_path", metavar="FILE",
                       help="the collection to write (must not exist; default: <cwd>/<os>.<arch>.<build_type>.mch)")
    group.add_argument("-temp_dir", metavar="DIR", help="work folder to use and keep (e.g. to redo later steps)")
    group.add_argument("--clean", action="store_true",
                       help="replay the collection, remove the contexts that fail, verify the result replays clean")
    group.add_argument("--ci", action="store_true", help="an empty result becomes a ZEROLENGTH placeholder file")
    group.add_argument("--merge_mch_files", action="store_true",
                       help="concatenate -mch_files instead of running anything")
    group.add_argument("-mch_files", nargs="+", metavar="FILE", help="collections for --merge_mch_files")
    group.add_argument("--skip_collection_step", action="store_true",
                       help="run nothing; use the .mc files already in -temp_dir")
    group.add_argument("--skip_collect_mc_files", action="store_true",
                       help="do not run the host programs (the mode is still checked); use the .mc files in -temp_dir")
    group.add_argument("--skip_merge_step", action="store_true", help="use the base.mch already in -temp_dir")
    group.add_argument("--skip_clean_and_verify_step", action="store_true", help="neither clean nor verify")
    group.add_argument("--skip_toc_step", action="store_true", help="write no table of contents (.mct)")
    group.add_argument("--skip_cleanup", action="store_true",
                       help="keep the temporary folder and the .mc files (also after an error)")


# ---------------------------------------------------------------- the plan (pure)

@dataclass(frozen=True)
class CollectPlan:
    """What to do, checked for contradictions before anything runs."""

    mode: Optional[CollectionMode]
    command: Optional[str] = None
    command_args: List[str] = field(default_factory=list)
    assemblies: List[str] = field(default_factory=list)
    ilc_rsps: List[str] = field(default_factory=list)
    excludes: List[str] = field(default_factory=list)
    pmi_location: Optional[str] = None
    pmi_paths: List[str] = field(default_factory=list)
    tiering: Tiering = Tiering()
    merge_mch_files: List[str] = field(default_factory=list)
    clean: bool = False
    ci: bool = False
    output: Optional[str] = None
    temp_dir: Optional[str] = None
    run_hosts: bool = True
    merge: bool = True
    toc: bool = True
    keep_temp: bool = False
    parallelism: int = 1
    jit_name: Optional[str] = None
    replay: RunOptions = RunOptions()  # the --clean and verify replays


def _chosen_modes(args: argparse.Namespace) -> List[str]:
    chosen = []
    if args.collection_command:
        chosen.append(f"the command '{args.collection_command}'")
    if args.pmi:
        chosen.append("--pmi")
    if args.crossgen2:
        chosen.append("--crossgen2")
    if args.nativeaot:
        chosen.append("--nativeaot")
    if args.merge_mch_files:
        chosen.append("--merge_mch_files")
    return chosen


def _mode_of(args: argparse.Namespace) -> Optional[CollectionMode]:
    if args.pmi:
        return CollectionMode.PMI
    if args.crossgen2:
        return CollectionMode.CROSSGEN2
    if args.nativeaot:
        return CollectionMode.NATIVEAOT
    if args.collection_command:
        return CollectionMode.COMMAND
    return None


def check_modes(args: argparse.Namespace) -> Optional[CollectionMode]:
    """Exactly one of a command, --pmi, --crossgen2, --nativeaot (or --merge_mch_files / --skip_collection_step)."""
    chosen = _chosen_modes(args)
    if len(chosen) > 1:
        raise SuiteError(f"conflicting collection modes: {' and '.join(chosen)}; pass exactly one")
    if not chosen and not args.skip_collection_step:
        raise SuiteError("nothing to collect: pass a collection command, --pmi, --crossgen2 or --nativeaot "
                         "(or --merge_mch_files, or --skip_collection_step with -temp_dir)")
    mode = _mode_of(args)
    if mode in (CollectionMode.PMI, CollectionMode.CROSSGEN2) and not args.assemblies:
        raise SuiteError(f"--{mode.value} needs -assemblies (files or directories to collect from)")
    if mode is CollectionMode.NATIVEAOT and not args.ilc_rsps:
        raise SuiteError("--nativeaot needs -ilc_rsps (the tests' .ilc.rsp files, or directories holding them)")
    return mode


COMPILER_MODES = (CollectionMode.PMI, CollectionMode.CROSSGEN2, CollectionMode.NATIVEAOT)


def check_mode_options(args: argparse.Namespace, mode: Optional[CollectionMode], tiering: Tiering) -> None:
    """Options that belong to another mode are refused rather than ignored."""
    if args.assemblies and mode not in (CollectionMode.PMI, CollectionMode.CROSSGEN2):
        raise SuiteError("-assemblies is only used with --pmi or --crossgen2")
    if args.ilc_rsps and mode is not CollectionMode.NATIVEAOT:
        raise SuiteError("-ilc_rsps is only used with --nativeaot")
    if args.exclude and mode not in COMPILER_MODES:
        raise SuiteError("-exclude is only used with --pmi, --crossgen2 or --nativeaot")
    if (args.pmi_location or args.pmi_path) and mode is not CollectionMode.PMI:
        raise SuiteError("-pmi_location and -pmi_path are only used with --pmi")
    if tiering.flags_given() and mode in COMPILER_MODES:
        raise SuiteError(f"{' '.join(tiering.flags_given())} cannot be used with --{mode.value}; "
                         "tiering flags apply to a collection command only")
    if args.mch_files and not args.merge_mch_files:
        raise SuiteError("-mch_files is only used with --merge_mch_files")
    if args.merge_mch_files and not args.mch_files:
        raise SuiteError("--merge_mch_files needs -mch_files (the collections to concatenate)")


def check_step_options(args: argparse.Namespace) -> None:
    if args.clean and args.skip_clean_and_verify_step:
        raise SuiteError("--clean and --skip_clean_and_verify_step contradict each other; drop one")
    if args.merge_mch_files and args.skip_merge_step:
        raise SuiteError("--merge_mch_files and --skip_merge_step contradict each other; drop one")
    reusing = [flag for flag, given in (("--skip_collection_step", args.skip_collection_step),
                                        ("--skip_collect_mc_files", args.skip_collect_mc_files),
                                        ("--skip_merge_step", args.skip_merge_step)) if given]
    if reusing and not args.temp_dir:
        raise SuiteError(f"{reusing[0]} needs -temp_dir (the work folder of an earlier run)")


def replay_options(args: argparse.Namespace, parallelism: int) -> RunOptions:
    """The superpmi switches of the --clean and verify replays: `-p N` (none with --sequential), `-boa`,
    `-boe`, `-w <file>` (needs --sequential), `-failureLimit N`, and the altjit options (§12.6, §14.3)."""
    options = RunOptions(sequential=bool(args.sequential), parallelism=None if args.sequential else parallelism,
                         error_limit=args.error_limit,
                         spmi_log_file=str(Path(args.spmi_log_file).resolve()) if args.spmi_log_file else None,
                         break_on_assert=bool(args.break_on_assert), break_on_error=bool(args.break_on_error),
                         altjit=bool(args.altjit))
    options.validate_common()
    return options


def plan_from_args(args: argparse.Namespace) -> CollectPlan:
    mode = check_modes(args)
    tiering = Tiering(args.tiered_compilation, args.tiered_pgo, args.disable_r2r, args.jitoptrepeat_all)
    check_mode_options(args, mode, tiering)
    check_step_options(args)
    run_hosts = not (args.skip_collection_step or args.skip_collect_mc_files or args.merge_mch_files)
    parallelism = args.parallelism or max(1, os.cpu_count() or 1)
    return CollectPlan(
        mode=mode, command=args.collection_command,
        command_args=collect_hosts.split_collection_args(args.collection_args),
        assemblies=list(args.assemblies or []), ilc_rsps=list(args.ilc_rsps or []), excludes=list(args.exclude),
        pmi_location=args.pmi_location,
        pmi_paths=list(args.pmi_path), tiering=tiering, merge_mch_files=list(args.mch_files or []),
        clean=args.clean, ci=args.ci, output=args.output_mch_path, temp_dir=args.temp_dir,
        run_hosts=run_hosts, merge=not args.skip_merge_step,
        toc=not args.skip_toc_step, keep_temp=args.skip_cleanup,
        parallelism=parallelism, jit_name=args.jit_name, replay=replay_options(args, parallelism))


# ---------------------------------------------------------------- tools

@dataclass(frozen=True)
class Tools:
    mcs: Path
    core_root: Optional[Path]
    jit: Optional[Path] = None
    shim: Optional[Path] = None
    superpmi: Optional[Path] = None


def _require_core_root(settings: config.Settings) -> Path:
    if settings.core_root is None:
        raise SuiteError("no Core_Root found; pass -core_root (it holds the JIT, the shim collector and corerun)")
    return settings.core_root


def find_shim(core_root: Path, host_os: str) -> Path:
    shim = core_root / platforms.shim_collector_file_name(host_os)
    if not shim.is_file():
        raise SuiteError(f"shim collector {shim.name} not found in Core_Root {core_root}; "
                         "build it with the JIT or pass another -core_root")
    return shim


def find_tools(plan: CollectPlan, settings: config.Settings) -> Tools:
    """Everything the chosen steps need, found before anything runs."""
    mcs = config.find_tool("mcs", settings)
    assert mcs is not None
    needs_jit = plan.run_hosts or plan.clean
    core_root = _require_core_root(settings) if plan.run_hosts else settings.core_root
    jit = collect_steps.core_root_jit(settings, plan.jit_name) if needs_jit else None
    shim = find_shim(core_root, settings.host_os) if plan.run_hosts and core_root is not None else None
    superpmi = config.find_tool("superpmi", settings) if plan.clean else None
    return Tools(mcs=mcs, core_root=core_root, jit=jit, shim=shim, superpmi=superpmi)


def find_corerun(core_root: Path, host_os: str) -> Path:
    corerun = core_root / platforms.exe_name("corerun", host_os)
    if not corerun.is_file():
        raise SuiteError(f"{corerun.name} not found in Core_Root {core_root}; pass another -core_root")
    return corerun


def find_crossgen2(core_root: Path, host_os: str) -> Path:
    crossgen2 = core_root / platforms.crossgen2_relative_path(host_os)
    if not crossgen2.is_file():
        raise SuiteError(f"crossgen2 not found at {crossgen2}; build it or pass another -core_root")
    return crossgen2


def find_ilc(core_root: Path, host_os: str) -> Tuple[Path, Path]:
    """`<Core_Root>/ilc-published/ilc[.exe]` and the `<Core_Root>/aotsdk` folder (§14.2)."""
    ilc = core_root / platforms.ilc_relative_path(host_os)
    if not ilc.is_file():
        raise SuiteError(f"--nativeaot: ILC not found at {ilc}; build the NativeAOT compiler or pass another -core_root")
    aotsdk = core_root / collect_hosts.AOTSDK_DIR
    if not aotsdk.is_dir():
        raise SuiteError(f"--nativeaot: folder {aotsdk} not found (the NativeAOT SDK assemblies); "
                         "build it or pass another -core_root")
    return ilc, aotsdk


# ---------------------------------------------------------------- the command

def resolve_output(plan: CollectPlan, settings: config.Settings) -> Path:
    if plan.output:
        final = Path(plan.output).resolve()
    else:
        final = collect_steps.default_output_path(Path.cwd(), settings.host_os, settings.arch, settings.build_type)
    collect_steps.check_output_path(final)
    return final


@contextmanager
def work_folder(plan: CollectPlan) -> Iterator[Path]:
    """`-temp_dir` (created if needed, always kept), else a new temporary folder removed at the end
    (also on errors and interrupts) unless --skip_cleanup."""
    if plan.temp_dir:
        folder = Path(plan.temp_dir).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with fsutil.temporary_directory(prefix="spmi-collect-", keep=plan.keep_temp) as folder:
        yield folder


def run_collect(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    settings = config.resolve_settings(args, "Checked")
    config.start_logging(args, settings)
    tools = find_tools(plan, settings)
    final = resolve_output(plan, settings)
    with runner.stop_on_termination(), work_folder(plan) as temp_dir:
        log.debug("Work folder %s", temp_dir)
        work = WorkFiles(temp_dir, final.name)
        run_steps(plan, settings, tools, work)
        collect_steps.publish(work.staged_final, final)
        if not plan.keep_temp:
            shutil.rmtree(work.staged_final.parent, ignore_errors=True)
    log.info("Generated MCH file: %s", final)
    return 0


def run_steps(plan: CollectPlan, settings: config.Settings, tools: Tools, work: WorkFiles) -> None:
    """§14.3: collect, merge, clean (or copy), TOC, verify, --ci placeholder — all in the work folder."""
    if plan.run_hosts:
        collect(plan, settings, tools, work.temp_dir)
    if plan.merge_mch_files:
        collect_steps.concat_mch_files(tools.mcs, work, [Path(p).resolve() for p in plan.merge_mch_files])
    elif plan.merge:
        collect_steps.merge_mc_files(tools.mcs, work, keep=plan.keep_temp)
    collect_steps.require_base_mch(work)
    replayer = _replayer(plan, settings, tools)
    if replayer is not None:
        collect_steps.clean_into_final(tools.mcs, replayer, work)
    else:
        collect_steps.copy_into_final(work)
    if plan.toc:
        collect_steps.make_toc(tools.mcs, work.staged_final)
    if replayer is not None:
        collect_steps.verify_clean(replayer, work)
    if plan.ci:
        collect_steps.mark_if_empty(work.staged_final)


def _replayer(plan: CollectPlan, settings: config.Settings, tools: Tools) -> Optional[Replayer]:
    if not plan.clean:
        return None
    assert tools.superpmi is not None and tools.jit is not None
    core_root = settings.core_root or tools.superpmi.parent
    return Replayer(tools.superpmi, tools.jit, core_root, settings, plan.replay)


def collect(plan: CollectPlan, settings: config.Settings, tools: Tools, temp_dir: Path) -> None:
    """Run the host programs with the shim in front of the JIT; the shim writes `.mc` files into `temp_dir`."""
    assert tools.core_root is not None and tools.shim is not None and tools.jit is not None
    compiler = plan.mode in (CollectionMode.CROSSGEN2, CollectionMode.NATIVEAOT)
    real_jit = collect_hosts.jit_for_compiler_hosts(tools.jit, temp_dir) if compiler else tools.jit
    shim = collect_hosts.Shim(tools.shim, real_jit, temp_dir)
    dotnet = collect_hosts.dotnet_variables(plan.tiering)
    env = collect_hosts.shim_environment(shim, dotnet)
    path_value = os.environ.get("PATH")
    if plan.mode is CollectionMode.COMMAND:
        assert plan.command is not None
        command = collect_hosts.resolve_collection_command(plan.command, tools.core_root, path_value,
                                                           settings.host_os)
        collect_hosts.run_command(command, plan.command_args, env, Path.cwd())
    elif plan.mode is CollectionMode.PMI:
        corerun = find_corerun(tools.core_root, settings.host_os)
        pmi_dll = collect_hosts.find_pmi_dll(plan.pmi_location, path_value, tools.core_root, settings.host_os)
        assemblies = collect_hosts.find_assemblies(plan.assemblies, plan.excludes)
        env.update(collect_hosts.pmi_environment(plan.pmi_paths, settings.host_os))
        collect_hosts.run_pmi(corerun, pmi_dll, assemblies, env, temp_dir, plan.parallelism, settings.show_progress)
    elif plan.mode is CollectionMode.CROSSGEN2:
        crossgen2 = find_crossgen2(tools.core_root, settings.host_os)
        assemblies = collect_hosts.find_assemblies(plan.assemblies, plan.excludes)
        collect_hosts.run_crossgen2(crossgen2, assemblies, shim, tools.core_root, dotnet, temp_dir,
                                    plan.parallelism, settings.show_progress)
    elif plan.mode is CollectionMode.NATIVEAOT:
        ilc, aotsdk = find_ilc(tools.core_root, settings.host_os)
        rsps = collect_hosts.find_ilc_rsps(plan.ilc_rsps, plan.excludes)
        layout = collect_hosts.NativeAotLayout(tools.core_root, aotsdk, tools.shim, settings.host_os)
        collect_hosts.run_nativeaot(ilc, rsps, shim, layout, dotnet, temp_dir, plan.parallelism,
                                    settings.show_progress)
