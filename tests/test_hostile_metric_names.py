"""Metric names come from a details CSV or a JSON summary: in every summary line built from them
(the Significance line above all) they stay inert text: no live HTML, no closing of the page's own
`<div>`, no pipeline command (docs/architecture.md "Untrusted text")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from spmi.base.untrusted import INVISIBLE_SPACE
from spmi.formats import details
from spmi.reports import asm_markdown
from spmi.reports import metric_markdown as report
from spmi.reports import metric_model as model
from spmi.reports.asm_model import Aggregate, AsmDiffsSummary, CollectionAggregates, CollectionReport

REPO = Path(__file__).resolve().parent.parent
IMG = "<img src=x onerror=alert(1)>"
VSO = "##vso[task.setvariable variable=leak]1"
MASK = "Cse\n\u00a0::add-mask::secret"
DIV = "</div></details><img src=y onerror=alert(2)>"
HOSTILE = [IMG, VSO, MASK, DIV]


SPACES = "".join(chr(c) for c in range(0x3001) if chr(c).isspace()) + INVISIBLE_SPACE


def assert_no_command(text: str) -> None:
    """No pipeline command: no `##vso[` anywhere, no line starting with `::` after any whitespace."""
    assert "##vso[" not in text
    for line in text.splitlines():
        assert not line.lstrip(SPACES).startswith("::"), line


def assert_inert(text: str) -> None:
    """No hostile name survived raw anywhere in `text` (markdown)."""
    assert "<img" not in text
    assert_no_command(text)
    assert text.count("<div") == text.count("</div>"), "a name closed or opened a <div>"


def metric_run(kind: str, focus: str, names: List[str]) -> model.MetricDiffRun:
    metrics = [focus] + names
    totals = {m: {row: model.Totals(1000, 1500) for row in model.ROWS} for m in metrics}
    collection = model.CollectionResult("libraries.mch", metrics, {m: "int" for m in metrics}, totals,
                                        {"Overall": 10, "MinOpts": 4, "FullOpts": 6},
                                        model.SideCounts(10), model.SideCounts(10))
    return model.MetricDiffRun(kind=kind, focus=focus, collections=[collection], threshold=25.0, noise_k=3.0)


def asm_summary(names: List[str]) -> AsmDiffsSummary:
    rows = Aggregate(base_successes=10, diff_successes=10, diffed_contexts=10, contexts_with_diffs=2,
                     base_code_bytes=1000, diff_code_bytes=990, base_perfscore=100.0, diff_perfscore=99.0)
    totals = {name: [100.0, 150.0] for name in names}
    totals["CseCount"] = [10.0, 10.0]
    collection = CollectionReport("libraries.mch", aggregates=CollectionAggregates(fullopts=rows),
                                  metric_totals=totals)
    return AsmDiffsSummary("linux", "x64", collections=[collection])


@pytest.mark.parametrize("kind,focus", [("tpdiff", "instructions"), ("memdiff", details.BYTES_ALLOCATED),
                                        ("metricdiff", details.BYTES_ALLOCATED)])
@pytest.mark.parametrize("name", HOSTILE)
def test_metric_summaries_keep_a_hostile_metric_name_inert(kind: str, focus: str, name: str) -> None:
    run = metric_run(kind, name if kind == "tpdiff" else focus, [] if kind == "tpdiff" else [name])
    for long in (True, False):
        text = report.render(run, long, details.metric_direction)
        assert "Significance: a change is flagged" in text
        assert_inert(text)
    assert "&lt;img src=x" in report.render(metric_run(kind, IMG if kind == "tpdiff" else focus,
                                                       [] if kind == "tpdiff" else [IMG]), True,
                                            details.metric_direction)


@pytest.mark.parametrize("name", HOSTILE)
def test_asmdiffs_summaries_keep_a_hostile_metric_name_inert(name: str) -> None:
    summary = asm_summary([name])
    for text in (asm_markdown.render_long(summary), asm_markdown.render_short(summary)):
        assert "Significance: a change is flagged" in text
        assert_inert(text)


def test_superpmi_summarize_markdown_keeps_hostile_metric_names_inert(tmp_path: Path) -> None:
    asm = tmp_path / "asm.json"
    asm.write_text(asm_summary(HOSTILE).to_json(), encoding="utf-8")
    metric = tmp_path / "metric.json"
    metric.write_text(json.dumps(model.run_to_json(metric_run("metricdiff", details.BYTES_ALLOCATED, HOSTILE))),
                      encoding="utf-8")
    for kind, source in (("asmdiffs", asm), ("metricdiff", metric)):
        out = tmp_path / f"{kind}.md"
        proc = subprocess.run([sys.executable, str(REPO / "superpmi.py"), "summarize", "-summary_type", kind,
                               "-summaries", str(source), "-output_long_summary_path", str(out)],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        text = out.read_text(encoding="utf-8")
        assert "Significance: a change is flagged" in text and "&lt;img src=x" in text
        assert_inert(text)
        assert_no_command(proc.stdout)
        # the console ends with the verdict line the summary opens with
        last = proc.stdout.splitlines()[-1]
        assert last.startswith({"asmdiffs": "linux x64: 2 of 10 contexts with diffs, -10 bytes (-1.00%)",
                                "metricdiff": "metricdiff: 5 of 5 metrics changed significantly ("}[kind]), last


def test_the_pipeline_page_keeps_hostile_metric_names_inside_its_own_div(tmp_path: Path) -> None:
    """A tpdiff work item whose JSON names its metric hostilely (the Significance line names it)."""
    run = metric_run("tpdiff", DIV, [])
    (tmp_path / "superpmi_tpdiff_summary_linux_x64.json").write_text(json.dumps(model.run_to_json(run)))
    # the markdown as the work item writes it (the summarize step republishes it, sanitized)
    (tmp_path / "superpmi_tpdiff_summary_linux_x64.md").write_text(report.render(run, True, details.metric_direction))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x64", "-platform", "linux", "-type", "tpdiff"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "2_overall_tpdiff_summary_linux_x64.md").read_text(encoding="utf-8")
    assert "Significance: a change is flagged" in text and "&lt;/div&gt;&lt;/details&gt;" in text
    assert_inert(text)


def test_metricdiff_console_lines_keep_hostile_metric_names_inert() -> None:
    """The closing console block of metricdiff (the logger's console handler, in a real process)."""
    script = ("import json, logging, sys\n"
              "from spmi.base import logs\n"
              "from spmi.commands import metricdiff\n"
              "from spmi.reports import metric_model as model\n"
              "logs.setup_logging(logging.INFO, None)\n"
              "run = model.run_from_json(json.loads(sys.stdin.read()))\n"
              "metricdiff.log_significance(run)\n")
    run = metric_run("metricdiff", details.BYTES_ALLOCATED, HOSTILE)
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(model.run_to_json(run)),
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "Significance: a change is flagged" in proc.stdout
    assert_no_command(proc.stdout)
    assert "Cse \u00a0::add-mask::secret" in proc.stdout  # one line: the name's line break is a space
