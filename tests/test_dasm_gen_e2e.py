"""Batched listing generation against the sample toolchain: byte-identical to one context per process."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.formats import details
from spmi.tools import dasm_gen, superpmi_tool

FORCED = superpmi_tool.asmdiffs_replay_options(align_loops=False)


def collection(toolchain: Path, name: str = "libraries.pmi", arch: str = "x64") -> Path:
    [mch] = sorted(toolchain.glob(f"collections/*/linux/{arch}/{name}.*.mch"))
    return mch


@pytest.fixture(scope="module")
def diff_table(sample_toolchain, tmp_path_factory) -> details.DetailsTable:
    tmp = tmp_path_factory.mktemp("diffcsv")
    core_root = sample_toolchain / "core_root"
    forced = superpmi_tool.option_flags("-jitoption", FORCED, force=True)
    forced += superpmi_tool.option_flags("-jit2option", FORCED, force=True)
    subprocess.run([str(core_root / "superpmi"), "-a", "-v", "ewi", "-f", str(tmp / "f.mcl"), "-details",
                    str(tmp / "d.csv"), *forced, str(sample_toolchain / "base" / "libclrjit.so"),
                    str(core_root / "libclrjit.so"), str(collection(sample_toolchain))],
                   cwd=core_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return details.read_details_csv(tmp / "d.csv")


def expected_of(table: details.DetailsTable) -> Dict[int, dasm_gen.ExpectedMethod]:
    return {r.context: dasm_gen.ExpectedMethod(r.method_name, r.tier) for r in table.rows}


def setup_for(toolchain: Path, tmp: Path, mch: Path) -> dasm_gen.ListingSetup:
    return dasm_gen.ListingSetup(superpmi=toolchain / "core_root" / "superpmi", core_root=toolchain / "core_root",
                                 mch=mch, host_arch="x64", target_arch="x64", altjit=False, forced=FORCED,
                                 env=dasm_gen.listing_env(), scratch_dir=tmp / "scratch", timeout=60)


def sides_for(toolchain: Path, out: Path) -> List[dasm_gen.JitSide]:
    return [dasm_gen.JitSide("base", toolchain / "base" / "libclrjit.so", [], out / "base"),
            dasm_gen.JitSide("diff", toolchain / "core_root" / "libclrjit.so", [], out / "diff")]


def tree_bytes(root: Path) -> Dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.dasm"))}


def test_batched_files_are_byte_identical_to_one_context_per_process(sample_toolchain, diff_table, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    succeeded = [r.context for r in diff_table.rows if r.both_succeeded]
    picked = succeeded[::len(succeeded) // 10][:10]  # spread over the collection: several tiers
    assert len({r.tier for r in diff_table.rows if r.context in picked}) > 1
    mch = collection(sample_toolchain)
    expected = expected_of(diff_table)
    batched = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "a", mch),
                                         sides_for(sample_toolchain, tmp_path / "a"), picked, expected, workers=3)
    single = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "b", mch),
                                        sides_for(sample_toolchain, tmp_path / "b"), picked, expected, workers=3,
                                        batched=False)
    assert batched.failures == [] and single.failures == []
    assert batched.processes == 4 and batched.fallback_chunks == 0  # ⌈3 workers / 2 JITs⌉ chunks per JIT
    assert single.processes == 2 * len(picked)
    a, b = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b")
    assert len(a) == 2 * len(picked)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key
    assert a != {} and any(a[f"base/{c}.dasm"] != a[f"diff/{c}.dasm"] for c in picked)
    assert not list((tmp_path / "a" / "scratch").iterdir()), "scratch files left behind"


def test_a_chunk_failing_the_name_check_falls_back_and_stays_identical(sample_toolchain, diff_table, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    picked = [r.context for r in diff_table.rows if r.both_succeeded][:6]
    expected = expected_of(diff_table)
    wrong = dict(expected)
    wrong[picked[1]] = dasm_gen.ExpectedMethod("Some:Other():void", "Tier1")
    mch = collection(sample_toolchain)
    sides = sides_for(sample_toolchain, tmp_path / "a")[1:]
    report = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "a", mch), sides, picked, wrong,
                                        workers=2)
    assert report.fallback_chunks == 1
    assert report.processes == 2 + 3  # two batches, then the failed chunk one by one
    single = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "b", mch),
                                        sides_for(sample_toolchain, tmp_path / "b")[1:], picked, expected,
                                        workers=2, batched=False)
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    assert single.failures == report.failures == []


def test_contexts_failing_during_generation_are_reported_not_dropped(sample_toolchain, tmp_path, monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    from sample.collection import make_collection
    mch = make_collection(tmp_path / "faulty.mch", "linux", "x64", contexts=10, faults={"assert": [4]}).path
    side = dasm_gen.JitSide("diff", sample_toolchain / "core_root" / "libclrjit.so", [], tmp_path / "out" / "diff")
    report = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path, mch), [side], list(range(1, 9)),
                                        {}, workers=2)
    assert [(f.side, f.context) for f in report.failures] == [("diff", 4)]
    assert "Failure while creating JitStdOutFile" in report.failures[0].reason
    assert "exit code 1" in report.failures[0].reason
    assert sorted(report.files("diff")) == [1, 2, 3, 5, 6, 7, 8]
    assert not (tmp_path / "out" / "diff" / "4.dasm").exists()


def test_base_listings_named_differently_are_checked_by_size(sample_toolchain, diff_table, tmp_path, monkeypatch):
    """The CSV names the diff JIT's methods; a base JIT that names them otherwise still batches."""
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    picked = [r.context for r in diff_table.rows if r.both_succeeded][:6]
    renamed = {c: dasm_gen.ExpectedMethod(f"Renamed:M{c}()", "Tier1") for c in picked}
    sizes = {r.context: int(r.base(details.CODE_BYTES)) for r in diff_table.rows if r.context in picked}
    mch = collection(sample_toolchain)
    base = dasm_gen.JitSide("base", sample_toolchain / "base" / "libclrjit.so", [], tmp_path / "a" / "base",
                            strict_names=False, sizes=sizes)
    report = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "a", mch), [base], picked, renamed,
                                        workers=2)
    assert report.fallback_chunks == 0 and report.processes == 2 and report.failures == []
    wrong_sizes = {c: s + 1 for c, s in sizes.items()}
    base = dasm_gen.JitSide("base", base.jit, [], tmp_path / "b" / "base", strict_names=False, sizes=wrong_sizes)
    report = dasm_gen.generate_listings(setup_for(sample_toolchain, tmp_path / "b", mch), [base], picked, renamed,
                                        workers=2)
    assert report.fallback_chunks == 2 and report.failures == []
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
