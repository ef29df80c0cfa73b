"""The console says what superpmi's files say (docs/contracts.md §2.8.3, §2.9, §3.1, §12.7), end to end
on the sample toolchain: the failing list split into failures and missing data, the missing-data line
kept when a collection fails, each asserting context named once with its hits per JIT, no
`Asm diffs found` from the metric commands, and a collection in which every context missed data."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

import pytest
from e2e_support import collection

import superpmi

ASSERTS = [3, 8, 11, 15, 19, 22, 26, 31, 37, 44]
MISSING = [5, 13, 29, 41]


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")


@pytest.fixture(scope="module")
def collections(tmp_path_factory) -> Path:
    from sample.collection import make_collection
    out = tmp_path_factory.mktemp("facts")
    make_collection(out / "facts.mch", "linux", "x64", contexts=50, faults={"assert": ASSERTS, "missing": MISSING})
    make_collection(out / "arm64.mch", "linux", "arm64", contexts=12)
    return out


def run(capsys, command: str, toolchain: Path, spmi: Path, *extra: str) -> Tuple[int, List[str]]:
    argv = [command, "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi),
            "-arch", "x64", "-target_os", "linux", *extra]
    code = superpmi.main(argv)
    out = capsys.readouterr()
    return code, [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line) for line in (out.out + out.err).splitlines()]


def numbers(line: str, label: str) -> List[int]:
    assert line.startswith(label), line
    return [int(n) for n in line[len(label):].split(", ")]


def one_line(lines: List[str], start: str) -> str:
    found = [line for line in lines if line.startswith(start)]
    assert len(found) == 1, (start, lines)
    return found[0]


@pytest.mark.parametrize("sequential", [False, True], ids=["parallel", "sequential"])
def test_replay_splits_failures_from_missing_data_and_keeps_the_missing_line(capsys, sample_toolchain, collections,
                                                                             tmp_path, sequential):
    extra = ["--sequential"] if sequential else ["--parallelism", "2"]
    code, lines = run(capsys, "replay", sample_toolchain, tmp_path, "-mch_files", str(collections / "facts.mch"),
                      *extra)
    assert code == 1
    assert "Compilation failures" in lines
    assert numbers(one_line(lines, "Failing contexts: "), "Failing contexts: ") == ASSERTS
    assert numbers(one_line(lines, "Contexts with missing data: "), "Contexts with missing data: ") == MISSING
    assert "SuperPMI encountered missing data for 4 out of 50 contexts" in lines
    # superpmi's own list holds all 14 (docs/contracts.md §3.1)
    log_text = next(tmp_path.glob("superpmi*.log")).read_text()
    assert "Failing contexts: 3, 5, 8" not in log_text


def test_asmdiffs_names_each_asserting_context_once_with_its_hits_per_jit(capsys, sample_toolchain, collections,
                                                                         tmp_path):
    code, lines = run(capsys, "asmdiffs", sample_toolchain, tmp_path, "-mch_files", str(collections / "facts.mch"),
                      "-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so"), "--parallelism", "2")
    assert code == 1
    counts = [int(m.group(1)) for m in map(re.compile(r"=== Assertion #\d+/\d+ \(count: (\d+)\): ").match, lines)
              if m]
    # printed for the collection, then again under "All asserts": 10 contexts each time, not 20
    assert sum(counts) == 2 * len(ASSERTS) and sum(counts[:len(counts) // 2]) == len(ASSERTS), counts
    context_lines = [line for line in lines if line.startswith("  facts.mch # ")]
    assert len(context_lines) == 2 * len(ASSERTS)
    for context in ASSERTS:
        mine = [line for line in context_lines if line.startswith(f"  facts.mch # {context} : IL size ")]
        assert len(mine) == 2 and all(line.endswith(" (base JIT 1, diff JIT 1)") for line in mine), mine
    assert numbers(one_line(lines, "Failing contexts: "), "Failing contexts: ") == ASSERTS
    assert numbers(one_line(lines, "Contexts with missing data: "), "Contexts with missing data: ") == MISSING
    assert ("SuperPMI encountered missing data. Missing with base JIT: 4. Missing with diff JIT: 4. "
            "Total contexts: 50.") in lines


def test_the_diff_jit_alone_asserting_is_named_as_the_diff_jits(capsys, sample_toolchain, tmp_path):
    from sample.make_toolchain import make_jit
    diff = make_jit(tmp_path / "diff" / "libclrjit.so", "linux", "x64", faults={"assert_every": 7})
    code, lines = run(capsys, "asmdiffs", sample_toolchain, tmp_path / "spmi", "-mch_files",
                      str(collection(sample_toolchain)), "-base_jit_path",
                      str(sample_toolchain / "base" / "libclrjit.so"), "-diff_jit_path", str(diff), "--sequential")
    assert code == 1
    context_lines = [line for line in lines if re.match(r"  libraries\.pmi\.linux\.x64\.checked\.mch # \d+ : ", line)]
    assert context_lines and all(line.endswith(" (diff JIT 1)") for line in context_lines), context_lines
    counts = [int(m.group(1)) for m in map(re.compile(r"=== Assertion #\d+/\d+ \(count: (\d+)\): ").match, lines)
              if m]
    assert sum(counts) == len(context_lines)


@pytest.mark.parametrize("command", ["tpdiff", "memdiff", "metricdiff"])
def test_metric_commands_never_report_asm_diffs(capsys, sample_toolchain, tmp_path, command):
    release = sample_toolchain / "release"
    extra = ["-metric", "PerfScore"] if command == "metricdiff" else []
    if command == "tpdiff":
        extra = ["-pin_path", str(sample_toolchain / "pintools" / "1.0" / "linux")]
    code, lines = run(capsys, command, sample_toolchain, tmp_path, "-mch_files", str(collection(sample_toolchain)),
                      "-base_jit_path", str(release / "base" / "libclrjit.so"),
                      "-diff_jit_path", str(release / "diff" / "libclrjit.so"), *extra)
    assert code == 0, lines
    assert not [line for line in lines if "Asm diffs found" in line]
    assert "SuperPMI diff done (120 contexts processed)" in lines


def test_a_collection_for_another_target_says_so(capsys, sample_toolchain, collections, tmp_path):
    """`replay -mch_files` over an arm64 collection with the x64 JIT: every context misses data."""
    code, lines = run(capsys, "replay", sample_toolchain, tmp_path, "-mch_files", str(collections / "arm64.mch"))
    hint = ("every context missed data: the collection may not match the JIT's target (check the collection's OS "
            "and architecture against -target_os and -target_arch)")
    assert code == 0
    assert f"SuperPMI encountered missing data for 12 out of 12 contexts; {hint}" in lines
    assert "  All replays clean" not in lines
    assert lines[-2:] == [f"  Nothing replayed in 1 MCH files ({hint}):", f"    {collections / 'arm64.mch'}"]
