"""Getting collections: local files, directories, filters, the cache, Azure and private stores."""
from __future__ import annotations

import argparse
import struct
from pathlib import Path
from typing import List, Optional

import pytest

import mch_sources
import spmi_config
from jitutil import SuiteError

GUID = "0a1b2c3d-0000-1111-2222-333344445555"


def mc_record(payload: bytes = b"payload") -> bytes:
    return b"mc" + struct.pack("<I", len(payload)) + payload + b"42"


def write_mch(path: Path, records: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(mc_record(f"ctx{i}".encode()) for i in range(records)))
    return path


def make_settings(spmi_location: Path, target_os: str = "linux", mch_arch: str = "x64") -> spmi_config.Settings:
    return spmi_config.Settings(host_os="linux", arch="x64", target_os=target_os, target_arch=mch_arch,
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


def test_private_store_is_used(tmp_path):
    store = tmp_path / "store"
    write_mch(store / GUID / "linux" / "x64" / "private.mch")
    args = parse(["-jit_ee_version", GUID, "-private_store", str(store), "-storage_url", "http://127.0.0.1:9"])
    settings = make_settings(tmp_path / "spmi")
    found = mch_sources.resolve_collections(args, settings)
    assert [p.name for p in found] == ["private.mch"]
