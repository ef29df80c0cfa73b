"""A JIT superpmi cannot load stops the run after the first collection with one line naming
it; two byte-identical JITs get a warning that no diffs are possible (sample toolchain)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from spmi.tools import superpmi_tool

REPO = Path(__file__).resolve().parent.parent
OTHER_GUID = "11111111-2222-3333-4444-555555555555"


def linux_x64_collections(toolchain: Path) -> Path:
    manifest = json.loads((toolchain / "toolchain.json").read_text(encoding="utf-8"))
    return Path(manifest["collections"]["linux-x64"][0]).parent


def run_superpmi_py(*argv: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUPERPMI_", "TF_BUILD", "DOTNET_"))}
    env.update(SPMI_SAMPLE_START_MS="0", SPMI_SAMPLE_COMPILE_US="0")
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), *map(str, argv)], capture_output=True,
                          text=True, timeout=240, env=env)


def common(toolchain: Path, spmi: Path) -> List[object]:
    return ["-core_root", toolchain / "core_root", "-spmi_location", spmi, "-arch", "x64", "-target_os", "linux",
            "-target_arch", "x64", "-mch_files", linux_x64_collections(toolchain)]


def error_lines(result: subprocess.CompletedProcess) -> List[str]:
    return [line for line in (result.stdout + result.stderr).splitlines() if "Error:" in line]


def test_load_errors_are_recognised() -> None:
    assert superpmi_tool.jit_load_error("x\nERROR: LoadLibrary failed (0x000000c1)\n") == "LoadLibrary failed (0x000000c1)"
    assert superpmi_tool.jit_load_error("ERROR: GetProcAddress 'getJit' failed (0x0000007f)") == \
        "GetProcAddress 'getJit' failed (0x0000007f)"
    assert superpmi_tool.jit_load_error("ERROR: Startup of JIT(/j/x.so) failed 1") == "Startup of JIT(/j/x.so) failed 1"
    assert superpmi_tool.jit_load_error("ERROR: Method 3 of size 36 failed to load and compile correctly") is None


@pytest.mark.parametrize("parallel", [True, False])
def test_text_file_as_diff_jit_stops_after_the_first_collection(sample_toolchain: Path, tmp_path: Path,
                                                                 parallel: bool) -> None:
    text_jit = tmp_path / "libclrjit.so"
    text_jit.write_text("this is not a JIT\n")
    argv = ["asmdiffs", *common(sample_toolchain, tmp_path / "spmi"),
            "-base_jit_path", sample_toolchain / "base" / "libclrjit.so", "-diff_jit_path", text_jit]
    result = run_superpmi_py(*argv, *([] if parallel else ["--sequential"]))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert f"superpmi cannot load the diff JIT '{text_jit}' (LoadLibrary failed (0x000000c1))" in lines[0]
    assert "base JIT" not in lines[0]
    assert (result.stdout + result.stderr).count("Running asm diffs of") == 1, "stopped after the first collection"
    assert "Traceback" not in result.stderr


def test_jit_ee_mismatch_in_replay_names_the_jit(sample_toolchain: Path, tmp_path: Path) -> None:
    from sample.make_toolchain import make_jit
    jit = make_jit(tmp_path / "libclrjit.so", "linux", "x64", guid=OTHER_GUID)
    result = run_superpmi_py("replay", *common(sample_toolchain, tmp_path / "spmi"), "-jit_path", jit)
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1 and f"superpmi cannot load the JIT '{jit}' (Jit Compiler has wrong version identifier." \
        in lines[0], lines
    assert (result.stdout + result.stderr).count("Replaying ") == 1


def test_unloadable_base_jit_in_memdiff_is_named(sample_toolchain: Path, tmp_path: Path) -> None:
    from sample.make_toolchain import make_invalid_jit
    base = make_invalid_jit(tmp_path / "libclrjit.so")
    result = run_superpmi_py("memdiff", *common(sample_toolchain, tmp_path / "spmi"), "-base_jit_path", base,
                             "-diff_jit_path", sample_toolchain / "release" / "diff" / "libclrjit.so")
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1 and f"superpmi cannot load the base JIT '{base}'" in lines[0], lines
    assert "diff JIT" not in lines[0]


@pytest.mark.parametrize("command, jit_dir", [("asmdiffs", "core_root"), ("memdiff", "release/diff")])
def test_identical_copies_warn_that_no_diffs_are_possible(sample_toolchain: Path, tmp_path: Path, command: str,
                                                          jit_dir: str) -> None:
    original = sample_toolchain / jit_dir / "libclrjit.so"
    copy = tmp_path / "copy" / "libclrjit.so"
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    result = run_superpmi_py(command, *common(sample_toolchain, tmp_path / "spmi"), "-base_jit_path", copy,
                             "-diff_jit_path", original)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"Warning: the base JIT {copy} and the diff JIT {original} are byte-identical; no diffs are possible" \
        in output


def test_different_jits_get_no_identical_warning(sample_toolchain: Path, tmp_path: Path) -> None:
    from spmi.steps import jit_pair
    a, b = tmp_path / "a.so", tmp_path / "b.so"
    a.write_bytes(b"jit one")
    b.write_bytes(b"jit two")
    assert not jit_pair.warn_if_identical(a, b)
    b.write_bytes(b"jit one")
    assert jit_pair.warn_if_identical(a, b)
