"""Disk full names the file that could not be written; a corrupted body is downloaded once
more within the run (Azurite behind the loopback fault proxy)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spmi.storage import blobs, downloads

REPO = Path(__file__).resolve().parent.parent
FAST_RETRY = blobs.RetryPolicy(attempts=4, first_delay=0.05, max_delay=0.2)
LIMIT = 1024 * 1024

needs_fsize_limit = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                                       reason="needs RLIMIT_FSIZE (Linux)")


def run_limited(body: str, cwd: Path, limit: int = LIMIT) -> subprocess.CompletedProcess:
    """`body` in a fresh Python whose files may not grow beyond `limit` (writes fail with EFBIG)."""
    script = ("import resource, signal, sys\n"
              f"sys.path[:0] = [{str(REPO)!r}]\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n" + body)
    return subprocess.run([sys.executable, "-B", "-c", script], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_corrupted_body_is_downloaded_again_once(storage_account, fault_proxy, tmp_path, captured_log) -> None:
    data = bytes(range(256)) * 4096
    storage_account.upload("superpmi", "f/body.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/body.bin"
    fault_proxy.corrupt_body(times=1, path_contains="body.bin")
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "body.bin").read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["body.bin"]
    assert fault_proxy.count("GET", "body.bin") == 2
    assert "body.bin: MD5" in captured_log.getvalue() and "downloading it again" in captured_log.getvalue()


def test_body_corrupted_twice_fails_and_leaves_nothing(storage_account, fault_proxy, tmp_path) -> None:
    data = b"collection bytes " * 1000
    storage_account.upload("superpmi", "f/twice.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/twice.bin"
    fault_proxy.corrupt_body(times=2, path_contains="twice.bin")
    with pytest.raises(blobs.DownloadError, match="does not match Content-MD5.*discarded after 2 attempts"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path)], chunk_size=4096, retry=FAST_RETRY)
    assert list(tmp_path.iterdir()) == []


@needs_fsize_limit
def test_disk_full_while_downloading_names_the_file(storage_account, tmp_path) -> None:
    url = storage_account.upload("superpmi", "f/big.bin", bytes(3 * LIMIT))
    target = tmp_path / "out"
    proc = run_limited("from pathlib import Path\n"
                       "from spmi.storage import blobs, downloads\n"
                       "try:\n"
                       f"    downloads.download_files([downloads.DownloadItem({url!r}, Path({str(target)!r}))])\n"
                       "except blobs.DownloadError as exc:\n"
                       "    print(exc); sys.exit(3)\n", tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert f"cannot write {target / 'big.bin.part'}: File too large; free some disk space" in proc.stdout


@needs_fsize_limit
def test_disk_full_while_writing_a_summary_names_the_file(tmp_path) -> None:
    """The summarize script, as a process: its overall summary cannot be written."""
    (tmp_path / "superpmi_tpdiff_summary_linux_x64.md").write_text("tp numbers\n" * 10000)
    proc = run_limited("import superpmi_asmdiffs_summarize\n"
                       "sys.exit(superpmi_asmdiffs_summarize.main(['-diff_summary_dir', "
                       f"{str(tmp_path)!r}, '-arch', 'x64', '-platform', 'linux', '-type', 'tpdiff']))\n", tmp_path,
                       limit=64 * 1024)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("superpmi_asmdiffs_summarize.py: error: File too large (")
    assert str(tmp_path / "2_overall_tpdiff_summary_linux_x64.md") in lines[0]
    assert not list(tmp_path.glob(".2_overall*")), "no temporary file is left"


@needs_fsize_limit
def test_disk_full_while_writing_dasm_names_the_file(tmp_path) -> None:
    """Listings (.dasm) go through the same atomic write: the error names the listing."""
    listing = tmp_path / "asm" / "base" / "12.dasm"
    proc = run_limited("from pathlib import Path\n"
                       "from spmi.base import fsutil\n"
                       "try:\n"
                       f"    fsutil.atomic_write_bytes(Path({str(listing)!r}), b'; listing' * {LIMIT})\n"
                       "except OSError as exc:\n"
                       "    print(exc.filename, exc.strerror); sys.exit(3)\n", tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == f"{listing} File too large"
    assert list(listing.parent.iterdir()) == []


@needs_fsize_limit
def test_disk_full_while_logging_is_one_line_naming_the_log_file(sample_toolchain: Path, tmp_path: Path) -> None:
    """`-spmi_location` on a full disk: the log file handler says so once, without a traceback."""
    spmi_location = tmp_path / "spmi"
    collections = sample_toolchain / "collections"
    argv = ["replay", "-core_root", str(sample_toolchain / "core_root"), "-target_os", "linux", "-target_arch", "x64",
            "-arch", "x64", "-spmi_location", str(spmi_location), "-mch_files", str(collections), "--sequential"]
    proc = run_limited("import runpy\n"
                       f"sys.argv = ['superpmi.py'] + {argv!r}\n"
                       f"runpy.run_path({str(REPO / 'superpmi.py')!r}, run_name='__main__')\n", tmp_path, limit=4096)
    output = proc.stdout + proc.stderr
    assert "Logging error" not in output and "Traceback" not in output, proc.stderr[:3000]
    log_file = spmi_location / "superpmi.log"
    lines = [line for line in proc.stderr.splitlines() if str(log_file) in line]
    assert lines == [f"warning: cannot write the log file {log_file} (File too large); nothing more is written to it"]
    assert "Replay summary:" in proc.stdout, "the console goes on"
    assert log_file.stat().st_size <= 4096
