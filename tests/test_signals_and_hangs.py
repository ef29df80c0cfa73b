"""SIGTERM, hangs, parallel-worker crashes and interrupted listings, with real processes
(the sample toolchain's superpmi; docs/contracts.md §2.10, §12.15, §12.20)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from e2e_support import collection, superpmi_processes_for

from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline import workitem
from spmi.tools import superpmi_tool

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find leftover processes")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> Path:
    from sample.collection import make_collection
    out = tmp_path_factory.mktemp("signal_faulty")
    make_collection(out / "hang.mch", "linux", "x64", contexts=40, faults={"hang": [9]})
    make_collection(out / "crash.mch", "linux", "x64", contexts=40, faults={"crash": [5]})
    return out


def fresh_copy(source: Path, directory: Path, name: str) -> Path:
    """A copy with its own name, so the test finds exactly its own superpmi processes."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    shutil.copyfile(source, target)
    return target


def suite_env(temp_root: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    env.update(TMPDIR=str(temp_root), SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US="0")
    env.update(extra)
    return env


def superpmi_argv(command: str, toolchain: Path, spmi: Path, *extra: str) -> List[str]:
    argv = [sys.executable, str(REPO / "superpmi.py"), command, "-core_root", str(toolchain / "core_root"),
            "-spmi_location", str(spmi), "-arch", "x64", "-target_os", "linux"]
    if command == "asmdiffs":
        argv += ["-base_jit_path", str(toolchain / "base" / "libclrjit.so")]
    return argv + list(extra)


def wait_for(condition, seconds: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def terminate_when(argv: List[str], env: Dict[str, str], condition, settle: float = 0.5,  # type: ignore[no-untyped-def]
                   cwd: Path = REPO) -> Tuple[int, str]:
    """Start `argv`, wait for `condition`, send SIGTERM (as AzDO and Helix do); exit code and output."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    try:
        assert wait_for(condition), "the expected state was never reached"
        time.sleep(settle)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out


def leftovers(temp_root: Path) -> List[str]:
    return sorted(str(p.relative_to(temp_root)) for p in temp_root.rglob("*"))


# ---------------------------------------------------------------- item 4 + 5: SIGTERM and superpmi's temp files

@pytest.mark.parametrize("command", ["replay", "asmdiffs"])
def test_sigterm_stops_the_tree_cleans_temp_and_exits_143(sample_toolchain, faulty, tmp_path, command):
    hang = fresh_copy(faulty / "hang.mch", tmp_path / "in", f"zz-sigterm-{command}.mch")
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    spmi = tmp_path / "spmi"
    argv = superpmi_argv(command, sample_toolchain, spmi, "-mch_files", str(collection(sample_toolchain)),
                         str(hang), "--parallelism", "2")
    code, out = terminate_when(argv, suite_env(temp_root), lambda: superpmi_processes_for(hang))
    assert code == 143, out
    assert "terminated by SIGTERM" in out and "Traceback" not in out
    time.sleep(0.3)
    assert superpmi_processes_for(hang) == [], "superpmi (or a worker) survived SIGTERM"
    assert leftovers(temp_root) == [], "temporary files left behind (ParallelSuperPMI-* or the suite's own)"
    assert (spmi / "superpmi.log").is_file()
    if command == "asmdiffs":
        asm = spmi / "asm.libraries.pmi.linux.x64.checked"
        assert (asm / "summary.md").is_file() and list((asm / "diff").glob("*.dasm")), "finished outputs are kept"


def test_timeout_kill_leaves_no_parallel_temp_files_and_names_the_contexts_reached(sample_toolchain, faulty,
                                                                                   tmp_path):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    hang = fresh_copy(faulty / "hang.mch", tmp_path / "in", "hang-timeout.mch")
    argv = superpmi_argv("replay", sample_toolchain, tmp_path / "spmi", "-mch_files", str(hang),
                         "--sequential", "--timeout", "3")
    proc = subprocess.run(argv, capture_output=True, text=True, env=suite_env(temp_root), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error = [line for line in proc.stdout.splitlines() if "did not finish within 3 s" in line]
    assert error and "hang-timeout.mch" in error[0]
    assert "8 contexts had finished (up to #8); context #9 had not" in error[0]
    assert leftovers(temp_root) == []

    parallel = superpmi_argv("replay", sample_toolchain, tmp_path / "spmi", "-mch_files", str(hang),
                             "--parallelism", "2", "--timeout", "3")
    proc = subprocess.run(parallel, capture_output=True, text=True, env=suite_env(temp_root), timeout=120)
    assert proc.returncode == 1
    assert "context #9 had not" in proc.stdout
    assert not list(temp_root.rglob("ParallelSuperPMI-*")) and leftovers(temp_root) == []


# ---------------------------------------------------------------- item 6: a time budget instead of a manual --timeout

def test_time_budget_shortens_the_next_timeout_and_then_skips():
    options = superpmi_tool.RunOptions(timeout=100.0, time_budget=30.0, started=1000.0)
    assert options.run_timeout(now=1000.0) == 30.0
    assert options.run_timeout(now=1025.0) == 5.0
    assert options.run_timeout(now=1031.0) == 0.0
    assert options.timeout_flag(5.0) == "--time_budget" and options.timeout_flag(100.0) == "--timeout"
    assert superpmi_tool.RunOptions(timeout=7.0).run_timeout() == 7.0
    assert superpmi_tool.RunOptions().run_timeout() is None
    verdict = superpmi_tool.timeout_verdict(0, [], not_started=True)
    assert verdict.failed and verdict.kind == "timeout" and "not started" in verdict.message


def test_work_item_budget_keeps_a_margin():
    assert pipeline.parse_duration("2:00:00") == 7200 and pipeline.parse_duration("90") == 90
    for bad in ("", "a:b", "0", "-5", "1::2", "inf", "1:-5:00", "nan", "1e308"):
        with pytest.raises(ValueError):
            pipeline.parse_duration(bad)
    with pytest.raises(SuiteError, match=r"^-work_item_timeout '0:00:00' must be positive \(more than 0 seconds\)$"):
        workitem.replay_deadline("0:00:00", 0.0)
    with pytest.raises(SuiteError, match=r"^-work_item_timeout 'soon' is not a duration; use H:MM:SS or seconds$"):
        workitem.replay_deadline("soon", 0.0)
    with pytest.raises(SuiteError, match=r"^-work_item_timeout '999:00:00' must be at most 2,592,000 seconds"):
        workitem.replay_deadline("999:00:00", 0.0)
    assert pipeline.work_item_budget(7200) == 7200 - 720
    assert pipeline.work_item_budget(600) == 480
    assert pipeline.work_item_budget(20) == 10
    assert workitem.replay_deadline("0:10:00", 50.0) == 530.0 and workitem.replay_deadline(None, 0.0) is None


def make_real_payload(root: Path, toolchain: Path) -> Path:
    """A correlation payload with the real scripts and the sample toolchain (linux-x64 work item)."""
    payload = root / "payload"
    shutil.copytree(toolchain / "core_root", payload, symlinks=True)
    for name in ("superpmi.py", pipeline.DRIVER_SCRIPT):
        shutil.copy2(REPO / name, payload / name)
    shutil.copytree(REPO / "spmi", payload / "spmi", ignore=shutil.ignore_patterns("__pycache__"))
    jit = pipeline.partition_for_target("linux", "x64").jit_name("linux")
    for side, source in (("base", toolchain / "base" / jit), ("diff", toolchain / "core_root" / jit)):
        (payload / side / "checked").mkdir(parents=True)
        shutil.copy2(source, payload / side / "checked" / jit)
    return payload


def work_item_argv(payload: Path, upload: Path, mch_files: List[Path], *extra: str) -> List[str]:
    return [sys.executable, str(payload / pipeline.DRIVER_SCRIPT), "-base_jit_directory", str(payload / "base"),
            "-diff_jit_directory", str(payload / "diff"), "-log_directory", str(upload), "-arch", "x64",
            "-platform", "linux", "-type", "asmdiffs", "-payload_directory", str(payload),
            "-mch_files", *[str(p) for p in mch_files], *extra]


def test_work_item_stops_a_hang_within_its_timeout_and_names_the_collection(sample_toolchain, faulty, tmp_path):
    payload = make_real_payload(tmp_path, sample_toolchain)
    upload = tmp_path / "upload"
    upload.mkdir()
    hang = fresh_copy(faulty / "hang.mch", tmp_path / "in", "hang-in-work-item.mch")
    argv = work_item_argv(payload, upload, [collection(sample_toolchain), hang], "-work_item_timeout", "0:00:20")
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=suite_env(tmp_path), timeout=120, cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert elapsed < 20, f"the work item ran past its own timeout ({elapsed:.0f} s)"
    summary = (upload / pipeline.summary_md_name("asmdiffs", "linux", "x64")).read_text(encoding="utf-8")
    assert "hang-in-work-item.mch" in summary and "did not finish within" in summary and "(--time_budget)" in summary
    assert "context #9 had not" in summary
    status = json.loads((upload / pipeline.status_name("linux", "x64")).read_text(encoding="utf-8"))
    assert not status["ok"]
    assert superpmi_processes_for(hang) == []


def test_sigterm_in_a_work_item_keeps_its_results_and_exits_143(sample_toolchain, faulty, tmp_path):
    payload = make_real_payload(tmp_path, sample_toolchain)
    upload = tmp_path / "upload"
    upload.mkdir()
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    hang = fresh_copy(faulty / "hang.mch", tmp_path / "in", "hang-sigterm-work-item.mch")
    argv = work_item_argv(payload, upload, [hang])
    code, out = terminate_when(argv, suite_env(temp_root), lambda: superpmi_processes_for(hang), cwd=tmp_path)
    assert code == 143, out
    assert "terminated by SIGTERM" in out
    time.sleep(0.3)
    assert superpmi_processes_for(hang) == []
    status = json.loads((upload / pipeline.status_name("linux", "x64")).read_text(encoding="utf-8"))
    assert not status["ok"] and any("terminated by SIGTERM" in p for s in status["steps"] for p in s["problems"])
    for name in pipeline.declared_results(pipeline.partition_for_target("linux", "x64"),
                                          pipeline.expand_types("asmdiffs")):
        assert (upload / name).is_file(), f"{name} missing: Helix fails on a declared result that is missing"
    assert (upload / pipeline.download_log_name("linux", "x64")).is_file()
    assert leftovers(temp_root) == []


# ---------------------------------------------------------------- item 7: a crashed worker in parallel mode

def test_parallel_worker_crash_is_named_with_the_contexts_not_replayed(sample_toolchain, faulty, tmp_path):
    crash = fresh_copy(faulty / "crash.mch", tmp_path / "in", "crash-parallel.mch")
    for command in ("replay", "asmdiffs"):
        argv = superpmi_argv(command, sample_toolchain, tmp_path / f"spmi-{command}", "-mch_files", str(crash),
                             "--parallelism", "2")
        proc = subprocess.run(argv, capture_output=True, text=True, env=suite_env(tmp_path), timeout=180)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 1, text
        assert "a superpmi worker crashed (parallel mode)" in text, text
        line = next(line for line in text.splitlines() if "worker crashed" in line)
        not_replayed = int(line.split("worker crashed (parallel mode); ")[1].split(" of 40")[0])
        assert 0 < not_replayed < 40
        assert "Compilation failures" not in line


def test_shortfall_rules():
    failures = superpmi_tool.Verdict(True, "Compilation failures", superpmi_tool.ResultKind.FAILURES, warning=True)
    crash = superpmi_tool.parallel_shortfall_verdict(failures, 124, 200, 0, None)
    assert crash.kind == "crash" and "76 of 200 contexts were not replayed" in crash.message
    limited = superpmi_tool.parallel_shortfall_verdict(failures, 150, 200, 100, 100)
    assert limited.kind == superpmi_tool.ResultKind.FAILURES and "stopped after -error_limit 100" in limited.message
    assert superpmi_tool.parallel_shortfall_verdict(failures, 200, 200, 3, None) is failures
    clean = superpmi_tool.Verdict(False, "Clean", superpmi_tool.ResultKind.CLEAN)
    assert superpmi_tool.parallel_shortfall_verdict(clean, 0, 200, 0, None) is clean


def test_context_count_from_toc_and_from_the_records(faulty, tmp_path):
    copy = fresh_copy(faulty / "crash.mch", tmp_path, "count.mch")
    assert superpmi_tool.count_contexts(copy) == 40
    (tmp_path / "notmch.mch").write_bytes(b"PK junk")
    assert superpmi_tool.count_contexts(tmp_path / "notmch.mch") is None


# ---------------------------------------------------------------- item 8: listings interrupted half-way

def test_interrupted_listings_are_marked_incomplete(sample_toolchain, tmp_path):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    spmi = tmp_path / "spmi"
    mch = fresh_copy(collection(sample_toolchain), tmp_path / "in", "listing-interrupt.mch")
    asm = spmi / "asm.listing-interrupt"
    # one process at a time: the base JIT's listings are written while the diff JIT's batch still runs
    argv = superpmi_argv("asmdiffs", sample_toolchain, spmi, "-mch_files", str(mch), "--parallelism", "1")
    env = suite_env(temp_root, SPMI_SAMPLE_COMPILE_US="20000")  # slow compiles: listings take seconds
    # stop at the first listing seen: the diff JIT's batch takes a third of a second more
    code, out = terminate_when(argv, env, lambda: any(asm.glob("*/*.dasm")), settle=0.0)
    assert code == 143, out
    assert (asm / "INCOMPLETE.txt").is_file(), "a half-written asm folder must say so"
    assert not (asm / "summary.md").exists()
    assert "is incomplete" in out


def test_complete_listings_carry_no_marker(sample_toolchain, tmp_path):
    spmi = tmp_path / "spmi"
    argv = superpmi_argv("asmdiffs", sample_toolchain, spmi, "-mch_files", str(collection(sample_toolchain)),
                         "--parallelism", "2")
    proc = subprocess.run(argv, capture_output=True, text=True, env=suite_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asm = spmi / "asm.libraries.pmi.linux.x64.checked"
    assert list(asm.glob("diff/*.dasm")) and not (asm / "INCOMPLETE.txt").exists()
