"""coredistools before any `superpmi -a` run (docs/contracts.md §2.8.6): the sample superpmi fails `-a`
without it, so asmdiffs/tpdiff/memdiff make sure it is beside superpmi — from Core_Root, copied up from
`Core_Root/R2RDump/`, or downloaded from (Azurite) storage — or stop in one line before any replay."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from azurite import closed_port_url
from e2e_support import collection

REPO = Path(__file__).resolve().parent.parent
LIB = "libcoredistools.so"
BLOB = f"libcoredistools/linux-x64/{LIB}"


@pytest.fixture
def bare_core_root(sample_toolchain: Path, tmp_path: Path) -> Path:
    """A copy of the sample Core_Root without coredistools (as one made from a product build may be)."""
    core_root = tmp_path / "Core_Root"
    shutil.copytree(sample_toolchain / "core_root", core_root, symlinks=True)
    (core_root / LIB).unlink()
    return core_root


def library_bytes(sample_toolchain: Path) -> bytes:
    return (sample_toolchain / "core_root" / LIB).read_bytes()


def jit_args(sample_toolchain: Path, command: str) -> List[str]:
    if command == "asmdiffs":
        return ["-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so")]
    return ["-base_jit_path", str(sample_toolchain / "release" / "base" / "libclrjit.so"),
            "-diff_jit_path", str(sample_toolchain / "release" / "diff" / "libclrjit.so")]


def run_command(command: str, sample_toolchain: Path, core_root: Path, spmi: Path,
                storage_url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUPERPMI_STORAGE_URL", "AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_CACHE_DIRECTORY",
                        "TF_BUILD")}
    env.update({"SPMI_SAMPLE_START_MS": "0", "SUPERPMI_STORAGE_RETRIES": "1"})
    argv = [sys.executable, str(REPO / "superpmi.py"), command, "-core_root", str(core_root), "-arch", "x64",
            "-target_os", "linux", *jit_args(sample_toolchain, command),
            "-mch_files", str(collection(sample_toolchain)), "-spmi_location", str(spmi), "-storage_url", storage_url,
            "--no_progress"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(spmi.parent), timeout=300)


def log_of(spmi: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(spmi.glob("superpmi*.log")))


def assert_no_replay_started(proc: subprocess.CompletedProcess, spmi: Path) -> None:
    text = proc.stdout + proc.stderr + log_of(spmi)
    assert "Invoking:" not in text, "no superpmi (nor pin) process was started"
    assert "Running asm diffs of" not in text and "Measuring" not in text
    assert not list(spmi.rglob("*.csv")), "no details CSV"
    assert not list(spmi.glob("*summary*")), "no summary"


def test_asmdiffs_downloads_coredistools_into_core_root(storage_account, sample_toolchain, bare_core_root, tmp_path):
    storage_account.upload("superpmi", BLOB, library_bytes(sample_toolchain))
    spmi = tmp_path / "spmi"
    proc = run_command("asmdiffs", sample_toolchain, bare_core_root, spmi, storage_account.account_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (bare_core_root / LIB).read_bytes() == library_bytes(sample_toolchain)
    assert (spmi / "diff_summary.md").is_file()
    assert f"Downloaded {storage_account.account_url}/superpmi/{BLOB} to {bare_core_root / LIB}" in log_of(spmi)
    assert not [p.name for p in bare_core_root.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_asmdiffs_copies_coredistools_up_from_r2rdump(sample_toolchain, bare_core_root, tmp_path):
    r2rdump = bare_core_root / "R2RDump"
    r2rdump.mkdir()
    (r2rdump / LIB).write_bytes(library_bytes(sample_toolchain))
    spmi = tmp_path / "spmi"
    proc = run_command("asmdiffs", sample_toolchain, bare_core_root, spmi, closed_port_url())  # storage unused
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (bare_core_root / LIB).read_bytes() == library_bytes(sample_toolchain)
    assert (r2rdump / LIB).is_file()
    assert f"Using {r2rdump / LIB} (copied to {bare_core_root / LIB})" in log_of(spmi)


@pytest.mark.parametrize("command", ["asmdiffs", "memdiff"])
def test_coredistools_nowhere_is_one_line_before_any_replay(command, storage_account, sample_toolchain,
                                                           bare_core_root, tmp_path):
    spmi = tmp_path / "spmi"
    proc = run_command(command, sample_toolchain, bare_core_root, spmi, storage_account.account_url)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    [line] = [line for line in text.splitlines() if "error" in line.lower()]
    assert f"{LIB} not found" in line
    for place in (bare_core_root / LIB, bare_core_root / "R2RDump" / LIB,
                  f"{storage_account.account_url}/superpmi/{BLOB} (not in storage)"):
        assert str(place) in line, (place, line)
    assert "pass -core_root" in line and "-storage_url" in line
    assert_no_replay_started(proc, spmi)
    assert not (bare_core_root / LIB).exists()


def test_unreachable_storage_is_named_in_the_one_line(sample_toolchain, bare_core_root, tmp_path):
    spmi = tmp_path / "spmi"
    url = closed_port_url()
    proc = run_command("asmdiffs", sample_toolchain, bare_core_root, spmi, url)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    [line] = [line for line in text.splitlines() if "error" in line.lower()]
    assert f"{LIB} not found" in line and f"{url}/superpmi/{BLOB}" in line and "refused" in line
    assert "not in storage" not in line, "a connection failure is not a missing blob"
    assert_no_replay_started(proc, spmi)


def test_superpmi_outside_core_root_gets_the_core_root_copy(tmp_path):
    from spmi.steps import coredistools
    tools, core_root = tmp_path / "product", tmp_path / "Core_Root"
    tools.mkdir()
    (core_root / "R2RDump").mkdir(parents=True)
    (core_root / LIB).write_bytes(b"core root copy")
    (core_root / "R2RDump" / LIB).write_bytes(b"r2rdump copy")
    assert coredistools.copy_sources(tools, core_root, LIB) == [core_root / LIB, core_root / "R2RDump" / LIB]
    assert coredistools.copy_sources(core_root, core_root, LIB) == [core_root / "R2RDump" / LIB]
    assert coredistools.copy_sources(tools, None, LIB) == [tools / "R2RDump" / LIB]
    installed = coredistools.ensure_coredistools(tools, core_root, "linux", "x64", closed_port_url())
    assert installed == tools / LIB and installed.read_bytes() == b"core root copy"
