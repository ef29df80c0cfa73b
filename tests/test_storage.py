"""The storage layer against a real Azurite, with faults injected by a loopback proxy."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict

import pytest
from azurite import ACCOUNT_KEY, closed_port_url

from spmi.base import redaction
from spmi.commands import shared
from spmi.storage import archives, blobs, downloads, uploads

FAST_RETRY = blobs.RetryPolicy(attempts=4, first_delay=0.05, max_delay=0.2)
REPO_ROOT = Path(__file__).resolve().parent.parent


def make_zip(entries: Dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def pattern_bytes(size: int) -> bytes:
    block = bytes(range(256)) * 4096
    return (block * (size // len(block) + 1))[:size]


# ---------------------------------------------------------------- pure parts

def test_redact_removes_keys_signatures_and_registered_secrets():
    text = ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc/def+ghi==;EndpointSuffix=x "
            "https://a.blob.core.windows.net/c/b?sv=2020&sig=ABC%2Bdef%3D&se=1 "
            "Authorization: SharedKey a:c2lnbmF0dXJl Bearer eyJ0eXAi.abc.def")
    cleaned = redaction.redact(text)
    for secret in ("abc/def+ghi==", "ABC%2Bdef%3D", "c2lnbmF0dXJl", "eyJ0eXAi"):
        assert secret not in cleaned
    assert "AccountKey=***" in cleaned and "sig=***" in cleaned and "AccountName=a" in cleaned
    redaction.register_secret("hunter2-very-secret")
    assert redaction.redact("oops hunter2-very-secret leaked") == "oops *** leaked"


def test_redaction_is_case_insensitive_also_beyond_ascii_and_leaves_plain_output_alone():
    assert redaction.redact("x?SIG=abc&y=1 AUTHORIZATION: bearer tok.en") == "x?SIG=***&y=1 AUTHORIZATION: bearer ***"
    assert redaction.redact("caf\u00e9 \u017fig=abc") == "caf\u00e9 \u017fig=***"  # long s matches s, like the re module
    output = "ISSUE: <ASM_DIFF> main method 19 of size 27 differs\n" * 2000
    assert redaction.redact(output) == output


def test_log_records_and_tracebacks_are_redacted(captured_log):
    log = logging.getLogger("superpmi")
    log.info("connecting with %s", "AccountKey=topsecretkey;")
    try:
        raise ValueError("bad sig=SECRETSIG&x")
    except ValueError:
        log.debug("failed", exc_info=True)
    text = captured_log.getvalue()
    assert "topsecretkey" not in text and "SECRETSIG" not in text
    assert "AccountKey=***" in text and "sig=***" in text


def test_account_url_resolution():
    env = {"SUPERPMI_STORAGE_URL": "http://env:1/acct/"}
    assert blobs.resolve_account_url("http://flag:2/x/", env) == "http://flag:2/x"
    assert blobs.resolve_account_url(None, env) == "http://env:1/acct"
    assert blobs.resolve_account_url(None, {}) == blobs.DEFAULT_ACCOUNT_URL
    conn = {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=a;AccountKey=k;BlobEndpoint=http://127.0.0.1:9/a;"}
    assert blobs.resolve_account_url(None, conn) == blobs.DEFAULT_ACCOUNT_URL
    assert blobs.resolve_account_url(None, conn, authenticated=True) == "http://127.0.0.1:9/a"
    assert blobs.connection_string_endpoint("UseDevelopmentStorage=true") == blobs.DEVELOPMENT_STORAGE_URL
    assert blobs.connection_string_endpoint("AccountName=acc;AccountKey=k") == "https://acc.blob.core.windows.net"
    with pytest.raises(blobs.SuiteError, match="-storage_url 'ftp://x' is not an http"):
        blobs.resolve_account_url("ftp://x", {})


def test_account_names():
    assert blobs.account_name_from_url("https://clrjit2.blob.core.windows.net") == "clrjit2"
    assert blobs.account_name_from_url("http://127.0.0.1:10000/devstoreaccount1") == "devstoreaccount1"


def test_blob_and_listing_urls_are_encoded():
    assert blobs.blob_url("c", "a b/c+d#.zip", "http://h/acct/") == "http://h/acct/c/a%20b/c%2Bd%23.zip"
    url = blobs.listing_url("http://h/a", "c", "collections/", marker="2!88!MDAw+/=", max_results=3)
    assert url == ("http://h/a/c?restype=container&comp=list&prefix=collections%2F"
                   "&marker=2%2188%21MDAw%2B%2F%3D&maxresults=3")


def test_listing_page_parsing():
    xml = (b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults ContainerName="c">'
           b"<Blobs><Blob><Name>a/b.zip</Name><Url>http://x/a/b.zip</Url></Blob>"
           b"<Blob><Name>a &amp; c</Name></Blob></Blobs><NextMarker>m1</NextMarker></EnumerationResults>")
    assert blobs.parse_listing_page(xml) == (["a/b.zip", "a & c"], "m1")
    last = b"<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>"
    assert blobs.parse_listing_page(last) == ([], None)


@pytest.mark.parametrize("name, mode, reason", [
    ("x.mch", 0o100644, None),
    ("sub/x.mch", 0, None),
    ("../x", 0o100644, "'..'"),
    ("a/../../x", 0o100644, "'..'"),
    ("/etc/x", 0o100644, "absolute"),
    ("C:\\x", 0, "absolute"),
    ("link", 0o120777, "symbolic link"),
])
def test_unsafe_zip_entries(name, mode, reason):
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    found = archives.unsafe_zip_entry_reason(info)
    assert (found is None) if reason is None else (reason in found)


def test_download_item_names():
    item = downloads.DownloadItem("http://h/a/c/x%20y.mch.zip?sv=1&sig=2", Path("."))
    assert item.name == "x y.mch.zip" and item.should_extract
    assert not downloads.DownloadItem("http://h/a/c/x.mch", Path(".")).should_extract


# ---------------------------------------------------------------- listing

def test_listing_follows_every_page(storage_account, fault_proxy):
    names = [f"collections/g/linux/x64/set {i}+a.mch.zip" for i in range(7)]
    for name in names:
        storage_account.upload("superpmi", name, b"z")
    storage_account.upload("superpmi", "other/ignored.zip", b"z")
    listed = blobs.list_blobs("superpmi", "collections/", fault_proxy.account_url, max_results=3)
    assert sorted(listed) == sorted(names)
    assert fault_proxy.count("GET", "comp=list") == 3


def test_listing_failure_names_the_url(storage_account):
    with pytest.raises(blobs.StorageError, match=r"listing http://.*/nosuchcontainer\?restype=container.*HTTP 40[34]"):
        blobs.list_blobs("nosuchcontainer", "x/", storage_account.account_url)
    closed = closed_port_url()
    with pytest.raises(blobs.StorageUnreachable, match=f"Listing failed: storage cannot be reached .*{closed}/superpmi"):
        blobs.list_blobs("superpmi", "", closed, retry=blobs.RetryPolicy(2, 0.01))


# ---------------------------------------------------------------- downloads

def test_download_and_extract(storage_account, tmp_path):
    data = b"mc" + pattern_bytes(50_000)
    url = storage_account.upload("superpmi", "collections/g/linux/x64/a.mch.zip", make_zip({"a.mch": data}))
    plain = storage_account.upload("superpmi", "builds/h/linux/x64/Checked/libclrjit.so", b"jit")
    results = downloads.download_files([downloads.DownloadItem(url, tmp_path),
                                      downloads.DownloadItem(plain, tmp_path / "jit")], retry=FAST_RETRY)
    assert results == [[tmp_path / "a.mch"], [tmp_path / "jit" / "libclrjit.so"]]
    assert (tmp_path / "a.mch").read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mch", "jit"], "no temp files left"


def test_missing_blob_required_vs_optional(storage_account, tmp_path):
    url = storage_account.blob_url("superpmi", "collections/none.mch.mct.zip")
    assert downloads.download_files([downloads.DownloadItem(url, tmp_path, optional=True)]) == [None]
    with pytest.raises(blobs.BlobNotFound, match="none.mch.mct.zip not found \\(HTTP 404\\)"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path)])
    assert list(tmp_path.iterdir()) == []


def test_server_errors_are_retried(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/a.bin", b"hello")
    fault_proxy.fail_status(500, times=2, method="GET")
    fault_proxy.fail_status(503, times=1, method="HEAD")
    url = f"{fault_proxy.account_url}/superpmi/f/a.bin"
    assert downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY) == [[tmp_path / "a.bin"]]
    assert (tmp_path / "a.bin").read_bytes() == b"hello"
    assert fault_proxy.count("GET") == 3 and fault_proxy.count("HEAD") == 2


def test_forbidden_is_final(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/a.bin", b"hello")
    fault_proxy.fail_status(403, times=5, method="HEAD")
    with pytest.raises(blobs.AccessDenied, match="HTTP 403"):
        downloads.download_files([downloads.DownloadItem(f"{fault_proxy.account_url}/superpmi/f/a.bin", tmp_path)],
                               retry=FAST_RETRY)
    assert fault_proxy.count("HEAD") == 1


def test_reset_mid_body_resumes_from_the_bytes_received(storage_account, fault_proxy, tmp_path):
    data = pattern_bytes(3_000_000)
    storage_account.upload("superpmi", "f/big.bin", data)
    fault_proxy.reset_mid_body(after=1_000_000, times=1)
    url = f"{fault_proxy.account_url}/superpmi/f/big.bin"
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "big.bin").read_bytes() == data
    first, second = fault_proxy.ranges("big.bin")
    assert first == "bytes=0-2999999"
    resumed_at = int(second.split("=")[1].split("-")[0])
    assert 0 < resumed_at <= 1_000_000


def fail_a_transfer(storage_account, fault_proxy, folder: Path, data: bytes) -> str:  # type: ignore[no-untyped-def]
    """`f/big.bin` uploaded, then its download cut mid-body and refused until the retries run out; its URL."""
    storage_account.upload("superpmi", "f/big.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/big.bin"
    fault_proxy.reset_mid_body(after=800_000, times=1)
    fault_proxy.fail_status(500, times=10, method="GET")
    with pytest.raises(blobs.DownloadError, match="run again to resume"):
        downloads.download_files([downloads.DownloadItem(url, folder)], retry=blobs.RetryPolicy(3, 0.01))
    return url


def test_interrupted_download_resumes_in_a_later_run(storage_account, fault_proxy, tmp_path, captured_log):
    data = pattern_bytes(3_000_000)
    url = fail_a_transfer(storage_account, fault_proxy, tmp_path, data)
    assert (tmp_path / "big.bin.part").is_file() and (tmp_path / "big.bin.part.json").is_file()
    assert not (tmp_path / "big.bin").exists()
    fault_proxy.clear()
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "big.bin").read_bytes() == data
    assert not (tmp_path / "big.bin.part").exists() and not (tmp_path / "big.bin.part.json").exists()
    (resumed,) = fault_proxy.ranges("big.bin")
    assert resumed != "bytes=0-2999999"
    assert "Resuming big.bin from" in captured_log.getvalue()


def test_a_kept_part_of_a_blob_that_changed_is_not_resumed(storage_account, fault_proxy, tmp_path, captured_log):
    """docs/contracts.md §12.5: a failed transfer keeps `.part` + `.part.json` (the blob's URL, ETag, length and the
    ranges that arrived) on purpose; when the blob has changed by the next run, it starts afresh and the old bytes
    never mix with the new."""
    import json
    old, new = pattern_bytes(3_000_000), bytes(reversed(pattern_bytes(3_000_000)))
    url = fail_a_transfer(storage_account, fault_proxy, tmp_path, old)
    kept = json.loads((tmp_path / "big.bin.part.json").read_text(encoding="utf-8"))
    assert kept["length"] == 3_000_000 and kept["etag"] and kept["url"].endswith("/superpmi/f/big.bin")
    assert sum(kept["done"].values()) > 0, "the ranges that arrived are recorded"
    fault_proxy.clear()
    storage_account.upload("superpmi", "f/big.bin", new)  # same name and length, another ETag
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "big.bin").read_bytes() == new
    assert fault_proxy.ranges("big.bin") == ["bytes=0-2999999"], "the whole blob again, from its first byte"
    assert "Resuming big.bin" not in captured_log.getvalue()
    assert not (tmp_path / "big.bin.part").exists() and not (tmp_path / "big.bin.part.json").exists()


def test_short_body_is_retried_then_fails_clearly(storage_account, fault_proxy, tmp_path):
    data = pattern_bytes(100_000)
    storage_account.upload("superpmi", "f/s.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/s.bin"
    fault_proxy.short_body(missing=10, times=1)
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert (tmp_path / "s.bin").read_bytes() == data
    (tmp_path / "s.bin").unlink()
    fault_proxy.short_body(missing=10, times=100)
    with pytest.raises(blobs.DownloadError, match="s.bin failed after 4 attempts"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert not (tmp_path / "s.bin").exists()


def test_wrong_md5_discards_the_download(storage_account, fault_proxy, tmp_path):
    storage_account.upload("superpmi", "f/m.bin", b"some content")
    fault_proxy.wrong_md5()
    with pytest.raises(blobs.DownloadError, match="does not match Content-MD5"):
        downloads.download_files([downloads.DownloadItem(f"{fault_proxy.account_url}/superpmi/f/m.bin", tmp_path)],
                               retry=FAST_RETRY)
    assert list(tmp_path.iterdir()) == []


def test_large_blob_comes_in_parallel_ranges(storage_account, fault_proxy, tmp_path):
    data = pattern_bytes(5 * 1024 * 1024 + 123)
    storage_account.upload("superpmi", "f/ranged.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/ranged.bin"
    downloads.download_files([downloads.DownloadItem(url, tmp_path)], chunk_size=1024 * 1024, max_workers=4)
    assert (tmp_path / "ranged.bin").read_bytes() == data
    ranges = sorted(fault_proxy.ranges("ranged.bin"), key=lambda r: int(r.split("=")[1].split("-")[0]))
    assert len(ranges) == 6
    assert ranges[0] == "bytes=0-1048575" and ranges[-1] == f"bytes={5 * 1024 * 1024}-{len(data) - 1}"


def test_ranges_finished_in_any_order_are_hashed_once_in_order(storage_account, fault_proxy, tmp_path):
    data = pattern_bytes(3 * 1024 * 1024 + 7)
    storage_account.upload("superpmi", "f/many.bin", data)
    url = f"{fault_proxy.account_url}/superpmi/f/many.bin"
    for attempt in range(3):
        target = tmp_path / str(attempt)
        downloads.download_files([downloads.DownloadItem(url, target)], chunk_size=64 * 1024, max_workers=8)
        assert (target / "many.bin").read_bytes() == data
    fault_proxy.wrong_md5()
    with pytest.raises(blobs.DownloadError, match="does not match Content-MD5"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path / "bad")], chunk_size=64 * 1024, max_workers=8,
                               retry=FAST_RETRY)
    assert list((tmp_path / "bad").iterdir()) == []


def _zip_with_raw_entry(name: str, data: bytes, mode: int = 0o100644) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo(name)
        info.external_attr = mode << 16
        archive.writestr(info, data)
    return buffer.getvalue()


@pytest.mark.parametrize("entry, mode, message", [
    ("../escape.mch", 0o100644, "has a '..' component"),
    ("/tmp/absolute-escape.mch", 0o100644, "has an absolute path"),
    ("link.mch", 0o120777, "has a symbolic link"),
])
def test_unsafe_archives_are_rejected(storage_account, tmp_path, entry, mode, message):
    target = tmp_path / "cache" / "inner"
    url = storage_account.upload("superpmi", "z/bad.mch.zip", _zip_with_raw_entry(entry, b"/etc/passwd", mode))
    with pytest.raises(archives.UnsafeArchive, match=message):
        downloads.download_files([downloads.DownloadItem(url, target)], retry=FAST_RETRY)
    assert list(target.iterdir()) == []
    assert not (tmp_path / "cache" / "escape.mch").exists()


def test_not_a_zip_is_rejected(storage_account, tmp_path):
    url = storage_account.upload("superpmi", "z/nozip.mch.zip", b"this is not a zip")
    with pytest.raises(archives.NotAZip, match="nozip.mch.zip is not a valid zip file"):
        downloads.download_files([downloads.DownloadItem(url, tmp_path)], retry=FAST_RETRY)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs RLIMIT_FSIZE (Linux)")
def test_disk_full_while_extracting_leaves_nothing_partial(storage_account, tmp_path):
    big = b"mc" + bytes(4 * 1024 * 1024)
    url = storage_account.upload("superpmi", "z/huge.mch.zip", make_zip({"huge.mch": big, "small.mch": b"mc"}))
    target = tmp_path / "out"
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        f"sys.path[:0] = [{str(REPO_ROOT)!r}]\n"
        "from spmi.storage import blobs, downloads\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))\n"
        "try:\n"
        f"    downloads.download_files([downloads.DownloadItem({url!r}, Path({str(target)!r}))])\n"
        "except blobs.DownloadError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-B", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert "extracting huge.mch.zip" in result.stdout and "free some disk space" in result.stdout
    left = sorted(p.name for p in target.iterdir())
    assert left == ["huge.mch.zip.part", "huge.mch.zip.part.json"], "the download is kept, nothing partial"
    # With space again, the next run only extracts (no new download needed).
    results = downloads.download_files([downloads.DownloadItem(url, target)])
    assert sorted(p.name for p in results[0]) == ["huge.mch", "small.mch"]
    assert (target / "huge.mch").read_bytes() == big
    assert sorted(p.name for p in target.iterdir()) == ["huge.mch", "small.mch"]


# ---------------------------------------------------------------- authenticated writing

def test_upload_with_each_credential_kind_and_replace_warning(storage_account, tmp_path, captured_log):
    path = tmp_path / "f.bin"
    path.write_bytes(b"first")
    by_key = uploads.StorageWriter(uploads.StorageCredentials(account_key=ACCOUNT_KEY), storage_account.account_url)
    url = by_key.upload_file("superpmi", "up/f.bin", path)
    assert "Warning: replacing existing blob!" not in captured_log.getvalue()
    path.write_bytes(b"second")
    by_conn = uploads.StorageWriter(uploads.StorageCredentials(connection_string=storage_account.connection_string))
    assert by_conn.upload_file("superpmi", "up/f.bin", path) == url
    assert "Warning: replacing existing blob!" in captured_log.getvalue()
    downloads.download_files([downloads.DownloadItem(url, tmp_path / "back")])
    assert (tmp_path / "back" / "f.bin").read_bytes() == b"second"
    assert blobs.head_blob(url).content_md5 is not None
    import datetime

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas
    sas = generate_container_sas("devstoreaccount1", "superpmi", account_key=ACCOUNT_KEY,
                                 permission=ContainerSasPermissions(read=True, write=True, create=True),
                                 expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    by_sas = uploads.StorageWriter(uploads.StorageCredentials(sas_token="?" + sas), storage_account.account_url)
    by_sas.upload_file("superpmi", "up/g.bin", path)
    assert blobs.blob_exists("superpmi", "up/g.bin", storage_account.account_url)
    assert ACCOUNT_KEY not in captured_log.getvalue()


def test_auth_failure_is_one_line_without_the_secret(storage_account, tmp_path, captured_log):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x")
    wrong_key = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    writer = uploads.StorageWriter(uploads.StorageCredentials(account_key=wrong_key), storage_account.account_url)
    with pytest.raises(blobs.AccessDenied) as info:
        writer.upload_file("superpmi", "up/x.bin", path)
    message = str(info.value)
    assert "\n" not in message and wrong_key not in message
    assert "authentication" in message or "refused" in message
    assert "-connection_string" in message
    wrong_sas = "sv=2021-08-06&ss=b&srt=sco&sp=rwc&se=2099-01-01&sig=Zm9vYmFyWm9vYmFyWm9vYmFy"
    writer = uploads.StorageWriter(uploads.StorageCredentials(sas_token=wrong_sas), storage_account.account_url)
    with pytest.raises(blobs.AccessDenied) as info:
        writer.upload_file("superpmi", "up/x.bin", path)
    assert "Zm9vYmFyWm9vYmFyWm9vYmFy" not in str(info.value)
    assert wrong_key not in captured_log.getvalue() and "Zm9vYmFyWm9vYmFyWm9vYmFy" not in captured_log.getvalue()


def test_writing_needs_a_credential_and_identity_needs_its_package():
    with pytest.raises(blobs.SuiteError, match="writing to storage needs a credential"):
        uploads.StorageWriter(uploads.StorageCredentials(), "http://127.0.0.1:9/a")
    try:
        import azure.identity  # noqa: F401
    except ImportError:
        with pytest.raises(blobs.SuiteError, match="pip install azure-identity"):
            uploads.StorageWriter(uploads.StorageCredentials(use_azure_cli=True), "http://127.0.0.1:9/a")


def test_credentials_from_args_and_environment():
    import argparse
    parser = argparse.ArgumentParser()
    shared.add_credential_options(parser)
    env = {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=a;AccountKey=envkeyenvkey;BlobEndpoint=http://h/a"}
    assert shared.storage_credentials(parser.parse_args([]), env).kind() == "connection string"
    creds = shared.storage_credentials(parser.parse_args(["-sas_token", "?sv=1&sig=abcdabcd"]), env)
    assert creds.kind() == "SAS token" and creds.connection_string is None and creds.sas_token == "sv=1&sig=abcdabcd"
    assert "envkeyenvkey" not in redaction.redact("x envkeyenvkey y")
