"""`superpmi.py collect` and `merge-mch --ci` end to end: real processes on the sample toolchain
(corerun, the shim collector, pmi.dll, the sample apps, mcs and superpmi)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from sample import mchfile
from sample.context import MethodContext, decode_context

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the sample toolchain is generated for Linux and macOS")

REPO = Path(__file__).resolve().parent.parent
FAILING_METHOD = "Failing.Broken:Replay(ubyte,long):int"


# ---------------------------------------------------------------- helpers

def suite_env(tmp: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment without JIT config; temporary folders go to `tmp` so tests can see what is left."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOTNET_", "COMPlus_", "SPMI_SAMPLE_"))}
    env.update(SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US="0", TMPDIR=str(tmp))
    env.pop("SUPERPMI_PRIVATE_STORE", None)
    env.update(extra or {})
    return env


class Workspace:
    """A test's folders: `cwd` (where outputs go by default), `tmp` (TMPDIR) and `spmi` (logs)."""

    def __init__(self, root: Path, toolchain: Path) -> None:
        self.root = root
        self.toolchain = toolchain
        self.core_root = toolchain / "core_root"
        self.cwd = root / "cwd"
        self.tmp = root / "tmp"
        self.spmi = root / "spmi"
        for folder in (self.cwd, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)

    def app(self, name: str) -> str:
        return str(self.toolchain / "apps" / f"{name}.dll")

    def superpmi(self, command: str, *args: str, core_root: Optional[Path] = None,
                 env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        argv = [sys.executable, str(REPO / "superpmi.py"), command, "-core_root", str(core_root or self.core_root),
                "-spmi_location", str(self.spmi), "--no_progress", *args]
        return subprocess.run(argv, cwd=self.cwd, env=suite_env(self.tmp, env), capture_output=True, text=True,
                              timeout=120)

    def collect(self, *args: str, **kwargs) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
        return self.superpmi("collect", *args, **kwargs)

    def leftovers(self) -> List[str]:
        return sorted(p.name for p in self.tmp.iterdir())


@pytest.fixture
def ws(sample_toolchain, tmp_path) -> Workspace:
    return Workspace(tmp_path, sample_toolchain)


def contexts(mch: Path) -> List[MethodContext]:
    data = mch.read_bytes()
    return [decode_context(mchfile.record_payload(data, ref)) for ref in mchfile.scan_records(data)]


def tiers(mch: Path) -> Counter:
    return Counter(c.tier for c in contexts(mch))


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def assert_ok(result: subprocess.CompletedProcess) -> str:
    text = output_of(result)
    assert result.returncode == 0, text
    assert "Traceback" not in text
    return text


def assert_fails_cleanly(ws: Workspace, result: subprocess.CompletedProcess, message: str,
                         output: Optional[Path] = None) -> None:
    """Exit 1, `message`, exactly one error line, no traceback, no temporary folder, no output."""
    text = output_of(result)
    assert result.returncode == 1, text
    assert message in text, text
    assert "Traceback" not in text
    assert len([line for line in text.splitlines() if "rror" in line]) == 1, text
    assert ws.leftovers() == [], text
    if output is not None:
        assert not output.exists() and not Path(str(output) + ".mct").exists()


def mcs(ws: Workspace, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ws.core_root / "mcs"), *args], capture_output=True, text=True,
                          env=suite_env(ws.tmp), timeout=60)


# ---------------------------------------------------------------- command mode

def test_command_mode_records_the_run_and_leaves_only_the_collection(ws):
    corerun = str(ws.core_root / "corerun")
    text = assert_ok(ws.collect(corerun, f"{ws.app('hello')} a b"))
    final = ws.cwd / "linux.x64.Checked.mch"
    assert f"Generated MCH file: {final}" in text
    assert Path(str(final) + ".mct").read_bytes()[:4] == b"INDX"
    assert tiers(final) == Counter({"FullOpts": 5})  # TieredCompilation=0 by default
    log_text = (ws.spmi / "superpmi.log").read_text()
    assert "args: a b" in log_text  # the host's output goes to the log; its arguments were split on spaces
    assert "DOTNET_EnableExtraSuperPmiQueries=1" in log_text and "SuperPMIShimPath=" in log_text
    assert ws.leftovers() == []
    # the default output name is made unique, never overwritten
    text = assert_ok(ws.collect("corerun", ws.app("hello")))  # found in Core_Root
    assert f"Generated MCH file: {ws.cwd / 'linux.x64.Checked.1.mch'}" in text


def test_clean_removes_exactly_the_failing_context_and_the_result_replays(ws):
    out = ws.root / "failing.mch"
    text = assert_ok(ws.collect("corerun", ws.app("failing"), "--clean", "-output_mch_path", str(out)))
    assert "Removing 1 failing context(s)" in text
    names = [c.name for c in contexts(out)]
    assert len(names) == 3 and FAILING_METHOD not in names
    unclean = ws.root / "unclean.mch"
    assert_ok(ws.collect("corerun", ws.app("failing"), "-output_mch_path", str(unclean)))
    assert sorted([c.name for c in contexts(unclean)]) == sorted(names + [FAILING_METHOD])
    replayed = ws.superpmi("replay", "-mch_files", str(out), "-arch", "x64", "-target_os", "linux")
    assert "Clean SuperPMI replay (3 contexts processed)" in assert_ok(replayed)


@pytest.mark.parametrize("flags, expected", [
    ([], {"FullOpts": 5}),
    (["--disable_r2r"], {"FullOpts": 7}),
    (["--tiered_compilation"], {"Tier0": 5, "Tier1-OSR": 1, "Tier1": 3}),
    (["--tiered_pgo"], {"Tier0": 3, "Instrumented Tier0": 3, "Tier1-OSR": 1, "Instrumented Tier1": 1, "Tier1": 3}),
    (["--tiered_pgo", "--disable_r2r"], {"Tier0": 5, "Instrumented Tier0": 4, "Tier1-OSR": 1, "Tier1": 3}),
])
def test_tiering_flags_change_what_is_recorded(ws, flags, expected):
    out = ws.root / "tiers.mch"
    assert_ok(ws.collect("corerun", ws.app("hello"), *flags, "-output_mch_path", str(out)))
    assert tiers(out) == Counter(expected)


def test_jitoptrepeat_all_is_recorded_in_every_context(ws):
    out = ws.root / "repeat.mch"
    assert_ok(ws.collect("corerun", ws.app("hello"), "--jitoptrepeat_all", "-output_mch_path", str(out)))
    recorded = contexts(out)
    assert len(recorded) == 5 and all(c.stored_config.get("JitOptRepeat") == "*" for c in recorded)


# ---------------------------------------------------------------- PMI mode

def test_pmi_over_a_folder_with_an_exclude_and_pmi_path(ws):
    out = ws.root / "pmi.mch"
    text = assert_ok(ws.collect("--pmi", "-assemblies", str(ws.toolchain / "apps"), "-exclude", "CRASH",
                                "-pmi_location", str(ws.toolchain / "pmi" / "pmi.dll"),
                                "-pmi_path", str(ws.toolchain / "deps"), "--parallelism", "2",
                                "-output_mch_path", str(out)))
    assert "Running PMI over 4 assemblies (2 at a time)" in text  # hello, failing, library, native
    assert "PMI failed for" in text and "native.dll (exit code 1)" in text
    assert "PMI done: 3 of 4 assemblies succeeded" in text
    names = [c.name for c in contexts(out)]
    assert not any(n.startswith("Crash.") for n in names)
    assert "Sample.Library.Bridge:Call():int" in names  # deps.dll resolved through PMIPATH
    assert "Hello.Program:Unused(int):int" in names  # PMI compiles methods an app never calls
    assert len(names) == 3 + 6 + 4 + 5  # PMI's own (deduplicated), hello, failing, library
    assert "\r" not in text and "assembly/s" not in text  # no progress bar when not on a terminal
    assert ws.leftovers() == []


def test_pmi_finds_pmi_dll_on_path_and_refuses_what_belongs_to_command_mode(ws):
    out = ws.root / "pmi.mch"
    path = f"{ws.toolchain / 'pmi'}{os.pathsep}{os.environ.get('PATH', '')}"
    text = assert_ok(ws.collect("--pmi", "-assemblies", ws.app("hello"), "--clean", "-output_mch_path", str(out),
                                env={"PATH": path}))
    assert "Clean SuperPMI replay (9 contexts processed)" in text
    refused = ws.collect("--pmi", "-assemblies", ws.app("hello"), "--tiered_pgo")
    assert_fails_cleanly(ws, refused, "--tiered_pgo cannot be used with --pmi")
    missing = ws.collect("--pmi", "-assemblies", ws.app("hello"))
    assert_fails_cleanly(ws, missing, "pmi.dll not found on PATH or in Core_Root; pass -pmi_location")


def test_a_host_crash_keeps_what_was_recorded_with_a_warning(ws):
    out = ws.root / "crash.mch"
    text = assert_ok(ws.collect("corerun", ws.app("crash"), "--clean", "-output_mch_path", str(out)))
    assert "Warning: corerun crashed (SIGSEGV); the .mc files it wrote so far are still used" in text
    assert "ends with a truncated method context" in text
    assert [c.name for c in contexts(out)] == ["Crash.Program:Main(System.String[]):int",
                                               "Crash.Program:Setup():void", "Crash.Program:Load(System.String):int"]


# ---------------------------------------------------------------- temp folder, skip steps

def test_temp_dir_is_kept_and_later_steps_can_be_redone(ws):
    temp = ws.root / "work"
    first = ws.root / "first.mch"
    assert_ok(ws.collect("corerun", ws.app("failing"), "-temp_dir", str(temp), "--skip_cleanup",
                         "-output_mch_path", str(first)))
    assert len(list(temp.glob("*.mc"))) == 1 and (temp / "base.mch").is_file()  # --skip_cleanup keeps the .mc
    second = ws.root / "second.mch"
    text = assert_ok(ws.collect("--skip_collection_step", "-temp_dir", str(temp), "--clean", "--skip_toc_step",
                                "-output_mch_path", str(second)))
    assert "Running the collection command" not in text and "Merging 1 .mc file(s)" in text
    assert len(contexts(second)) == 3 and not Path(str(second) + ".mct").exists()
    assert not list(temp.glob("*.mc"))  # merged, so removed this time
    third = ws.root / "third.mch"
    assert_ok(ws.collect("--skip_collection_step", "--skip_merge_step", "-temp_dir", str(temp),
                         "-output_mch_path", str(third)))
    assert third.read_bytes() == first.read_bytes()
    again = ws.collect("--skip_collection_step", "-temp_dir", str(temp), "-output_mch_path", str(ws.root / "x.mch"))
    assert_fails_cleanly(ws, again, "No .mc files generated", ws.root / "x.mch")
    needs_temp = ws.collect("--skip_collection_step")
    assert_fails_cleanly(ws, needs_temp, "--skip_collection_step needs -temp_dir")


def test_skip_cleanup_keeps_the_work_folder(ws):
    text = assert_ok(ws.collect("corerun", ws.app("hello"), "--skip_cleanup"))
    assert "Keeping temporary directory" in text
    [kept] = ws.leftovers()
    assert len(list((ws.tmp / kept).glob("*.mc"))) == 1 and (ws.tmp / kept / "base.mch").is_file()


# ---------------------------------------------------------------- --ci and merge-mch --ci

def test_ci_zero_length_placeholder_both_ways(ws):
    from sample.collection import make_collection
    inputs = ws.root / "jobs"
    broken = make_collection(ws.root / "broken.mch", "linux", "x64", contexts=3,
                             faults={"compile_error": [1, 2, 3]}).path
    empty_job = inputs / "job1" / "empty.mch"
    empty_job.parent.mkdir(parents=True)
    text = assert_ok(ws.collect("--merge_mch_files", "-mch_files", str(broken), "--clean", "--ci",
                                "-output_mch_path", str(empty_job)))
    assert "Removing 3 failing context(s)" in text and "ZEROLENGTH placeholder" in text
    assert empty_job.read_bytes() == b"ZEROLENGTH" and not Path(str(empty_job) + ".mct").exists()

    full_job = inputs / "job2" / "hello.mch"
    full_job.parent.mkdir(parents=True)
    assert_ok(ws.collect("corerun", ws.app("hello"), "--ci", "-output_mch_path", str(full_job)))
    assert full_job.read_bytes()[:2] == b"mc"  # --ci leaves a non-empty collection alone

    merged = ws.root / "merged.mch"
    without_ci = ws.superpmi("merge-mch", "-output_mch_path", str(merged), "-pattern", f"{inputs}/*.mch")
    assert without_ci.returncode == 1 and "mcs -merge failed" in output_of(without_ci)  # the marker is no mch
    assert empty_job.exists() and not merged.exists()
    text = assert_ok(ws.superpmi("merge-mch", "-output_mch_path", str(merged), "-pattern", f"{inputs}/*.mch",
                                 "--ci"))
    assert "Removed 1 ZEROLENGTH placeholder(s)" in text and not empty_job.exists()
    assert len(contexts(merged)) == 5 and Path(str(merged) + ".mct").is_file()


# ---------------------------------------------------------------- collect -> upload-private -> asmdiffs / replay

def test_collection_is_found_by_its_jit_ee_guid_in_a_private_store(ws, storage_account):
    guid = mcs(ws, "-printJITEEVersion").stdout.strip()
    collected = ws.root / "mine.mch"
    assert_ok(ws.collect("--pmi", "-assemblies", str(ws.toolchain / "apps"), "-exclude", "native",
                         "-pmi_location", str(ws.toolchain / "pmi" / "pmi.dll"), "-pmi_path",
                         str(ws.toolchain / "deps"), "--clean", "-output_mch_path", str(collected)))
    assert len(contexts(collected)) == 20  # 21 recorded, the failing one removed
    store = ws.root / "store"
    text = assert_ok(ws.superpmi("upload-private", "-mch_files", str(collected), "-private_store", str(store)))
    assert (store / guid / "linux" / "x64" / "mine.mch").is_file()
    assert (store / guid / "linux" / "x64" / "mine.mch.mct").is_file()
    assert "Copied 2 files" in text
    storage = ["-storage_url", storage_account.account_url, "-private_store", str(store)]
    text = assert_ok(ws.superpmi("asmdiffs", *storage, "-base_jit_path", str(ws.toolchain / "base" / "libclrjit.so"),
                                 "-arch", "x64", "-target_os", "linux"))
    stored = store / guid / "linux" / "x64" / "mine.mch"
    assert f"Running asm diffs of {stored}" in text and "Asm diffs found" in text
    assert "mine.mch" in (ws.spmi / "diff_summary.md").read_text()
    assert (ws.spmi / "asm.mine" / "base").is_dir()
    text = assert_ok(ws.superpmi("replay", *storage, "-arch", "x64", "-target_os", "linux"))
    assert f"Replaying {stored}" in text
    assert "Clean SuperPMI replay (20 contexts processed)" in text and "All replays clean" in text


# ---------------------------------------------------------------- bad input

def test_command_not_found(ws):
    out = ws.root / "out.mch"
    result = ws.collect("no-such-host", "-output_mch_path", str(out))
    assert_fails_cleanly(ws, result, "collection command 'no-such-host' not found", out)


def test_no_mc_files_generated(ws):
    out = ws.root / "out.mch"
    result = ws.collect(shutil.which("true") or "/bin/true", "-output_mch_path", str(out))
    assert_fails_cleanly(ws, result, "No .mc files generated", out)
    kept = ws.collect(shutil.which("true") or "/bin/true", "-output_mch_path", str(out), "--skip_cleanup")
    assert kept.returncode == 1 and len(ws.leftovers()) == 1  # --skip_cleanup keeps the work folder


def test_merge_mch_files_must_exist(ws):
    out = ws.root / "out.mch"
    result = ws.collect("--merge_mch_files", "-mch_files", str(ws.root / "none.mch"), "-output_mch_path", str(out))
    assert_fails_cleanly(ws, result, "-mch_files '%s' is not a file" % (ws.root / "none.mch"), out)


def test_output_already_exists(ws):
    out = ws.root / "exists.mch"
    out.write_bytes(b"mine")
    result = ws.collect("corerun", ws.app("hello"), "-output_mch_path", str(out))
    assert_fails_cleanly(ws, result, f"-output_mch_path {out} already exists")
    assert out.read_bytes() == b"mine"
    assert "Running the collection command" not in output_of(result)


@pytest.mark.parametrize("args, message", [
    (["corerun", "--pmi", "-assemblies", "x"], "conflicting collection modes: the command 'corerun' and --pmi"),
    (["--pmi", "--crossgen2", "-assemblies", "x"], "conflicting collection modes: --pmi and --crossgen2"),
    (["--merge_mch_files", "-mch_files", "a.mch", "--pmi"], "conflicting collection modes"),
    ([], "nothing to collect"),
    (["--pmi"], "--pmi needs -assemblies"),
    (["corerun", "-assemblies", "x"], "-assemblies is only used with --pmi or --crossgen2"),
    (["--crossgen2", "-assemblies", "x", "--tiered_compilation"], "--tiered_compilation cannot be used with"),
    (["corerun", "--clean", "--skip_clean_and_verify_step"], "contradict each other"),
    (["--merge_mch_files"], "--merge_mch_files needs -mch_files"),
])
def test_conflicting_or_incomplete_mode_flags(ws, args, message):
    assert_fails_cleanly(ws, ws.collect(*args), message)


def test_missing_shim_jit_corerun_or_crossgen2(ws):
    core_root = ws.root / "core_root"
    shutil.copytree(ws.core_root, core_root, symlinks=True)
    (core_root / "libsuperpmi-shim-collector.so").unlink()
    result = ws.collect("corerun", ws.app("hello"), core_root=core_root)
    assert_fails_cleanly(ws, result, "shim collector libsuperpmi-shim-collector.so not found in Core_Root")
    shutil.copy(ws.core_root / "libsuperpmi-shim-collector.so", core_root)
    (core_root / "libclrjit.so").unlink()
    result = ws.collect("corerun", ws.app("hello"), core_root=core_root)
    assert_fails_cleanly(ws, result, "JIT 'libclrjit.so' not found")
    result = ws.collect("--crossgen2", "-assemblies", ws.app("hello"))
    assert_fails_cleanly(ws, result, "crossgen2 not found at")


# ---------------------------------------------------------------- NativeAOT mode (ILC response files)

def test_nativeaot_compiles_each_test_of_its_response_file_through_the_shim(ws):
    tests = ws.root / "nativeaot"
    shutil.copytree(ws.toolchain / "nativeaot", tests)  # ILC writes each test's exports file beside its rsp
    out = ws.root / "aot.mch"
    work = ws.root / "work"
    text = assert_ok(ws.collect("--nativeaot", "-ilc_rsps", str(tests), "--clean", "-output_mch_path", str(out),
                                "-temp_dir", str(work)))
    assert "Running ILC over 2 response files" in text and "Warning" not in text
    recorded = contexts(out)
    assert {c.set_name for c in recorded} == {"hello", "library"}
    assert {c.tier for c in recorded} == {"FullOpts"}  # ahead of time: every method once, no tiers
    assert "Hello.Program:Unused(int):int" in [c.name for c in recorded]
    # the rsps name a test build that is gone: ILC (strict about its input, references and descriptor) only
    # succeeded because the paths were made local; the exports file went to the test's native/ folder
    for test in ("Hello", "Library"):
        assert (tests / test / test / "native" / f"{test}.exports").is_file()
    # ILC's shim forwards to a copy of the JIT (superpmi replays the original); the rewritten rsps are there too
    assert (work / "libclrjit_superpmi.so").read_bytes() == (ws.core_root / "libclrjit.so").read_bytes()
    rsp = (work / "nativeaot_Hello.out.a.rsp").read_text().splitlines()
    assert rsp[:3] == ["--targetos:linux", "--targetarch:x64", "-O"]
    assert f"--descriptor:{tests / 'Hello' / 'ILLink.Descriptors.xml'}" in rsp
    assert str(tests / "Hello" / "Hello" / "Hello.dll") in rsp and not any("/__w/1/s" in line for line in rsp)
    assert ws.leftovers() == []


def test_nativeaot_exclude_and_missing_parts(ws):
    tests = ws.root / "nativeaot"
    shutil.copytree(ws.toolchain / "nativeaot", tests)
    out = ws.root / "hello.mch"
    assert_ok(ws.collect("--nativeaot", "-ilc_rsps", str(tests), "-exclude", "library", "-output_mch_path", str(out)))
    assert {c.set_name for c in contexts(out)} == {"hello"}
    core_root = ws.root / "core_root"
    shutil.copytree(ws.core_root, core_root, symlinks=True)
    shutil.rmtree(core_root / "aotsdk")
    result = ws.collect("--nativeaot", "-ilc_rsps", str(tests), core_root=core_root)
    assert_fails_cleanly(ws, result, f"--nativeaot: folder {core_root / 'aotsdk'} not found")
    shutil.rmtree(core_root / "ilc-published")
    result = ws.collect("--nativeaot", "-ilc_rsps", str(tests), core_root=core_root)
    assert_fails_cleanly(ws, result, "--nativeaot: ILC not found at")
    result = ws.collect("--nativeaot", "-ilc_rsps", str(ws.toolchain / "apps"))
    assert_fails_cleanly(ws, result, "no *.ilc.rsp files to collect from")


# ---------------------------------------------------------------- superpmi switches of the clean and verify replays

def test_superpmi_switches_and_the_target_reach_the_clean_and_verify_replays(ws):
    spmi_log = ws.root / "spmi.txt"
    out = ws.root / "arm64.mch"
    assert_ok(ws.collect(str(ws.core_root / "corerun"), ws.app("hello"), "--clean", "-output_mch_path", str(out),
                         "-target_arch", "arm64", "-mch_arch", "arm64", "--altjit", "--sequential", "--break_on_error",
                         "-error_limit", "5", "-spmi_log_file", str(spmi_log)))
    assert {c.target_arch for c in contexts(out)} == {"arm64"}  # the shim forwarded to the arm64 cross JIT
    runs = [line.split("Invoking: ", 1)[1] for line in (ws.spmi / "superpmi.log").read_text().splitlines()
            if "Invoking: " in line and "/superpmi " in line]
    assert len(runs) == 2  # the clean replay and the verify replay
    for run in runs:
        assert " -p" not in run
        assert (f"-boe -w {spmi_log} -failureLimit 5 -jitoption force 'AltJit=*' -jitoption force 'AltJitNgen=*' "
                "-target arm64 -f ") in run
        assert run.split()[-2].endswith("/libclrjit_universal_arm64_x64.so")
    assert spmi_log.is_file() and spmi_log.stat().st_size > 0
    result = ws.collect("corerun", ws.app("hello"), "--clean", "-spmi_log_file", str(spmi_log))
    assert_fails_cleanly(ws, result, "-spmi_log_file requires --sequential")
    result = ws.collect("corerun", ws.app("hello"), "-mch_arch", "sparc")
    assert_fails_cleanly(ws, result, "-mch_arch 'sparc' is not an architecture")


def _wait_for(predicate, seconds: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


@pytest.mark.parametrize("signal_number, exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_interrupted_collection_stops_the_host_tree_and_removes_the_work_folder(ws, signal_number, exit_code):
    pids = ws.root / "pids"
    script = ws.root / "slow_host.sh"
    script.write_text('#!/bin/sh\necho $$ > "$PIDS.shell"\n"$CORERUN" "$APP"\n'
                      'sleep 300 &\necho $! > "$PIDS.sleep"\nwait\n')
    script.chmod(0o755)
    out = ws.root / "out.mch"
    argv = [sys.executable, str(REPO / "superpmi.py"), "collect", "-core_root", str(ws.core_root),
            "-spmi_location", str(ws.spmi), str(script), "-output_mch_path", str(out)]
    env = suite_env(ws.tmp, {"PIDS": str(pids), "CORERUN": str(ws.core_root / "corerun"), "APP": ws.app("hello")})
    proc = subprocess.Popen(argv, cwd=ws.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sleep_pid_file = Path(f"{pids}.sleep")
    _wait_for(lambda: sleep_pid_file.is_file() and sleep_pid_file.read_text().strip())
    assert list(ws.tmp.glob("spmi-collect-*/*.mc"))  # the host recorded something before it was stopped
    proc.send_signal(signal_number)
    text, _ = proc.communicate(timeout=30)
    assert proc.returncode == exit_code, text
    assert "interrupted; child processes stopped" in text and "Traceback" not in text
    for name in ("shell", "sleep"):
        pid = int(Path(f"{pids}.{name}").read_text())
        _wait_for(lambda pid=pid: _gone(pid), 5)
    assert ws.leftovers() == [] and not out.exists()
