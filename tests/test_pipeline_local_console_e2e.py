"""`superpmi_asmdiffs_setup.py --run_locally` on a developer's machine: one line per work item and the
overall pages; `-v` shows everything (staging, the pipeline variables, the summarize step's output)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from spmi.pipeline import setup

REPO = Path(__file__).resolve().parent.parent
CLOSED_STORAGE = "http://127.0.0.1:9"
TIME = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("quiet") / "toolchain"
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(out), "--contexts", "50",
                    "--collections", "libraries.pmi", "--seed", "3"], check=True, stdout=subprocess.DEVNULL)
    return out


def run_setup(toolchain: Path, root: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TF_BUILD", "GITHUB_", "SYSTEM_", "BUILD_", "SUPERPMI_"))}
    env.update(SUPERPMI_STORAGE_URL=CLOSED_STORAGE, SUPERPMI_STORAGE_RETRIES="1")
    root.mkdir()
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory",
            str(toolchain / "core_root"), "-payload_directory", str(root / "payload"), "-base_jit_directory",
            str(toolchain / "base"), "-base_git_hash", "0" * 40, "-private_store", str(toolchain / "collections"),
            "-type", "asmdiffs", "--run_locally", "-jobs", "2", *extra]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def console(proc: subprocess.CompletedProcess) -> List[str]:
    return [TIME.sub("", line) for line in (proc.stdout + proc.stderr).splitlines()]


def test_a_local_run_prints_one_line_per_work_item_and_the_overall_page(toolchain: Path, tmp_path: Path) -> None:
    proc = run_setup(toolchain, tmp_path / "quiet")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = console(proc)
    local = tmp_path / "quiet" / "payload_local"
    items = ["win-x64", "win-arm64", "linux-x64", "linux-arm64", "osx-arm64"]
    overall = local / "helixresults" / "1_overall_asmdiffs_summary_linux_x64.md"
    assert lines == [f"Running 5 work item(s) locally in {local / 'workitems'}, 2 at a time",
                     *[f"Work item {item} passed; console log {local / 'workitems' / item / 'console.log'}"
                       for item in items],
                     f"Overall asmdiffs summary: {overall}"]
    assert overall.is_file()
    kept = (local / "summarize.log").read_text(encoding="utf-8")
    assert f"Writing {overall}" in kept and "# ASM diffs generated on linux x64" in kept


def test_verbose_shows_everything(toolchain: Path, tmp_path: Path) -> None:
    proc = run_setup(toolchain, tmp_path / "verbose", "-v")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = console(proc)
    assert any(line.startswith("Payload ") and " ready for 5 work item(s)" in line for line in lines)
    assert "##vso[task.setvariable variable=Architecture]x64" in lines
    assert "# ASM diffs generated on linux x64" in lines
    assert len(lines) > 100
    assert not (tmp_path / "verbose" / "payload_local" / "summarize.log").exists()


@pytest.mark.parametrize("flags, environ, quiet", [
    (["--run_locally"], {}, True),
    (["--run_locally", "-v"], {}, False),
    (["--run_locally", "-log_level", "debug"], {}, False),
    (["--run_locally"], {"TF_BUILD": "True"}, False),
    (["--run_locally"], {"GITHUB_ACTIONS": "true"}, False),
    ([], {}, False),
])
def test_when_a_run_is_quiet(flags: List[str], environ: dict, quiet: bool) -> None:
    import superpmi_asmdiffs_setup
    args: argparse.Namespace = superpmi_asmdiffs_setup.build_parser().parse_args(
        ["-product_directory", "p", "-payload_directory", "q", *flags])
    assert setup.quiet_local_run(args, environ) is quiet
