"""`superpmi.py asmdiffs --dasm_all_diffs` end to end against the sample toolchain: listings of every
context with diffs from the same batched superpmi runs, the analyzer over all of them, and the
summaries and HTML report exactly as without the option."""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import List, Set, Tuple

import pytest
from e2e_support import newest_log

import superpmi

SUMMARY_FILES = ("diff_summary.md", "diff_short_summary.md", "diff_report.html")


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    monkeypatch.delenv("TF_BUILD", raising=False)


@pytest.fixture(scope="module")
def many_diffs(tmp_path_factory) -> Path:
    """A collection with more contexts with diffs than asmdiffs picks for listings."""
    from sample.collection import make_collection
    mch = tmp_path_factory.mktemp("all_diffs") / "libraries.pmi.linux.x64.checked.mch"
    make_collection(mch, "linux", "x64", contexts=1500)
    return mch


def run_asmdiffs(capsys, toolchain: Path, mch: Path, spmi: Path, *extra: str) -> str:
    details = spmi.parent / f"{spmi.name}.details"
    details.mkdir()
    argv = ["asmdiffs", "-core_root", str(toolchain / "core_root"), "-spmi_location", str(spmi), "-arch", "x64",
            "-target_os", "linux", "-base_jit_path", str(toolchain / "base" / "libclrjit.so"), "-mch_files", str(mch),
            "--parallelism", "2", "-details", str(details), *extra]
    code = superpmi.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    return newest_log(spmi)


def contexts_with_diffs(details_dir: Path) -> Set[int]:
    """The details CSV's contexts that both JITs compiled and that differ (docs/contracts.md §3.2)."""
    [path] = details_dir.glob("*.csv")
    with path.open(newline="", encoding="utf-8") as f:
        return {int(row["Context"]) for row in csv.DictReader(f)
                if row["Has diff"] == "True" and row["Base result"] == row["Diff result"] == "Success"}


def listed(asm: Path, side: str) -> Set[int]:
    return {int(p.stem) for p in (asm / side).glob("*.dasm")}


def listing_runs(log: str) -> List[Tuple[int, int]]:
    """(contexts, superpmi processes) of each `Listings of N contexts in ... (K superpmi processes)` line."""
    return [(int(n), int(k)) for n, k in re.findall(r"Listings of (\d+) contexts in .* \((\d+) superpmi processes\)",
                                                     log)]


def test_every_context_with_diffs_gets_listings_and_the_summaries_stay_the_same(capsys, sample_toolchain,
                                                                               many_diffs, tmp_path):
    picked_log = run_asmdiffs(capsys, sample_toolchain, many_diffs, tmp_path / "picked")
    all_log = run_asmdiffs(capsys, sample_toolchain, many_diffs, tmp_path / "all", "--dasm_all_diffs")
    with_diffs = contexts_with_diffs(tmp_path / "all.details")
    assert with_diffs == contexts_with_diffs(tmp_path / "picked.details")
    picked_asm, all_asm = (tmp_path / name / "asm.libraries.pmi.linux.x64.checked" for name in ("picked", "all"))
    picked = listed(picked_asm, "base")
    assert picked == listed(picked_asm, "diff") and picked < with_diffs  # the option has more to list
    assert listed(all_asm, "base") == listed(all_asm, "diff") == with_diffs
    for context in picked:  # the picked listings are the same files
        for side in ("base", "diff"):
            name = f"{side}/{context}.dasm"
            assert (all_asm / name).read_bytes() == (picked_asm / name).read_bytes(), name
    # the same batched runs: one superpmi process per chunk and JIT, whatever the number of contexts
    [(picked_count, picked_processes)] = listing_runs(picked_log)
    [(all_count, all_processes)] = listing_runs(all_log)
    assert (picked_count, all_count) == (len(picked), len(with_diffs))
    assert picked_processes == all_processes == 2  # --parallelism 2: one chunk per JIT, the two side by side
    for name in SUMMARY_FILES:
        assert (tmp_path / "all" / name).read_bytes() == (tmp_path / "picked" / name).read_bytes(), name
    # the analyzer's own summary.md covers every context with diffs (--is-diffs-only: no "unchanged" methods)
    totals = re.search(r"(\d+) contexts with diffs \((\d+) size improvements, (\d+) size regressions, (\d+) same size",
                       all_log)
    assert totals is not None and int(totals.group(1)) == len(with_diffs)
    improved, regressed, same = totals.group(2, 3, 4)
    all_md = (all_asm / "summary.md").read_text(encoding="utf-8")
    assert (f"{int(improved) + int(regressed)} total files with Code Size differences ({improved} improved, "
            f"{regressed} regressed), {same} unchanged.") in all_md
    assert re.search(r"^\d+ total methods with Code Size differences \(\d+ improved, \d+ regressed\)\.$", all_md, re.M)
    picked_md = (picked_asm / "summary.md").read_text(encoding="utf-8")
    assert picked_md != all_md and picked_md in (tmp_path / "picked" / "diff_summary.md").read_text(encoding="utf-8")
