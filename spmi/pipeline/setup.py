"""`superpmi_asmdiffs_setup.py`'s body: resolve the options, stage the payload, write the
Helix project, print the AzDO variables, and optionally run the work items locally.
"""
from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from spmi.base import cioutput, config, fsutil, logs, platforms
from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline.azdo import default_creator, helix_source_prefix, pipeline_variables, print_variables
from spmi.pipeline.helix import plan_work_items, render_proj, split_options
from spmi.pipeline.local_runner import run_locally
from spmi.pipeline.payload import (
    StageOptions,
    prepare_payload_directory,
    stage_collections,
    stage_payload,
    validate_payload,
)
from spmi.reports import significance
from spmi.sources.baseline import check_revision

log = logging.getLogger("superpmi")


def resolve_host(args: argparse.Namespace) -> Tuple[str, str]:
    host_os = platforms.detect_host_os() if not args.host_os else platforms.normalize_os(args.host_os)
    if host_os is None:
        raise SuiteError(f"-host_os '{args.host_os}' is not an OS; use windows, linux or osx")
    host_arch = args.host_arch
    if host_arch is None:
        detected = platforms.arch_from_machine(__import__("platform").machine())
        if detected not in pipeline.HOST_ARCHES:
            raise SuiteError("cannot pick a Helix host queue for this machine; pass -host_arch x64 or x86")
        host_arch = detected
    return host_os, host_arch


def existing_dir(value: Optional[str], flag: str) -> Optional[Path]:
    if value is None:
        return None
    path = Path(value).resolve()
    if not path.is_dir():
        raise SuiteError(f"{flag} '{value}' is not a directory")
    return path


def used_dir(value: Optional[str], flag: str, used: bool) -> Optional[Path]:
    """`existing_dir` for an option the chosen types use; others are ignored, so a pipeline
    can pass every directory whatever -type it runs."""
    if not used:
        if value is not None:
            log.debug("Ignoring %s: -type does not use it", flag)
        return None
    return existing_dir(value, flag)


def work_items_per_target(text: str) -> Optional[int]:
    """`-work_items_per_target`: a count (>= 1), or `auto` (None: from the collections' sizes)."""
    value = (text or "1").strip().lower()
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise SuiteError(f"-work_items_per_target '{text}' is neither a count of at least 1 nor 'auto'")
    if int(value) > pipeline.MAX_WORK_ITEMS_PER_TARGET:
        raise SuiteError(f"-work_items_per_target '{text}' is more than the {pipeline.MAX_WORK_ITEMS_PER_TARGET} "
                         "work items a target may have")
    return int(value)


def positive(value: int, flag: str) -> int:
    if value < 1:
        raise SuiteError(f"{flag} {value} must be at least 1")
    return value


def quiet_local_run(args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None) -> bool:
    """`--run_locally` on a developer's machine shows only one line per work item and the overall
    pages; `-v`, a debug `-log_level`, or a CI run (whose logs want the pipeline commands) show everything."""
    environ = os.environ if environ is None else environ
    under_ci = cioutput.running_under_azdo(environ) or cioutput.running_under_github(environ)
    return bool(args.run_locally) and not args.verbose and not under_ci \
        and logs.parse_log_level(args.log_level) > logging.DEBUG


def run(args: argparse.Namespace) -> int:
    level = logging.DEBUG if args.verbose else logs.parse_log_level(args.log_level)
    quiet = quiet_local_run(args)
    logs.setup_logging(max(level, logging.WARNING) if quiet else level, None)  # staging: warnings only when quiet
    significance.check_override_names(args.significance)
    host_os, host_arch = resolve_host(args)
    types = pipeline.expand_types(args.type)
    flavours = pipeline.flavours_for(types)
    checked, release, pin = "checked" in flavours, "release" in flavours, any(t.uses_pin for t in types)
    source = existing_dir(args.source_directory, "-source_directory")
    assert source is not None
    if not (source / pipeline.DRIVER_SCRIPT).is_file():
        raise SuiteError(f"-source_directory '{source}' does not hold {pipeline.DRIVER_SCRIPT}")
    payload = Path(args.payload_directory).resolve()
    runtime_repo = existing_dir(args.runtime_repo, "-runtime_repo")
    downloads_baseline = ((checked and args.base_jit_directory is None)
                          or (release and args.release_base_jit_directory is None))
    if runtime_repo is None and downloads_baseline:
        runtime_repo = config.find_git_work_tree(Path.cwd())
    options = StageOptions(
        source_directory=source,
        product_directory=existing_dir(args.product_directory, "-product_directory"),  # type: ignore[arg-type]
        payload=payload, host_os=host_os, host_arch=host_arch, types=types,
        release_product_directory=used_dir(args.release_product_directory, "-release_product_directory", release),
        base_jit_directory=used_dir(args.base_jit_directory, "-base_jit_directory", checked),
        release_base_jit_directory=used_dir(args.release_base_jit_directory, "-release_base_jit_directory", release),
        base_git_hash=args.base_git_hash, runtime_repo=runtime_repo,
        baseline_of=check_revision(args.baseline_of, "-baseline_of") if args.baseline_of else None,
        storage_url=args.storage_url,
        jit_analyze_directory=existing_dir(args.jit_analyze_directory, "-jit_analyze_directory"),
        git_directory=existing_dir(args.git_directory, "-git_directory"),
        pin_directory=used_dir(args.pin_directory, "-pin_directory", pin),
        mch_files=list(args.mch_files or []),
        private_stores=[Path(s).resolve() for s in (args.private_store or [])],
        jit_ee_version=config.checked_jit_ee_version(args.jit_ee_version) if args.jit_ee_version else None,
        work_items_per_target=work_items_per_target(args.work_items_per_target),
        bytes_per_work_item=positive(args.bytes_per_work_item, "-bytes_per_work_item"))
    base_options, diff_options = split_options(args.base_jit_options), split_options(args.diff_jit_options)
    prepare_payload_directory(payload, args.clean)
    collections = stage_collections(options)
    hashes = stage_payload(options)
    items = plan_work_items(host_os, host_arch, args.type, base_options, diff_options, collections,
                            pipeline.signal_args(args.noise_check, args.significance, args.include_noise))
    validate_payload(payload, items, host_os, types, source)
    helix_dir = Path(args.helix_directory).resolve() if args.helix_directory else payload.with_name(payload.name + "_helix")
    (helix_dir / "workitem").mkdir(parents=True, exist_ok=True)
    proj = helix_dir / pipeline.PROJ_FILE_NAME
    install = (payload / pipeline.REQUIREMENTS_FILE).is_file()
    fsutil.atomic_write_text(proj, render_proj(items, host_os, str(payload), args.type, install))
    log.info("Payload %s ready for %d work item(s) (%s); baseline %s", payload, len(items),
             ", ".join(i.name for i in items), ", ".join(f"{k}: {v or 'unknown'}" for k, v in hashes.items()))
    log.info("Helix project %s", proj)
    environ = dict(os.environ)
    if not quiet:  # the pipeline's variables; nothing reads them in a quiet local run
        print_variables(pipeline_variables(payload, host_arch, args.creator or default_creator(environ),
                                           args.source_prefix or helix_source_prefix(environ)))
    if not args.run_locally:
        return 0
    logs.setup_logging(level, None)
    local_dir = Path(args.local_directory).resolve() if args.local_directory else payload.with_name(payload.name + "_local")
    jobs = positive(args.jobs, "-jobs") if args.jobs is not None else platforms.usable_cpu_count()
    return run_locally(items, payload, local_dir, host_os, host_arch, args.type, source, jobs,
                       history_summarize_options(args, hashes, options.jit_ee_version), quiet=quiet)


def history_summarize_options(args: argparse.Namespace, hashes: Dict[str, Optional[str]],
                              jit_ee_version: Optional[str]) -> List[str]:
    """What the local summarize step is told about history (docs/history.md); nothing unless asked."""
    if not (args.history_upload or args.history):
        return []
    argv = ["--history_upload"] if args.history_upload else []
    argv += ["--history", "-history_last", str(args.history_last)] if args.history else []
    base_hash = next((h for h in hashes.values() if h), None) or args.base_git_hash
    for flag, value in (("-diff_git_hash", args.diff_git_hash), ("-base_git_hash", base_hash),
                        ("-jit_ee_version", jit_ee_version), ("-storage_url", args.storage_url)):
        if value:
            argv += [flag, value]
    return argv
