"""Storage inputs a hostile or broken server controls (docs/contracts.md §12.21): endless
listings, names that clash or leave their folder, trickling bodies and signals, archive
bombs and clashes, redirects, and storage that cannot be reached beside a private store.
Azurite behind the loopback fault proxy; `superpmi.py` as a real subprocess where it matters."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from azurite import closed_port_url
from test_mch_sources import GUID, make_settings, make_zip, mc_record, parse, upload_collection, write_mch

from spmi.base import config
from spmi.base.errors import SuiteError
from spmi.commands import rollingbuild
from spmi.sources import mch_sources
from spmi.storage import archives, blobs, downloads

REPO_ROOT = Path(__file__).resolve().parent.parent
FAST_RETRY = blobs.RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.05)
TARGET = ["-target_os", "linux", "-target_arch", "x64", "-mch_arch", "x64"]
PREFIX = f"collections/{GUID}/linux/x64/"


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setenv("SUPERPMI_STORAGE_RETRIES", "1")


def suite_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_STORAGE_URL", "SUPERPMI_PRIVATE_STORE")}
    env["SUPERPMI_STORAGE_RETRIES"] = "1"
    env.update(extra)
    return env


def download_argv(spmi: Path, storage_url: str, *extra: str) -> List[str]:
    return [sys.executable, str(REPO_ROOT / "superpmi.py"), "download", "-spmi_location", str(spmi),
            "-jit_ee_version", GUID, "--no_progress", *TARGET, "-storage_url", storage_url, *extra]


def error_lines(proc: subprocess.CompletedProcess) -> List[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if "error:" in line.lower()]


# ---------------------------------------------------------------- endless listings

def test_a_listing_that_repeats_its_marker_stops_with_one_line(storage_account, fault_proxy, tmp_path):
    fault_proxy.fake_listing([PREFIX + "a.mch.zip"], marker="again")
    with pytest.raises(blobs.StorageError, match="never ends: page 2 gives the marker 'again' a second time"):
        blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url)
    assert fault_proxy.count("GET", "comp=list") == 2
    proc = subprocess.run(download_argv(tmp_path / "spmi", fault_proxy.account_url), capture_output=True,
                          text=True, env=suite_env(), timeout=60)
    assert proc.returncode == 1
    (line,) = error_lines(proc)
    assert "never ends" in line and "Traceback" not in proc.stderr


def test_a_listing_with_ever_new_markers_stops_at_the_page_limit(storage_account, fault_proxy):
    assert blobs.MAX_LISTING_PAGES == 1000
    fault_proxy.fake_listing([PREFIX + "a.mch.zip"], marker=None)
    with pytest.raises(blobs.StorageError, match="did not end within 25 pages"):
        blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url, max_pages=25)
    assert fault_proxy.count("GET", "comp=list") == 25


def test_a_normal_listing_of_several_pages_still_ends(storage_account, fault_proxy):
    for i in range(5):
        storage_account.upload("superpmi", f"{PREFIX}set{i}.mch.zip", b"z")
    assert len(blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url, max_results=2,
                                max_pages=3)) == 5


def test_a_trickling_listing_page_has_a_deadline(storage_account, fault_proxy):
    storage_account.upload("superpmi", PREFIX + "a.mch.zip", b"z")
    fault_proxy.trickle(interval=0.05, path_contains="comp=list")
    started = time.monotonic()
    with pytest.raises(blobs.StorageError, match=r"Listing failed after 2 attempts \(the body took longer than 1 s\)"):
        blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url, retry=FAST_RETRY, page_deadline=1.0)
    assert time.monotonic() - started < 10
    assert blobs.SMALL_BODY_DEADLINE == 120.0


# ---------------------------------------------------------------- two blobs, one local file

def test_two_blobs_for_one_cache_file_are_refused_and_the_cache_never_complete(storage_account, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "x.mch", with_toc=False)
    upload_collection(storage_account, GUID, "linux/x64/sub", "x.mch", with_toc=False)
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    cache = settings.spmi_location / "mch" / f"{GUID}.linux.x64"
    for _ in range(2):  # a rerun refuses again: nothing was recorded complete
        with pytest.raises(SuiteError) as error:
            mch_sources.resolve_collections(args, settings)
        message = str(error.value)
        assert "two blobs for one cache file 'x.mch'" in message and "\n" not in message
        assert f"{PREFIX}x.mch.zip" in message and f"{PREFIX}sub/x.mch.zip" in message
        assert not (cache / mch_sources.MANIFEST_NAME).exists() and not (cache / "x.mch").exists()


def test_a_plain_blob_and_its_zip_for_one_file_are_refused(storage_account, tmp_path):
    storage_account.upload("superpmi", PREFIX + "y.mch", mc_record())
    upload_collection(storage_account, GUID, "linux/x64", "Y.mch", with_toc=False)
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    with pytest.raises(SuiteError, match="two blobs for one cache file"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))


def test_download_items_for_one_file_are_refused_before_any_request(storage_account, fault_proxy, tmp_path):
    first = f"{fault_proxy.account_url}/superpmi/a/x.bin"
    second = f"{fault_proxy.account_url}/superpmi/b/X.bin"
    with pytest.raises(blobs.DownloadError, match="would both be saved as"):
        downloads.download_files([downloads.DownloadItem(first, tmp_path), downloads.DownloadItem(second, tmp_path)])
    assert fault_proxy.requests == []


# ---------------------------------------------------------------- slow bodies and signals

def test_a_trickling_body_is_cut_by_the_slow_body_rule(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/slow.bin", b"s" * 4000)
    fault_proxy.trickle(interval=0.05, path_contains="slow.bin")
    rule = downloads.SlowBodyRule(window_seconds=1.0, min_bytes_per_second=200)
    started = time.monotonic()
    with pytest.raises(blobs.DownloadError, match=r"slow.bin failed after 2 attempts \(body slower than the minimum"):
        downloads.download_files([downloads.DownloadItem(f"{fault_proxy.account_url}/superpmi/f/slow.bin", tmp_path)],
                                 retry=FAST_RETRY, slow_body=rule)
    assert time.monotonic() - started < 10
    assert not (tmp_path / "slow.bin").exists()
    assert downloads.DEFAULT_SLOW_BODY_RULE == downloads.SlowBodyRule(60.0, 1024.0)


def _process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals")
@pytest.mark.parametrize("signal_number, exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_download_in_a_slow_body_at_once(storage_account, fault_proxy, tmp_path,
                                                          signal_number, exit_code):
    upload_collection(storage_account, GUID, "linux/x64", "slow.mch", records=2000, with_toc=False)
    fault_proxy.trickle(interval=0.5, path_contains="slow.mch.zip")
    spmi = tmp_path / "spmi"
    cache = spmi / "mch" / f"{GUID}.linux.x64"
    proc = subprocess.Popen(download_argv(spmi, fault_proxy.account_url), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=suite_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (cache / "slow.mch.zip.part").exists() or fault_proxy.count("GET", "slow.mch.zip") == 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.05)
        time.sleep(1.0)  # a few bytes into the body
        sent = time.monotonic()
        proc.send_signal(signal_number)
        output, _ = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == exit_code, output
    assert took < 3, f"took {took:.1f} s to stop"
    assert not _process_group_alive(proc.pid), "a child process survived"
    assert sorted(p.name for p in cache.iterdir()) == [], "no .part, no manifest"
    assert "Traceback" not in output and "interrupted" in output


# ---------------------------------------------------------------- archives

def _zip_entries(entries: List[tuple]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name), data)
    return buffer.getvalue()


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("entries, message", [
    ([("a.mch", b"mc1"), ("a.mch", b"mc2")], "entry 'a.mch' appears twice"),
    ([("A.mch", b"mc1"), ("a.MCH", b"mc2")], "appears twice"),
    ([("a", b"file"), ("a/b", b"inside")], "entry 'a' is a file and also the folder of 'a/b'"),
    ([("a/b", b"inside"), ("a", b"file")], "entry 'a' is a file and also the folder of 'a/b'"),
])
def test_clashing_zip_entries_are_named(tmp_path, entries, message):
    archive = tmp_path / "x.zip"
    archive.write_bytes(_zip_entries(entries))
    with pytest.raises(archives.UnsafeArchive, match=message) as error:
        archives.extract_zip(archive, tmp_path / "out")
    assert "disk space" not in str(error.value)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_an_extraction_asked_to_stop_leaves_nothing(tmp_path):
    import threading
    archive = tmp_path / "big.zip"
    archive.write_bytes(make_zip({"big.mch": os.urandom(3 * 1024 * 1024)}))
    stop = threading.Event()
    stop.set()
    with pytest.raises(archives.ExtractionStopped):
        archives.extract_zip(archive, tmp_path / "out", stop=stop)
    assert list((tmp_path / "out").iterdir()) == []


def _zip_bomb(path: Path, name: str, size: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open(name, "w", force_zip64=True) as entry:
            block = b"\0" * (1024 * 1024)
            for _ in range(size // len(block)):
                entry.write(block)


def test_a_zip_bomb_download_is_refused_and_the_cache_left_incomplete(storage_account, tmp_path):
    bomb = tmp_path / "bomb.mch.zip"
    _zip_bomb(bomb, "bomb.mch", 300 * 1024 * 1024)
    assert bomb.stat().st_size < 400 * 1024
    storage_account.upload("superpmi", PREFIX + "bomb.mch.zip", bomb)
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    with pytest.raises(archives.UnsafeArchive, match="entry 'bomb.mch' unpacks .* an archive bomb"):
        mch_sources.resolve_collections(args, settings)
    cache = settings.spmi_location / "mch" / f"{GUID}.linux.x64"
    assert sorted(p.name for p in cache.iterdir()) == []


def test_archive_size_limits_cover_the_total_and_tar(tmp_path):
    archive = tmp_path / "two.zip"
    archive.write_bytes(make_zip({"a.bin": os.urandom(3000), "b.bin": os.urandom(3000)}))
    with pytest.raises(archives.UnsafeArchive, match="would unpack to 6,000 bytes, more than the limit of 5,000"):
        archives.extract_zip(archive, tmp_path / "out", limits=archives.SizeLimits(max_total_bytes=5000))
    tar_path = tmp_path / "z.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 4 * 1024 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    with pytest.raises(archives.UnsafeArchive, match="unpacks .* an archive bomb"):
        archives.extract_tar(tar_path, tmp_path / "t", limits=archives.SizeLimits(ratio_floor_bytes=1024 * 1024))
    assert not (tmp_path / "t" / "zeros.bin").exists()


def test_a_downloaded_collection_that_is_not_one_never_counts_as_cached(storage_account, tmp_path):
    storage_account.upload("superpmi", PREFIX + "junk.mch.zip", make_zip({"junk.mch": b"not a collection"}))
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    cache = settings.spmi_location / "mch" / f"{GUID}.linux.x64"
    for _ in range(2):
        with pytest.raises(SuiteError, match="collection 'junk.mch' downloaded from .* is not a method-context "
                                             "file .*; it was removed and the cache left incomplete"):
            mch_sources.resolve_collections(args, settings)
        assert sorted(p.name for p in cache.iterdir()) == []


def test_jitutil_extract_of_a_truncated_tar_gz_is_one_line_without_a_log_file(tmp_path):
    whole = tmp_path / "whole.tar.gz"
    with tarfile.open(whole, "w:gz") as tar:
        for i in range(3):
            data = os.urandom(200_000)
            info = tarfile.TarInfo(f"dir/f{i}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(whole.read_bytes()[:300_000])
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "jitutil.py"), "extract", str(truncated),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cut.tar.gz is damaged or truncated" in lines[0], proc.stderr
    assert "log file" not in proc.stderr and "unexpected" not in proc.stderr


# ---------------------------------------------------------------- redirects

def test_a_redirect_to_another_host_is_refused_naming_both(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/r.bin", b"data")
    url = f"{fault_proxy.account_url}/superpmi/f/r.bin"
    fault_proxy.redirect(f"http://localhost:{fault_proxy.port}{{path}}", path_contains="r.bin")
    with pytest.raises(blobs.StorageError, match=r"r.bin redirects to http://localhost:\d+/.*another host; refusing"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("location, message", [
    ("{path}", "redirects more than 10 times \\(a redirect loop\\)"),
    ("file:///etc/passwd", "redirects to file:///etc/passwd: a file URL is not storage"),
])
def test_redirect_loops_and_file_urls_get_their_own_line(storage_account, fault_proxy, tmp_path, location, message):
    fault_proxy.redirect(location)
    with pytest.raises(blobs.StorageError, match=message) as error:
        blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url, retry=FAST_RETRY)
    assert "free space" not in str(error.value)
    with pytest.raises(blobs.StorageError, match=message):
        downloads.download_files([downloads.DownloadItem(f"{fault_proxy.account_url}/superpmi/x.bin", tmp_path)],
                                 retry=FAST_RETRY)


def test_a_redirect_on_the_same_host_is_followed(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/real.bin", b"real data")
    fault_proxy.redirect("/devstoreaccount1/superpmi/f/real.bin", path_contains="moved.bin")
    url = f"{fault_proxy.account_url}/superpmi/f/moved.bin"
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "moved.bin").read_bytes() == b"real data"


# ---------------------------------------------------------------- listing names

def test_a_listing_name_with_dot_dot_is_refused_before_any_request(storage_account, fault_proxy, tmp_path):
    fault_proxy.fake_listing([PREFIX + "../../evil.mch.zip"], marker="")
    args = parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url])
    with pytest.raises(blobs.StorageError, match=r"refusing blob name '.*/\.\./\.\./evil.mch.zip' .* '\.\.' component"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [method for method, *_ in fault_proxy.requests] == ["GET"]  # the listing only


@pytest.mark.parametrize("value", ["nul", "con", "COM1", "con.txt", "aux"])
def test_device_names_are_not_jit_ee_versions(value):
    with pytest.raises(SuiteError, match="not a JIT-EE version GUID: it has a device name"):
        config.checked_jit_ee_version(value)


@pytest.mark.parametrize("rest", ["con/x.so", "nul", "sub/COM1.so", "a:b.so", "./x.so"])
def test_rolling_build_blob_names_get_the_one_confinement_check(rest):
    prefix = "builds/h/linux/x64/Checked"
    with pytest.raises(SuiteError, match="refusing to download blob"):
        rollingbuild.relative_blob_path(f"{prefix}/{rest}", prefix)


def test_a_blob_name_with_a_newline_is_logged_on_one_line(storage_account, fault_proxy, tmp_path, captured_log):
    storage_account.upload("superpmi", "f/line\n::warning::x.bin", b"data")
    url = f"{fault_proxy.account_url}/superpmi/f/line%0A::warning::x.bin"
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    lines = captured_log.getvalue().splitlines()
    assert any(line.startswith("Download: ") and line.endswith("line ::warning::x.bin") for line in lines), lines
    assert not any(line.startswith("::") for line in lines)
    with pytest.raises(blobs.BlobNotFound) as error:
        downloads.download_files([downloads.DownloadItem(url + "missing", tmp_path)], retry=FAST_RETRY)
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------- storage unreachable beside a private store

def test_unreachable_storage_is_a_warning_with_a_private_store(tmp_path, fast_retries, captured_log):
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    closed = closed_port_url()
    args = parse(["-jit_ee_version", GUID, "-storage_url", closed, "-private_store", str(store)])
    found = mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [p.name for p in found] == ["private.mch"]
    warning = [line for line in captured_log.getvalue().splitlines() if "cannot be reached" in line]
    assert len(warning) == 1 and "Connection refused" in warning[0] and warning[0].startswith("Warning: ")


def test_unreachable_storage_with_a_private_store_and_a_complete_cache(storage_account, tmp_path, fast_retries):
    upload_collection(storage_account, GUID, "linux/x64", "cached.mch")
    settings = make_settings(tmp_path / "spmi")
    online = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    mch_sources.resolve_collections(online, settings)
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    proc = subprocess.run(download_argv(settings.spmi_location, closed_port_url(), "-private_store", str(store)),
                          capture_output=True, text=True, env=suite_env(), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cached.mch" in proc.stdout and "private.mch" in proc.stdout


@pytest.mark.parametrize("store_kind", ["none", "empty"])
def test_unreachable_storage_without_a_local_source_stays_an_error(tmp_path, store_kind):
    spmi = tmp_path / "spmi"
    extra: List[str] = []
    if store_kind == "empty":
        (tmp_path / "store" / GUID / "linux" / "x64").mkdir(parents=True)
        extra = ["-private_store", str(tmp_path / "store")]
    proc = subprocess.run(download_argv(spmi, closed_port_url(), *extra), capture_output=True, text=True,
                          env=suite_env(), timeout=60)
    assert proc.returncode == 1
    (line,) = error_lines(proc)
    assert "storage cannot be reached" in line and "Connection refused" in line


def test_http_errors_from_a_listing_are_not_unreachable(storage_account, fault_proxy, tmp_path, fast_retries):
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    fault_proxy.fail_status(503, times=100)
    args = parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url, "-private_store", str(store)])
    with pytest.raises(blobs.StorageError, match="HTTP 503") as error:
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert not isinstance(error.value, blobs.StorageUnreachable)




# ---------------------------------------------------------------- offline: no connection at all is final at once

def unresolvable_url() -> str:
    """An account URL whose host can never resolve (`.invalid` is reserved, RFC 2606)."""
    return "http://superpmi-storage.invalid/account"


@pytest.mark.parametrize("url_kind", ["refused", "unresolvable"])
def test_storage_that_cannot_be_reached_is_not_retried(monkeypatch, url_kind):
    monkeypatch.delenv("SUPERPMI_STORAGE_RETRIES", raising=False)
    sleeps: List[float] = []
    monkeypatch.setattr(blobs.time, "sleep", sleeps.append)
    url = closed_port_url() if url_kind == "refused" else unresolvable_url()
    with pytest.raises(blobs.StorageUnreachable, match="storage cannot be reached") as error:
        blobs.list_blobs("superpmi", "collections/", url)
    assert sleeps == [] and "attempts" not in str(error.value)


def test_an_answer_that_fails_keeps_its_retries(storage_account, fault_proxy, monkeypatch):
    monkeypatch.delenv("SUPERPMI_STORAGE_RETRIES", raising=False)
    monkeypatch.setattr(blobs.time, "sleep", lambda seconds: None)
    fault_proxy.fail_status(503, times=100)
    with pytest.raises(blobs.StorageError, match="failed after 5 attempts .HTTP 503") as error:
        blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url)
    assert not isinstance(error.value, blobs.StorageUnreachable)
    assert fault_proxy.count("GET", "comp=list") == 5


def test_the_exception_chain_decides_what_never_connected(tmp_path):
    import requests
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get(closed_port_url(), timeout=5)
    assert blobs.never_connected(refused.value)
    assert not blobs.never_connected(requests.exceptions.ChunkedEncodingError("Connection broken: reset"))
    assert not blobs.never_connected(requests.ConnectTimeout("connect timed out"))
    assert not blobs.never_connected(ConnectionResetError(104, "Connection reset by peer"))


@pytest.mark.parametrize("url_kind", ["refused", "unresolvable"])
def test_offline_download_beside_a_private_store_goes_on_without_retrying(tmp_path, url_kind):
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    spmi = tmp_path / "spmi"
    url = closed_port_url() if url_kind == "refused" else unresolvable_url()
    env = suite_env()
    env.pop("SUPERPMI_STORAGE_RETRIES")
    proc = subprocess.run(download_argv(spmi, url, "-private_store", str(store), "-v"), capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "private.mch" in proc.stdout and "going on with the private stores only" in proc.stdout
    assert "retrying" not in proc.stdout + proc.stderr
