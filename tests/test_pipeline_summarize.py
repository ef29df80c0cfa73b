"""The summarize script: gathering, MISSING platforms, diff fences as HTML, size budgets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spmi.pipeline import common as pipeline
from spmi.pipeline import summarize
from spmi.reports import pipeline_markdown as md
from spmi.reports.asm_model import (
    Aggregate,
    AsmDiffsSummary,
    AssertGroup,
    AssertInstance,
    CollectionAggregates,
    CollectionReport,
    DiffListStats,
    ExampleDiff,
    ReplayStatus,
)

REPO = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


# ---------------------------------------------------------------- pure pieces

def test_diff_fence_becomes_html() -> None:
    text = "before\n```diff\n@@ -1 +1 @@\n-mov a, <b>\n+mov a, \"c\"\n+add x & y\n ctx\n```\nafter"
    assert md.diff_fences_to_html(text) == (
        'before\n<pre><code><div>@@ -1 +1 @@</div>'
        '<div style="background-color:rgba(248,81,73,0.15)">-mov a, &lt;b&gt;</div>'
        '<div style="background-color:rgba(46,160,67,0.15)">+mov a, "c"\n+add x &amp; y</div>'
        '<div> ctx</div></code></pre>\nafter')
    assert md.diff_fences_to_html("```\nplain\n```") == "```\nplain\n```"
    assert md.diff_fences_to_html("```diff\n+open") == "```diff\n+open"


def test_fit_sections_drops_highest_rank_first_and_notes_it() -> None:
    sections = [md.Section("HEAD\n"), md.Section("a" * 50 + "\n", 1, "A"), md.Section("b" * 50 + "\n", 2, "B"),
                md.Section("TAIL\n")]
    text = md.fit_sections(sections, 80, lambda titles: f"[cut {','.join(titles)}]\n")
    assert text == "HEAD\n" + "a" * 50 + "\n[cut B]\nTAIL\n"
    tiny = md.fit_sections(sections, 30, lambda titles: f"[cut {','.join(titles)}]\n")
    assert tiny.startswith("HEAD\n[cut ") and len(tiny) < 30


def test_gather_reads_names_case_insensitively(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "superpmi_asmdiffs_summary_Linux_ARM64.md").write_text("x")
    (tmp_path / "a" / "SUPERPMI_STATUS_LINUX_arm64.json").write_text("{}")
    (tmp_path / "superpmi_asmdiffs_short_summary_linux_arm64.md").write_text("short")
    (tmp_path / "superpmi_tpdiff_summary_osx_arm64.md").write_text("tp")
    found = summarize.gather_files(tmp_path, "asmdiffs")
    assert list(found) == [("linux", "arm64")]
    assert found[("linux", "arm64")].markdown.name == "superpmi_asmdiffs_summary_Linux_ARM64.md"
    assert found[("linux", "arm64")].status.name == "SUPERPMI_STATUS_LINUX_arm64.json"


def test_states_mark_missing_and_failed_platforms(tmp_path: Path) -> None:
    (tmp_path / "superpmi_asmdiffs_summary_windows_x86.md").write_text("<empty>")
    (tmp_path / "superpmi_status_windows_x86.json").write_text(json.dumps({"ok": False, "steps": [
        {"name": "download", "exit_code": 1, "ok": False, "problems": ["Error: no network"]}]}))
    (tmp_path / "superpmi_asmdiffs_summary_linux_arm.md").write_text("fine")
    states = summarize.build_states(summarize.gather_files(tmp_path, "asmdiffs"),
                                    summarize.expected_platforms("x86"), None)
    by_label = {s.label: s for s in states}
    assert by_label["windows x86"].missing and by_label["windows x86"].failed
    assert by_label["windows x86"].problems == ["MISSING: the work item left no summary",
                                                "download failed (exit code 1): Error: no network"]
    assert not by_label["linux arm"].failed
    box = summarize.pipeline_box(states)
    assert "windows x86" in box and "MISSING" in box and "no network" in box and "linux arm|" not in box
    assert summarize.failure_messages(states, "asmdiffs") == [
        "asmdiffs on windows x86: MISSING: the work item left no summary; "
        "download failed (exit code 1): Error: no network"]


def test_tpdiff_overall_concatenates_platforms(tmp_path: Path) -> None:
    (tmp_path / "superpmi_tpdiff_summary_windows_x64.md").write_text("tp windows")
    (tmp_path / "superpmi_tpdiff_summary_linux_x64.md").write_text("<empty>")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x64", "-platform", "windows", "-type", "tpdiff"],
                          capture_output=True, text=True, timeout=60, env=without_ci_variables())
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "2_overall_tpdiff_summary_windows_x64.md").read_text()
    # one verdict line per platform first (no JSON summary came back: the platform's markdown is the verdict)
    assert text.startswith("# Throughput impact on windows x64\n\ntpdiff windows x64: see its summary below\n\n"
                           "tpdiff windows arm64: no results came back\n\n")
    assert "came back\n\nThe following shows the impact on throughput" in text
    assert "## windows x64" in text and "tp windows" in text
    assert "MISSING: no linux x64 results came back" in text and "MISSING: no osx arm64 results came back" in text
    assert "##vso[task.uploadsummary]" not in proc.stdout


def test_all_writes_three_summaries_in_tab_order(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x86", "-platform", "windows", "-type", "all"],
                          capture_output=True, text=True, timeout=60, env=dict(without_ci_variables(), TF_BUILD="True"))
    assert proc.returncode == 0, proc.stderr
    expected = [("asmdiffs", "# ASM diffs generated on windows x86\n", "No asmdiffs found"),
                ("tpdiff", "# Throughput impact on windows x86\n", "No throughput diffs found"),
                ("memdiff", "# Memory impact on windows x86\n", "No memory diffs found")]
    paths = [tmp_path / pipeline.overall_summary_name(t, "windows", "x86") for t, _, _ in expected]
    assert [p.name[:2] for p in paths] == ["1_", "2_", "3_"]
    uploads = [line for line in proc.stdout.splitlines() if line.startswith("##vso[task.uploadsummary]")]
    assert uploads == [f"##vso[task.uploadsummary]{p}" for p in paths]
    for path, (_type_name, heading, nothing) in zip(paths, expected):
        text = path.read_text()
        assert text.startswith(heading) and nothing in text
        assert "MISSING: no linux arm results came back" in text
        assert proc.stdout.index(heading) < proc.stdout.index(f"##vso[task.uploadsummary]{path}")
    issues = [line.split("]", 1)[1].split(":")[0] for line in proc.stdout.splitlines() if "logissue" in line]
    assert issues == [f"{t} on {p}" for t, _, _ in expected for p in ("windows x86", "linux arm")]


def test_each_type_counts_only_its_own_steps_and_shows_the_memory_gate(tmp_path: Path) -> None:
    steps = [{"name": "download", "exit_code": 0, "ok": True, "problems": []},
             {"name": "asmdiffs", "exit_code": 1, "ok": False,
              "problems": ["Assertion failed: x (a.cpp:1) (count: 1)"]},
             {"name": "asmdiffs markdown", "exit_code": 0, "ok": True, "problems": []},
             {"name": "tpdiff", "exit_code": 0, "ok": True, "problems": []},
             {"name": "memdiff", "exit_code": 2, "ok": False, "gate": True,
              "problems": ["memory gate crossed (memdiff exit code 2)",
                           "memory gate: a.mch Overall BytesAllocated grew by +40.00% (threshold 25%)"]}]
    (tmp_path / "superpmi_status_windows_x86.json").write_text(json.dumps({"ok": False, "steps": steps}))
    for type_name in ("asmdiffs", "tpdiff", "memdiff"):
        (tmp_path / pipeline.summary_md_name(type_name, "windows", "x86")).write_text(f"{type_name} text")
        (tmp_path / pipeline.summary_md_name(type_name, "linux", "arm")).write_text(f"{type_name} text")

    def state(type_name: str) -> summarize.PlatformState:
        states = summarize.build_states(summarize.gather_files(tmp_path, type_name),
                                        summarize.expected_platforms("x86"), None, type_name)
        return states[0]

    asm, tp, mem = state("asmdiffs"), state("tpdiff"), state("memdiff")
    assert asm.failed and not asm.gate_failed
    assert asm.problems == ["asmdiffs failed (exit code 1): Assertion failed: x (a.cpp:1) (count: 1)"]
    assert not tp.failed and tp.problems == [] and summarize.pipeline_box([tp]) == ""
    assert mem.failed and mem.gate_failed
    assert mem.problems == ["memory gate crossed (memdiff exit code 2)",
                            "memory gate: a.mch Overall BytesAllocated grew by +40.00% (threshold 25%)"]
    box = summarize.pipeline_box([mem])
    assert box.startswith('**<span style="color:red">Memory gate failed</span>** on windows x86: ')
    assert '|windows x86|<span style="color:red">memory gate</span>|memory gate crossed' in box
    assert summarize.failure_messages([mem], "memdiff") == [
        "memdiff on windows x86: memory gate crossed (memdiff exit code 2); memory gate: a.mch Overall "
        "BytesAllocated grew by +40.00% (threshold 25%)"]


def test_bad_directory_is_one_line_error(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path / "nope"), "-arch", "x64", "-platform", "windows", "-type", "asmdiffs"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "is not a directory" in proc.stderr


# ---------------------------------------------------------------- a huge diff set

def without_ci_variables() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}


def big_diff_text(seed: int) -> str:
    lines = []
    for i in range(250):
        sign = "+" if (i + seed) % 3 == 0 else ("-" if (i + seed) % 3 == 1 else " ")
        lines.append(f"{sign}       mov      rax, qword ptr [rbp-0x{i:04x}]   ; <example {seed}> & some padding text")
    return "```diff\n" + "\n".join(lines) + "\n...\n```"


def collection(platform: str, index: int, broken: bool) -> CollectionReport:
    base = 1_000_000 + index * 1000
    minopts = Aggregate(base_successes=5000, diff_successes=5000, diffed_contexts=5000, contexts_with_diffs=300,
                        base_code_bytes=base, diff_code_bytes=base + (index * 37) % 500 - 200,
                        base_perfscore=50000.0, diff_perfscore=50000.0 + index, perfscore_log_sum=0.5)
    fullopts = Aggregate(base_successes=9000, diff_successes=9000, diffed_contexts=9000, contexts_with_diffs=400,
                         base_code_bytes=base * 2, diff_code_bytes=base * 2 - index * 11,
                         base_perfscore=90000.0, diff_perfscore=89990.0, perfscore_log_sum=-0.25)
    examples = [ExampleDiff(context=100 + k, kind="improvement" if k % 2 else "regression",
                            title=f"System.Example{k}:Method{index}(int):this (FullOpts)", base_bytes=500,
                            diff_bytes=480 + k, diff_text=big_diff_text(index * 10 + k),
                            repro_command=f"superpmi -c {100 + k} jit.so {platform}.mch") for k in range(6)]
    status = ReplayStatus(failed=broken, reason="Compilation failures" if broken else "", exit_code=1 if broken else 0)
    asserts = [AssertGroup("x != nullptr (lsra.cpp:77)", 12, [AssertInstance(5, 10)])] if broken else []
    return CollectionReport(name=f"set{index:02d}.{platform.replace(' ', '.')}.checked.mch",
                            aggregates=CollectionAggregates(minopts, fullopts, DiffListStats(contexts_with_diffs=700)),
                            examples=examples, jit_analyze_markdown="jit-analyze output\n" * 400,
                            status=status, asserts=asserts)


def write_huge_results(directory: Path) -> None:
    for partition in pipeline.partitions_for_host("x64"):
        platform = f"{partition.target_os} {partition.target_arch}"
        broken = partition.name == "linux-arm64"
        summary = AsmDiffsSummary(target_os=partition.target_os, target_arch=partition.target_arch,
                                  repro_command=f"python superpmi.py asmdiffs -target_os {partition.target_os}",
                                  collections=[collection(platform, i, broken and i == 0) for i in range(12)])
        folder = directory / partition.name
        folder.mkdir(parents=True)
        label = partition.label
        (folder / pipeline.summary_json_name("asmdiffs", *label.split("_"))).write_text(summary.to_json())
        status = {"ok": not broken, "steps": [{"name": "asmdiffs", "exit_code": 1 if broken else 0, "ok": not broken,
                                                "problems": ["Assertion failed: x != nullptr"] if broken else []}]}
        (folder / pipeline.status_name(*label.split("_"))).write_text(json.dumps(status))


def run_summarize(directory: Path, short: bool, step_summary: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir", str(directory),
            "-arch", "x64", "-platform", "windows", "-type", "asmdiffs"] + (["--short"] if short else [])
    env = dict(without_ci_variables(), TF_BUILD="True", GITHUB_STEP_SUMMARY=str(step_summary))
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def check_kept(text: str) -> None:
    assert text.startswith("# ASM diffs generated on windows x64\n")
    assert "Work item problems" in text[:2000] and "Replay problems" in text
    head = text[:text.index("## ")]
    assert "**Impact by collection**" in head
    impact = head[head.index("**Impact by collection**"):]
    assert impact.count("|set") == 60  # every collection of every platform in the impact table
    for label in ("windows x64", "windows arm64", "linux x64", "linux arm64", "osx arm64"):
        assert f"\n## {label}\n" in text
        assert f"python superpmi.py asmdiffs -target_os {label.split()[0]}" in text
    assert "**Truncated:**" in text


def test_huge_diff_set_fits_both_budgets(tmp_path: Path) -> None:
    results = tmp_path / "helixresults"
    write_huge_results(results)
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("x" * 200_000)  # earlier steps already used some of the 1 MiB
    long_proc = run_summarize(results, False, step_summary)
    assert long_proc.returncode == 0, long_proc.stderr
    long_path = results / "1_overall_asmdiffs_summary_windows_x64.md"
    long_text = long_path.read_text(encoding="utf-8")
    assert len(long_text.encode("utf-8")) < MIB
    check_kept(long_text)
    assert "<pre><code>" in long_text and "```diff" not in long_text
    assert "to stay within 1 MiB;" in long_text
    assert f"{long_text}##vso[task.uploadsummary]{long_path}\n" in long_proc.stdout  # the file, then the command
    assert "##vso[task.logissue type=error]asmdiffs on linux arm64:" in long_proc.stdout
    github = step_summary.read_text(encoding="utf-8")
    assert len(github.encode("utf-8")) < MIB
    check_kept(github[200_000:])
    assert "```diff" in github

    short_proc = run_summarize(results, True, tmp_path / "short_step_summary.md")
    assert short_proc.returncode == 0, short_proc.stderr
    short_text = (results / "1_overall_asmdiffs_short_summary_windows_x64.md").read_text(encoding="utf-8")
    assert len(short_text) < 65_536
    assert "to stay within 65,536 characters;" in short_text
    check_kept(short_text)
    assert len((tmp_path / "short_step_summary.md").read_text(encoding="utf-8")) < 65_536


# ---------------------------------------------------------------- headline tables (tpdiff, memdiff)

def metric_run_json(kind: str, focus: str, collections: dict) -> str:
    from spmi.reports import metric_model as mm
    results = []
    for name, (base, diff) in collections.items():
        totals = {focus: {row: mm.Totals(base, diff) for row in mm.ROWS}}
        results.append(mm.CollectionResult(name, [focus], {focus: "int"}, totals,
                                           {"Overall": 10, "MinOpts": 4, "FullOpts": 6},
                                           mm.SideCounts(10), mm.SideCounts(10)))
    return json.dumps(mm.run_to_json(mm.MetricDiffRun(kind=kind, focus=focus, collections=results)))


def visible_part(text: str) -> str:
    """The text outside every collapsed <details> block."""
    out, depth = [], 0
    for line in text.splitlines():
        depth += line.count("<details>")
        if depth == 0:
            out.append(line)
        depth -= line.count("</details>")
    return "\n".join(out)


def test_tpdiff_and_memdiff_pages_open_with_one_headline_table_in_platform_order(tmp_path: Path) -> None:
    for kind, focus in (("tpdiff", "instructions"), ("memdiff", "BytesAllocated")):
        (tmp_path / f"superpmi_{kind}_summary_linux_x64.json").write_text(metric_run_json(
            kind, focus, {"aspnet.mch": (1000, 1001), "libraries.mch": (2000, 1900)}))
        (tmp_path / f"superpmi_{kind}_summary_linux_x64.md").write_text(f"{kind} linux x64 body")
        (tmp_path / f"superpmi_{kind}_summary_windows_x64.json").write_text(metric_run_json(
            kind, focus, {"aspnet.mch": (500, 800)}))
        (tmp_path / f"superpmi_{kind}_summary_windows_x64.md").write_text(f"{kind} windows x64 body")
    for platform in ("linux_x64", "windows_x64"):
        (tmp_path / f"superpmi_asmdiffs_summary_{platform}.md").write_text("asm body")
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir",
                           str(tmp_path), "-arch", "x64", "-platform", "linux", "-type", "all"],
                          capture_output=True, text=True, timeout=60, env=without_ci_variables())
    assert proc.returncode == 0, proc.stderr
    orders = []
    for kind, label in (("tpdiff", "instructions executed in the JIT"), ("memdiff", "bytes allocated by the JIT")):
        text = (tmp_path / pipeline.overall_summary_name(kind, "linux", "x64")).read_text()
        shown = visible_part(text)
        assert f"**{label}, by platform and collection**" in shown
        rows = [line for line in shown.splitlines() if line.startswith("|") and ".mch|" in line]
        # sorted by absolute PDIFF: +60% (windows), -5% (libraries), +0.10% (aspnet)
        assert [r.split("|")[1:3] for r in rows] == [["windows x64", "aspnet.mch"], ["linux x64", "libraries.mch"],
                                                       ["linux x64", "aspnet.mch"]]
        assert "|500|800|+300|" in rows[0] and "-100|" in rows[1]
        assert "significant when it reaches its metric's minimum meaningful change" in shown
        orders.append([line[3:] for line in text.splitlines() if line.startswith("## ")])
    asm = (tmp_path / pipeline.overall_summary_name("asmdiffs", "linux", "x64")).read_text()
    orders.append([line[3:] for line in asm.splitlines() if line.startswith("## ")])
    assert orders[0] == orders[1] == orders[2]
    # platforms with results first, then the missing ones, each in the host queue's partition order
    assert orders[0][:3] == ["windows x64", "linux x64", "windows arm64"]
