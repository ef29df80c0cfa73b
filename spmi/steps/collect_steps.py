"""The steps of `collect` after the host programs ran (docs/contracts.md §14.3).

Everything happens in the temporary folder: `.mc` files are merged into `base.mch`
(or `--merge_mch_files` concatenates collections into it), `--clean` replays it and
strips the failing contexts, a table of contents is made and the result verified;
only then are the `.mch` and its `.mct` moved to the final path (so a failed run
leaves nothing there).
"""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from spmi.base import config, fsutil, platforms
from spmi.base.errors import SuiteError
from spmi.steps import mch_merge, replay_steps
from spmi.tools import mcs as mcs_tool
from spmi.tools import superpmi_tool
from spmi.tools.superpmi_tool import ResultKind, RunFiles, RunOptions

log = logging.getLogger("superpmi")

MC_PATTERN = "*.mc"


@dataclass(frozen=True)
class WorkFiles:
    """The files of one collection in its temporary folder."""

    temp_dir: Path
    final_name: str

    @property
    def base_mch(self) -> Path:
        return self.temp_dir / "base.mch"

    @property
    def fail_mcl(self) -> Path:
        return self.temp_dir / "basefail.mcl"

    @property
    def staged_final(self) -> Path:
        """The final collection while it is being made (moved to the output path at the end)."""
        return self.temp_dir / "final" / self.final_name


@dataclass(frozen=True)
class Replayer:
    """What the clean and verify replays need: superpmi, the Core_Root JIT and the replay options."""

    superpmi: Path
    jit: Path
    core_root: Path
    settings: config.Settings
    options: RunOptions

    @property
    def invocation(self) -> superpmi_tool.SuperpmiInvocation:
        """Collections are replayed for the JIT's target: `-target <arch>` when `-target_arch` is not the host's."""
        return superpmi_tool.SuperpmiInvocation(self.superpmi, self.settings.arch, self.settings.target_arch,
                                                self.options)


# ---------------------------------------------------------------- output path (pure + checks)

def default_output_path(cwd: Path, host_os: str, arch: str, build_type: str) -> Path:
    """`<cwd>/<host_os>.<arch>.<build_type>.mch`, made unique."""
    return fsutil.unique_file_path(cwd / f"{host_os}.{arch}.{build_type}.mch")


def check_output_path(path: Path) -> None:
    """The final `.mch` must not exist yet (nor its `.mct`), and its folder must."""
    for existing in (path, mcs_tool.toc_path(path)):
        if existing.exists():
            raise SuiteError(f"-output_mch_path {existing} already exists; remove it or choose another path")
    if not path.parent.is_dir():
        raise SuiteError(f"-output_mch_path {path}: folder {path.parent} does not exist; create it first")


# ---------------------------------------------------------------- merge

def mc_files(directory: Path) -> List[Path]:
    """The `.mc` files the shim wrote (below the folder, recursively)."""
    return sorted(p for p in directory.rglob(MC_PATTERN) if p.is_file())


def require_mc_files(directory: Path) -> List[Path]:
    found = mc_files(directory)
    if not found:
        raise SuiteError(f"No .mc files generated in {directory}; the collection ran no JIT compilations "
                         "through the shim (check the command, Core_Root and the log)")
    log.info("%d .mc file(s) generated", len(found))
    return found


def merge_mc_files(mcs: Path, work: WorkFiles, keep: bool) -> None:
    """`mcs -merge <temp>/base.mch <temp>/*.mc -recursive -dedup -thin`; then the `.mc` files go (unless `keep`)."""
    found = require_mc_files(work.temp_dir)
    _remove_if_exists(work.base_mch)
    log.info("Merging %d .mc file(s) into %s", len(found), work.base_mch)
    mcs_tool.run_mcs(mcs_tool.merge_argv(mcs, work.base_mch, str(work.temp_dir / MC_PATTERN)), produces=work.base_mch)
    if not keep:
        for path in found:
            path.unlink()


def concat_mch_files(mcs: Path, work: WorkFiles, sources: Sequence[Path]) -> None:
    """`--merge_mch_files`: `mcs -concat <temp>/base.mch <each>` instead of collecting."""
    for source in sources:
        if not source.is_file():
            raise SuiteError(f"-mch_files '{source}' is not a file; check the path")
    _remove_if_exists(work.base_mch)
    for source in sources:
        log.info("Appending %s to %s", source, work.base_mch)
        mcs_tool.run_mcs(mcs_tool.concat_argv(mcs, work.base_mch, source), produces=work.base_mch)


def require_base_mch(work: WorkFiles) -> None:
    if not work.base_mch.is_file():
        raise SuiteError(f"{work.base_mch} not found; run the merge step (drop --skip_merge_step) "
                         "or pass the -temp_dir of an earlier run")


def _remove_if_exists(path: Path) -> None:
    if path.exists():
        path.unlink()


# ---------------------------------------------------------------- clean

def replay_files(fail_mcl: Path) -> RunFiles:
    return RunFiles(fail_mcl=fail_mcl, details_csv=fail_mcl.with_suffix(".csv"))


def clean_replay_argv(replayer: Replayer, mch: Path, fail_mcl: Path) -> List[str]:
    """`superpmi -v ewi [-p [N]] [-boa] [-boe] [-w <log>] [-failureLimit N] [altjit] [-target <arch>]
    -f <fail.mcl> -details <csv> <jit> <mch>` (the clean and verify replays, §12.6, §14.3)."""
    return superpmi_tool.build_replay_argv(replayer.invocation, replayer.jit, mch, replay_files(fail_mcl), [])


def replay_for_failures(replayer: Replayer, mch: Path, fail_mcl: Path) -> replay_steps.CollectionOutcome:
    """The clean (or verify) replay of `mch` listing its failing contexts; the run must have completed."""
    _remove_if_exists(fail_mcl)
    files = replay_files(fail_mcl)
    argv = clean_replay_argv(replayer, mch, fail_mcl)
    run = superpmi_tool.run_superpmi(argv, replayer.core_root, replayer.options.timeout)
    outcome = replay_steps.finish_run(run, mch, files, diff_mode=False, timeout=replayer.options.timeout)
    if outcome.verdict.kind not in (ResultKind.CLEAN, ResultKind.MISSING, ResultKind.FAILURES):
        raise SuiteError(f"superpmi could not replay {mch}: {outcome.verdict.message}")
    outcome.failing_contexts = superpmi_tool.read_mcl(fail_mcl)
    return outcome


def clean_into_final(mcs: Path, replayer: Replayer, work: WorkFiles) -> List[int]:
    """Replay `base.mch`; strip the failing contexts into the staged final (or copy it when none fail)."""
    log.info("Cleaning %s: replaying it to find contexts that fail", work.base_mch)
    failing = replay_for_failures(replayer, work.base_mch, work.fail_mcl).failing_contexts
    work.staged_final.parent.mkdir(parents=True, exist_ok=True)
    if not failing:
        log.info("No failing contexts; nothing to strip")
        copy_into_final(work)
        return []
    log.info("Removing %d failing context(s): %s", len(failing), replay_steps.summarize_contexts(failing))
    _remove_if_exists(work.staged_final)
    mcs_tool.run_mcs(mcs_tool.strip_argv(mcs, work.fail_mcl, work.base_mch, work.staged_final),
                     produces=work.staged_final)
    return failing


def copy_into_final(work: WorkFiles) -> None:
    work.staged_final.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work.base_mch, work.staged_final)


# ---------------------------------------------------------------- TOC, verify, --ci, publish

def make_toc(mcs: Path, mch: Path) -> Path:
    toc = mcs_tool.toc_path(mch)
    _remove_if_exists(toc)
    mcs_tool.run_mcs(mcs_tool.toc_argv(mcs, mch), produces=toc)
    return toc


def verify_clean(replayer: Replayer, work: WorkFiles) -> None:
    """A full replay of the final collection must be clean (missing data is only a warning)."""
    log.info("Verifying %s", work.staged_final)
    fail_mcl = work.temp_dir / "finalfail.mcl"
    outcome = replay_for_failures(replayer, work.staged_final, fail_mcl)
    if outcome.verdict.kind is ResultKind.FAILURES or outcome.failing_contexts:
        contexts = replay_steps.summarize_contexts(outcome.failing_contexts) or "unknown"
        raise SuiteError(f"the cleaned collection still fails to replay (contexts {contexts}); "
                         "see the log file for superpmi's output")


def publish(staged: Path, final: Path) -> List[Path]:
    """Move the staged `.mch` (and its `.mct`) to the final path: a copy under a temporary
    name in the final folder, then a rename. Refuses to replace an existing file."""
    moved = []
    for source, target in ((staged, final), (mcs_tool.toc_path(staged), mcs_tool.toc_path(final))):
        if not source.is_file():
            continue
        if target.exists():
            raise SuiteError(f"{target} appeared while collecting; remove it or choose another -output_mch_path")
        partial = target.with_name(f".{target.name}.partial")
        try:
            shutil.copyfile(source, partial)
            os.replace(partial, target)
        finally:
            _remove_if_exists(partial)
        moved.append(target)
    return moved


def mark_if_empty(final: Path) -> bool:
    """`--ci`: a zero-length collection becomes a `ZEROLENGTH` placeholder (and has no TOC)."""
    if not mch_merge.mark_if_empty(final):
        return False
    _remove_if_exists(mcs_tool.toc_path(final))
    return True


def core_root_jit(settings: config.Settings, jit_name: Optional[str]) -> Path:
    """The real JIT the shim forwards to and the clean/verify replays use: `-jit_name`, else the JIT for
    `-target_os`/`-target_arch` (the host's native JIT when no target is given)."""
    name = jit_name or platforms.jit_file_name(settings.host_os, settings.arch, settings.target_os,
                                               settings.target_arch)
    for directory in settings.tool_search_dirs():
        if (directory / name).is_file():
            return directory / name
    places = ", ".join(str(d) for d in settings.tool_search_dirs()) or "no Core_Root found"
    raise SuiteError(f"JIT '{name}' not found ({places}); pass -core_root")
