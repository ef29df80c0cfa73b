"""`superpmi.py asmdiffs` end to end against the sample toolchain."""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from e2e_support import assert_fails_in_one_line, collection, interrupt_once_replaying, newest_log, superpmi_invocation

import superpmi

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    monkeypatch.delenv("TF_BUILD", raising=False)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> Path:
    from sample.collection import make_collection
    out = tmp_path_factory.mktemp("asm_faulty")
    make_collection(out / "asserts.mch", "linux", "x64", contexts=40, faults={"assert": [3, 5, 7, 30]})
    make_collection(out / "missing.mch", "linux", "x64", contexts=40, faults={"missing": [4, 6]})
    make_collection(out / "crash.mch", "linux", "x64", contexts=12, faults={"crash": [4]})
    make_collection(out / "hang.mch", "linux", "x64", contexts=12, faults={"hang": [4]})
    make_collection(out / "broken_csv.mch", "linux", "x64", contexts=30)
    (out / "notacollection.mch").write_bytes(b"PK\x03\x04 zip, not a collection")
    return out


def asmdiffs(capsys, toolchain: Path, spmi: Path, *extra: str, jit: str = "libclrjit.so",
             base: bool = True) -> Tuple[int, str]:
    argv = ["asmdiffs", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi),
            "-arch", "x64", "-target_os", "linux"]
    if "--sequential" not in extra:
        argv += ["--parallelism", "2"]
    if base:
        argv += ["-base_jit_path", str(toolchain / "base" / jit)]
    code = superpmi.main(argv + list(extra))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_diffs_produce_listings_analysis_and_summaries(capsys, sample_toolchain, tmp_path):
    mch = collection(sample_toolchain)
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(mch), "--git_diff")
    assert code == 0, out
    assert "Asm diffs found" in out
    assert re.search(r"Total bytes of delta: -?\d+ \(-?\d+\.\d\d% of base\)", out)
    assert re.search(r"Relative PerfScore Geomean \(Diffs\): -?\d+\.\d{4}%", out)
    assert re.search(r"\d+ contexts with diffs \(\d+ size improvements, \d+ size regressions, \d+ same size\)", out)
    # the details are in the log file; the console keeps progress, the totals and the result
    details_log = newest_log(tmp_path)
    assert "Differences found. To replay SuperPMI use:" in details_log and "export DOTNET_JitDisasm=*" in details_log
    assert f"-c ### {sample_toolchain / 'core_root' / 'libclrjit.so'} {mch}" in details_log
    assert "using the built-in equivalent (jitanalyze.py)" in details_log
    assert "Top file regressions" in details_log and "Invoking:" in details_log
    for detail in ("Differences found", "Top file", "Top method", "Invoking:"):
        assert detail not in out, detail
    asm = tmp_path / "asm.libraries.pmi.linux.x64.checked"
    base_files = sorted(p.name for p in (asm / "base").iterdir())
    assert base_files and base_files == sorted(p.name for p in (asm / "diff").iterdir())
    first = (asm / "base" / base_files[0]).read_text()
    assert first.startswith("; Assembly listing for method ")
    assert (asm / "summary.md").read_text().startswith("```")
    assert (asm / "asm_diffs.diff").stat().st_size > 0
    long_text = (tmp_path / "diff_summary.md").read_text()
    short_text = (tmp_path / "diff_short_summary.md").read_text()
    verdict, rest = long_text.split("\n\n", 1)  # the verdict line first, then §12.10 item 1
    assert re.fullmatch(r"linux x64: \d+ of 120 contexts with diffs, .* bytes \(.*\), PerfScore .*; no failures",
                        verdict), verdict
    assert rest.startswith("Diffs are based on ") and short_text.startswith(verdict + "\n\n")
    assert re.sub(r"<[^>]+>", "", verdict) in out.strip().splitlines()[-1]  # the console ends with it
    assert "<summary>Example diffs</summary>" in long_text and "```diff" in long_text
    assert "#### jit-analyze output" in long_text
    assert "python superpmi.py asmdiffs -arch x64 -target_os linux -target_arch x64" in long_text
    assert f"-mch_files {mch}" in long_text
    assert re.search(r"superpmi -c \d+ -jitoption force JitEnableNoWayAssert=1", long_text)
    assert short_text[len(verdict) + 2:].startswith("Diffs are based on ") and "Example diffs" not in short_text
    assert "Asm diffs in 1 MCH files:" in out and "Summary Markdown file" in out
    # a second run keeps the first run's outputs
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(mch), "-tag", "run 2")
    assert code == 0
    assert (tmp_path / "diff_summary.1.md").is_file() and (tmp_path / "diff_short_summary.1.md").is_file()
    assert (tmp_path / "asm.run_2.libraries.pmi.linux.x64.checked" / "summary.md").is_file()
    assert (tmp_path / "diff_summary.md").read_text() == long_text


def test_no_diffs_says_so(capsys, sample_toolchain, tmp_path):
    twin = tmp_path / "twin" / "libclrjit.so"
    twin.parent.mkdir()
    shutil.copyfile(sample_toolchain / "base" / "libclrjit.so", twin)
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(collection(sample_toolchain)),
                         "-diff_jit_path", str(twin))
    assert code == 0, out
    assert "Clean SuperPMI diff (120 contexts processed)" in out
    assert "  No asm diffs" in out
    assert "No diffs found." in (tmp_path / "diff_summary.md").read_text()
    assert "No diffs found in 1 collection" in (tmp_path / "diff_short_summary.md").read_text()
    assert not list(tmp_path.glob("asm.*"))


def test_asserts_fail_the_run_and_top_the_summary(capsys, sample_toolchain, faulty, tmp_path):
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "asserts.mch"),
                         str(collection(sample_toolchain)), "--produce_repro")
    assert code == 1
    assert "Compilation failures" in out and "=== Assertion #1/" in out
    assert "Repro 4 .mc file(s) created for failures:" in out and (tmp_path / "repro.asserts").is_dir()
    last = out.strip().splitlines()[-3:]  # the error, a blank line, the verdict line
    assert "asmdiffs failed for 1 of 2 collections (asserts.mch: Compilation failures)" in last[0]
    assert re.search(r"linux x64: .*; replay problems in 1 of 2 collections$", last[2]), last
    summary = (tmp_path / "diff_summary.md").read_text()
    assert summary.index("Replay problems") < summary.index("Diffs are based on")
    assert "Asserts (identical ones grouped; a context asserting in both JITs is two hits):" in summary
    assert "asserts.mch" in summary
    # four contexts assert in both JITs (two distinct asserts, two contexts each): contexts and hits apart
    assert "JIT asserts in 4 contexts (8 hits)" in summary
    assert re.search(r"\|asserts\.mch\|[^\n]*failed[^\n]*\|4\|8\|", summary)
    assert len(re.findall(r"\|2\|4 \(2 / 2\)\|asserts\.mch\|", summary)) == 2
    assert "To reproduce the failures:" in summary and "repro.asserts" in summary


def test_missing_data_only_is_a_warning(capsys, sample_toolchain, faulty, tmp_path):
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "missing.mch"))
    assert code == 0, out
    assert ("SuperPMI encountered missing data. Missing with base JIT: 2. Missing with diff JIT: 2. "
            "Total contexts: 40.") in out
    assert "MISSED" in (tmp_path / "diff_summary.md").read_text()


def test_crash_and_hang_fail_with_one_line_reasons(capsys, sample_toolchain, faulty, tmp_path):
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(faulty / "crash.mch"),
                         str(faulty / "hang.mch"), str(collection(sample_toolchain)), "--sequential",
                         "--timeout", "3")
    assert code == 1
    assert "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault)" in out
    assert "superpmi did not finish within 3 s (--timeout) and was killed" in out
    diffs_part = out.split("Asm diffs in", 1)[1]
    assert "libraries.pmi.linux.x64.checked.mch" in diffs_part, "the good collection is still diffed"
    assert "Replay failures in 2 MCH files:" in out
    assert "Replay problems" in (tmp_path / "diff_summary.md").read_text()


def test_cross_target_uses_cross_jits_and_target_flag(capsys, sample_toolchain, tmp_path):
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-target_arch", "arm64",
                         "-mch_files", str(collection(sample_toolchain, arch="arm64")),
                         jit="libclrjit_universal_arm64_x64.so")
    assert code == 0, out
    invoke = superpmi_invocation(tmp_path)
    assert " -target arm64 " in invoke and "core_root/libclrjit_universal_arm64_x64.so" in invoke
    listings = list((tmp_path / "asm.libraries.pmi.linux.arm64.checked" / "diff").glob("*.dasm"))
    assert listings and "ARM64" in listings[0].read_text()


def test_compile_list_limits_the_run(capsys, sample_toolchain, tmp_path):
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", str(collection(sample_toolchain)),
                         "-c", "1-60", "-metrics", "PerfScore")
    assert code == 0, out
    invoke = superpmi_invocation(tmp_path)
    assert " -c 1-60 " in invoke and " -p" not in invoke
    details_log = newest_log(tmp_path)
    assert "Summary of Perf Score diffs:" in details_log and "Total PerfScoreUnits of base:" in details_log
    assert "(overridden on cmd)" in details_log
    assert re.search(r"Diffs are based on .*>60</span> contexts", (tmp_path / "diff_summary.md").read_text())


def normalise(text: str, root: Path) -> str:
    return text.replace(str(root), "<spmi>")


def test_sequential_and_parallel_give_identical_summaries(capsys, sample_toolchain, tmp_path):
    mch = collection(sample_toolchain, name="benchmarks.run")
    code_a, _ = asmdiffs(capsys, sample_toolchain, tmp_path / "a", "-mch_files", str(mch), "--sequential")
    code_b, _ = asmdiffs(capsys, sample_toolchain, tmp_path / "b", "-mch_files", str(mch), "--parallelism", "3")
    assert code_a == code_b == 0
    for name in ("diff_summary.md", "diff_short_summary.md"):
        a = normalise((tmp_path / "a" / name).read_text(), tmp_path / "a")
        b = normalise((tmp_path / "b" / name).read_text(), tmp_path / "b")
        assert a == b, name
    asm_a = tmp_path / "a" / "asm.benchmarks.run.linux.x64.checked"
    asm_b = tmp_path / "b" / "asm.benchmarks.run.linux.x64.checked"
    assert sorted(p.name for p in asm_a.rglob("*.dasm")) == sorted(p.name for p in asm_b.rglob("*.dasm"))


def test_malformed_details_csv_fails_that_collection_only(capsys, sample_toolchain, faulty, tmp_path):
    """A superpmi that writes a broken CSV for one collection (a wrapper around the sample one)."""
    core_root = tmp_path / "core_root"
    shutil.copytree(sample_toolchain / "core_root", core_root, symlinks=True)
    real = core_root / "superpmi.real"
    (core_root / "superpmi").rename(real)
    wrapper = core_root / "superpmi"
    wrapper.write_text(f"""#!{sys.executable}
import subprocess, sys
code = subprocess.call([{str(real)!r}] + sys.argv[1:])
if "-details" in sys.argv and "broken_csv" in sys.argv[-1]:
    path = sys.argv[sys.argv.index("-details") + 1]
    with open(path, "a") as handle:
        handle.write("1,2,oops\\n")
sys.exit(code)
""")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path / "spmi", "-core_root", str(core_root),
                         "-mch_files", str(faulty / "broken_csv.mch"), str(collection(sample_toolchain)))
    assert code == 1
    assert "details CSV unusable" in out and "fields, the header has" in out
    assert "Asm diffs in 1 MCH files:" in out
    assert "asmdiffs failed for 1 of 2 collections (broken_csv.mch: details CSV unusable" in out


def bad_inputs(toolchain: Path, faulty: Path, tmp: Path) -> List[Tuple[List[str], str]]:
    core = toolchain / "core_root"
    no_superpmi = tmp / "no_superpmi"
    no_superpmi.mkdir()
    shutil.copyfile(core / "libclrjit.so", no_superpmi / "libclrjit.so")
    mch = str(collection(toolchain))
    base = str(toolchain / "base" / "libclrjit.so")
    return [
        (["-base_jit_path", str(tmp / "missing.so"), "-mch_files", mch], "does not exist"),
        (["-base_jit_path", base, "-diff_jit_path", str(tmp / "nope.so"), "-mch_files", mch], "does not exist"),
        (["-base_jit_path", str(core / "libclrjit.so"), "-mch_files", mch], "the base and diff JIT are the same file"),
        (["-base_jit_path", str(toolchain / "base" / "libclrjit_universal_arm64_x64.so"), "-mch_files", mch],
         "generates code for universal-arm64, not linux/x64"),
        (["-base_jit_path", base, "-core_root", str(no_superpmi), "-mch_files", mch], "superpmi not found"),
        (["-base_jit_path", base, "-mch_files", str(tmp)], "No MCH files found"),
        (["-base_jit_path", base, "-mch_files", str(faulty / "notacollection.mch")], "is not a method-context file"),
        (["-base_jit_path", base, "-mch_files", mch, "-metrics", "Bytes"], "not a jit-analyze metric"),
    ]


def test_bad_inputs_give_one_line_and_exit_1(sample_toolchain, faulty, tmp_path):
    for extra, message in bad_inputs(sample_toolchain, faulty, tmp_path):
        assert_fails_in_one_line("asmdiffs", sample_toolchain, tmp_path / "spmi", extra, message)


def test_undecodable_build_string_is_only_a_warning(capsys, sample_toolchain, tmp_path):
    from sample.make_toolchain import make_jit
    odd = make_jit(tmp_path / "odd" / "libclrjit.so", "linux", "x64", variant="base", build_string="custom build")
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path / "spmi", "-base_jit_path", str(odd), "-mch_files",
                         str(collection(sample_toolchain)), "-c", "1-20", base=False)
    assert code == 0, out
    assert "could not decode the base JIT build string" in out


def test_json_summary_jitdump_and_release_mode(capsys, sample_toolchain, tmp_path):
    from spmi.reports import summaries
    mch = str(collection(sample_toolchain))
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path, "-mch_files", mch, "-c", "1-40", "--summary_as_json",
                         "--diff_jit_dump", "-jitoption", "JitNoCSE=1")
    assert code == 0, out
    [summary] = summaries.read_json_summaries([tmp_path / "diff_summary.json"])
    assert summary.collections[0].name == Path(mch).name and summary.jit_options.common == ["JitNoCSE=1"]
    assert summary.analyzer == "built-in" and "-jitoption JitNoCSE=1" in summary.repro_command
    assert not list(tmp_path.glob("diff_summary*.md"))
    dumps = list((tmp_path / "jitdump.libraries.pmi.linux.x64.checked" / "diff").glob("*.txt"))
    assert dumps and all(p.stat().st_size for p in dumps)
    code, out = asmdiffs(capsys, sample_toolchain, tmp_path / "release", "-mch_files", mch, "-c", "1-40",
                         "--diff_with_release")
    assert code == 1
    assert "Asm diffs found (a failure with --diff_with_release)" in out
    invoke = superpmi_invocation(tmp_path / "release")
    assert invoke.endswith(f"-c 1-40 -ignoreStoredConfig {sample_toolchain / 'base' / 'libclrjit.so'} "
                           f"{sample_toolchain / 'core_root' / 'libclrjit.so'} {mch}")
    assert not list((tmp_path / "release").glob("asm.*")) and not list((tmp_path / "release").glob("diff_summary*"))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find leftover processes")
def test_ctrl_c_kills_children_keeps_finished_outputs(sample_toolchain, faulty, tmp_path):
    hang = tmp_path / "zz-hang-ctrl-c.mch"
    hang.write_bytes((faulty / "hang.mch").read_bytes())
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    spmi = tmp_path / "spmi"
    argv = [sys.executable, str(REPO / "superpmi.py"), "asmdiffs", "-core_root", str(sample_toolchain / "core_root"),
            "-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so"), "-spmi_location", str(spmi),
            "-arch", "x64", "-target_os", "linux", "-mch_files", str(collection(sample_toolchain)), str(hang),
            "--sequential"]
    env = dict(os.environ, TMPDIR=str(temp_root), SPMI_SAMPLE_START_MS="0")
    code, out = interrupt_once_replaying(argv, env, hang)
    assert code == 130, out
    assert "interrupted" in out and "Traceback" not in out
    assert list(temp_root.iterdir()) == [], "temporary files left behind"
    asm = spmi / "asm.libraries.pmi.linux.x64.checked"
    assert (asm / "summary.md").is_file() and list((asm / "diff").glob("*.dasm")), "finished outputs are kept"
