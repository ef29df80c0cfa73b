"""Setup for tpdiff: the PIN package goes into the payload, copied from -pin_directory or
downloaded once on the build agent (Azurite stands in for the storage account)."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from spmi.base import platforms
from spmi.pipeline import common as pipeline
from spmi.tools import pintools

REPO = Path(__file__).resolve().parent.parent
HOST_OS = "windows" if sys.platform.startswith("win") else ("osx" if sys.platform == "darwin" else "linux")
PIN, PINTOOL = pipeline.pin_files(HOST_OS, "x86")


def release_product(root: Path) -> Path:
    """Tools and release JITs (tpdiff needs no checked ones); also used as the baseline."""
    product = root / "product"
    product.mkdir()
    for tool in ("superpmi", "mcs"):
        (product / platforms.exe_name(tool, HOST_OS)).write_text("tool")
    (product / platforms.coredistools_file_name(HOST_OS)).write_text("disassembler library")
    for name in pipeline.required_jit_names(HOST_OS, "x86"):
        (product / name).write_text("release jit")
    return product


def package_archive() -> bytes:
    """`pintools/1.0/<host_os>.zip|.tar.gz` as stored: paths relative to the package root."""
    members = {PIN.split("/", 1)[1]: b"pin", PINTOOL.split("/", 1)[1]: b"pintool"}
    buffer = io.BytesIO()
    if HOST_OS == "windows":
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o755
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def run_setup(root: Path, storage_url: str, *extra: str) -> subprocess.CompletedProcess:
    product = release_product(root)
    env = {k: v for k, v in os.environ.items() if k != "SUPERPMI_STORAGE_URL"}
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_setup.py"), "-product_directory", str(product),
            "-release_product_directory", str(product), "-release_base_jit_directory", str(product),
            "-host_arch", "x86", "-host_os", HOST_OS, "-payload_directory", str(root / "payload"),
            "-storage_url", storage_url, "-type", "tpdiff", *extra]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_pin_is_downloaded_into_the_payload(tmp_path: Path, storage_account) -> None:
    storage_account.upload(pintools.CONTAINER, pintools.archive_blob_name(HOST_OS), package_archive())
    proc = run_setup(tmp_path, storage_account.account_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = tmp_path / "payload"
    assert (payload / PIN).read_bytes() == b"pin" and (payload / PINTOOL).read_bytes() == b"pintool"
    assert sorted(p.name for p in (payload / pipeline.PIN_DIR).iterdir()) == sorted(
        [Path(PIN).name, Path(PINTOOL).parent.name])  # nothing else (no lock or scratch files)
    assert "Downloaded the PIN package" in proc.stdout + proc.stderr


def test_no_pin_anywhere_is_a_one_line_error(tmp_path: Path, storage_account) -> None:
    proc = run_setup(tmp_path, storage_account.account_url)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "pin not found: no PIN package at" in proc.stderr


def test_pin_directory_without_the_hosts_pintool_is_named(tmp_path: Path) -> None:
    package = tmp_path / "pinpackage"
    (package / Path(PIN).name).parent.mkdir(parents=True)
    (package / Path(PIN).name).write_text("pin")
    proc = run_setup(tmp_path, "http://127.0.0.1:9/devstoreaccount1", "-pin_directory", str(package))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert f"{PINTOOL} (x86 pintool; needed by win-x86, linux-arm)" in proc.stderr
