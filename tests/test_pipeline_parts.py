"""A target spread over several Helix work items (docs/contracts.md §12.15, §12.16): the plan,
the names, and -- run locally on the sample toolchain -- the merged summary of 3 work items
equals what one work item for the same collections gives (markdown and JSON, examples and
per-context tables included); a failed part shows as that part's failure, the rest is summarized.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline import helix, setup
from spmi.pipeline import summarize as pipeline_summarize
from spmi.pipeline.common import Part
from spmi.reports import asm_model, metric_model

REPO = Path(__file__).resolve().parent.parent
HOST_OS = "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")
CLOSED_STORAGE = "http://127.0.0.1:9/devstoreaccount1"
TARGET = ("windows", "x86")


# ---------------------------------------------------------------- planning (pure)

def test_plan_parts_balances_bytes_and_keeps_the_processing_order() -> None:
    sizes = [("a", 10), ("b", 70), ("c", 20), ("d", 40), ("e", 30), ("f", 30)]
    parts = pipeline.plan_parts(sizes, 3)
    assert sorted(name for part in parts for name in part) == sorted(name for name, _ in sizes)
    order = [name for name, _ in sizes]
    for part in parts:
        assert part == sorted(part, key=order.index)
    loads = [sum(dict(sizes)[name] for name in part) for part in parts]
    assert max(loads) - min(loads) <= 10 and max(loads) == 70


def test_plan_parts_never_makes_empty_work_items() -> None:
    assert pipeline.plan_parts([("a", 5), ("b", 1)], 4) == [["a"], ["b"]]
    assert pipeline.plan_parts([("a", 5)], 3) == [["a"]]
    assert pipeline.plan_parts([("a", 0), ("b", 0), ("c", 0)], 2) == [["a", "c"], ["b"]]
    with pytest.raises(ValueError):
        pipeline.plan_parts([("a", 1)], 0)


def test_auto_part_count_follows_the_bytes() -> None:
    gib = 1024 ** 3
    assert pipeline.auto_part_count([("a", gib)], 2 * gib) == 1
    assert pipeline.auto_part_count([("a", 3 * gib), ("b", 2 * gib), ("c", gib)], 2 * gib) == 3
    assert pipeline.auto_part_count([(str(i), 5 * gib) for i in range(20)], 2 * gib, limit=8) == 8
    assert pipeline.auto_part_count([("a", 40 * gib)], 2 * gib) == 1  # one collection, one work item


def test_part_names_round_trip() -> None:
    part = Part.parse("2/3")
    name = pipeline.summary_json_name("asmdiffs", "windows", "x86", part)
    assert name == "superpmi_asmdiffs_summary_windows_x86.part2of3.json"
    parsed = pipeline.parse_result_name(name)
    assert parsed is not None and (parsed.target_os, parsed.target_arch, parsed.part) == ("windows", "x86", part)
    assert pipeline.parse_status_name_part(pipeline.status_name("linux", "arm64", part)) == ("linux", "arm64", part)
    assert pipeline.parse_result_name("superpmi_memdiff_summary_linux_x64.md").part == Part()
    for bad in ("0/3", "4/3", "x", ""):
        with pytest.raises(ValueError):
            Part.parse(bad)
    with pytest.raises(SuiteError):
        setup.work_items_per_target("0")
    with pytest.raises(SuiteError, match="more than the 64 work items a target may have"):
        setup.work_items_per_target(str(pipeline.MAX_WORK_ITEMS_PER_TARGET + 1))
    assert setup.work_items_per_target(str(pipeline.MAX_WORK_ITEMS_PER_TARGET)) == pipeline.MAX_WORK_ITEMS_PER_TARGET
    assert setup.work_items_per_target("auto") is None and setup.work_items_per_target("4") == 4


def test_a_split_partition_gets_one_work_item_per_part() -> None:
    files = tuple(helix.under(helix.PAYLOAD, "linux", "collections", f"{n}.mch") for n in "abc")
    plan = helix.CollectionPlan(split=(("win-x86", ((files[0], files[2]), (files[1],))),))
    items = helix.plan_work_items("linux", "x86", "asmdiffs", collections=plan)
    assert [item.name for item in items] == ["win-x86-part1of2", "win-x86-part2of2", "linux-arm"]
    first = helix.expand_command(items[0].command, {"HELIX_PYTHONPATH": "py", "HELIX_CORRELATION_PAYLOAD": "/p",
                                                    "HELIX_WORKITEM_UPLOAD_ROOT": "/u"})
    assert first[first.index("-part") + 1] == "1/2"
    assert first[first.index("-mch_files") + 1:] == ["/p/collections/a.mch", "/p/collections/c.mch"]
    assert "superpmi_status_windows_x86.part2of2.json" in items[1].results
    assert "-part" not in helix.expand_command(items[2].command, {"HELIX_PYTHONPATH": "py",
                                                                  "HELIX_CORRELATION_PAYLOAD": "/p",
                                                                  "HELIX_WORKITEM_UPLOAD_ROOT": "/u"})


# ---------------------------------------------------------------- run locally

@dataclass
class PipelineRun:
    proc: subprocess.CompletedProcess
    local: Path

    @property
    def results(self) -> Path:
        return self.local / "helixresults"

    def overall(self, type_name: str) -> str:
        return (self.results / pipeline.overall_summary_name(type_name, HOST_OS, "x86")).read_text(encoding="utf-8")

    def show(self) -> str:
        return f"exit {self.proc.returncode}\n{self.proc.stdout[-5000:]}\n{self.proc.stderr[-3000:]}"


def run_pipeline(root: Path, toolchain: Path, store: Path, work_items: str) -> PipelineRun:
    payload = root / f"payload_{work_items}"
    env = dict(os.environ, SUPERPMI_STORAGE_URL=CLOSED_STORAGE, SUPERPMI_STORAGE_RETRIES="1", PYTHONPATH=str(REPO))
    env.pop("GITHUB_STEP_SUMMARY", None)
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory",
            str(toolchain / "core_root"), "-host_arch", "x86", "-payload_directory", str(payload),
            "-base_jit_directory", str(toolchain / "base"), "-base_git_hash", "0" * 40, "-private_store", str(store),
            "-release_product_directory", str(toolchain / "release" / "diff"), "-release_base_jit_directory",
            str(toolchain / "release" / "base"), "-pin_directory", str(toolchain / "pintools" / "1.0" / HOST_OS),
            "-type", "all", "--run_locally", "-jobs", "3", "-work_items_per_target", work_items]
    work = root / f"cwd_{work_items}"
    work.mkdir()
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    return PipelineRun(proc, payload.with_name(payload.name + "_local"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, PipelineRun]:
    root = tmp_path_factory.mktemp("parts")
    toolchain = root / "toolchain"
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(toolchain), "--contexts", "40",
                    "--host_arch", "x86", "--seed", "11"], check=True, stdout=subprocess.DEVNULL)
    store = root / "store"
    shutil.copytree(toolchain / "collections", store)
    for guid_dir in store.iterdir():
        shutil.rmtree(guid_dir / "linux" / "arm")  # that work item downloads and fails: the same in both runs
    return {count: run_pipeline(root, toolchain, store, count) for count in ("1", "3")}


def part_files(run: PipelineRun, type_name: str) -> List[Path]:
    name = pipeline.summary_json_name(type_name, *TARGET)
    return sorted(run.results.rglob(name.replace(".json", ".part*of3.json")))


def test_three_work_items_ran_for_the_split_target(runs) -> None:
    split = runs["3"]
    assert split.proc.returncode == 1, split.show()  # linux-arm cannot download, in both runs
    items = sorted(p.name for p in (split.local / "workitems").iterdir())
    assert items == ["linux-arm", "win-x86-part1of3", "win-x86-part2of3", "win-x86-part3of3"], split.show()
    for type_name in ("asmdiffs", "tpdiff", "memdiff"):
        parts = part_files(split, type_name)
        assert len(parts) == 3, type_name
        whole = runs["1"].results / "win-x86" / pipeline.summary_json_name(type_name, *TARGET)
        assert whole.is_file()


def test_merged_asmdiffs_json_equals_the_single_work_item(runs) -> None:
    parts = [asm_model.AsmDiffsSummary.from_json(p.read_text(encoding="utf-8")) for p in part_files(runs["3"], "asmdiffs")]
    assert all(len(p.collections) == 1 for p in parts)
    whole_path = runs["1"].results / "win-x86" / pipeline.summary_json_name("asmdiffs", *TARGET)
    whole = asm_model.AsmDiffsSummary.from_json(whole_path.read_text(encoding="utf-8"))
    merged = asm_model.combine_partitions(parts)
    assert merged.to_document() == asm_model.combine_partitions([whole]).to_document()
    assert len(merged.collections) == 3 and merged.has_diffs
    assert any(c.examples for c in merged.collections) and any(c.jit_analyze_markdown for c in merged.collections)
    assert "$HELIX_CORRELATION_PAYLOAD" in merged.base_jit_path or HOST_OS == "windows"


def test_merged_metric_json_equals_the_single_work_item(runs) -> None:
    for type_name in ("tpdiff", "memdiff"):
        parts = [metric_model.run_from_json(json.loads(p.read_text(encoding="utf-8")))
                 for p in part_files(runs["3"], type_name)]
        whole_path = runs["1"].results / "win-x86" / pipeline.summary_json_name(type_name, *TARGET)
        whole = metric_model.run_from_json(json.loads(whole_path.read_text(encoding="utf-8")))
        merged = metric_model.merge_runs(parts)
        assert metric_model.run_to_json(merged) == metric_model.run_to_json(metric_model.merge_runs([whole]))
        assert len(merged.collections) == 3
        assert any(c.examples for c in merged.collections), type_name  # the per-context tables
        rendered = pipeline_summarize.render_metric_documents(
            [json.loads(p.read_text(encoding="utf-8")) for p in part_files(runs["3"], type_name)])
        single_md = whole_path.with_suffix(".md").read_text(encoding="utf-8")
        assert rendered == single_md


REPORT_LINK = re.compile(r"^\* windows x86.*: `superpmi_asmdiffs_report_windows_x86[.a-z0-9]*\.html`.*\n", re.MULTILINE)


def test_overall_summaries_are_identical_but_for_one_html_report_per_work_item(runs) -> None:
    for type_name in ("asmdiffs", "tpdiff", "memdiff"):
        one, three = runs["1"].overall(type_name), runs["3"].overall(type_name)
        assert "windows x86" in one and "Work item problems" in one  # linux arm is missing in both
        assert REPORT_LINK.sub("", three) == REPORT_LINK.sub("", one), type_name
    one, three = runs["1"].overall("asmdiffs"), runs["3"].overall("asmdiffs")
    assert [m.group(0).split("`")[1] for m in REPORT_LINK.finditer(one)] == \
        ["superpmi_asmdiffs_report_windows_x86.html"]
    assert [m.group(0).split("`")[1] for m in REPORT_LINK.finditer(three)] == \
        [f"superpmi_asmdiffs_report_windows_x86.part{k}of3.html" for k in (1, 2, 3)]
    for k in (1, 2, 3):
        assert (runs["3"].results / f"win-x86-part{k}of3" / f"superpmi_asmdiffs_report_windows_x86.part{k}of3.html"
                ).is_file()


def test_a_failed_part_shows_as_that_part_the_rest_still_summarized(runs, tmp_path: Path) -> None:
    results = tmp_path / "helixresults"
    shutil.copytree(runs["3"].results, results)
    for old in results.glob("*overall*"):
        old.unlink()
    failed = results / "win-x86-part2of3"
    lost = asm_model.AsmDiffsSummary.from_json(
        (failed / pipeline.summary_json_name("asmdiffs", *TARGET, Part(2, 3))).read_text(encoding="utf-8"))
    for type_name in ("asmdiffs", "tpdiff", "memdiff"):
        for name in (pipeline.summary_json_name(type_name, *TARGET, Part(2, 3)),
                     pipeline.summary_md_name(type_name, *TARGET, Part(2, 3))):
            (failed / name).write_text(pipeline.EMPTY_PLACEHOLDER, encoding="utf-8")
    status_path = failed / pipeline.status_name(*TARGET, Part(2, 3))
    status = json.loads(status_path.read_text(encoding="utf-8"))
    status["ok"] = False
    status["steps"][0].update(ok=False, exit_code=1, problems=["the collection could not be read"])
    status_path.write_text(json.dumps(status), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(results), "-arch", "x86", "-platform", HOST_OS, "-type", "all"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert proc.returncode == 0, proc.stderr
    overall = (results / pipeline.overall_summary_name("asmdiffs", HOST_OS, "x86")).read_text(encoding="utf-8")
    box = overall[overall.index("Work item problems"):overall.index("\n\n", overall.index("|Platform|"))]
    assert "windows x86" in box and "part 2 of 3: download failed (exit code 1): the collection could not be read" \
        in box
    assert "part 2 of 3: the work item left no summary" in box
    kept = [c.name for c in asm_model.combine_partitions(
        [asm_model.AsmDiffsSummary.from_json(p.read_text(encoding="utf-8")) for p in part_files(runs["3"], "asmdiffs")]
    ).collections if c.name != lost.collections[0].name]
    assert len(kept) == 2 and all(name in overall for name in kept)
    issues = [line for line in proc.stdout.splitlines() if "task.logissue" in line]
    assert any("windows x86" in line and "part 2 of 3" in line for line in issues)


def test_jobs_option_and_payload_copies_that_share_the_collections(tmp_path: Path) -> None:
    import superpmi_asmdiffs_setup
    from spmi.pipeline import local_runner
    base = ["-product_directory", "p", "-payload_directory", "q"]
    parser = superpmi_asmdiffs_setup.build_parser()
    assert parser.parse_args(base + ["-jobs", "2"]).jobs == 2
    assert parser.parse_args(base + ["-parallelism", "5"]).jobs == 5  # the older name
    assert parser.parse_args(base).jobs is None  # setup then takes platforms.usable_cpu_count()
    with pytest.raises(SuiteError):
        setup.positive(0, "-jobs")
    payload = tmp_path / "payload"
    (payload / "collections" / "s").mkdir(parents=True)
    (payload / "collections" / "s" / "a.mch").write_bytes(b"mc" * 100)
    (payload / "superpmi.py").write_text("x", encoding="utf-8")
    local_runner.copy_payload(payload, tmp_path / "item")
    assert (tmp_path / "item" / "collections" / "s" / "a.mch").read_bytes() == b"mc" * 100
    assert (tmp_path / "item" / "collections" / "s" / "a.mch").stat().st_ino == \
        (payload / "collections" / "s" / "a.mch").stat().st_ino or sys.platform.startswith("win")
    assert (tmp_path / "item" / "superpmi.py").stat().st_ino != (payload / "superpmi.py").stat().st_ino
