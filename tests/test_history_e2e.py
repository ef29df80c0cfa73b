"""History end to end: real tpdiff runs on the sample toolchain, records uploaded to Azurite,
`history list/show/compare` reading them back anonymously, hostile records skipped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"


def run_cli(*args: object, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("AZURE_STORAGE_", "SUPERPMI_CACHE_DIRECTORY", "SUPERPMI_STORAGE_URL"))}
    environment.update(env or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                          timeout=300, cwd=str(REPO_ROOT))


class Toolchain:
    def __init__(self, root: Path) -> None:
        manifest = json.loads((root / "toolchain.json").read_text(encoding="utf-8"))
        native = f"{manifest['host_os']}-{manifest['host_arch']}"
        self.root = root
        self.host_os, self.host_arch = manifest["host_os"], manifest["host_arch"]
        self.core_root = Path(manifest["superpmi"]).parent
        self.jit_name = manifest["jit_names"][native]
        self.collection = next(Path(p) for p in manifest["collections"][native] if "libraries.pmi" in p)

    def release_jit(self, where: Path, tp_factor: float) -> Path:
        from sample.make_toolchain import make_jit
        return make_jit(where / self.jit_name, self.host_os, self.host_arch, flavor="release", tp_factor=tp_factor)

    def tpdiff_summary(self, tmp: Path, label: str, tp_factor: float) -> Path:
        """A tpdiff JSON summary of the release base JIT against one with `tp_factor`."""
        diff = self.release_jit(tmp / f"jit_{label}", tp_factor)
        spmi = tmp / f"spmi_{label}"
        result = run_cli("tpdiff", "-core_root", self.core_root, "-base_jit_path", self.root / "release" / "base" /
                         self.jit_name, "-diff_jit_path", diff, "-mch_files", self.collection, "-pin_path",
                         self.root / "pintools" / "1.0" / self.host_os, "-spmi_location", spmi, "--summary_as_json",
                         "--sequential")
        assert result.returncode == 0, result.stdout + result.stderr
        (found,) = spmi.glob("tpdiff_summary*.json")
        return found


@pytest.fixture(scope="module")
def toolchain(sample_toolchain: Path) -> Toolchain:
    return Toolchain(sample_toolchain)


def upload(azurite, summary: Path, day: int, diff_hash: str) -> subprocess.CompletedProcess:
    result = run_cli("history", "upload", "-summaries", summary, "-target_os", "linux", "-target_arch", "x64",
                     "-diff_git_hash", diff_hash, "-base_git_hash", "1" * 40, "-jit_ee_version", GUID,
                     "-storage_url", azurite.account_url, "-run_time", f"202611{day:02d}T030000Z",
                     env={"AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string})
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def main_runs(toolchain, tmp_path_factory) -> List[Path]:
    """Three main-to-main tpdiff summaries: small moves either way, as ordinary commits make."""
    tmp = tmp_path_factory.mktemp("main_runs")
    return [toolchain.tpdiff_summary(tmp, f"main{i}", factor) for i, factor in enumerate((1.0002, 0.9999, 1.0001))]


@pytest.fixture
def recorded(storage_account, main_runs):
    for day, summary in enumerate(main_runs, start=1):
        upload(storage_account, summary, day, f"{day:07x}")
    return storage_account


def test_uploaded_records_are_listed_newest_first(recorded):
    result = run_cli("history", "list", "-storage_url", recorded.account_url)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("2026")]
    assert [line.split()[0] for line in lines] == ["20261103T030000Z", "20261102T030000Z", "20261101T030000Z"]
    assert all(line.split()[1:3] == ["tpdiff", "linux/x64"] for line in lines)
    names = [b.name for b in recorded.service_client().get_container_client("superpmi").list_blobs()]
    assert "history/tpdiff/linux/x64/20261101T030000Z_0000001.json" in names


@pytest.mark.parametrize("tp_factor, verdict", [(1.0, "within noise: below the rule"),
                                               (1.025, "outside the usual range by")])
def test_a_pr_is_judged_against_the_main_runs(recorded, toolchain, tmp_path, tp_factor, verdict):
    pr = toolchain.tpdiff_summary(tmp_path, "pr", tp_factor)
    out = tmp_path / "history.md"
    result = run_cli("history", "compare", "-summaries", pr, "-target_os", "linux", "-target_arch", "x64",
                     "-jit_ee_version", GUID, "-storage_url", recorded.account_url, "-output_md_path", out)
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line for line in out.read_text(encoding="utf-8").splitlines()
               if line.startswith(f"|linux x64|{toolchain.collection.name}|instructions|"))
    assert verdict in row, row
    if tp_factor != 1.0:
        assert "(fence ±" in row and "last 3 main runs)" in row, row
    assert ("FLAGGED" in result.stdout) == (tp_factor != 1.0)


def test_hostile_and_corrupt_records_are_skipped_with_one_line_each(recorded, toolchain, tmp_path):
    good = json.loads(recorded.service_client().get_blob_client(
        "superpmi", "history/tpdiff/linux/x64/20261101T030000Z_0000001.json").download_blob().readall())
    wrong_types = json.loads(json.dumps(good))
    wrong_types["record"]["collections"] = "x"
    hostile = json.loads(json.dumps(good))
    hostile["record"]["collections"][0]["name"] = "##vso[task.setvariable variable=X]1"
    for name, body in (("history/tpdiff/linux/x64/20261104T030000Z_0000004.json", json.dumps(wrong_types)),
                       ("history/tpdiff/linux/x64/20261105T030000Z_0000005.json", json.dumps(hostile)),
                       ("history/tpdiff/linux/x64/20261106T030000Z_0000006.json", "{" * 50 + "oops"),
                       ("history/tpdiff/linux/x64/20261107T030000Z_0000007.json", " " * (5 * 1024 * 1024)),
                       ("history/tpdiff/linux/x64/%2e%2e%2fevil.json", json.dumps(good)),
                       ("history/tpdiff/linux/x64/20261108T030000Z_0000008.json\n##vso[task.complete]x",
                        json.dumps(good))):
        recorded.upload("superpmi", name, body.encode("utf-8"), content_md5=False)
    page = tmp_path / "trend.html"
    result = run_cli("history", "show", "-summary_type", "tpdiff", "-target_os", "linux", "-target_arch", "x64",
                     "-storage_url", recorded.account_url, "-output_html_path", page)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    warnings = [line for line in output.splitlines() if line.startswith("Warning: skipped")]
    assert len(warnings) == 6, output
    assert "##vso[" not in output and "Traceback" not in output
    assert page.read_text(encoding="utf-8").count('<g class="series"') == 1
    assert not (tmp_path / "x64").exists()


def test_upload_without_a_credential_fails_in_one_line(toolchain, main_runs, tmp_path):
    result = run_cli("history", "upload", "-summaries", main_runs[0], "-target_os", "linux", "-target_arch", "x64",
                     "-storage_url", "http://127.0.0.1:9/devstoreaccount1")
    assert result.returncode == 1
    assert "AZURE_STORAGE_SAS_TOKEN" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
