"""Setup without -base_jit_directory: baseline JITs via git + `jitrollingbuild.py download` (Azurite)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gitrepos import make_runtime_repos

from spmi.base import platforms
from spmi.pipeline import common as pipeline
from spmi.sources import baseline

REPO = Path(__file__).resolve().parent.parent
HOST_OS = "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")


def product_directory(root: Path) -> Path:
    product = root / "product"
    product.mkdir()
    for tool in ("superpmi", "mcs"):
        (product / (tool + ".exe" if HOST_OS == "windows" else tool)).write_text("tool")
    (product / platforms.coredistools_file_name(HOST_OS)).write_text("disassembler library")
    for name in pipeline.required_jit_names(HOST_OS, "x86"):
        (product / name).write_text("diff jit")
    return product


def run_setup(cwd: Path, product: Path, payload: Path, storage_url: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(cwd.parent))
    env.pop("SUPERPMI_STORAGE_URL", None)
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory", str(product),
            "-host_arch", "x86", "-payload_directory", str(payload), "-storage_url", storage_url, *extra]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_baseline_is_the_newest_built_jit_change(tmp_path: Path, storage_account) -> None:
    repos = make_runtime_repos(tmp_path / "runtime")
    # Candidates from the merge-base m5: m4 (GUID change, no build), m3 (JIT change, built), m1.
    for name in pipeline.required_jit_names(HOST_OS, "x86"):
        blob = baseline.build_blob_name(repos.c["m3"], HOST_OS, "x86", "Checked", name)
        storage_account.upload("jitrollingbuild", blob, b"base jit " + name.encode())
    product = product_directory(tmp_path)
    payload = tmp_path / "payload"
    proc = run_setup(repos.work, product, payload, storage_account.account_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in pipeline.required_jit_names(HOST_OS, "x86"):
        assert (payload / "base" / "checked" / name).read_bytes() == b"base jit " + name.encode()
    info = json.loads((payload / "base" / "baseline.json").read_text())
    assert info["hashes"] == {"checked": repos.c["m3"]}
    assert "not built with the first git hash" in proc.stdout


def test_no_built_baseline_is_a_one_line_error(tmp_path: Path, storage_account) -> None:
    repos = make_runtime_repos(tmp_path / "runtime")
    proc = run_setup(repos.work, product_directory(tmp_path), tmp_path / "payload", storage_account.account_url)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "No baseline JIT found" in proc.stderr
    assert repos.c["m4"] in proc.stderr and repos.c["m3"] in proc.stderr


def test_baseline_of_an_older_revision_is_that_revisions_baseline(tmp_path: Path, storage_account) -> None:
    """A scheduled main run compares this build with the previous one: -baseline_of HEAD~1."""
    repos = make_runtime_repos(tmp_path / "runtime")
    for commit in ("m1", "m3"):
        for name in pipeline.required_jit_names(HOST_OS, "x86"):
            blob = baseline.build_blob_name(repos.c[commit], HOST_OS, "x86", "Checked", name)
            storage_account.upload("jitrollingbuild", blob, f"{commit} jit".encode())
    payload = tmp_path / "payload"
    proc = run_setup(repos.work, product_directory(tmp_path), payload, storage_account.account_url,
                     "-baseline_of", repos.c["m2"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = json.loads((payload / "base" / "baseline.json").read_text())
    assert info["hashes"] == {"checked": repos.c["m1"]}
