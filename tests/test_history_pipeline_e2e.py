"""History through the local pipeline: three scheduled-style main runs record tpdiff results in
Azurite (`superpmi_asmdiffs_setup.py --run_locally --history_upload`), then PR runs (`--history`)
get an overall summary whose History rows say within or flagged. The sample
toolchain has run-to-run noise on PIN's counts, so main's changes spread as real ones do."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from spmi.pipeline import common as pipeline

REPO = Path(__file__).resolve().parent.parent
HOST_OS = "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")
HOST_ARCH = "x86"
BASELINE_HASH = "0123456789abcdef0123456789abcdef01234567"
MAIN_FACTORS = (1.0, 1.0, 1.0)


def make_toolchain(out: Path) -> Path:
    subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), str(out), "--contexts", "24",
                    "--collections", "libraries.pmi", "--host_arch", HOST_ARCH, "--seed", "3",
                    "--noise", "instructions=0.05", "--noise_seed", "11"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def release_product(toolchain: Path, where: Path, tp_factor: float) -> Path:
    """Release diff JITs of every target of the host queue, `tp_factor` times the base's instructions."""
    shutil.copytree(toolchain / "release" / "diff", where)
    for partition in pipeline.partitions_for_host(HOST_ARCH):
        subprocess.run([sys.executable, str(REPO / "sample" / "make_toolchain.py"), "jit",
                        str(where / partition.jit_name(HOST_OS)), "--target",
                        f"{partition.target_os}-{partition.target_arch}", "--flavor", "release", "--tp_factor",
                        str(tp_factor)], check=True, stdout=subprocess.DEVNULL)
    return where


def run_pipeline(toolchain: Path, root: Path, label: str, tp_factor: float, azurite, *history: str,
                 noise_run: int) -> subprocess.CompletedProcess:
    """One local pipeline run; `noise_run` keys the sample tools' run-to-run noise (work items that run
    side by side would otherwise take run numbers in any order, sample/README.md)."""
    product = release_product(toolchain, root / f"product_{label}", tp_factor)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_STORAGE_", "GITHUB_", "TF_BUILD"))}
    env.update({"PYTHONPATH": str(REPO), "SUPERPMI_STORAGE_RETRIES": "1",
                "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string, "SPMI_SAMPLE_NOISE_RUN": str(noise_run)})
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory",
            str(toolchain / "core_root"), "-host_arch", HOST_ARCH, "-payload_directory", str(root / f"payload_{label}"),
            "-base_git_hash", BASELINE_HASH, "-private_store", str(toolchain / "collections"),
            "-release_product_directory", str(product), "-release_base_jit_directory",
            str(toolchain / "release" / "base"), "-pin_directory", str(toolchain / "pintools" / "1.0" / HOST_OS),
            "-type", "tpdiff", "--run_locally", "-parallelism", "2", "-storage_url", azurite.account_url, *history]
    work = root / f"cwd_{label}"
    work.mkdir()
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)


def overall(root: Path, label: str) -> str:
    path = (root / f"payload_{label}_local" / "helixresults" /
            pipeline.overall_summary_name("tpdiff", HOST_OS, HOST_ARCH))
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def history_runs(azurite, tmp_path_factory) -> Dict[str, object]:
    from azurite import PUBLIC_CONTAINERS
    for name in PUBLIC_CONTAINERS:
        azurite.clear_container(name)
    root = tmp_path_factory.mktemp("history_pipeline")
    toolchain = make_toolchain(root / "toolchain")
    for index, factor in enumerate(MAIN_FACTORS):
        proc = run_pipeline(toolchain, root, f"main{index}", factor, azurite, "--history_upload",
                            "-diff_git_hash", f"{index + 1:040x}", noise_run=index + 1)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    prs = {}
    for run, (label, factor) in enumerate((("same", 1.0), ("slower", 1.025)), start=len(MAIN_FACTORS) + 1):
        prs[label] = run_pipeline(toolchain, root, label, factor, azurite, "--history", "-history_last", "30",
                                  noise_run=run)
    return {"root": root, "prs": prs, "azurite": azurite}


def history_rows(text: str) -> List[List[str]]:
    section = text.split("## History", 1)[1].split("\n## ", 1)[0]
    return [line.strip("|").split("|") for line in section.splitlines() if line.startswith("|") and ".mch|" in line]


def test_main_runs_leave_records_that_history_list_shows(history_runs):
    azurite = history_runs["azurite"]
    result = subprocess.run([sys.executable, str(REPO / "superpmi.py"), "history", "list", "-summary_type", "tpdiff",
                             "-storage_url", azurite.account_url], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line[:4].isdigit()]
    targets = {f"{p.target_os}/{p.target_arch}" for p in pipeline.partitions_for_host(HOST_ARCH)}
    assert len(rows) == 3 * len(targets)
    assert {row[2] for row in rows} == targets
    assert {row[3] for row in rows} == {f"{i:040x}" for i in (1, 2, 3)}


@pytest.mark.parametrize("label, verdict", [("same", "within"), ("slower", "outside the usual range by")])
def test_a_pr_run_is_judged_against_the_main_runs(history_runs, label, verdict):
    proc = history_runs["prs"][label]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = history_rows(overall(history_runs["root"], label))
    targets = {f"{p.target_os} {p.target_arch}" for p in pipeline.partitions_for_host(HOST_ARCH)}
    assert {row[0] for row in rows} == targets
    page_names = [f"superpmi_history_tpdiff_{p.target_os}_{p.target_arch}.html"
                  for p in pipeline.partitions_for_host(HOST_ARCH)]
    text = overall(history_runs["root"], label)
    results = history_runs["root"] / f"payload_{label}_local" / "helixresults"
    for name in page_names:
        assert f"`{name}`" in text
        page = (results / name).read_text(encoding="utf-8")
        assert page.count('<g class="series"') == 1 and page.count('class="pr"') == 1
    for row in rows:
        assert row[2] == "instructions"
        assert row[4].lstrip("*").startswith(verdict), row
        if label == "slower":
            assert "(fence ±" in row[4] and "last 3 main runs" in row[4], row
        assert row[4].startswith("**") == (label == "slower")
