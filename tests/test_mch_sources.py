"""Getting collections: local files, directories, filters, the cache, Azure and private stores."""
from __future__ import annotations

import argparse
import io
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List

import pytest
from azurite import closed_port_url

from spmi.base import config
from spmi.base.errors import SuiteError
from spmi.sources import mch_sources

REPO_ROOT = Path(__file__).resolve().parent.parent

GUID = "0a1b2c3d-0000-1111-2222-333344445555"


def mc_record(payload: bytes = b"payload") -> bytes:
    return b"mc" + struct.pack("<I", len(payload)) + payload + b"42"


def write_mch(path: Path, records: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(mc_record(f"ctx{i}".encode()) for i in range(records)))
    return path


def make_settings(spmi_location: Path, target_os: str = "linux", mch_arch: str = "x64") -> config.Settings:
    return config.Settings(host_os="linux", arch="x64", target_os=target_os, target_arch=mch_arch,
                                mch_arch=mch_arch, build_type="Checked", repo_root=None, core_root=None,
                                product_dir=None, spmi_location=spmi_location)


def parse(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mch_sources.add_collection_options(parser)
    return parser.parse_args(argv)


def test_options_are_added_once_and_keep_an_existing_storage_url():
    parser = argparse.ArgumentParser()
    parser.add_argument("-storage_url")
    mch_sources.add_collection_options(parser)
    args = parser.parse_args(["-mch_files", "a", "b", "-filter", "x", "y", "-private_store", "p1",
                              "-private_store", "p2", "--force_download", "-jit_ee_version", GUID,
                              "-storage_url", "http://h"])
    assert args.mch_files == ["a", "b"]
    assert args.filter == ["x", "y"]
    assert args.private_store == ["p1", "p2"]
    assert args.force_download and args.jit_ee_version == GUID and args.storage_url == "http://h"


def test_private_stores_default_to_the_environment():
    assert mch_sources.private_stores(None, {"SUPERPMI_PRIVATE_STORE": "a; b;;"}) == ["a", "b"]
    assert mch_sources.private_stores(["x"], {"SUPERPMI_PRIVATE_STORE": "a"}) == ["x"]
    assert mch_sources.private_stores(None, {}) == []


@pytest.mark.parametrize("name, filters, expected", [
    ("libraries.pmi.linux.x64.checked.mch", None, True),
    ("libraries.pmi.linux.x64.checked.mch", ["PMI"], True),
    ("libraries.pmi.linux.x64.checked.mch", ["bench", "LIBRARIES"], True),
    ("libraries.pmi.linux.x64.checked.mch", ["bench"], False),
])
def test_filters_are_case_insensitive_substrings_ored(name, filters, expected):
    assert mch_sources.matches_filters(name, filters) is expected


def test_local_files_and_directories_are_searched_recursively(tmp_path):
    single = write_mch(tmp_path / "one.mch")
    write_mch(tmp_path / "dir" / "a.mch")
    write_mch(tmp_path / "dir" / "sub" / "b.mc")
    (tmp_path / "dir" / "sub" / "b.mch.mct").write_bytes(b"INDX")
    write_mch(tmp_path / "dir" / ".spmi-tmp-x" / "half.mch")
    args = parse(["-mch_files", str(single), str(tmp_path / "dir")])
    found = mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [p.name for p in found] == ["one.mch", "a.mch", "b.mc"]


def test_filter_applies_to_local_files(tmp_path):
    write_mch(tmp_path / "libraries.pmi.mch")
    write_mch(tmp_path / "benchmarks.run.mch")
    args = parse(["-mch_files", str(tmp_path), "-filter", "BENCH"])
    found = mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [p.name for p in found] == ["benchmarks.run.mch"]


def test_nothing_found_is_a_clear_error(tmp_path):
    write_mch(tmp_path / "libraries.pmi.mch")
    args = parse(["-mch_files", str(tmp_path), "-filter", "nomatch"])
    with pytest.raises(SuiteError, match="No MCH files found to replay matching -filter nomatch"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))


def test_missing_path_is_a_clear_error(tmp_path):
    args = parse(["-mch_files", str(tmp_path / "nope.mch")])
    with pytest.raises(SuiteError, match="nope.mch' is neither a file"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))


def test_a_file_without_the_record_magic_is_named(tmp_path):
    bad = tmp_path / "bad.mch"
    bad.write_bytes(b"PK\x03\x04 not a collection")
    args = parse(["-mch_files", str(bad)])
    with pytest.raises(SuiteError, match="bad.mch' is not a method-context file"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    empty = tmp_path / "empty.mch"
    empty.write_bytes(b"")
    with pytest.raises(SuiteError, match="empty.mch' is empty"):
        mch_sources.resolve_collections(parse(["-mch_files", str(empty)]), make_settings(tmp_path / "spmi"))


def make_zip(entries) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def upload_collection(account, guid: str, target: str, name: str, records: int = 3, with_toc: bool = True) -> bytes:
    data = b"".join(mc_record(f"{name}-{i}".encode()) for i in range(records))
    account.upload("superpmi", f"collections/{guid}/{target}/{name}.zip", make_zip({name: data}))
    if with_toc:
        account.upload("superpmi", f"collections/{guid}/{target}/{name}.mct.zip", make_zip({name + ".mct": b"INDX"}))
    return data


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setenv("SUPERPMI_STORAGE_RETRIES", "1")


def test_blob_selection_is_case_insensitive_with_filters_and_companions():
    names = [
        f"collections/{GUID}/linux/x64/libraries.pmi.linux.x64.checked.mch.zip",
        f"collections/{GUID}/linux/x64/libraries.pmi.linux.x64.checked.mch.mct.zip",
        f"collections/{GUID}/Linux/x64/benchmarks.run.linux.x64.checked.mch.zip",
        f"collections/{GUID}/linux/arm64/libraries.pmi.linux.arm64.checked.mch.zip",
        f"collections/{GUID}/linux/x64/readme.txt",
    ]
    assert mch_sources.select_collection_blobs(names, GUID, "linux", "x64", None) == [
        names[2], names[0], names[1]]
    assert mch_sources.select_collection_blobs(names, GUID, "linux", "x64", ["LIBRARIES"]) == names[:2]
    assert mch_sources.select_collection_blobs(names, "other", "linux", "x64", None) == []


def test_manifest_coverage_of_filters():
    assert mch_sources.manifest_covers(None, ["x"]) and mch_sources.manifest_covers(None, None)
    assert not mch_sources.manifest_covers(["libraries"], None)
    assert mch_sources.manifest_covers(["libraries", "bench"], ["Bench"])
    assert not mch_sources.manifest_covers(["libraries"], ["bench"])


def test_cold_then_warm_cache_without_network(storage_account, tmp_path, captured_log):
    data = upload_collection(storage_account, GUID, "linux/x64", "libraries.pmi.linux.x64.checked.mch")
    upload_collection(storage_account, GUID, "linux/x64", "benchmarks.run.linux.x64.checked.mch", with_toc=False)
    upload_collection(storage_account, GUID, "windows/x64", "libraries.pmi.windows.x64.checked.mch")
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url])
    found = mch_sources.resolve_collections(args, settings)
    cache = settings.spmi_location / "mch" / f"{GUID}.linux.x64"
    assert found == [cache / "benchmarks.run.linux.x64.checked.mch", cache / "libraries.pmi.linux.x64.checked.mch"]
    assert found[1].read_bytes() == data
    assert (cache / "libraries.pmi.linux.x64.checked.mch.mct").read_bytes() == b"INDX"
    assert (cache / mch_sources.MANIFEST_NAME).is_file()
    offline = parse(["-jit_ee_version", GUID, "-storage_url", closed_port_url(), "-filter", "bench"])
    assert mch_sources.resolve_collections(offline, settings) == found[:1]
    assert f'Found download cache directory "{cache}" and --force_download not set; skipping download' \
        in captured_log.getvalue()


def test_cold_cache_unreachable_is_a_clear_error(tmp_path, fast_retries):
    closed = closed_port_url()
    args = parse(["-jit_ee_version", GUID, "-storage_url", closed])
    with pytest.raises(SuiteError, match=f"Listing failed: storage cannot be reached .*Connection refused.*{closed}/superpmi"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))


def test_incomplete_cache_is_completed(storage_account, fault_proxy, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "a.mch")
    upload_collection(storage_account, GUID, "linux/x64", "b.mch")
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url])
    mch_sources.resolve_collections(args, settings)
    cache = settings.spmi_location / "mch" / f"{GUID}.linux.x64"
    (cache / mch_sources.MANIFEST_NAME).unlink()
    (cache / "b.mch").unlink()
    fault_proxy.clear()
    found = mch_sources.resolve_collections(args, settings)
    assert [p.name for p in found] == ["a.mch", "b.mch"]
    assert fault_proxy.count("GET", "/b.mch.zip") == 1 and fault_proxy.count("GET", "/a.mch.zip") == 0
    assert (cache / mch_sources.MANIFEST_NAME).is_file()
    # A different filter is not covered by a filtered download: it lists again.
    fault_proxy.clear()
    narrow = settings.spmi_location / "narrow"
    settings2 = make_settings(narrow)
    mch_sources.resolve_collections(parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url,
                                           "-filter", "a.mch"]), settings2)
    mch_sources.resolve_collections(parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url,
                                           "-filter", "b.mch"]), settings2)
    assert fault_proxy.count("GET", "comp=list") == 2


def test_force_download_downloads_again(storage_account, fault_proxy, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "a.mch", with_toc=False)
    settings = make_settings(tmp_path / "spmi")
    args = parse(["-jit_ee_version", GUID, "-storage_url", fault_proxy.account_url])
    mch_sources.resolve_collections(args, settings)
    mch_sources.resolve_collections(args, settings)
    assert fault_proxy.count("GET", "/a.mch.zip") == 1
    args.force_download = True
    mch_sources.resolve_collections(args, settings)
    assert fault_proxy.count("GET", "/a.mch.zip") == 2


def test_nothing_in_storage_is_a_clear_error(storage_account, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "a.mch")
    args = parse(["-jit_ee_version", GUID, "-storage_url", storage_account.account_url, "-filter", "zzz"])
    with pytest.raises(SuiteError, match=f"No Azure Storage MCH files to download from .*/superpmi/collections/"
                                         f"{GUID}/linux/x64/ matching -filter zzz"):
        mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))


def test_private_store_is_used_with_storage(storage_account, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "public.mch")
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    args = parse(["-jit_ee_version", GUID, "-private_store", str(store), "-private_store", str(tmp_path / "none"),
                  "-storage_url", storage_account.account_url])
    found = mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [p.name for p in found] == ["public.mch", "private.mch"]


def test_urls_in_mch_files_are_cached_with_their_toc(storage_account, fault_proxy, tmp_path):
    data = upload_collection(storage_account, GUID, "linux/x64", "u.mch")
    upload_collection(storage_account, GUID, "linux/x64", "plain.mch", with_toc=False)
    settings = make_settings(tmp_path / "spmi")
    url = f"{fault_proxy.account_url}/superpmi/collections/{GUID}/linux/x64/u.mch.zip"
    plain = f"{fault_proxy.account_url}/superpmi/collections/{GUID}/linux/x64/plain.mch.zip"
    found = mch_sources.resolve_collections(parse(["-mch_files", url, plain]), settings)
    assert [p.name for p in found] == ["u.mch", "plain.mch"]
    assert found[0].read_bytes() == data and (found[0].parent / "u.mch.mct").is_file()
    assert found[0].parent != found[1].parent
    fault_proxy.clear()
    again = mch_sources.resolve_collections(parse(["-mch_files", url, plain]), settings)
    assert again == found and fault_proxy.requests == []


@pytest.mark.skipif(os.name == "nt", reason="'//dir' is a real UNC path on Windows")
def test_unc_paths_are_copied_into_the_cache(tmp_path):
    share = tmp_path / "share"
    write_mch(share / "s.mch")
    (share / "s.mch.mct").write_bytes(b"INDX")
    settings = make_settings(tmp_path / "spmi")
    found = mch_sources.resolve_collections(parse(["-mch_files", "/" + str(share)]), settings)
    assert [p.name for p in found] == ["s.mch"]
    assert str(found[0]).startswith(str(settings.spmi_location / "mch" / "unc"))
    assert (found[0].parent / "s.mch.mct").is_file()


def test_two_processes_share_one_download(storage_account, fault_proxy, tmp_path):
    upload_collection(storage_account, GUID, "linux/x64", "shared.mch", records=2000)
    spmi = tmp_path / "spmi"
    script = f"""
import sys, logging
sys.path[:0] = [{str(REPO_ROOT)!r}, {str(REPO_ROOT / 'tests')!r}]
from pathlib import Path
from spmi.sources import mch_sources
from test_mch_sources import make_settings, parse
logging.getLogger("superpmi").addHandler(logging.StreamHandler(sys.stdout))
logging.getLogger("superpmi").setLevel(logging.INFO)
found = mch_sources.resolve_collections(parse(["-jit_ee_version", {GUID!r}, "-storage_url", {fault_proxy.account_url!r}]),
                                        make_settings(Path({str(spmi)!r})))
print("FOUND", [p.name for p in found])
"""
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert all("FOUND ['shared.mch']" in out for out in outputs)
    assert fault_proxy.count("GET", "/shared.mch.zip") == 1
    assert sum("skipping download" in out for out in outputs) == 1


def test_private_store_alone_when_storage_has_nothing(storage_account, tmp_path, captured_log):
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "only-private.mch")
    args = parse(["-jit_ee_version", GUID, "-private_store", str(store), "-storage_url", storage_account.account_url])
    found = mch_sources.resolve_collections(args, make_settings(tmp_path / "spmi"))
    assert [p.name for p in found] == ["only-private.mch"]
    assert "Warning: No Azure Storage MCH files to download from" in captured_log.getvalue()


# ---------------------------------------------------------------- the overlapped feed's order

def test_the_feed_predicts_the_order_the_finished_cache_is_listed_in(tmp_path):
    from spmi.sources.collection_feed import CollectionDownload, arrived_as_expected, expected_order
    names = ["b.mch", "A.mch", "a-b.mch", "sub/z.mch", "sub/deeper/c.mc", "zz/a.mch", "x.mch.mct", "y.txt"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"mc")
    listed = mch_sources.find_collection_files(tmp_path)
    existing = [p for p in listed if p.name != "b.mch"]
    pending = [CollectionDownload(tmp_path / "b.mch", []), CollectionDownload(tmp_path / "x.mch.mct", [])]
    assert expected_order(list(reversed(existing)), pending, tmp_path) == listed
    assert arrived_as_expected([tmp_path / "b.mch"], tmp_path / "b.mch")
    assert arrived_as_expected([], tmp_path / "b.mch")  # only its companion was missing
    assert not arrived_as_expected([tmp_path / "A.mch"], tmp_path / "b.mch")
    assert not arrived_as_expected([tmp_path / "gone.mch"], tmp_path / "gone.mch")
