"""`--run_locally`: run every work item of a host queue on this machine as Helix would
(each in its own folder, seeing only its copy of the payload), then gather the results.
"""
from __future__ import annotations

import compileall
import concurrent.futures
import logging
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from spmi.base import runner
from spmi.base.errors import ToolTimeout
from spmi.pipeline import common as pipeline
from spmi.pipeline.helix import WorkItem, expand_command
from spmi.pipeline.payload import copy_file

log = logging.getLogger("superpmi")


@dataclass
class LocalResult:
    item: WorkItem
    exit_code: int
    directory: Path
    missing_results: List[str]


_DROPPED_ENV_PREFIXES = ("HELIX_", "GITHUB_", "SYSTEM_", "BUILD_", "AGENT_")
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "SUPERPMI_CACHE_DIRECTORY",
                "SUPERPMI_PRIVATE_STORE", "TF_BUILD", "VIRTUAL_ENV")


def work_item_environment(base_env: Mapping[str, str], helix: Mapping[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in base_env.items()
           if k not in _DROPPED_ENV and not k.startswith(_DROPPED_ENV_PREFIXES)}
    env.update(helix)
    return env


def helix_variables(item: WorkItem, directory: Path, payload: Path, python: str, correlation_id: str) -> Dict[str, str]:
    return {
        "HELIX_CORRELATION_PAYLOAD": str(payload),
        "HELIX_WORKITEM_UPLOAD_ROOT": str(directory / "upload"),
        "HELIX_PYTHONPATH": python,
        "HELIX_WORKITEM_PAYLOAD": str(directory / "work"),
        "HELIX_WORKITEM_ROOT": str(directory / "work"),
        "HELIX_CORRELATION_ID": correlation_id,
        "HELIX_WORKITEM_ID": str(uuid.uuid4()),
        "HELIX_WORKITEM_FRIENDLYNAME": item.name,
        "HELIX_DUMP_FOLDER": str(directory / "dumps"),
        "HELIX_CURRENT_LOG": str(directory / "console.log"),
    }


def copy_payload(payload: Path, target: Path) -> None:
    """A work item's own copy of the payload; the collections (read only, and most of the
    bytes) are hard links where the file system allows, so that several work items of a
    target do not each copy all of them."""
    collections = payload / pipeline.LOCAL_COLLECTIONS_DIR

    def copy(source: str, destination: str) -> None:
        if Path(source).is_relative_to(collections):
            try:
                os.link(source, destination)
                return
            except OSError:
                pass
        shutil.copy2(source, destination)

    shutil.copytree(payload, target, symlinks=True, copy_function=copy)


def run_work_item_locally(item: WorkItem, payload: Path, root: Path, python: str, correlation_id: str,
                          base_env: Mapping[str, str]) -> LocalResult:
    """Run one work item as Helix would: a fresh directory with its own payload copy."""
    directory = root / item.name
    if directory.exists():
        shutil.rmtree(directory)
    item_payload = directory / "payload"
    copy_payload(payload, item_payload)
    for sub in ("upload", "work", "dumps"):
        (directory / sub).mkdir(parents=True)
    helix = helix_variables(item, directory, item_payload, python, correlation_id)
    env = work_item_environment(base_env, helix)
    argv = expand_command(item.command, env)
    console = directory / "console.log"
    with console.open("wb") as out:
        out.write(("+ " + runner.format_command(argv) + "\n").encode("utf-8"))
        out.flush()
        try:
            code = runner.run(argv, cwd=directory / "work", env=env, timeout=_timeout_seconds(item.timeout),
                              output_file=out).returncode
        except ToolTimeout:
            out.write(f"\nwork item timed out after {item.timeout}\n".encode("utf-8"))
            code = 1
    upload = directory / "upload"
    missing = [name for name in item.results if not (upload / name).is_file()]
    return LocalResult(item, code, directory, missing)


def compile_payload_once(payload: Path) -> bool:
    """Byte code for the payload's package, written here once before the work items copy the payload
    (with it): each would otherwise compile the same modules again, as a Helix machine does for its
    own. Nothing is written where Python is told not to (`PYTHONDONTWRITEBYTECODE`, `-B`); whether
    byte code was written."""
    if sys.dont_write_bytecode:
        return False
    return bool(compileall.compile_dir(str(payload / pipeline.PACKAGE_DIR), quiet=2))


def _timeout_seconds(text: str) -> float:
    return pipeline.parse_duration(text)


def collect_results(results: Sequence[LocalResult], destination: Path) -> None:
    """What the agent's Helix step downloads: the declared files, per work item."""
    for result in results:
        target = destination / result.item.name
        target.mkdir(parents=True, exist_ok=True)
        for name in result.item.results:
            source = result.directory / "upload" / name
            if source.is_file():
                copy_file(source, target / name)


#: Where a quiet local run keeps the summarize step's output (in the local directory).
SUMMARIZE_LOG = "summarize.log"


def run_summarize(argv: Sequence[str], output: Optional[Path]) -> int:
    """The summarize script: its output on the console, or into `output`."""
    if output is None:
        return runner.run(argv, inherit_output=True).returncode
    with output.open("wb") as out:
        return runner.run(argv, output_file=out).returncode


def run_locally(items: Sequence[WorkItem], payload: Path, local_dir: Path, host_os: str, host_arch: str,
                type_name: str, source_directory: Path, parallelism: int, summarize_options: Sequence[str] = (),
                quiet: bool = False) -> int:
    """All work items, then the summarize script (with `summarize_options`); exit 1 when anything failed.
    `quiet`: the summarize script's output goes to `<local_dir>/summarize.log` instead of the console."""
    work_root = local_dir / "workitems"
    results_dir = local_dir / "helixresults"
    for stale in (work_root, results_dir):
        if stale.exists():
            shutil.rmtree(stale)
    work_root.mkdir(parents=True)
    compile_payload_once(payload)
    correlation_id = str(uuid.uuid4())
    log.info("Running %d work item(s) locally in %s, %d at a time", len(items), work_root, max(1, parallelism))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallelism)) as pool:
        futures = [pool.submit(run_work_item_locally, item, payload, work_root, sys.executable, correlation_id,
                               dict(os.environ)) for item in items]
        results = [f.result() for f in futures]
    status = 0
    for result in results:
        state = "passed" if result.exit_code == 0 else f"failed (exit code {result.exit_code})"
        log.info("Work item %s %s; console log %s", result.item.name, state, result.directory / "console.log")
        if result.exit_code != 0:
            status = 1
        if result.missing_results:
            status = 1
            log.error("Error: work item %s did not leave %s (Helix would fail the download)",
                      result.item.name, ", ".join(result.missing_results))
    collect_results(results, results_dir)
    argv = [sys.executable, str(source_directory / pipeline.SUMMARIZE_SCRIPT), "-diff_summary_dir",
            str(results_dir), "-arch", host_arch, "-platform", host_os, "-type", type_name, *summarize_options]
    sys.stdout.flush()
    code = run_summarize(argv, local_dir / SUMMARIZE_LOG if quiet else None)
    if code != 0:
        status = 1
        where = f"; its output: {local_dir / SUMMARIZE_LOG}" if quiet else ""
        log.error("Error: summarize -type %s exited with %d%s", type_name, code, where)
    for diff_type in pipeline.expand_types(type_name):
        summary = results_dir / pipeline.overall_summary_name(diff_type.name, host_os, host_arch)
        log.info("Overall %s summary: %s", diff_type.name, summary)
    return status
