"""The Helix work-item driver on a payload whose superpmi.py is a scripted stand-in.

The stand-in records each call and behaves as the scenario in $FAKE_SCENARIO says,
so these tests pin down the driver's own steps (commands, copies, zip, placeholders,
status, exit code) without depending on the real asmdiffs.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

from summary_documents import asm_document, metric_document

from spmi.pipeline import common as pipeline
from spmi.pipeline import workitem
from spmi.steps import summary_render

REPO = Path(__file__).resolve().parent.parent
DRIVER_SCRIPTS = ("superpmi_asmdiffs.py",)

FAKE_SUPERPMI = r'''
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
scenario = os.environ.get("FAKE_SCENARIO", "diffs")
with open(os.environ["FAKE_CALLS"], "a") as calls:
    calls.write(json.dumps(argv) + "\n")
def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None
def summary(kind):  # a real JSON summary of `kind` whose one collection is named after the scenario
    if scenario == "foreign_json":
        return json.dumps({"summary_type": "tpdiff" if kind == "asmdiffs" else "asmdiffs"})
    return (Path(os.environ["FAKE_SUMMARIES"]) / (kind + "_" + scenario + ".json")).read_text()
command = argv[0]
if value("-log_file"):
    Path(value("-log_file")).write_text("log of " + command + "\n")
if command == "download":
    sys.exit(1 if scenario == "download_fails" else 0)
if scenario == "download_fails" and "-mch_files" not in argv:  # a diff type downloading the collections
    print("Error: cannot download collection linux.x64.checked.mch: connection reset")
    sys.exit(1)
if command == "asmdiffs":
    spmi = Path(value("-spmi_location"))
    if scenario in ("diffs", "assert", "gate", "foreign_json"):
        (spmi / "asm.libraries.pmi" / "base").mkdir(parents=True, exist_ok=True)
        (spmi / "asm.libraries.pmi" / "base" / "12.dasm").write_text("; base listing\n")
        (spmi / "diff_summary.json").write_text(summary("asmdiffs"))
        (spmi / "diff_report.html").write_text("<!DOCTYPE html><title>report of " + scenario + "</title>")
    if scenario == "assert":
        print("============================== Assertions:")
        print("=== Assertion #1/1 (count: 3): interval->isActive (/runtime/src/coreclr/jit/lsra.cpp:8124)")
        print("Error: replay failures in 1 collection")
        sys.exit(1)
    if scenario == "nodiffs":
        (spmi / "diff_summary.json").write_text(summary("asmdiffs"))
    sys.exit(0)
if command in ("tpdiff", "memdiff"):
    spmi = Path(value("-spmi_location"))
    (spmi / (command + "_summary.json")).write_text(summary(command))
    if command == "memdiff" and scenario == "gate":
        print("Error: memory gate: a.mch Overall BytesAllocated grew by +40.00% (threshold 25%)")
        sys.exit(2)
    sys.exit(0)
sys.exit(9)
'''


def make_payload(root: Path, host_os: str = "linux") -> Path:
    payload = root / "payload"
    payload.mkdir(parents=True)
    for name in DRIVER_SCRIPTS:
        shutil.copy2(REPO / name, payload / name)
    shutil.copytree(REPO / "spmi", payload / "spmi", ignore=shutil.ignore_patterns("__pycache__"))
    (payload / "superpmi.py").write_text(FAKE_SUPERPMI)
    for side in ("base", "diff"):
        for flavour in ("checked", "release"):
            for target_arch in ("arm64", "x64"):
                partition = pipeline.partition_for_target("linux", target_arch)
                jit = payload / side / flavour / partition.jit_name(host_os)
                jit.parent.mkdir(parents=True, exist_ok=True)
                jit.write_text("jit")
    for name in pipeline.pin_files(host_os, "x64"):
        (payload / name).parent.mkdir(parents=True, exist_ok=True)
        (payload / name).write_text("pin")
    (payload / "base" / "baseline.json").write_text(json.dumps({"version": 1, "hashes": {"checked": "abc123",
                                                                                         "release": "def456"}}))
    return payload


def write_fake_summaries(folder: Path, scenario: str) -> Path:
    """The JSON summaries the stand-in writes for `scenario`: real ones, each of one collection named
    `<scenario>.mch`."""
    folder.mkdir(parents=True)
    documents = {"asmdiffs": asm_document(collection=f"{scenario}.mch"),
                 "tpdiff": metric_document("tpdiff", f"{scenario}.mch"),
                 "memdiff": metric_document("memdiff", f"{scenario}.mch")}
    for kind, document in documents.items():
        (folder / f"{kind}_{scenario}.json").write_text(json.dumps(document))
    return folder


def rendered_as_summarize_would(upload: Path, kind: str, label: str) -> str:
    """The long markdown `superpmi.py summarize` writes for the work item's uploaded JSON summary;
    also checks that the short one lies beside the long one, as summarize leaves it."""
    json_path = upload / f"superpmi_{kind}_summary_{label}.json"
    rendered = summary_render.render_documents(kind, [(json_path, summary_render.load_json(json_path))])
    assert (upload / f"superpmi_{kind}_short_summary_{label}.md").read_text() == rendered.short_text
    return rendered.long_text


def run_driver(tmp_path: Path, scenario: str, target_arch: str = "arm64", extra: List[str] = (),
               type_name: str = "asmdiffs") -> Dict[str, object]:
    payload = make_payload(tmp_path)
    summaries = write_fake_summaries(tmp_path / "fake_summaries", scenario)
    upload = tmp_path / "upload"
    upload.mkdir(parents=True)
    calls = tmp_path / "calls.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"FAKE_SCENARIO": scenario, "FAKE_CALLS": str(calls), "FAKE_SUMMARIES": str(summaries),
                "HELIX_CORRELATION_PAYLOAD": str(payload),
                "HELIX_WORKITEM_UPLOAD_ROOT": str(upload), "HELIX_PYTHONPATH": sys.executable})
    argv = [sys.executable, str(payload / "superpmi_asmdiffs.py"), "-base_jit_directory", str(payload / "base"),
            "-diff_jit_directory", str(payload / "diff"), "-log_directory", str(upload), "-arch", target_arch,
            "-platform", "Linux", "-type", type_name, *extra]
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    call_list = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return {"proc": proc, "upload": upload, "payload": payload, "calls": call_list}


def test_clean_run_leaves_every_declared_file(tmp_path: Path) -> None:
    result = run_driver(tmp_path, "diffs", extra=["-base_jit_options", "JitNoCSE=1", "-diff_jit_options", "A=1;B=2"])
    proc, upload, payload = result["proc"], result["upload"], result["payload"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    partition = pipeline.partition_for_target("linux", "arm64")
    for name in pipeline.declared_results(partition, pipeline.expand_types("asmdiffs")):
        assert (upload / name).is_file(), name
    markdown = (upload / "superpmi_asmdiffs_summary_linux_arm64.md").read_text()
    assert "diffs.mch" in markdown
    assert markdown == rendered_as_summarize_would(upload, "asmdiffs", "linux_arm64")
    uploaded = json.loads((upload / "superpmi_asmdiffs_summary_linux_arm64.json").read_text())
    assert [c["name"] for c in uploaded["summary"]["collections"]] == ["diffs.mch"]
    assert "report of diffs" in (upload / "superpmi_asmdiffs_report_linux_arm64.html").read_text()
    with zipfile.ZipFile(upload / "Asmdiffs_linux_arm64.zip") as archive:
        assert archive.namelist() == ["asm.libraries.pmi/base/12.dasm"]
    asmdiffs, download = result["calls"]  # asmdiffs downloads; the download step then checks
    jit = "libclrjit_universal_arm64_x64.so"
    assert download[:2] == ["download", "--no_progress"]
    assert download[download.index("-core_root") + 1] == str(payload)
    assert download[download.index("-spmi_location") + 1] == str(payload / "artifacts" / "spmi")
    assert download[download.index("-log_file") + 1] == str(upload / "superpmi_download_linux_arm64.log")
    assert asmdiffs[:2] == ["asmdiffs", "--no_progress"]
    assert asmdiffs[asmdiffs.index("-arch") + 1] == "x64"
    assert asmdiffs[asmdiffs.index("-target_arch") + 1] == "arm64"
    assert asmdiffs[asmdiffs.index("-base_jit_path") + 1] == str(payload / "base" / "checked" / jit)
    assert asmdiffs[asmdiffs.index("-diff_jit_path") + 1] == str(payload / "diff" / "checked" / jit)
    assert asmdiffs[asmdiffs.index("-error_limit") + 1] == "100"
    assert "--summary_as_json" in asmdiffs
    assert [asmdiffs[i + 1] for i, a in enumerate(asmdiffs) if a == "-diff_jit_option"] == ["A=1", "B=2"]
    assert [asmdiffs[i + 1] for i, a in enumerate(asmdiffs) if a == "-base_jit_option"] == ["JitNoCSE=1"]
    status = json.loads((upload / "superpmi_status_linux_arm64.json").read_text())
    assert status["ok"] is True and status["partition"] == "linux-arm64"
    assert status["baseline_hashes"] == {"asmdiffs": "abc123"}
    assert "-base_git_hash abc123" in status["repro"]["asmdiffs"]
    assert "-diff_jit_option A=1 -diff_jit_option B=2" in status["repro"]["asmdiffs"]
    assert status["placeholders"] == []


def test_assert_fails_the_work_item_but_keeps_summaries(tmp_path: Path) -> None:
    result = run_driver(tmp_path, "assert")
    proc, upload = result["proc"], result["upload"]
    assert proc.returncode == 1
    markdown = (upload / "superpmi_asmdiffs_summary_linux_arm64.md").read_text()
    assert "assert.mch" in markdown
    assert markdown == rendered_as_summarize_would(upload, "asmdiffs", "linux_arm64")
    status = json.loads((upload / "superpmi_status_linux_arm64.json").read_text())
    assert status["ok"] is False
    step = next(s for s in status["steps"] if s["name"] == "asmdiffs")
    assert step["exit_code"] == 1
    assert step["problems"][0] == ("Assertion failed: interval->isActive (/runtime/src/coreclr/jit/lsra.cpp:8124) "
                                   "(count: 3)")


def test_no_diffs_zip_and_failed_download_placeholders(tmp_path: Path) -> None:
    nodiffs = run_driver(tmp_path / "a", "nodiffs", target_arch="x64")
    assert nodiffs["proc"].returncode == 0
    with zipfile.ZipFile(nodiffs["upload"] / "Asmdiffs_linux_x64.zip") as archive:
        assert archive.namelist() == ["nodiff.txt"]
        assert archive.read("nodiff.txt").decode() == "No diffs found!"
    failed = run_driver(tmp_path / "b", "download_fails")
    upload = failed["upload"]
    assert failed["proc"].returncode == 1
    assert [c[0] for c in failed["calls"]] == ["asmdiffs", "download"]
    for name in ("superpmi_asmdiffs_summary_linux_arm64.md", "superpmi_asmdiffs_summary_linux_arm64.json",
                 "superpmi_asmdiffs_report_linux_arm64.html"):
        assert (upload / name).read_text() == "<empty>"
    assert (upload / "superpmi_asmdiffs_linux_arm64.log").read_text() == "log of asmdiffs\n"
    status = json.loads((upload / "superpmi_status_linux_arm64.json").read_text())
    assert sorted(status["placeholders"]) == sorted(["superpmi_asmdiffs_summary_linux_arm64.md",
                                                     "superpmi_asmdiffs_summary_linux_arm64.json",
                                                     "superpmi_asmdiffs_report_linux_arm64.html"])
    steps = {s["name"]: s for s in status["steps"]}
    assert not steps["asmdiffs"]["ok"] and not steps["download"]["ok"]
    assert any("linux.x64.checked.mch" in p for p in steps["asmdiffs"]["problems"]), steps["asmdiffs"]


def test_a_summary_that_does_not_render_is_a_failed_markdown_step(tmp_path: Path) -> None:
    result = run_driver(tmp_path, "foreign_json")
    proc, upload = result["proc"], result["upload"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "work item linux-arm64 failed in: asmdiffs markdown" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert (upload / "superpmi_asmdiffs_summary_linux_arm64.md").read_text() == "<empty>"
    status = json.loads((upload / "superpmi_status_linux_arm64.json").read_text())
    failed = [s for s in status["steps"] if not s["ok"]]
    json_path = upload / "superpmi_asmdiffs_summary_linux_arm64.json"
    assert [(s["name"], s["problems"]) for s in failed] == [
        ("asmdiffs markdown", [f"summary '{json_path}' is a tpdiff summary, not asmdiffs; "
                               "pass -summary_type tpdiff or asmdiffs summaries"])]


def test_a_failed_download_stops_the_types_after_the_first(tmp_path: Path) -> None:
    result = run_driver(tmp_path, "download_fails", type_name="all")
    assert result["proc"].returncode == 1
    assert [c[0] for c in result["calls"]] == ["asmdiffs", "download"]
    for name in ("superpmi_tpdiff_summary_linux_arm64.md", "superpmi_memdiff_summary_linux_arm64.md"):
        assert (result["upload"] / name).read_text() == "<empty>"


def test_no_overlap_and_payload_collections_download_first(tmp_path: Path) -> None:
    no_overlap = run_driver(tmp_path / "a", "diffs", extra=["--no_overlap"])
    assert no_overlap["proc"].returncode == 0, no_overlap["proc"].stdout + no_overlap["proc"].stderr
    assert [c[0] for c in no_overlap["calls"]] == ["download", "asmdiffs"]
    staged = run_driver(tmp_path / "b", "diffs", extra=["-mch_files", "mch/a.mch"])
    assert staged["proc"].returncode == 0, staged["proc"].stdout + staged["proc"].stderr
    assert [c[0] for c in staged["calls"]] == ["download", "asmdiffs"]
    assert all(c[c.index("-mch_files") + 1] == "mch/a.mch" for c in staged["calls"])


def test_all_types_release_jits_pin_and_the_memory_gate(tmp_path: Path) -> None:
    result = run_driver(tmp_path, "gate", type_name="all")
    proc, upload, payload = result["proc"], result["upload"], result["payload"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "work item linux-arm64 failed in: memdiff (memory gate)" in proc.stdout + proc.stderr
    commands = [c[0] for c in result["calls"]]
    assert commands == ["asmdiffs", "download", "tpdiff", "memdiff"]
    calls = {c[0]: c for c in result["calls"]}
    jit = "libclrjit_universal_arm64_x64.so"
    for name in ("tpdiff", "memdiff"):
        call = calls[name]
        assert call[call.index("-base_jit_path") + 1] == str(payload / "base" / "release" / jit)
        assert call[call.index("-diff_jit_path") + 1] == str(payload / "diff" / "release" / jit)
    assert calls["tpdiff"][calls["tpdiff"].index("-pin_path") + 1] == str(payload / "pin")
    assert "-pin_path" not in calls["memdiff"] and "-pin_path" not in calls["asmdiffs"]
    partition = pipeline.partition_for_target("linux", "arm64")
    for name in pipeline.declared_results(partition, pipeline.expand_types("all")):
        assert (upload / name).is_file(), name
    for kind in ("asmdiffs", "tpdiff", "memdiff"):
        markdown = (upload / f"superpmi_{kind}_summary_linux_arm64.md").read_text()
        assert "gate.mch" in markdown
        assert markdown == rendered_as_summarize_would(upload, kind, "linux_arm64")
    steps = [s["name"] for s in json.loads((upload / "superpmi_status_linux_arm64.json").read_text())["steps"]]
    assert steps == ["download", "asmdiffs", "asmdiffs markdown", "tpdiff", "tpdiff markdown", "memdiff",
                     "memdiff markdown"]
    status = json.loads((upload / "superpmi_status_linux_arm64.json").read_text())
    failed = [s for s in status["steps"] if not s["ok"]]
    assert [(s["name"], s["exit_code"], s["gate"]) for s in failed] == [("memdiff", 2, True)]
    assert failed[0]["problems"] == ["memory gate crossed (memdiff exit code 2)",
                                     "memory gate: a.mch Overall BytesAllocated grew by +40.00% (threshold 25%)"]
    assert status["baseline_hashes"] == {"asmdiffs": "abc123", "tpdiff": "def456", "memdiff": "def456"}
    assert "-base_git_hash def456" in status["repro"]["memdiff"]


def test_tpdiff_without_pin_in_the_payload_is_a_failed_step(tmp_path: Path) -> None:
    payload = make_payload(tmp_path / "p")
    shutil.rmtree(payload / "pin")
    upload = tmp_path / "upload"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"FAKE_CALLS": str(tmp_path / "calls"), "HELIX_PYTHONPATH": sys.executable})
    proc = subprocess.run([sys.executable, str(payload / "superpmi_asmdiffs.py"), "-base_jit_directory",
                           str(payload / "base"), "-diff_jit_directory", str(payload / "diff"), "-log_directory",
                           str(upload), "-arch", "x64", "-platform", "linux", "-type", "tpdiff"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    status = json.loads((upload / "superpmi_status_linux_x64.json").read_text())
    tpdiff = next(s for s in status["steps"] if s["name"] == "tpdiff")
    pintool = payload / "pin" / "clrjit_inscount_x64" / "libclrjit_inscount.so"
    assert tpdiff["problems"] == [f"PIN package file {payload / 'pin' / 'pin'} is not in the payload",
                                f"PIN package file {pintool} is not in the payload"]
    assert (upload / "superpmi_tpdiff_summary_linux_x64.md").read_text() == "<empty>"


def test_missing_jit_is_a_failed_step(tmp_path: Path) -> None:
    payload = make_payload(tmp_path / "p")
    (payload / "diff" / "checked" / "libclrjit_universal_arm64_x64.so").unlink()
    (tmp_path / "p" / "upload").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"FAKE_CALLS": str(tmp_path / "calls"), "HELIX_PYTHONPATH": sys.executable})
    proc = subprocess.run([sys.executable, str(payload / "superpmi_asmdiffs.py"), "-base_jit_directory",
                           str(payload / "base"), "-diff_jit_directory", str(payload / "diff"), "-log_directory",
                           str(tmp_path / "p" / "upload"), "-arch", "arm64", "-platform", "linux"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    status = json.loads((tmp_path / "p" / "upload" / "superpmi_status_linux_arm64.json").read_text())
    asmdiffs = next(s for s in status["steps"] if s["name"] == "asmdiffs")
    assert not asmdiffs["ok"] and "is not in the payload" in asmdiffs["problems"][0]


def test_bad_arguments_are_one_line() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "superpmi_asmdiffs.py"), "-base_jit_directory", "b",
                           "-diff_jit_directory", "d", "-log_directory", "l", "-arch", "arm64", "-platform", "beos"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "-platform 'beos'" in proc.stderr


def test_problems_in_output_and_repro() -> None:
    text = "\n".join([
        "[10:00:00] ISSUE: <ASSERT> #12 /src/jit/morph.cpp (3317) - Assertion failed '!\"bad\"' in 'A:B()' during "
        "'Morph' (IL size 10; hash 0x0000abcd; FullOpts)",
        "[10:00:01] Error: something broke",
        "[10:00:01] Error: something broke",
        "  Replay failures in 2 MCH files:",
    ])
    assert workitem.problems_in_output(text) == ["Assertion failed: !\"bad\" (/src/jit/morph.cpp:3317) (count: 1)",
                                               "Error: something broke", "Replay failures in 2 MCH files:"]
    many = "\n".join(f"Error: e{i}" for i in range(30))
    assert workitem.problems_in_output(many, limit=5)[-1] == "... 25 more in the log"
    asmdiffs = pipeline.DIFF_TYPES["asmdiffs"]
    assert workitem.repro_command("linux", "arm", asmdiffs, None, [], []) == (
        "python src/coreclr/scripts/superpmi.py asmdiffs -target_os linux -target_arch arm -arch x86")


def test_tool_environment_puts_payload_tools_first(tmp_path: Path) -> None:
    (tmp_path / "jit-analyze").mkdir()
    (tmp_path / "git" / "cmd").mkdir(parents=True)
    env = workitem.tool_environment(tmp_path, {"PATH": "/usr/bin"})
    assert env["PATH"].split(os.pathsep) == [str(tmp_path / "jit-analyze"), str(tmp_path / "git" / "cmd"), "/usr/bin"]
    assert workitem.tool_environment(tmp_path / "none", {"PATH": "/usr/bin"})["PATH"] == "/usr/bin"


def test_a_missing_jit_directory_is_found_before_the_download(tmp_path: Path) -> None:
    payload = make_payload(tmp_path / "p")
    upload = tmp_path / "upload"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"FAKE_CALLS": str(tmp_path / "calls"), "HELIX_PYTHONPATH": sys.executable})
    missing = tmp_path / "no_base"
    proc = subprocess.run([sys.executable, str(payload / "superpmi_asmdiffs.py"), "-base_jit_directory", str(missing),
                           "-diff_jit_directory", str(payload / "diff"), "-log_directory", str(upload),
                           "-arch", "x64", "-platform", "linux"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "calls").exists(), "superpmi.py was never run: no download"
    status = json.loads((upload / "superpmi_status_linux_x64.json").read_text())
    assert [step["name"] for step in status["steps"]] == ["driver"]
    assert status["steps"][0]["problems"] == [f"-base_jit_directory '{missing}' is not a directory; "
                                              "the payload lacks its JITs"]
    assert (upload / "superpmi_asmdiffs_summary_linux_x64.md").read_text() == "<empty>"


def test_a_markdown_step_that_fails_is_one_line_and_the_work_item_goes_on(tmp_path: Path, monkeypatch) -> None:
    """The markdown is rendered in the driver: a fault there (a renderer bug, a file that cannot be
    written) is that step's one-line problem, never an exception that would cost the status document."""
    summary_json = tmp_path / "superpmi_tpdiff_summary_linux_x64.json"
    summary_json.write_text(json.dumps(metric_document("tpdiff", "t.mch")))
    output_md = tmp_path / "superpmi_tpdiff_summary_linux_x64.md"
    tpdiff = pipeline.DIFF_TYPES["tpdiff"]

    step = workitem.render_markdown(tpdiff, summary_json, output_md)
    assert (step.name, step.ok, step.problems) == ("tpdiff markdown", True, [])
    assert "t.mch" in output_md.read_text()

    def broken(kind: str, documents: object) -> None:
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(summary_render, "render_documents", broken)
    step = workitem.render_markdown(tpdiff, summary_json, output_md)
    assert (step.name, step.exit_code, step.ok) == ("tpdiff markdown", 1, False)
    assert step.problems == [f"rendering {summary_json.name} failed: ZeroDivisionError: division by zero"]
    monkeypatch.undo()

    unwritable = tmp_path / "folder.md"
    unwritable.mkdir()
    step = workitem.render_markdown(tpdiff, summary_json, unwritable)
    assert not step.ok and len(step.problems) == 1 and step.problems[0].startswith("cannot write folder.md: ")
