"""One malformed result file makes its platform a row that says what is wrong; the rest is
still summarized (`superpmi_asmdiffs_summarize.py` as a process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict

import pytest
from summary_documents import HUGE, asm_document, tpdiff_document

from spmi.base import schema
from spmi.pipeline import common as pipeline
from spmi.reports.asm_model import Aggregate, AsmDiffsSummary, CollectionAggregates, CollectionReport

REPO = Path(__file__).resolve().parent.parent
GOOD_COLLECTION = "libraries.pmi.linux.x64.checked.mch"
DEEP = 100_000


def good_summary() -> AsmDiffsSummary:
    rows = Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, contexts_with_diffs=2,
                     base_code_bytes=1000, diff_code_bytes=990, base_perfscore=100.0, diff_perfscore=99.0)
    collection = CollectionReport(GOOD_COLLECTION, aggregates=CollectionAggregates(fullopts=rows))
    return AsmDiffsSummary("linux", "x64", repro_command="python superpmi.py asmdiffs -target_os linux",
                           collections=[collection])


def bad_types_summary() -> bytes:
    document = good_summary().to_document()
    document["summary"]["collections"][0]["aggregates"]["minopts"]["base_successes"] = "ten"
    return json.dumps(document).encode()


def ragged_rows_summary() -> bytes:
    document = good_summary().to_document()
    document["summary"]["collections"][0]["diff_rows"] = {"context": [1, 2], "method": ["m"]}
    return json.dumps(document).encode()


def huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: the size counts, not the blocks
        handle.truncate(pipeline.MAX_RESULT_FILE_BYTES + 1)


STATUS = pipeline.status_name("windows", "x64")
SUMMARY_JSON = pipeline.summary_json_name("asmdiffs", "windows", "x64")
SUMMARY_MD = pipeline.summary_md_name("asmdiffs", "windows", "x64")

# name -> (file, how to write it, what the row must say)
CASES: Dict[str, tuple] = {
    "status is a list": (STATUS, b"[]", "not a status document: expected an object, not a list"),
    "status with wrong types": (STATUS, b'{"ok": "yes", "steps": [{"name": "asmdiffs", "ok": 1}]}',
                                "not a status document: ok: expected true/false, not a string"),
    "status step not an object": (STATUS, b'{"ok": false, "steps": [["x"]]}',
                                  "steps[0]: expected an object, not a list"),
    "status nested deeply": (STATUS, b'{"steps": ' + b"[" * DEEP + b"]" * DEEP + b"}", "nested too deeply to read"),
    "status not UTF-8": (STATUS, b'{"ok": "\xff\xfe"}', "not UTF-8 text (byte 8)"),
    "status NaN": (STATUS, b'{"ok": true, "steps": [{"exit_code": NaN}]}', "NaN is not a JSON number"),
    "status exit code of 401 digits": (STATUS, b'{"ok": true, "steps": [{"exit_code": 1' + b"0" * 400 + b"}]}",
                                       "steps[0].exit_code: expected a number of at most"),
    "status huge": (STATUS, huge, f"more than the {pipeline.MAX_RESULT_FILE_BYTES:,} a result file may have"),
    "summary is a list": (SUMMARY_JSON, b"[]", "not an asmdiffs JSON summary"),
    "summary with wrong types": (SUMMARY_JSON, bad_types_summary,
                                 "summary.collections[0].aggregates.minopts.base_successes: expected an integer, "
                                 "not a string"),
    "summary with ragged diff rows": (SUMMARY_JSON, ragged_rows_summary,
                                      "summary.collections[0].diff_rows: diff_rows.method must be a list as long"),
    "summary metric_totals of three": (SUMMARY_JSON, lambda: json.dumps(asm_document(
        {"PerfScore": [1, 2, 3]}, collection="b.mch", target_os="windows")).encode(),
        "summary.collections[0]: metric_totals.PerfScore is not [base, diff]"),
    "summary metric_totals of 401 digits": (SUMMARY_JSON, lambda: json.dumps(asm_document(
        {"PerfScore": [HUGE, 1]}, collection="b.mch", target_os="windows")).encode(),
        "summary.collections[0].metric_totals.PerfScore[0]: expected a number of at most"),
    "summary nested deeply": (SUMMARY_JSON, b"[" * DEEP + b"]" * DEEP, "nested too deeply to read"),
    "summary not UTF-8": (SUMMARY_JSON, b"\xc3\x28", "not UTF-8 text (byte 0)"),
    "summary huge": (SUMMARY_JSON, huge, "not read"),
    "markdown not UTF-8": (SUMMARY_MD, b"# fine\n\xff\n", "not UTF-8 text (byte 7); not shown"),
}


def write_results(directory: Path, name: str, content) -> None:  # type: ignore[no-untyped-def]
    good = directory / "linux-x64"
    good.mkdir(parents=True)
    (good / pipeline.summary_json_name("asmdiffs", "linux", "x64")).write_text(good_summary().to_json())
    (good / pipeline.status_name("linux", "x64")).write_text(json.dumps({"ok": True, "steps": []}))
    bad = directory / "windows-x64"
    bad.mkdir()
    path = bad / name
    if callable(content) and content is huge:
        content(path)
    else:
        path.write_bytes(content() if callable(content) else content)


def run_summarize(directory: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir", str(directory),
            "-arch", "x64", "-platform", "windows", "-type", "asmdiffs", *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY",)}
    env["TF_BUILD"] = "True"
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_file_becomes_a_row_and_the_rest_is_summarized(tmp_path: Path, case: str) -> None:
    name, content, expected = CASES[case]
    write_results(tmp_path, name, content)
    proc = run_summarize(tmp_path)
    assert proc.returncode == 0, proc.stderr   # the script's rule: 1 only for bad arguments
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    text = (tmp_path / "1_overall_asmdiffs_summary_windows_x64.md").read_text(encoding="utf-8")
    # table cells escape markdown syntax (`\[`); compare the text as shown
    rows = [line.replace("\\", "") for line in text.splitlines() if line.startswith("|windows x64|")]
    assert len(rows) == 1, text[:3000]
    assert name in rows[0] and expected in rows[0], rows[0]
    assert GOOD_COLLECTION in text, "the good platform is still summarized"
    assert "\n## linux x64\n" in text and "python superpmi.py asmdiffs -target_os linux" in text
    issues = [line for line in proc.stdout.splitlines() if line.startswith("##vso[task.logissue type=error]")]
    assert any("asmdiffs on windows x64:" in line and name in line for line in issues), issues
    assert not any("linux x64" in line for line in issues)


def test_malformed_markdown_of_a_metric_type_is_reported(tmp_path: Path) -> None:
    (tmp_path / pipeline.summary_md_name("tpdiff", "windows", "x64")).write_bytes(b"\xff\xfe tp")
    (tmp_path / pipeline.summary_md_name("tpdiff", "linux", "x64")).write_text("linux tp numbers\n")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x64", "-platform", "windows", "-type", "tpdiff"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "2_overall_tpdiff_summary_windows_x64.md").read_text(encoding="utf-8")
    assert "linux tp numbers" in text
    assert "UNREADABLE: the windows x64 results cannot be used: superpmi_tpdiff_summary_windows_x64.md: " \
           "not UTF-8 text (byte 0)" in text


# ---------------------------------------------------------------- the schema checks (pure)

@pytest.mark.parametrize("make, message", [
    (lambda: schema.build(pipeline.WorkItemStatus, {"steps": [{"problems": ["a", 3]}]}),
     "steps[0].problems[1]: expected a string, not an integer"),
    (lambda: schema.build(pipeline.WorkItemStatus, {"repro": {"asmdiffs": None}}),
     "repro.asmdiffs: expected a string, not null"),
    (lambda: schema.build(pipeline.WorkItemStatus, {"steps": [{"exit_code": True}]}),
     "steps[0].exit_code: expected an integer, not true/false"),
    (lambda: schema.build(AsmDiffsSummary, {"target_os": "linux"}), "target_arch: missing"),
    (lambda: schema.build(Aggregate, {"base_perfscore": 1e400}), "base_perfscore: expected a finite number"),
])
def test_schema_names_the_place(make: Callable[[], object], message: str) -> None:
    with pytest.raises(schema.SchemaError) as info:
        make()
    assert str(info.value) == message or str(info.value).startswith(message)


def test_schema_builds_records_and_ignores_unknown_keys() -> None:
    status = schema.build(pipeline.WorkItemStatus, {"ok": True, "version": 3, "steps": [
        {"name": "download", "exit_code": None, "ok": True, "extra": [1]}], "repro": {"asmdiffs": "cmd"}})
    assert status == pipeline.WorkItemStatus(ok=True, steps=[pipeline.StatusStep(name="download")],
                                             repro={"asmdiffs": "cmd"})
    document = json.loads(good_summary().to_json())
    assert AsmDiffsSummary.from_document(document) == good_summary()
    assert schema.build(Aggregate, {"base_perfscore": 3}).base_perfscore == 3.0


def _tpdiff_bytes(path: str, value: object) -> bytes:
    document = tpdiff_document("b.mch")
    place = document
    *parents, last = path.split("/")
    for part in parents:
        place = place[int(part)] if part.isdigit() else place[part]
    place[last] = value
    return json.dumps(document).encode()


@pytest.mark.parametrize("content, expected", [
    (b"[]", "not a metric diff JSON summary (expected an object, not a list)"),
    (_tpdiff_bytes("noise_k", "x"), "noise_k: expected a finite number, not a string"),
    (_tpdiff_bytes("collections/0/totals/instructions/Overall/base", HUGE),
     "collections[0].totals.instructions.Overall.base: expected a number of at most"),
    (b'{"collections": 5}', "not a metric diff JSON summary ("),
    (b"\xff", "not UTF-8 text (byte 0)"),
])
def test_malformed_metric_json_summary_is_a_row(tmp_path: Path, content: bytes, expected: str) -> None:
    name = pipeline.summary_json_name("tpdiff", "windows", "x64")
    (tmp_path / name).write_bytes(content)
    (tmp_path / pipeline.summary_md_name("tpdiff", "linux", "x64")).write_text("linux tp numbers\n")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x64", "-platform", "windows", "-type", "tpdiff"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    text = (tmp_path / "2_overall_tpdiff_summary_windows_x64.md").read_text(encoding="utf-8")
    rows = [line.replace("\\", "") for line in text.splitlines() if line.startswith("|windows x64|")]
    assert len(rows) == 1 and name in rows[0] and expected in rows[0], rows
    assert "linux tp numbers" in text


# ---------------------------------------------------------------- what a result file may be (§12.16)

def secret_file(directory: Path) -> Path:
    secret = directory / "secret.txt"
    secret.write_text("root:x:0:0:SECRET-TEXT:/root:/bin/sh\n")
    return secret


needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32",
                                    reason="needs symbolic links")


def assert_refused_row(directory: Path, proc: subprocess.CompletedProcess, name: str, reason: str) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr
    text = (directory / "results" / "1_overall_asmdiffs_summary_windows_x64.md").read_text(encoding="utf-8")
    rows = [line.replace("\\", "") for line in text.splitlines() if line.startswith("|windows x64|")]
    assert len(rows) == 1, text[:3000]
    assert name in rows[0] and reason in rows[0] and "not read" in rows[0], rows[0]
    assert GOOD_COLLECTION in text, "the good platform is still summarized"
    return text


@needs_symlinks
@pytest.mark.parametrize("name", [SUMMARY_MD, SUMMARY_JSON, STATUS])
def test_a_symlinked_result_file_is_not_followed(tmp_path: Path, name: str) -> None:
    secret = secret_file(tmp_path)
    results = tmp_path / "results"
    write_results(results, "unrelated.txt", b"")
    os.symlink(secret, results / "windows-x64" / name)
    proc = run_summarize(results)
    text = assert_refused_row(tmp_path, proc, name, "a symbolic link")
    assert "SECRET-TEXT" not in text and "SECRET-TEXT" not in proc.stdout + proc.stderr


@needs_symlinks
def test_a_result_file_below_a_linked_folder_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / SUMMARY_MD).write_text("SECRET-TEXT\n")
    results = tmp_path / "results"
    write_results(results, "unrelated.txt", b"")
    os.symlink(outside, results / "windows-x64" / "linked")
    os.symlink(outside, results / "windows-x64" / SUMMARY_MD)  # a folder link named as a result file
    proc = run_summarize(results)
    assert_refused_row(tmp_path, proc, SUMMARY_MD, "a symbolic link")
    assert "not looking in" in proc.stdout + proc.stderr and "SECRET-TEXT" not in proc.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_as_a_result_file_is_not_opened(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_results(results, "unrelated.txt", b"")
    os.mkfifo(results / "windows-x64" / SUMMARY_JSON)
    proc = run_summarize(results)  # would block forever if opened
    assert_refused_row(tmp_path, proc, SUMMARY_JSON, "not a regular file")


def test_a_part_count_beyond_the_maximum_is_refused(tmp_path: Path) -> None:
    name = pipeline.summary_json_name("asmdiffs", "windows", "x64").replace(".json", ".part2of99999999999.json")
    results = tmp_path / "results"
    write_results(results, name, good_summary().to_json().encode())
    proc = run_summarize(results)
    assert_refused_row(tmp_path, proc, name, f"names 99,999,999,999 work items, more than the "
                                             f"{pipeline.MAX_WORK_ITEMS_PER_TARGET}")


def test_one_collection_in_two_work_items_is_that_platforms_problem(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_results(results, "unrelated.txt", b"")
    windows = AsmDiffsSummary("windows", "x64", collections=[CollectionReport("same.mch")]).to_json()
    for index in (1, 2):
        part = pipeline.Part(index, 2)
        (results / "windows-x64" / pipeline.summary_json_name("asmdiffs", "windows", "x64", part)).write_text(windows)
    proc = run_summarize(results)
    assert proc.returncode == 0, proc.stderr
    text = (results / "1_overall_asmdiffs_summary_windows_x64.md").read_text(encoding="utf-8")
    rows = [line.replace("\\", "") for line in text.splitlines() if line.startswith("|windows x64|")]
    assert len(rows) == 1 and "same.mch listed twice: in more than one windows x64 summary" in rows[0], rows
    assert GOOD_COLLECTION in text, "the good platform is still summarized"


@needs_symlinks
def test_the_result_file_rule_names_each_kind_of_refusal(tmp_path: Path) -> None:
    from spmi.base import fsutil
    root = tmp_path / "results"
    (root / "a").mkdir(parents=True)
    (root / "a" / "ok.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_text("{}")
    os.symlink(outside, root / "linked")
    os.symlink(outside / "x.json", root / "a" / "link.json")
    assert fsutil.not_a_regular_file_inside(root, root / "a" / "ok.json") is None
    assert fsutil.not_a_regular_file_inside(root, root / "a" / "link.json") == "a symbolic link"
    assert fsutil.not_a_regular_file_inside(root, root / "linked" / "x.json") == \
        f"below a symbolic link ({root / 'linked'})"
    assert fsutil.not_a_regular_file_inside(root, root / "a") == "not a regular file"
    assert fsutil.not_a_regular_file_inside(root, outside / "x.json") == f"not inside {root}"
    assert fsutil.not_a_regular_file_inside(root, root / "a" / "gone.json").startswith("cannot be examined (")
