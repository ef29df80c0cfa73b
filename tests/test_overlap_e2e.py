"""Replaying while the other collections download (spmi/sources/collection_feed.py), end to end:
the sample toolchain's collections are published to Azurite with `superpmi.py upload` and the
commands fetch them through the loopback fault proxy, throttled so that a download takes about
a second (docs/contracts.md §11.3, §12.5, §12.20)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from e2e_support import superpmi_processes_for

from sample.make_toolchain import make_toolchain
from spmi.pipeline import common as pipeline

REPO = Path(__file__).resolve().parent.parent
GUID = "0ddba11a-5e7f-4c1d-9a2b-3c4d5e6f7a8b"
SETS = ("aspnet.run", "benchmarks.run", "libraries.pmi")  # the order the commands take them in
TARGET = ["-arch", "x64", "-target_os", "linux", "-target_arch", "x64"]
SCRUBBED_ENV = ("SUPERPMI_STORAGE_URL", "AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_CACHE_DIRECTORY",
                "SUPERPMI_PRIVATE_STORE", "TF_BUILD", "GITHUB_STEP_SUMMARY")
THROTTLE = 15_000  # bytes/s per connection: each zipped collection takes about a second


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory):
    return make_toolchain(tmp_path_factory.mktemp("overlap_toolchain"), contexts=300, seed=4,
                          targets=["linux-x64"], collections=list(SETS), guid=GUID)


def child_env(temp_root: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US="0", SUPERPMI_STORAGE_RETRIES="1",
               TMPDIR=str(temp_root))
    env.update(extra)
    return env


def suite_argv(command: str, toolchain, spmi: Path, storage_url: str, *extra: str) -> List[str]:
    argv = [sys.executable, str(REPO / "superpmi.py"), command, "-core_root", str(toolchain.core_root),
            "-spmi_location", str(spmi), *TARGET, "-jit_ee_version", GUID, "-storage_url", storage_url,
            "--no_progress"]
    if command != "replay":
        argv += ["-base_jit_path", str(toolchain.base_dir / "libclrjit.so")]
    return argv + list(extra)


def publish(storage_account, toolchain, scratch: Path) -> None:
    env = child_env(scratch, AZURE_STORAGE_CONNECTION_STRING=storage_account.connection_string)
    upload = subprocess.run([sys.executable, str(REPO / "superpmi.py"), "upload", "-spmi_location",
                             str(scratch / "spmi"), "-jit_ee_version", GUID, *TARGET, "--no_progress",
                             "-mch_files", str(toolchain.collections_dir)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert upload.returncode == 0, upload.stdout + upload.stderr


@pytest.fixture
def published(storage_account, toolchain, tmp_path):
    scratch = tmp_path / "publish"
    scratch.mkdir()
    publish(storage_account, toolchain, scratch)
    return storage_account


def run(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


def cache_dir(spmi: Path) -> Path:
    return spmi / "mch" / f"{GUID}.linux.x64"


def outputs(spmi: Path) -> Dict[str, str]:
    """Every file a command wrote under `spmi_location` (but the cache and the log), with the
    run's own folder replaced, so two runs in two folders can be compared."""
    found = {}
    for path in sorted(spmi.rglob("*")):
        relative = path.relative_to(spmi)
        if path.is_file() and relative.parts[0] != "mch" and not path.name.endswith(".log"):
            found[relative.as_posix()] = path.read_text(encoding="utf-8", errors="replace").replace(str(spmi), "<spmi>")
    return found


def replay_report(out: str, spmi: Path) -> List[str]:
    """What replay printed from its first collection on, without timestamps and download lines."""
    lines = [re.sub(r"^\[[0-9:]+\] ", "", line).replace(str(spmi), "<spmi>") for line in out.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("Replaying "))
    return [line for line in lines[start:] if not line.startswith("Download")]


def leftovers(folder: Path) -> List[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("command", ["asmdiffs", "memdiff", "replay"])
def test_overlapped_run_writes_what_the_download_first_run_writes(published, toolchain, fault_proxy, tmp_path,
                                                                  command):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    extra = ["--summary_as_json"] if command != "replay" else []
    first = tmp_path / "download_first"
    sequential = run(suite_argv(command, toolchain, first, published.account_url, "--no_overlap", *extra),
                     child_env(temp_root))
    assert sequential.returncode == 0, sequential.stdout + sequential.stderr

    fault_proxy.per_connection_bytes_per_second = THROTTLE
    overlapped_dir = tmp_path / "overlapped"
    overlapped = run(suite_argv(command, toolchain, overlapped_dir, fault_proxy.account_url, *extra),
                     child_env(temp_root))
    assert overlapped.returncode == 0, overlapped.stdout + overlapped.stderr

    assert outputs(overlapped_dir) == outputs(first)
    if command == "replay":  # replay writes only its log: its summary block is what it produces
        report = replay_report(sequential.stdout, first)
        assert replay_report(overlapped.stdout, overlapped_dir) == report
        assert report[-2:] == ["Replay summary:", "  All replays clean"] and len(report) > 3 * len(SETS), report
    else:
        assert outputs(first), "the runs wrote nothing to compare"
    assert leftovers(cache_dir(overlapped_dir)) == leftovers(cache_dir(first))
    assert leftovers(temp_root) == []
    log = overlapped.stdout
    started_first = log.index(f"{SETS[0]}.linux.x64.checked.mch")
    last_arrived = log.index(f"Downloaded {SETS[-1]}.linux.x64.checked.mch")
    assert started_first < last_arrived, "the first collection waited for every download:\n" + log
    replayed = [line for line in log.splitlines() if ".linux.x64.checked.mch" in line and str(overlapped_dir) in line
                and "Download" not in line]
    assert [s for s in SETS if any(s in line for line in replayed)] == list(SETS)


def both_at_work(fault_proxy, first: Path) -> bool:
    """superpmi replays the first collection while the last one is being downloaded."""
    return bool(superpmi_processes_for(first)) and fault_proxy.count("GET", SETS[-1]) >= 1


def stop_once_both_at_work(argv: List[str], env: Dict[str, str], fault_proxy, first: Path,
                           stop_signal: int) -> Tuple[int, str]:
    """Run `argv`, send `stop_signal` once it replays `first` while the last collection downloads,
    and return its exit code and output."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not both_at_work(fault_proxy, first) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert both_at_work(fault_proxy, first), "the first collection was never replayed while the last downloaded"
        proc.send_signal(stop_signal)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out


def assert_stopped_cleanly(out: str, first: Path, temp_root: Path, cache: Path) -> None:
    """No traceback, no superpmi left, no temporary file, no partial or recorded-complete download."""
    assert "Traceback" not in out
    time.sleep(0.3)
    assert superpmi_processes_for(first) == [], "superpmi survived the interrupt"
    assert leftovers(temp_root) == [], "temporary files left behind"
    cached = leftovers(cache)
    assert not [name for name in cached if ".part" in name or name.startswith(".")], cached
    assert "superpmi_download_complete.json" not in cached, "an interrupted download was recorded complete"
    assert f"{SETS[-1]}.linux.x64.checked.mch" not in cached


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find leftover processes")
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_during_overlap_leaves_no_process_and_no_partial_file(published, toolchain, fault_proxy, tmp_path,
                                                                       stop_signal):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    spmi = tmp_path / "spmi"
    fault_proxy.trickle(interval=0.05, path_contains=SETS[-1])  # the last collection never arrives in time
    first = cache_dir(spmi) / f"{SETS[0]}.linux.x64.checked.mch"
    argv = suite_argv("asmdiffs", toolchain, spmi, fault_proxy.account_url)
    env = child_env(temp_root, SPMI_SAMPLE_COMPILE_US="20000")  # the first replay takes seconds
    code, out = stop_once_both_at_work(argv, env, fault_proxy, first, stop_signal)
    assert code == (143 if stop_signal == signal.SIGTERM else 130), out
    assert_stopped_cleanly(out, first, temp_root, cache_dir(spmi))


def test_a_failed_download_names_its_collection_and_the_next_run_fetches_only_it(published, toolchain,
                                                                                 fault_proxy, tmp_path):
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    spmi = tmp_path / "spmi"
    broken = f"{SETS[1]}.linux.x64.checked.mch.zip"
    fault_proxy.corrupt_body(times=2, path_contains=broken)  # the retry within the run is corrupted too
    argv = suite_argv("asmdiffs", toolchain, spmi, fault_proxy.account_url)
    failed = run(argv, child_env(temp_root))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    error = [line for line in (failed.stdout + failed.stderr).splitlines() if "does not match Content-MD5" in line]
    assert error and broken in error[-1], failed.stdout + failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr
    assert not (cache_dir(spmi) / "superpmi_download_complete.json").exists()
    assert not [name for name in leftovers(cache_dir(spmi)) if ".part" in name]

    fault_proxy.requests.clear()
    again = run(argv, child_env(temp_root))
    assert again.returncode == 0, again.stdout + again.stderr
    fetched = sorted({path.rsplit("/", 1)[-1].split("?")[0] for method, path, status, _ in fault_proxy.requests
                      if method == "GET" and ".zip" in path})
    assert broken in fetched and not [name for name in fetched if SETS[0] in name], fetched
    assert (cache_dir(spmi) / "superpmi_download_complete.json").is_file()


# ---------------------------------------------------------------- the Helix work item

def work_item_payload(toolchain, root: Path) -> Path:
    """A linux-x64 correlation payload: the real scripts, the sample Core_Root and both JITs."""
    payload = root / "payload"
    shutil.copytree(toolchain.core_root, payload, symlinks=True)
    for name in ("superpmi.py", pipeline.DRIVER_SCRIPT):
        shutil.copy2(REPO / name, payload / name)
    shutil.copytree(REPO / "spmi", payload / "spmi", ignore=shutil.ignore_patterns("__pycache__"))
    jit = pipeline.partition_for_target("linux", "x64").jit_name("linux")
    for side, source in (("base", toolchain.base_dir / "libclrjit.so"), ("diff", toolchain.core_root / "libclrjit.so")):
        (payload / side / "checked").mkdir(parents=True)
        shutil.copy2(source, payload / side / "checked" / jit)
    return payload


def work_item_argv(payload: Path, upload: Path, *extra: str) -> List[str]:
    return [sys.executable, str(payload / pipeline.DRIVER_SCRIPT), "-base_jit_directory", str(payload / "base"),
            "-diff_jit_directory", str(payload / "diff"), "-log_directory", str(upload), "-arch", "x64",
            "-platform", "linux", "-type", "asmdiffs", "-payload_directory", str(payload), *extra]


def run_work_item(toolchain, root: Path, storage_url: str, *extra: str) -> Tuple[subprocess.CompletedProcess, Path]:
    payload = work_item_payload(toolchain, root)
    upload = root / "upload"
    upload.mkdir()
    (root / "tmp").mkdir()
    proc = run(work_item_argv(payload, upload, *extra), child_env(root / "tmp", SUPERPMI_STORAGE_URL=storage_url))
    return proc, upload


def work_item_results(upload: Path, payload: Path) -> Dict[str, str]:
    """The summaries, report and listings a work item left (not its logs and status)."""
    found = {}
    for path in sorted(upload.iterdir()):
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found[path.name] = "\n".join(f"{n}:{archive.read(n).decode()}" for n in sorted(archive.namelist()))
        elif path.suffix != ".log" and "status" not in path.name:
            found[path.name] = path.read_text(encoding="utf-8").replace(str(payload), "<payload>")
    return found


def test_work_item_replays_while_downloading_and_leaves_what_download_first_leaves(published, toolchain, fault_proxy,
                                                                                   tmp_path):
    first_root, overlapped_root = tmp_path / "download_first", tmp_path / "overlapped"
    sequential, first_upload = run_work_item(toolchain, first_root, published.account_url, "--no_overlap")
    assert sequential.returncode == 0, sequential.stdout + sequential.stderr
    fault_proxy.per_connection_bytes_per_second = THROTTLE
    overlapped, overlapped_upload = run_work_item(toolchain, overlapped_root, fault_proxy.account_url)
    assert overlapped.returncode == 0, overlapped.stdout + overlapped.stderr

    results = work_item_results(first_upload, first_root / "payload")
    assert any(name.endswith(".md") for name in results) and any(name.endswith(".zip") for name in results), results
    assert work_item_results(overlapped_upload, overlapped_root / "payload") == results
    log = (overlapped_upload / "superpmi_asmdiffs_linux_x64.log").read_text(encoding="utf-8")
    started_first = log.index(f"{SETS[0]}.linux.x64.checked.mch")
    last_arrived = log.index(f"Downloaded {SETS[-1]}.linux.x64.checked.mch")
    assert started_first < last_arrived, "asmdiffs waited for every download:\n" + log
    status = json.loads((overlapped_upload / "superpmi_status_linux_x64.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in status["steps"]] == ["download", "asmdiffs", "asmdiffs markdown"]
    assert status["ok"] is True
    assert leftovers(overlapped_root / "tmp") == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find leftover processes")
def test_sigterm_to_an_overlapping_work_item_stops_both_sides_and_keeps_its_files(published, toolchain, fault_proxy,
                                                                                  tmp_path):
    payload = work_item_payload(toolchain, tmp_path)
    upload = tmp_path / "upload"
    upload.mkdir()
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    fault_proxy.trickle(interval=0.05, path_contains=SETS[-1])  # the last collection never arrives in time
    spmi = payload / pipeline.SPMI_LOCATION
    first = cache_dir(spmi) / f"{SETS[0]}.linux.x64.checked.mch"
    env = child_env(temp_root, SUPERPMI_STORAGE_URL=fault_proxy.account_url, SPMI_SAMPLE_COMPILE_US="20000")
    code, out = stop_once_both_at_work(work_item_argv(payload, upload), env, fault_proxy, first, signal.SIGTERM)
    assert code == 143, out
    assert_stopped_cleanly(out, first, temp_root, cache_dir(spmi))
    status = json.loads((upload / pipeline.status_name("linux", "x64")).read_text(encoding="utf-8"))
    assert not status["ok"] and any("terminated by SIGTERM" in p for s in status["steps"] for p in s["problems"])
    for name in pipeline.declared_results(pipeline.partition_for_target("linux", "x64"),
                                          pipeline.expand_types("asmdiffs")):
        assert (upload / name).is_file(), f"{name} missing: Helix fails on a declared result that is missing"
