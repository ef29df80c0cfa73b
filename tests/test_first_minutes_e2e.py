"""What someone new sees first: missing inputs outside an enlistment, bad paths, `-h`, a short console."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from e2e_support import collection

REPO = Path(__file__).resolve().parent.parent
NEWCOMER_LINE = "not in a dotnet/runtime enlistment"


def superpmi(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SUPERPMI_CACHE_DIRECTORY", "TF_BUILD")}
    env["SPMI_SAMPLE_START_MS"] = "0"
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def error_lines(text: str) -> List[str]:
    return [line for line in text.splitlines() if "error" in line.lower()]


@pytest.mark.parametrize("command", ["asmdiffs", "replay", "memdiff"])
def test_nothing_given_outside_an_enlistment_points_to_the_demo(command, tmp_path):
    proc = superpmi(command, cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    [line] = text.strip().splitlines()
    assert NEWCOMER_LINE in line and str(tmp_path) in line
    assert f"superpmi.py {command} -h" in line and "sample/demo.py" in line
    assert "not found" not in line, "no tool discovery happened"
    assert not list(tmp_path.iterdir()), "nothing written"


def test_nothing_given_inside_an_enlistment_goes_on_to_tool_discovery(tmp_path):
    enlistment = tmp_path / "runtime"
    (enlistment / ".git").mkdir(parents=True)
    (enlistment / "src" / "coreclr").mkdir(parents=True)
    proc = superpmi("replay", cwd=enlistment)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert NEWCOMER_LINE not in text
    assert "superpmi not found" in text, text


def test_every_bad_explicit_path_is_named_before_discovery_or_downloads(sample_toolchain, tmp_path):
    spmi = tmp_path / "spmi"
    good_mch = collection(sample_toolchain)
    proc = superpmi("asmdiffs", "-core_root", str(tmp_path / "no_core_root"),
                    "-base_jit_path", str(tmp_path / "base" / "libclrjit.so"),
                    "-diff_jit_path", str(tmp_path),
                    "-mch_files", str(good_mch), str(tmp_path / "gone.mch"), "http://127.0.0.1:9/never.mch",
                    "-spmi_location", str(spmi), cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    assert error_lines(text) == [
        f"superpmi.py: error: -core_root '{tmp_path / 'no_core_root'}' is not a directory; check the path",
        f"superpmi.py: error: -base_jit_path '{tmp_path / 'base' / 'libclrjit.so'}' does not exist; check the path",
        f"superpmi.py: error: -diff_jit_path '{tmp_path}' is not a file; check the path",
        f"superpmi.py: error: -mch_files '{tmp_path / 'gone.mch'}' is neither a file, a directory nor a URL; "
        "check the path"]
    assert not spmi.exists(), "no log, no cache, no download before the inputs are checked"


@pytest.mark.skipif(sys.platform != "linux", reason="the sample toolchain is built for a Linux host")
def test_paths_superpmi_would_sort_wrongly_are_refused_before_anything_runs(sample_toolchain, tmp_path):
    """superpmi sorts positionals by their last extension (docs/contracts.md §2.3): a JIT named
    `.mch`/`.mct`/`.mc` would be replayed as the collection, a collection named `.so` loaded as a JIT."""
    spmi = tmp_path / "spmi"
    good_mch = collection(sample_toolchain)
    as_mch = tmp_path / "x.MCH"
    as_mch.write_bytes((sample_toolchain / "base" / "libclrjit.so").read_bytes())
    as_mct = tmp_path / "jit.mct"
    as_mct.write_bytes(as_mch.read_bytes())
    as_jit = tmp_path / "collection.so"
    as_jit.write_bytes(good_mch.read_bytes())
    as_zip = tmp_path / "collection.mch.zip"
    as_zip.write_bytes(b"PK")
    proc = superpmi("asmdiffs", "-core_root", str(sample_toolchain / "core_root"), "-base_jit_path", str(as_mch),
                    "-diff_jit_path", str(as_mct), "-mch_files", str(good_mch), str(as_jit), str(as_zip),
                    "-target_os", "linux", "-target_arch", "x64", "-spmi_location", str(spmi), cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text and "No asm diffs" not in text
    assert error_lines(text) == [
        f"superpmi.py: error: -base_jit_path '{as_mch}' ends in .MCH, which superpmi reads as a collection, "
        "not a JIT; pass the JIT (.so file)",
        f"superpmi.py: error: -diff_jit_path '{as_mct}' ends in .mct, which superpmi reads as a collection, "
        "not a JIT; pass the JIT (.so file)",
        f"superpmi.py: error: -mch_files '{as_jit}': superpmi reads this file as a JIT, not a collection; "
        "pass a .mc, .mch, .mct file or a folder holding them",
        f"superpmi.py: error: -mch_files '{as_zip}': superpmi reads this file as an unknown file type, not a "
        "collection; pass a .mc, .mch, .mct file or a folder holding them"]
    assert not spmi.exists(), "nothing ran"


def test_replay_names_a_bad_jit_path_and_core_root_together(sample_toolchain, tmp_path):
    proc = superpmi("replay", "-core_root", str(tmp_path / "nope"), "-jit_path", str(tmp_path / "jit.so"),
                    "-mch_files", str(collection(sample_toolchain)), "-spmi_location", str(tmp_path / "spmi"),
                    cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1
    lines = error_lines(text)
    assert len(lines) == 2, text
    assert "-core_root" in lines[0] and "-jit_path" in lines[1] and "does not exist" in lines[1]


def test_asmdiffs_help_starts_with_examples_and_groups_the_jit_paths(tmp_path):
    proc = superpmi("asmdiffs", "-h", cwd=tmp_path)
    assert proc.returncode == 0
    text = proc.stdout
    head = text.split("options:", 1)[0]
    examples = [line.strip() for line in head.splitlines() if line.strip().startswith("python superpmi.py asmdiffs")]
    assert len(examples) == 2, head
    assert any("-base_jit_path" in e and "-diff_jit_path" in e for e in examples)
    groups = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line
        for flag in ("-base_jit_path", "-diff_jit_path"):
            if line.strip().startswith(flag + " "):
                groups[flag] = current
    assert groups["-base_jit_path"] == groups["-diff_jit_path"] != "", groups


def asmdiffs_run(toolchain: Path, spmi: Path, *extra: str) -> subprocess.CompletedProcess:
    return superpmi("asmdiffs", "-core_root", str(toolchain / "core_root"), "-arch", "x64", "-target_os", "linux",
                    "-base_jit_path", str(toolchain / "base" / "libclrjit.so"),
                    "-mch_files", str(collection(toolchain)), str(collection(toolchain, "benchmarks.run")),
                    "-spmi_location", str(spmi), "--no_progress", *extra, cwd=spmi.parent)


def test_console_shows_progress_and_a_short_result_details_in_the_log(sample_toolchain, tmp_path):
    spmi = tmp_path / "spmi"
    proc = asmdiffs_run(sample_toolchain, spmi)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 45, proc.stdout  # 14 per collection (with the 9 totals lines), the result block
    assert sum("Running asm diffs of" in line for line in lines) == 2
    tail = "\n".join(lines[lines.index(next(x for x in lines if x.endswith("Asm diffs summary:"))):])
    assert f"Summary Markdown file: {spmi / 'diff_summary.md'}" in tail
    assert f"HTML diff report: {spmi / 'diff_report.html'}" in tail
    assert "Asm diffs in 2 MCH files:" in tail
    assert len(re.findall(r"\.mch \(\d+ contexts with diffs\)$", tail, re.M)) == 2
    log_text = (spmi / "superpmi.log").read_text()
    for detail in ("Top file regressions", "Top method improvements", "Invoking:", "Differences found"):
        assert detail in log_text and detail not in proc.stdout, detail


def test_verbose_shows_the_details_on_the_console(sample_toolchain, tmp_path):
    proc = asmdiffs_run(sample_toolchain, tmp_path / "spmi", "-v")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for detail in ("Top file regressions", "Top method improvements", "Invoking:", "Differences found",
                   "Relative PerfScore Geomean", "Asm diffs summary:"):
        assert detail in proc.stdout, detail
    assert len(proc.stdout.splitlines()) > 100


def test_demo_is_short_and_ends_with_next_steps_that_work(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SUPERPMI_CACHE_DIRECTORY", "TF_BUILD")}
    env["SPMI_SAMPLE_START_MS"] = "0"
    proc = subprocess.run([sys.executable, str(REPO / "sample" / "demo.py"), "--out", str(tmp_path / "demo"),
                           "--contexts", "80"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 130, proc.stdout  # six collections; before, the analyzer lists made it 1,000+
    steps = lines[lines.index("Next steps:"):]
    opened = [Path(line.strip()) for line in steps if line.strip().endswith((".md", ".html"))]
    assert [p.name for p in opened] == ["diff_summary.md", "diff_report.html"] * 2
    assert all(p.is_file() for p in opened)
    commands = [shlex.split(line) for line in steps if not line.strip().startswith("More:")
                and ("superpmi.py" in line or "make_toolchain.py" in line or "superpmi_asmdiffs_setup.py" in line)]
    assert len(commands) == 3, steps
    interpreter = os.path.abspath(sys.executable)  # cwd (tmp_path) does not hold it: shown in full
    assert [argv[0] for argv in commands] == [interpreter] * 3, "the interpreter that ran the demo, not `python`"
    [more] = [line.strip() for line in steps if line.strip().startswith("More:")]
    assert more.startswith(f"More: {shlex.quote(interpreter)} {REPO / 'superpmi.py'} asmdiffs -h"), more
    [verbose] = [argv for argv in commands if argv[-1] == "-v"]
    pipeline = [argv for argv in commands if "make_toolchain.py" in argv[1] or "superpmi_asmdiffs_setup.py" in argv[1]]
    assert len(pipeline) == 2 and pipeline[1][-1] == "--run_locally"
    assert any(line.strip().startswith("5. ") and line.rstrip().endswith(f"{REPO / 'sample' / 'demo.py'} --history")
               for line in steps), steps
    rerun = subprocess.run(verbose, capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "Top file regressions" in rerun.stdout and "libraries.pmi" in rerun.stdout
    assert "aspnet" not in rerun.stdout.split("Asm diffs summary:")[1], "-filter libraries kept to one collection"


def test_demo_names_its_interpreter_as_the_user_types_it(tmp_path):
    from sample.demo import interpreter_as_typed
    venv_python = str(tmp_path / ".venv" / "bin" / "python")
    assert interpreter_as_typed(venv_python, str(tmp_path)) == os.path.join(".venv", "bin", "python")
    assert interpreter_as_typed(venv_python, str(tmp_path / ".venv" / "bin")) == os.path.join(".", "python")
    assert interpreter_as_typed(venv_python, str(tmp_path / "elsewhere")) == venv_python
    assert interpreter_as_typed("/usr/bin/python3", str(tmp_path)) == "/usr/bin/python3"
