"""Repro lines that paste: failure repros leave MISSING contexts out; pipeline summaries name
enlistment-relative `superpmi.py asmdiffs … -filter <collection> -c <N>` commands."""
from __future__ import annotations

import re

import pytest

import superpmi
from spmi.pipeline import common as pipeline
from spmi.pipeline import workitem
from spmi.reports import asm_model


@pytest.fixture(autouse=True)
def fast_toolchain(monkeypatch):
    monkeypatch.setenv("SPMI_SAMPLE_START_MS", "0")
    monkeypatch.delenv("TF_BUILD", raising=False)


def test_failure_repros_skip_missing_contexts(capsys, sample_toolchain, tmp_path):
    from sample.collection import make_collection
    mch = tmp_path / "mixed.mch"
    make_collection(mch, "linux", "x64", contexts=30, faults={"assert": [3, 9], "missing": [4, 6]})
    spmi = tmp_path / "spmi"
    code = superpmi.main(["asmdiffs", "-core_root", str(sample_toolchain / "core_root"), "-spmi_location", str(spmi),
                          "-arch", "x64", "-target_os", "linux", "--sequential", "--summary_as_json",
                          "-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so"), "-mch_files", str(mch)])
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    summary = asm_model.AsmDiffsSummary.from_json((spmi / "diff_summary.json").read_text(encoding="utf-8"))
    [report] = summary.collections
    assert report.failing_contexts == [3, 9]
    contexts = sorted(int(re.search(r" -c (\d+) ", line).group(1)) for line in report.repro_commands)
    assert contexts == [3, 9]
    assert all(str(sample_toolchain) in line for line in report.repro_commands)  # local: the raw superpmi line

    # the work item rewrites them for an enlistment
    path = spmi / "diff_summary.json"
    cfg = workitem.DriverConfig(payload=tmp_path, base_jit_directory=tmp_path, diff_jit_directory=tmp_path,
                                upload=tmp_path, target_os="linux", target_arch="arm64", host_os="linux",
                                types=[pipeline.DIFF_TYPES["asmdiffs"]], base_jit_options=["JitStressModeNames=X"])
    workitem.annotate_asmdiffs_summary(path, cfg, "abc123")
    [report] = asm_model.AsmDiffsSummary.from_json(path.read_text(encoding="utf-8")).collections
    assert report.repro_commands == [
        f"python src/coreclr/scripts/superpmi.py asmdiffs -target_os linux -target_arch arm64 -arch x64 "
        f"-filter mixed -c {n} -base_git_hash abc123 -base_jit_option JitStressModeNames=X" for n in (3, 9)]


def test_pipeline_example_repros_are_enlistment_relative(tmp_path):
    summary = asm_model.AsmDiffsSummary("linux", "arm64", collections=[asm_model.CollectionReport(
        "libraries.pmi.linux.arm64.checked.mch",
        examples=[asm_model.ExampleDiff(37, asm_model.IMPROVEMENT, "M()", 10, 8,
                                        repro_command="/tmp/w/payload/superpmi -c 37 /tmp/w/x.so /tmp/w/x.mch")])])
    path = tmp_path / "s.json"
    path.write_text(summary.to_json(), encoding="utf-8")
    cfg = workitem.DriverConfig(payload=tmp_path, base_jit_directory=tmp_path, diff_jit_directory=tmp_path,
                                upload=tmp_path, target_os="linux", target_arch="arm64", host_os="linux",
                                types=[pipeline.DIFF_TYPES["asmdiffs"]])
    workitem.annotate_asmdiffs_summary(path, cfg, "abc123")
    [report] = asm_model.AsmDiffsSummary.from_json(path.read_text(encoding="utf-8")).collections
    assert report.examples[0].repro_command == (
        "python src/coreclr/scripts/superpmi.py asmdiffs -target_os linux -target_arch arm64 -arch x64 "
        "-filter libraries.pmi.linux.arm64.checked -c 37 -base_git_hash abc123")
    assert "/tmp/w" not in path.read_text(encoding="utf-8")
