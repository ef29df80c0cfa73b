"""`superpmi.py replay` end to end against the sample toolchain."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from e2e_support import assert_fails_in_one_line, collection, interrupt_once_replaying, superpmi_invocation

import superpmi

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> Path:
    """Small collections with faults the replay must show."""
    from sample.collection import make_collection
    out = tmp_path_factory.mktemp("faulty")
    make_collection(out / "asserts.mch", "linux", "x64", contexts=40, faults={"assert": [3, 5, 7, 30], "missing": [9]})
    make_collection(out / "missing.mch", "linux", "x64", contexts=20, faults={"missing": [4, 6]})
    make_collection(out / "crash.mch", "linux", "x64", contexts=12, faults={"crash": [4]})
    make_collection(out / "hang.mch", "linux", "x64", contexts=12, faults={"hang": [4]})
    (out / "notacollection.mch").write_bytes(b"PK\x03\x04 zip, not a collection")
    return out


def replay(capsys, toolchain: Path, spmi: Path, *extra: str) -> Tuple[int, str]:
    argv = ["replay", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi),
            "-arch", "x64", "-target_os", "linux", *extra]
    code = superpmi.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_clean_replay(capsys, sample_toolchain, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(collection(sample_toolchain)),
                       "--parallelism", "2")
    assert code == 0, out
    assert "Clean SuperPMI replay (120 contexts processed)" in out
    assert "Replay summary:" in out
    assert out.rstrip().endswith("All replays clean")
    log_text = (tmp_path / "superpmi.log").read_text()
    assert " -p 2 " in log_text and "Traceback" not in log_text


def test_asserts_are_grouped_repros_collected_and_exit_1(capsys, sample_toolchain, faulty, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "asserts.mch"),
                       "--produce_repro")
    assert code == 1
    assert "Compilation failures" in out
    assert "============================== Assertions:" in out
    assert "=== Assertion #1/2 (count: 2): " in out
    assert "  asserts.mch # 3 : IL size" in out
    assert out.count("============================== Assertions:") == 2, "asserts are printed again at the end"
    assert "Repro 4 .mc file(s) created for failures:" in out
    repro_dir = tmp_path / "repro.asserts"
    assert sorted(p.name for p in repro_dir.iterdir()) == ["repro-3.mc", "repro-30.mc", "repro-5.mc", "repro-7.mc"]
    assert f"{repro_dir / 'xxxxx.mc'}" in out
    assert "Replay failures in 1 MCH files:" in out and str(faulty / "asserts.mch") in out
    # a second run never overwrites the first run's repros
    replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "asserts.mch"), "--produce_repro")
    assert (tmp_path / "repro.asserts.1").is_dir() and len(list(repro_dir.iterdir())) == 4


def test_missing_data_only_is_a_warning(capsys, sample_toolchain, faulty, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "missing.mch"))
    assert code == 0, out
    assert "SuperPMI encountered missing data for 2 out of 20 contexts" in out
    assert "All replays clean" in out


def test_crash_is_a_failure(capsys, sample_toolchain, faulty, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "crash.mch"), "--sequential")
    assert code == 1
    assert "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault)" in out
    assert "Replay failures in 1 MCH files:" in out


@pytest.mark.parametrize("mode", [["--sequential"], ["--parallelism", "2"]])
def test_a_truncated_collection_is_named_as_unreadable(capsys, sample_toolchain, tmp_path, mode):
    """superpmi stops at a corrupt record (docs/contracts.md §2.8.2, exit -1): that is what is said,
    naming the collection, not a crashed worker; the next collection still runs."""
    good = collection(sample_toolchain)
    truncated = tmp_path / "truncated.mch"
    truncated.write_bytes(good.read_bytes()[:len(good.read_bytes()) * 2 // 3])
    code, out = replay(capsys, sample_toolchain, tmp_path / "spmi", "-mch_files", str(truncated), str(good), *mode)
    assert code == 1
    assert "crashed" not in out, out
    assert re.search(r"superpmi cannot read the collection truncated\.mch: Method [0-9]+ is of low integrity "
                     r"\(the file is truncated or corrupt; download or copy it again\)", out), out
    assert "Clean SuperPMI replay (120 contexts processed)" in out, "the next collection still runs"


def test_relative_collection_paths_name_the_given_files(capsys, sample_toolchain, tmp_path, monkeypatch):
    """superpmi runs in Core_Root: a relative -mch_files path still names the file the user meant."""
    good = collection(sample_toolchain)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / good.name).write_bytes(good.read_bytes())
    monkeypatch.chdir(tmp_path / "work")
    code, out = replay(capsys, sample_toolchain, tmp_path / "spmi", "-mch_files", good.name)
    assert code == 0, out
    assert "Clean SuperPMI replay (120 contexts processed)" in out


def test_hang_is_killed_after_timeout(capsys, sample_toolchain, faulty, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "hang.mch"),
                       str(faulty / "missing.mch"), "--timeout", "2")
    assert code == 1
    assert "superpmi did not finish within 2 s (--timeout) and was killed" in out
    assert "SuperPMI encountered missing data for 2 out of 20 contexts" in out, "the next collection still runs"


def test_compile_list_runs_only_those_contexts_without_p(capsys, sample_toolchain, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-mch_files", str(collection(sample_toolchain)),
                       "-c", "3,7-9")
    assert code == 0, out
    assert "Clean SuperPMI replay (4 contexts processed)" in out
    invoke = superpmi_invocation(tmp_path)
    assert " -c 3,7-9 " in invoke and " -p" not in invoke


def test_cross_target_uses_the_cross_jit_and_target_flag(capsys, sample_toolchain, tmp_path):
    code, out = replay(capsys, sample_toolchain, tmp_path, "-target_arch", "arm64",
                       "-mch_files", str(collection(sample_toolchain, arch="arm64")))
    assert code == 0, out
    invoke = superpmi_invocation(tmp_path)
    assert "-target arm64" in invoke and "libclrjit_universal_arm64_x64.so" in invoke


def bad_input_cases(toolchain: Path, faulty: Path, tmp: Path) -> List[Tuple[List[str], str]]:
    no_superpmi = tmp / "empty_core_root"
    no_superpmi.mkdir()
    (no_superpmi / "libclrjit.so").write_bytes((toolchain / "core_root" / "libclrjit.so").read_bytes())
    mch = str(collection(toolchain))
    return [
        (["-jit_path", str(tmp / "nope.so"), "-mch_files", mch], "does not exist"),
        (["-jit_path", str(toolchain / "core_root" / "libclrjit_universal_arm64_x64.so"), "-mch_files", mch],
         "generates code for universal-arm64, not linux/x64"),
        (["-core_root", str(no_superpmi), "-mch_files", mch], "superpmi not found"),
        (["-mch_files", str(tmp)], "No MCH files found"),
        (["-mch_files", str(faulty / "notacollection.mch")], "is not a method-context file"),
        (["-mch_files", mch, "-spmi_log_file", "x.log"], "requires --sequential"),
        (["-mch_files", mch, "-details", str(tmp / "missing" / "dir" / "y.csv")],
         f"-details '{tmp / 'missing' / 'dir' / 'y.csv'}': the folder '{tmp / 'missing' / 'dir'}' does not exist"),
    ]


def test_bad_inputs_give_one_line_and_exit_1(sample_toolchain, faulty, tmp_path):
    for extra, message in bad_input_cases(sample_toolchain, faulty, tmp_path):
        assert_fails_in_one_line("replay", sample_toolchain, tmp_path / "spmi", extra, message)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find leftover processes")
def test_ctrl_c_kills_children_and_removes_temp_files(sample_toolchain, faulty, tmp_path):
    hang_copy = tmp_path / "hang-ctrl-c.mch"
    hang_copy.write_bytes((faulty / "hang.mch").read_bytes())
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    argv = [sys.executable, str(REPO / "superpmi.py"), "replay", "-core_root", str(sample_toolchain / "core_root"),
            "-spmi_location", str(tmp_path / "spmi"), "-arch", "x64", "-target_os", "linux",
            "-mch_files", str(hang_copy), "--sequential"]
    env = dict(__import__("os").environ, TMPDIR=str(temp_root))
    code, out = interrupt_once_replaying(argv, env, hang_copy, settle=0.5)
    assert code == 130, out
    assert "interrupted" in out and "Traceback" not in out
    assert list(temp_root.iterdir()) == [], "temporary files left behind"
    assert (tmp_path / "spmi" / "superpmi.log").is_file()
