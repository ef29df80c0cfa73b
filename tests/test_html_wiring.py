"""The HTML diff explorer wired into the suite, without processes: the diff rows the JSON summary
carries, the report built from summaries, listings read from disk, the packaging of the page's
assets, and the pipeline's pointers to each platform's report."""
from __future__ import annotations

import configparser
import fnmatch
import json
import re
from pathlib import Path
from typing import Any, Dict

import pytest

from spmi.base.errors import SuiteError
from spmi.formats.details import parse_details
from spmi.pipeline import common as pipeline
from spmi.pipeline import summarize as pipeline_summarize
from spmi.reports import html_build
from spmi.reports.asm_model import (
    Aggregate,
    AsmDiffsSummary,
    AssertGroup,
    AssertInstance,
    CollectionAggregates,
    CollectionReport,
    DiffRows,
    ReplayStatus,
    merge_summaries,
)
from spmi.reports.html_report import ASSETS, render_html
from spmi.reports.pipeline_markdown import ReportLink, html_reports_section
from spmi.steps import html_step

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)

REPO = Path(__file__).resolve().parent.parent
HEADER = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
          "Base instructions,Diff instructions,Base ActualCodeBytes,Diff ActualCodeBytes,Base PerfScore,Diff PerfScore")


def report_data(page: str) -> Dict[str, Any]:
    """The row table a page carries (its `report-data` JSON block)."""
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert match, "no report data in the page"
    return json.loads(match.group(1))


def rows_with(*entries: tuple) -> DiffRows:
    rows = DiffRows()
    for entry in entries:
        rows.append(*entry)
    return rows


def summary_with_rows(target_arch: str = "x64") -> AsmDiffsSummary:
    diffs = CollectionReport("a.mch", CollectionAggregates(Aggregate(diffed_contexts=40, contexts_with_diffs=3,
                                                                     base_successes=40, diff_successes=40)),
                             diff_rows=rows_with((3, "Ns.C:M3()", "Tier0", True, 100, 90, 10.0, 9.5),
                                                 (8, '"quoted" </script> ##vso[x]', "Tier1", False, 50, 60, 5.0, 6.25),
                                                 (9, "Ns.C:M9()", "FullOpts", False, 70, 70, 7.0, 7.0)))
    failing = CollectionReport(
        "b.mch", CollectionAggregates(Aggregate(base_successes=8, base_failures=2, diff_successes=8, diff_failures=2,
                                                diffed_contexts=8, base_misses=1)),
        status=ReplayStatus(failed=True, reason="Compilation failures", exit_code=1, missing_contexts=4),
        asserts=[AssertGroup("x | y < 3 (lower.cpp:12)", 2, [AssertInstance(9, 4), AssertInstance(11, 5)])],
        repro_commands=["superpmi -c 9 libclrjit.so b.mch", "superpmi -c 11 libclrjit.so b.mch"])
    return AsmDiffsSummary("linux", target_arch, "linux", "x64", "/b/libclrjit.so", "/d/libclrjit.so",
                           baseline="abc123", repro_command="python superpmi.py asmdiffs ...",
                           collections=[diffs, failing])


# ---------------------------------------------------------------- the rows in the JSON summary

def test_diff_rows_of_a_details_table_are_the_diff_list():
    table = parse_details(HEADER + "\n" + "\n".join([
        '5,10,"Ns.C:M5()",Tier0,Success,Success,True,True,0,0,100,96,10.5,9.25',
        '2,10,"Ns.C:M2()",FullOpts,Success,Success,False,True,0,0,80,90,8,9',
        '3,10,"Ns.C:M3()",FullOpts,Success,Success,False,False,0,0,80,80,8,8',
        '4,10,"Ns.C:M4()",FullOpts,Success,Error,False,True,0,0,80,0,8,0']) + "\n")
    rows = html_build.diff_rows_of(table)
    assert rows.context == [2, 5] and rows.method == ["Ns.C:M2()", "Ns.C:M5()"]
    assert rows.minopts == [False, True] and rows.tier == ["FullOpts", "Tier0"]
    assert (rows.base_bytes, rows.diff_bytes) == ([80, 100], [90, 96])
    assert (rows.base_perfscore, rows.diff_perfscore) == ([8.0, 10.5], [9.0, 9.25])


def test_json_summary_carries_the_rows_one_line_per_column_and_reads_back():
    summary = summary_with_rows()
    text = summary.to_json()
    lines = text.splitlines()
    method_line = next(line for line in lines if line.lstrip().startswith('"method"'))
    assert json.loads("{" + method_line.rstrip(",") + "}")["method"] == summary.collections[0].diff_rows.method
    assert sum(1 for line in lines if line.lstrip().startswith('"context": [')) == 2
    assert AsmDiffsSummary.from_json(text) == summary
    assert json.loads(text)["summary"]["collections"][1]["diff_rows"]["context"] == []


def test_method_names_cannot_disturb_the_compact_writer():
    summary = summary_with_rows()
    rows = summary.collections[0].diff_rows
    rows.method[0] = json.dumps("0:0:method")  # looks like the writer's place holders, without their nonce
    rows.method[1] = "\u2028\"],\n\"tier\": [\"x\"]"
    assert AsmDiffsSummary.from_json(summary.to_json()) == summary


def test_summaries_without_rows_or_with_unknown_keys_still_read():
    document = summary_with_rows().to_document()
    for collection in document["summary"]["collections"]:
        del collection["diff_rows"]
    document["summary"]["collections"][0]["from_a_newer_suite"] = {"x": 1}
    summary = AsmDiffsSummary.from_document(json.loads(json.dumps(document)))
    assert [len(c.diff_rows) for c in summary.collections] == [0, 0]
    assert html_build.report_from_summary(summary).rows == []


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows["method"].pop(), "diff_rows.method must be a list as long as diff_rows.context"),
    (lambda rows: rows.__setitem__("base_bytes", [1, "2", 3]), "diff_rows.base_bytes[1]: expected an integer, not a string"),
    (lambda rows: rows.__setitem__("minopts", [1, 0, 0]), "diff_rows.minopts[0]: expected true/false, not an integer"),
    (lambda rows: rows.__setitem__("tier", "Tier0"), "diff_rows.tier: expected a list, not a string"),
])
def test_malformed_rows_are_one_line_errors(change, message):
    document = json.loads(summary_with_rows().to_json())
    change(document["summary"]["collections"][0]["diff_rows"])
    with pytest.raises(SuiteError) as info:
        AsmDiffsSummary.from_document(document, "x.json")
    assert str(info.value).startswith("x.json: malformed asmdiffs JSON summary (") and message in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- report from summaries

def test_report_from_a_summary_has_header_counts_failures_and_every_row():
    summary = summary_with_rows()
    report = html_build.report_from_summary(summary)
    assert report.header.platform == "linux x64" and report.header.baseline == "abc123"
    assert report.header.collections == ["a.mch", "b.mch"]
    assert [(c.collection, c.contexts, c.contexts_with_diffs, c.missing, c.failures) for c in report.counts] == \
        [("a.mch", 40, 3, 0, 0), ("b.mch", 8, 0, 4, 2)]
    assert [(f.kind, f.count) for f in report.failures] == [("replay failed", 1), ("assert", 2), ("MISSING", 4)]
    assert report.failures[1].text == "x | y < 3 (lower.cpp:12)\ncontexts: 9, 11"
    assert report.failures[1].repro_command == "superpmi -c 9 libclrjit.so b.mch\nsuperpmi -c 11 libclrjit.so b.mch"
    assert [(r.collection, r.context, r.delta_bytes, r.minopts) for r in report.rows] == \
        [("a.mch", 3, -10, True), ("a.mch", 8, 10, False), ("a.mch", 9, 0, False)]
    page = render_html(report)
    assert "</script> ##vso" not in page  # only escaped, inside the JSON block
    data = report_data(page)
    assert data["names"][data["rows"]["n"][1]] == '"quoted" </script> ##vso[x]'


def test_an_assert_counts_its_contexts_and_names_its_hits_per_jit():
    from spmi.reports.asm_model import AssertGroup, AssertInstance, CollectionReport
    both = AssertGroup("x (lower.cpp:12)", 4, [AssertInstance(9, 3), AssertInstance(11, 5)], contexts=2,
                       base_hits=2, diff_hits=2)
    unknown = AssertGroup("y (morph.cpp:3)", 3, [AssertInstance(1, 3), AssertInstance(2, 5)], contexts=2)
    failures = html_build.collection_failures("a.mch", CollectionReport("a.mch", asserts=[both, unknown]))
    assert [(f.count, f.text) for f in failures] == [
        (2, "x (lower.cpp:12)\ncontexts: 9, 11\nhits: 4 (base 2, diff 2)"),
        (2, "y (morph.cpp:3)\ncontexts: 1, 2\nhits: 3")]


def test_merged_report_of_two_targets_prefixes_collections():
    merged = merge_summaries([summary_with_rows("x64"), summary_with_rows("arm64")])
    report = html_build.report_from_merged(merged)
    assert report.header.collections == ["linux arm64: a.mch", "linux arm64: b.mch", "linux x64: a.mch",
                                         "linux x64: b.mch"]
    assert report.title == "asmdiffs linux arm64 + linux x64 (2 targets)"
    assert len(report.rows) == 6 and {r.collection for r in report.rows} == {"linux arm64: a.mch", "linux x64: a.mch"}
    assert html_build.report_from_merged(merge_summaries([summary_with_rows()])).header.collections == \
        ["a.mch", "b.mch"]


# ---------------------------------------------------------------- listings on disk

def test_listings_are_read_in_pairs_cut_to_size_and_within_the_budget(tmp_path):
    asm = tmp_path / "asm.x"
    for side in ("base", "diff"):
        (asm / side).mkdir(parents=True)
        for context in (4, 12, 30):
            (asm / side / f"{context}.dasm").write_text(f"; {side} {context}\n" + "nop\n" * context)
    (asm / "base" / "7.dasm").write_text("; base only\n")
    (asm / "diff" / "notes.dasm").write_text("not a context\n")
    budget = html_step.ListingBudget(remaining=2 * (len("; base 12\n") + 12 * 4) + 2 * (len("; base 4\n") + 16))
    listings = html_step.read_listings("x.mch", asm, lambda c: f"superpmi -c {c}", budget)
    assert [(item.context, item.repro_command) for item in listings] == [(4, "superpmi -c 4"), (12, "superpmi -c 12")]
    assert listings[0].base_text == "; base 4\n" + "nop\n" * 4 and listings[0].diff_text.startswith("; diff 4")
    assert budget.left_out == 1
    cut = html_step.cut_listing("a\nb\nc\nd\n", max_lines=2)
    assert cut == "a\nb\n; ... 2 more lines cut from this page (see the .dasm file)\n"
    assert html_step.cut_listing("x" * 10 + "\n" + "y" * 10, max_chars=15).startswith("x" * 10 + "\n; ... 1 more")
    assert html_step.cut_listing("short\n") == "short\n"


def test_report_path_follows_the_summary_name(tmp_path):
    assert html_step.report_path(tmp_path / "diff_summary.md") == tmp_path / "diff_report.html"
    assert html_step.report_path(tmp_path / "diff_summary.2.json") == tmp_path / "diff_report.2.html"
    (tmp_path / "diff_report.html").write_text("taken")
    assert html_step.report_path(tmp_path / "diff_summary.md") == tmp_path / "diff_report.1.html"


# ---------------------------------------------------------------- packaging

def test_package_data_covers_every_asset():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg", encoding="utf-8")
    patterns = [p.strip() for p in config["options.package_data"]["spmi.reports"].replace("\n", ",").split(",")
                if p.strip()]
    assets = sorted(p.relative_to(ASSETS.parent).as_posix() for p in ASSETS.iterdir() if p.is_file())
    assert assets == ["html_assets/report.css", "html_assets/report.js"]
    assert all(any(fnmatch.fnmatch(asset, pattern) for pattern in patterns) for asset in assets)


# ---------------------------------------------------------------- pipeline pointers

def test_reports_section_names_each_file_and_artifact():
    links = [ReportLink("linux x64", "superpmi_asmdiffs_report_linux_x64.html", "SuperPMI_Asmdiffs_linux_x64"),
             ReportLink("osx arm64", "a`b\nc.html", "art")]
    text = html_reports_section(links, "https://dev.azure.com/o/p/_build/results?buildId=1&view=artifacts")
    assert text.startswith("**HTML diff explorer** of each platform:")
    assert "([artifacts of this run](https://dev.azure.com/o/p/_build/results?buildId=1&view=artifacts))" in text
    assert "* linux x64: `superpmi_asmdiffs_report_linux_x64.html` in the artifact `SuperPMI_Asmdiffs_linux_x64`\n" \
        in text
    assert "* osx arm64: `a'b c.html` in the artifact `art`\n" in text
    assert html_reports_section([]) == ""


def test_report_links_use_the_artifact_of_each_ci(tmp_path):
    upload = tmp_path / "win-arm64"
    upload.mkdir()
    (upload / pipeline.html_report_name("asmdiffs", "windows", "arm64")).write_text("<!DOCTYPE html>")
    (upload / pipeline.html_report_name("asmdiffs", "linux", "x64")).write_text(pipeline.EMPTY_PLACEHOLDER)
    (upload / pipeline.summary_md_name("asmdiffs", "linux", "x64")).write_text("summary\n")
    files = pipeline_summarize.gather_files(tmp_path, "asmdiffs")
    states = pipeline_summarize.build_states(files, [("windows", "arm64"), ("linux", "x64")], None, "asmdiffs")
    assert [s.html_report for s in states] == ["superpmi_asmdiffs_report_windows_arm64.html", ""]
    azdo = pipeline_summarize.report_links(states, "x64", github=False)
    github = pipeline_summarize.report_links(states, "x64", github=True)
    assert [(link.platform, link.artifact) for link in azdo] == [("windows arm64", "SuperPMI_Asmdiffs_windows_arm64")]
    assert [link.artifact for link in github] == ["results-x64-win-arm64"]
    environ = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42",
               "SYSTEM_COLLECTIONURI": "https://dev.azure.com/org/", "SYSTEM_TEAMPROJECT": "public proj",
               "BUILD_BUILDID": "7"}
    assert pipeline_summarize.artifacts_url(environ, True) == "https://github.com/o/r/actions/runs/42#artifacts"
    assert pipeline_summarize.artifacts_url(environ, False) == \
        "https://dev.azure.com/org/public%20proj/_build/results?buildId=7&view=artifacts"
    assert pipeline_summarize.artifacts_url({}, True) == pipeline_summarize.artifacts_url({}, False) == ""


def test_ci_files_publish_the_reports():
    azdo = (REPO / "eng" / "pipelines" / "superpmi-asmdiffs.yml").read_text(encoding="utf-8")
    assert "**/*_${{ partition.os }}_${{ partition.arch }}.html" in azdo
    assert "artifact: " + pipeline.azdo_results_artifact(pipeline.Partition("p", "${{ partition.os }}",
                                                                            "${{ partition.arch }}")) in azdo
    github = (REPO / ".github" / "workflows" / "superpmi-asmdiffs.yml").read_text(encoding="utf-8")
    assert "name: results-${{ matrix.host_arch }}-${{ matrix.name }}" in github
    assert "path: ${{ runner.temp }}/upload" in github
    assert pipeline.github_results_artifact("x64", pipeline.partitions_for_host("x64")[0]) == "results-x64-win-x64"
