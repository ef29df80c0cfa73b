"""History without Azure, end to end: real tpdiff runs on a noisy sample toolchain, recorded in a local
folder (`-storage_url <folder>`) with no target or credential flags, then a PR judged against them.

Five main runs replay a byte-identical copy of the base JIT, each with its own noise (run key), so
main's changes are noise only. A no-change PR is then within for every collection; a diff JIT that
executes 2.5% more instructions is flagged, and its verdict names the fence."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
#: PIN counts vary by up to ±0.2% per compile: collection totals move by about 0.01%, above the 0.005% rule
NOISE = "instructions=0.2"

pytestmark = pytest.mark.skipif(sys.platform.startswith("win"), reason="the sample toolchain runs on Linux and macOS")


def run_cli(*args: object, noise_run: str = "") -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("AZURE_STORAGE_", "SUPERPMI_", "SPMI_SAMPLE_", "TF_BUILD", "GITHUB_"))}
    environment.update({"SPMI_SAMPLE_START_MS": "0", "SPMI_SAMPLE_COMPILE_US": "0"})
    if noise_run:
        environment["SPMI_SAMPLE_NOISE_RUN"] = noise_run
    return subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *map(str, args)], capture_output=True,
                          text=True, env=environment, timeout=300, cwd=str(REPO_ROOT))


class Noisy:
    def __init__(self, root: Path) -> None:
        manifest = json.loads((root / "toolchain.json").read_text(encoding="utf-8"))
        native = f"{manifest['host_os']}-{manifest['host_arch']}"
        self.root, self.manifest = root, manifest
        self.host_os, self.host_arch = manifest["host_os"], manifest["host_arch"]
        self.core_root = Path(manifest["superpmi"]).parent
        self.jit_name = manifest["jit_names"][native]
        self.collections = [Path(p) for p in manifest["collections"][native]]

    def base(self) -> Path:
        return self.root / "release" / "base" / self.jit_name

    def same_as_base(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(self.base(), folder / self.jit_name))

    def slower(self, folder: Path, tp_factor: float) -> Path:
        from sample.make_toolchain import make_jit
        from sample.noise import NoiseConfig
        noise = self.manifest["noise"]
        return make_jit(folder / self.jit_name, self.host_os, self.host_arch, flavor="release", tp_factor=tp_factor,
                        noise=NoiseConfig(noise["noise"], noise["noise_seed"], noise["noise_runs"]))

    def tpdiff_summary(self, diff: Path, spmi: Path, noise_run: str) -> Path:
        result = run_cli("tpdiff", "-core_root", self.core_root, "-base_jit_path", self.base(), "-diff_jit_path", diff,
                         "-mch_files", *self.collections, "-pin_path", self.root / "pintools" / "1.0" / self.host_os,
                         "-spmi_location", spmi, "--summary_as_json", "--no_progress", noise_run=noise_run)
        assert result.returncode == 0, result.stdout + result.stderr
        (found,) = spmi.glob("tpdiff_summary*.json")
        return found


@pytest.fixture(scope="module")
def noisy(tmp_path_factory) -> Noisy:
    out = tmp_path_factory.mktemp("noisy_history")
    subprocess.run([sys.executable, str(REPO_ROOT / "sample" / "make_toolchain.py"), str(out), "--contexts", "150",
                    "--targets", f"linux-{'arm64' if os.uname().machine in ('arm64', 'aarch64') else 'x64'}",
                    "--collections", "libraries.pmi,aspnet.run", "--noise", NOISE, "--noise_seed", "3"],
                   check=True, stdout=subprocess.DEVNULL)
    return Noisy(out)


@pytest.fixture(scope="module")
def store(noisy, tmp_path_factory) -> Path:
    """Five main runs recorded in a folder: `history upload -summaries F -storage_url <folder>`, nothing else."""
    folder = tmp_path_factory.mktemp("history_store") / "store"
    work = tmp_path_factory.mktemp("main_runs")
    for day in range(1, 6):
        summary = noisy.tpdiff_summary(noisy.same_as_base(work / f"jit{day}"), work / f"spmi{day}", f"main{day}")
        result = run_cli("history", "upload", "-summaries", summary, "-storage_url", folder,
                         "-run_time", f"202611{day:02d}T030000Z", "-diff_git_hash", f"{day:07x}")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Recorded tpdiff" in result.stdout
    return folder


def verdict_rows(markdown: str) -> List[str]:
    return [line for line in markdown.splitlines() if re.match(r"^\|\w+ \w+\|[^|]+\.mch\|instructions\|", line)]


def test_main_runs_land_in_the_folder_in_the_account_layout(store, noisy):
    files = sorted(p.relative_to(store).as_posix() for p in store.rglob("*.json"))
    assert len(files) == 5
    assert all(re.match(rf"^superpmi/history/tpdiff/{noisy.host_os}/\w+/202611\d\dT030000Z_\w+\.json$", f)
               for f in files), files
    listed = run_cli("history", "list", "-storage_url", store.as_uri())
    assert listed.returncode == 0 and listed.stdout.count("tpdiff") == 5, listed.stdout + listed.stderr


def test_a_no_change_pr_is_within_for_every_collection(store, noisy, tmp_path):
    pr = noisy.tpdiff_summary(noisy.same_as_base(tmp_path / "jit"), tmp_path / "spmi", "pr-same")
    out = tmp_path / "history.md"
    result = run_cli("history", "compare", "-summaries", pr, "-storage_url", store, "-output_md_path", out)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = verdict_rows(out.read_text(encoding="utf-8"))
    assert len(rows) == len(noisy.collections), rows
    assert all("|within" in row and "**" not in row for row in rows), rows
    assert "FLAGGED" not in result.stdout
    # the noise is real: main moved, so each collection has a fence of width
    assert all("(fence ±" in row or "below the rule" in row for row in rows), rows


def test_a_slower_jit_is_flagged_with_its_fence_and_drawn_on_the_trend_page(store, noisy, tmp_path):
    pr = noisy.tpdiff_summary(noisy.slower(tmp_path / "jit", 1.025), tmp_path / "spmi", "pr-slow")
    result = run_cli("history", "compare", "-summaries", pr, "-storage_url", store)
    assert result.returncode == 0, result.stdout + result.stderr
    flagged = [line for line in result.stdout.splitlines() if line.strip().startswith("FLAGGED")]
    assert len(flagged) == len(noisy.collections), result.stdout
    for line in flagged:
        match = re.search(r"instructions \+(\d+\.\d+)%: outside the usual range by (\d+\.\d+) pp "
                          r"\(fence ±(\d+\.\d+)%, last 5 main runs\)$", line)
        assert match, line
        change, excess, fence = map(float, match.groups())
        assert 2.3 < change < 2.7 and 0 < fence < change and excess == pytest.approx(change - fence, abs=0.02)
    page = tmp_path / "trend.html"
    shown = run_cli("history", "show", "-summaries", pr, "-storage_url", store, "-output_html_path", page)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    text = page.read_text(encoding="utf-8")
    assert text.count('class="fence"') == len(noisy.collections) and text.count('class="pr"') == len(noisy.collections)
    assert "PR FLAGGED +2." in text and "2026-11-01" in text
