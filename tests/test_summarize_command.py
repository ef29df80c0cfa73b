"""`superpmi.py summarize` as a process: bad inputs and outputs are one line each, checked before
anything is written (docs/contracts.md §12.13)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from summary_documents import HUGE, asm_document, tpdiff_document

from spmi.reports.asm_model import Aggregate, AsmDiffsSummary, CollectionAggregates, CollectionReport

REPO = Path(__file__).resolve().parent.parent
COLLECTION = "libraries.pmi.linux.x64.checked.mch"


def summary(*collections: str) -> AsmDiffsSummary:
    rows = Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, contexts_with_diffs=2,
                     base_code_bytes=1000, diff_code_bytes=990, base_perfscore=100.0, diff_perfscore=99.0)
    return AsmDiffsSummary("linux", "x64", repro_command="python superpmi.py asmdiffs",
                           collections=[CollectionReport(name, aggregates=CollectionAggregates(fullopts=rows))
                                        for name in collections or (COLLECTION,)])


def write_summary(path: Path, *collections: str) -> Path:
    path.write_text(summary(*collections).to_json(), encoding="utf-8")
    return path


def summarize(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_ACTIONS", "SUPERPMI_CACHE_DIRECTORY")}
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), "summarize", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120)


def error_lines(proc: subprocess.CompletedProcess) -> List[str]:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.strip()]


def test_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_bytes(b'{"summary": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(deep),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: summary '{deep}' is not a JSON summary: nested too deeply to read"]
    assert not (tmp_path / "out.md").exists()


def test_a_summary_given_twice_is_named(tmp_path: Path) -> None:
    one = write_summary(tmp_path / "one.json")
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(one), str(one),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: -summaries lists '{one}' twice; give each summary once"]


def test_a_collection_listed_twice_is_named(tmp_path: Path) -> None:
    twice = write_summary(tmp_path / "twice.json", COLLECTION, COLLECTION)
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(twice),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: collection(s) {COLLECTION} listed twice in one linux x64 summary; "
                     "each collection is replayed once per target"]
    other = write_summary(tmp_path / "other.json")
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(other),
                                  str(write_summary(tmp_path / "again.json")),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: collection(s) {COLLECTION} listed twice: in more than one linux x64 "
                     "summary; each collection is replayed once per target"]


@pytest.mark.parametrize("summary_type", ["tpdiff", "metricdiff"])
def test_an_asmdiffs_summary_of_another_type_says_what_it_is(tmp_path: Path, summary_type: str) -> None:
    asm = write_summary(tmp_path / "asm.json")
    lines = error_lines(summarize(tmp_path, "-summary_type", summary_type, "-summaries", str(asm),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: summary '{asm}' is an asmdiffs summary, not {summary_type}; "
                     f"pass -summary_type asmdiffs or {summary_type} summaries"]


def test_a_summary_that_does_not_say_its_kind(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"collections": []}))
    lines = error_lines(summarize(tmp_path, "-summary_type", "memdiff", "-summaries", str(bare),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert lines == [f"superpmi.py: error: summary '{bare}' does not say what kind of summary it is (no "
                     "summary_type); -summary_type memdiff expects what `memdiff --summary_as_json` writes"]


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    one = write_summary(tmp_path / "one.json")
    before = one.read_bytes()
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(one),
                                  "-output_long_summary_path", str(tmp_path / "out.md"),
                                  "-output_short_summary_path", str(one)))
    assert lines == [f"superpmi.py: error: -output_short_summary_path '{one}' is the input summary '{one}'; "
                     "writing it would overwrite that input, give another file"]
    assert one.read_bytes() == before and not (tmp_path / "out.md").exists()


def test_two_outputs_on_one_file_are_refused(tmp_path: Path) -> None:
    one = write_summary(tmp_path / "one.json")
    out = tmp_path / "out.md"
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(one),
                                  "-output_long_summary_path", str(out), "-output_short_summary_path", str(out),
                                  "-output_html_path", str(out)))
    assert lines == [
        f"superpmi.py: error: -output_short_summary_path '{out}' is the same file as -output_long_summary_path; "
        "give each output its own file",
        f"superpmi.py: error: -output_html_path '{out}' is the same file as -output_long_summary_path; "
        "give each output its own file"]
    assert not out.exists()


def test_an_html_path_that_is_a_folder_is_refused_before_any_markdown(tmp_path: Path) -> None:
    one = write_summary(tmp_path / "one.json")
    folder = tmp_path / "report"
    folder.mkdir()
    lines = error_lines(summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(one),
                                  "-output_long_summary_path", str(tmp_path / "out.md"),
                                  "-output_html_path", str(folder)))
    assert lines == [f"superpmi.py: error: -output_html_path '{folder}' is a directory; give a file name"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "report"], "nothing was written"


def test_good_outputs_are_all_written(tmp_path: Path) -> None:
    one = write_summary(tmp_path / "one.json")
    proc = summarize(tmp_path, "-summary_type", "asmdiffs", "-summaries", str(one),
                     "-output_long_summary_path", str(tmp_path / "out.md"), "-output_html_path",
                     str(tmp_path / "out.html"))
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"one.json", "out.md", "out_short.md", "out.html"}


def _hostile_tpdiff(field: str, value: object) -> dict:
    document = tpdiff_document()
    document[field] = value
    return document


@pytest.mark.parametrize("kind, document, message", [
    ("asmdiffs", lambda: asm_document({"PerfScore": [1, 2, 3]}), "metric_totals.PerfScore is not [base, diff]"),
    ("asmdiffs", lambda: asm_document({"PerfScore": [HUGE, 1]}),
     "summary.collections[0].metric_totals.PerfScore[0]: expected a number of at most"),
    ("tpdiff", lambda: _hostile_tpdiff("noise_k", "x"), "noise_k: expected a finite number, not a string"),
    ("tpdiff", lambda: _hostile_tpdiff("noise_k", [1]), "noise_k: expected a finite number, not a list"),
    ("tpdiff", lambda: _hostile_tpdiff("focus", "BytesAllocated"), "no totals of the focus metric 'BytesAllocated'"),
    ("tpdiff", lambda: _hostile_tpdiff("significance", {"instructions": "nan"}),
     "significance.instructions: expected a finite number, not a string"),
])
def test_hostile_numbers_and_shapes_are_one_line_naming_file_and_field(tmp_path: Path, kind: str, document,
                                                                         message: str) -> None:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document()), encoding="utf-8")
    lines = error_lines(summarize(tmp_path, "-summary_type", kind, "-summaries", str(path),
                                  "-output_long_summary_path", str(tmp_path / "out.md")))
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], lines
    assert not (tmp_path / "out.md").exists()
