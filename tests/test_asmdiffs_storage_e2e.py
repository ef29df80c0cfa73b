"""`superpmi.py asmdiffs` with no `-base_jit_path` and no `-mch_files`, end to end against Azurite.

The sample toolchain's collections are published with `superpmi.py upload` and its baseline JIT with
`jitrollingbuild.py upload` (as the merge-base's rolling build); asmdiffs then runs as a subprocess in a
real git checkout of a runtime-shaped repository with only `SUPERPMI_STORAGE_URL` pointing at Azurite.
It must find the JIT-EE GUID (§9), download the collections (§12.5) and the baseline JIT (§12.8), write
summaries naming the baseline, and run again with warm caches and unreachable storage.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict, List

import pytest
from azurite import closed_port_url
from gitrepos import GUID_FILE, git, make_runtime_repos

from sample.make_toolchain import make_toolchain

REPO = Path(__file__).resolve().parent.parent
GUID = "c0ffee00-1234-4abc-8def-0123456789ab"  # not the generator's default: nothing may fall back to it
SETS = ("libraries.pmi", "benchmarks.run")
TARGET = ["-arch", "x64", "-target_os", "linux", "-target_arch", "x64"]
JIT = "libclrjit.so"
SCRUBBED_ENV = ("SUPERPMI_STORAGE_URL", "AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_CACHE_DIRECTORY",
                "SUPERPMI_PRIVATE_STORE", "TF_BUILD")


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory):
    return make_toolchain(tmp_path_factory.mktemp("storage_e2e_toolchain"), contexts=60, seed=3,
                          targets=["linux-x64"], collections=list(SETS), guid=GUID)


def jiteeversionguid_header(guid: str) -> str:
    """`src/coreclr/inc/jiteeversionguid.h` as the runtime repository writes it (§9)."""
    value = uuid.UUID(guid)
    fields = value.fields
    tail = ", ".join(f"0x{b:02x}" for b in value.bytes[8:])
    return ("// Licensed to the .NET Foundation under one or more agreements.\n"
            "// The .NET Foundation licenses this file to you under the MIT license.\n"
            "\n"
            "#include <minipal/guid.h>\n"
            "\n"
            f"constexpr GUID JITEEVersionIdentifier = {{ /* {guid} */\n"
            f"    0x{fields[0]:08x},\n"
            f"    0x{fields[1]:04x},\n"
            f"    0x{fields[2]:04x},\n"
            f"    {{{tail}}}\n"
            "  };\n")


def child_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update({"SPMI_SAMPLE_START_MS": "0", "SUPERPMI_STORAGE_RETRIES": "1"})
    env.update(extra)
    return env


def run_script(script: str, args: List[str], cwd: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def publish(storage_account, toolchain, merge_base: str, scratch: Path) -> None:
    """Collections with `superpmi.py upload`, the baseline with `jitrollingbuild.py upload`."""
    env = child_env(AZURE_STORAGE_CONNECTION_STRING=storage_account.connection_string)
    scratch.mkdir()
    up = run_script("superpmi.py", ["upload", "-spmi_location", str(scratch / "spmi"), "-jit_ee_version", GUID,
                                    *TARGET, "--no_progress", "-mch_files", str(toolchain.collections_dir)],
                    scratch, env)
    assert up.returncode == 0, output(up)
    product = scratch / "product"
    product.mkdir()
    shutil.copyfile(toolchain.base_dir / JIT, product / JIT)
    rolling = run_script("jitrollingbuild.py", ["upload", "-git_hash", merge_base, "-product_location", str(product),
                                                "-host_os", "linux", "-arch", "x64",
                                                "-spmi_location", str(scratch / "spmi")], scratch, env)
    assert rolling.returncode == 0, output(rolling)
    service = storage_account.service_client()
    prefix = f"collections/{GUID}/linux/x64/"
    assert sorted(b.name for b in service.get_container_client("superpmi").list_blobs()) == sorted(
        f"{prefix}{s}.linux.x64.checked{ext}" for s in SETS for ext in (".mch.zip", ".mch.mct.zip"))
    assert [b.name for b in service.get_container_client("jitrollingbuild").list_blobs()] == [
        f"builds/{merge_base}/linux/x64/Checked/{JIT}"]


def asmdiffs(cwd: Path, core_root, spmi, storage_url: str, *extra: str) -> subprocess.CompletedProcess:
    args = ["asmdiffs", "-core_root", str(core_root), "-spmi_location", str(spmi), *TARGET, "--no_progress", *extra]
    return run_script("superpmi.py", args, cwd, child_env(SUPERPMI_STORAGE_URL=storage_url))


def log_text(spmi: Path, name: str) -> str:
    return (spmi / name).read_text(encoding="utf-8")


def check_downloads(toolchain, spmi: Path, merge_base: str) -> None:
    cache = spmi / "mch" / f"{GUID}.linux.x64"
    names = sorted(p.name for p in cache.iterdir() if not p.name.startswith("superpmi_download"))
    assert names == sorted(f"{s}.linux.x64.checked{ext}" for s in SETS for ext in (".mch", ".mch.mct"))
    for path in toolchain.collections["linux-x64"]:
        assert (cache / path.name).read_bytes() == path.read_bytes()
    base = spmi / "basejit" / f"{merge_base}.linux.x64.Checked" / JIT
    assert base.read_bytes() == (toolchain.base_dir / JIT).read_bytes()
    assert sorted(p.name for p in (spmi / "basejit").iterdir() if p.is_dir()) == [f"{merge_base}.linux.x64.Checked"]


def check_summary(spmi: Path, name: str, merge_base: str) -> str:
    text = log_text(spmi, name)
    verdict, rest = text.split("\n\n", 1)  # the verdict line first (docs/signal.md), then §12.10 item 1
    assert verdict.startswith("linux x64: ") and "contexts with diffs" in verdict, verdict
    assert rest.startswith("Diffs are based on ")
    assert "<summary>Overall (" in text and "<summary>Example diffs</summary>" in text
    for s in SETS:
        assert f"|{s}.linux.x64.checked.mch|" in text
    assert f"baseline: {merge_base} (1st candidate)" in text
    assert f"-base_git_hash {merge_base}" in text  # the repro command line
    assert f"basejit/{merge_base}.linux.x64.Checked/{JIT}" in text
    return text


def test_asmdiffs_finds_collections_and_baseline_in_storage(storage_account, toolchain, tmp_path):
    repos = make_runtime_repos(tmp_path / "runtime", base_touches_jit=True)
    merge_base = repos.c["m5"]  # the feature branch's merge-base with origin/main; it changes the JIT
    # The enlistment carries the collections' JIT-EE GUID in the real header format.
    (repos.work / GUID_FILE).write_text(jiteeversionguid_header(GUID), encoding="utf-8")
    git(repos.work, "add", GUID_FILE)
    git(repos.work, "commit", "-q", "-m", "JIT-EE GUID")
    publish(storage_account, toolchain, merge_base, tmp_path / "publish")
    # Decoys: newer main (m6) and an older JIT change (m3) have builds too; the diff JIT as base means no diffs.
    for decoy in (repos.c["m6"], repos.c["m3"]):
        storage_account.upload("jitrollingbuild", f"builds/{decoy}/linux/x64/Checked/{JIT}",
                               toolchain.core_root / JIT)

    spmi = tmp_path / "spmi"
    first = asmdiffs(repos.work, toolchain.core_root, spmi, storage_account.account_url)
    assert first.returncode == 0, output(first)
    log = log_text(spmi, "superpmi.log")
    assert f"Baseline hash: {merge_base}" in first.stdout
    assert f"JIT-EE version {GUID} from {repos.work / GUID_FILE}" in log
    assert "no JIT-EE GUID found" not in log and "printJITEEVersion" not in log
    assert "Downloading 4 of 4 collection files" in first.stdout
    assert "Asm diffs in 2 MCH files:" in first.stdout
    check_downloads(toolchain, spmi, merge_base)
    long_text = check_summary(spmi, "diff_summary.md", merge_base)
    short_verdict, short_rest = log_text(spmi, "diff_short_summary.md").split("\n\n", 1)
    assert long_text.startswith(short_verdict + "\n\n") and short_rest.startswith("Diffs are based on ")

    # Warm caches: the storage URL now points at a closed port and nothing needs the network.
    second = asmdiffs(repos.work, toolchain.core_root, spmi, closed_port_url())
    assert second.returncode == 0, output(second)
    assert "Using cached baseline JIT" in second.stdout and "Trying baseline" not in second.stdout
    assert "--force_download not set; skipping download" in second.stdout
    assert "Download:" not in log_text(spmi, "superpmi.1.log")
    assert "Asm diffs in 2 MCH files:" in second.stdout
    check_summary(spmi, "diff_summary.1.md", merge_base)
    assert (spmi / "diff_short_summary.1.md").is_file()
    assert log_text(spmi, "diff_summary.md") == long_text  # the first run's summary is untouched
    assert sorted(p.name for p in spmi.glob("asm.*")) == sorted(
        f"asm.{s}.linux.x64.checked{n}" for s in SETS for n in ("", ".1"))


def test_guid_from_mcs_flag_url_and_relative_paths(storage_account, toolchain, tmp_path):
    """The checkout's header has no GUID (warning, then `mcs -printJITEEVersion`); asmdiffs runs from a
    directory inside the checkout with relative -core_root/-spmi_location, and `-storage_url` wins over
    a `SUPERPMI_STORAGE_URL` that points at a closed port."""
    repos = make_runtime_repos(tmp_path / "runtime", base_touches_jit=True)
    merge_base = repos.c["m5"]
    header = repos.work / GUID_FILE
    assert header.is_file() and "JITEEVersionIdentifier" not in header.read_text()
    publish(storage_account, toolchain, merge_base, tmp_path / "publish")
    subdir = repos.work / "src" / "coreclr"
    spmi = tmp_path / "spmi"
    result = asmdiffs(subdir, os.path.relpath(toolchain.core_root, subdir), os.path.relpath(spmi, subdir),
                      closed_port_url(), "-storage_url", storage_account.account_url)
    assert result.returncode == 0, output(result)
    assert f"Warning: no JIT-EE GUID found in {header}" in result.stdout
    assert f"{toolchain.core_root / 'mcs'} -printJITEEVersion" in log_text(spmi, "superpmi.log")
    check_downloads(toolchain, spmi, merge_base)
    check_summary(spmi, "diff_summary.md", merge_base)
    assert f"-core_root {toolchain.core_root} " in log_text(spmi, "diff_summary.md")  # absolute in the repro line
