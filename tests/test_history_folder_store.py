"""A local folder as the history store: same layout as the storage account, the same checks on read
(names of the record shape only, confined paths, regular files only, the size cap), no credential."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spmi.base.errors import SuiteError
from spmi.history import folder_store, records, store
from spmi.history.records import CollectionTotals, HistoryRecord
from spmi.storage import uploads

GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"
REPO = Path(__file__).resolve().parent.parent


def record(day: int, change: float = 0.01) -> HistoryRecord:
    return HistoryRecord("tpdiff", "linux", "x64", f"202611{day:02d}T030000Z", f"{day:07x}", jit_ee_version=GUID,
                         collections=[CollectionTotals("a.mch", 10, {"instructions": [1e9, 1e9 * (1 + change / 100)]})])


def test_a_folder_path_or_file_url_is_a_folder_store(tmp_path, monkeypatch):
    monkeypatch.delenv("SUPERPMI_STORAGE_URL", raising=False)
    assert store.resolve_location(str(tmp_path)) == tmp_path.resolve().as_uri()
    assert store.resolve_location(tmp_path.as_uri()) == tmp_path.resolve().as_uri()
    assert folder_store.folder_path(store.resolve_location(str(tmp_path))) == tmp_path.resolve()
    assert store.resolve_location("http://127.0.0.1:10000/devstoreaccount1/") == "http://127.0.0.1:10000/devstoreaccount1"
    monkeypatch.setenv("SUPERPMI_STORAGE_URL", str(tmp_path))
    assert store.resolve_location(None) == tmp_path.resolve().as_uri()
    with pytest.raises(SuiteError, match="not a local folder's file:// URL"):
        store.resolve_location("file://server/share/history")


def test_records_written_to_a_folder_are_listed_and_read_back(tmp_path):
    location = store.resolve_location(str(tmp_path))
    for day in (1, 2, 3):
        written = store.upload_record(record(day), uploads.StorageCredentials(), location, tmp_path / "scratch")
        assert Path(written).is_file()
    assert (tmp_path / "superpmi" / "history" / "tpdiff" / "linux" / "x64" / "20261102T030000Z_0000002.json").is_file()
    names, problems = store.list_record_names(location, "tpdiff", "linux", "x64")
    assert [n.time for n in names] == ["20261103T030000Z", "20261102T030000Z", "20261101T030000Z"] and problems == []
    listing = store.load_history(location, "tpdiff", "linux", "x64", 2)
    assert [r.diff_hash for r in listing.records] == ["0000003", "0000002"] and listing.problems == []
    assert store.load_history(store.resolve_location(str(tmp_path / "absent")), "tpdiff", "linux", "x64", 5).records == []


def test_hostile_files_in_the_folder_are_skipped_with_one_line_each(tmp_path):
    location = store.resolve_location(str(tmp_path / "store"))
    store.upload_record(record(1), uploads.StorageCredentials(), location, tmp_path)
    folder = tmp_path / "store" / "superpmi" / "history" / "tpdiff" / "linux" / "x64"
    good = (folder / "20261101T030000Z_0000001.json").read_bytes()
    outside = tmp_path / "outside.json"
    outside.write_bytes(good)
    (folder / "20261102T030000Z_0000002.json").symlink_to(outside)                    # a link leaving the folder
    with open(folder / "20261103T030000Z_0000003.json", "wb") as huge:                # over the cap, never read
        huge.truncate(records.MAX_RECORD_BYTES + 1)
    (folder / "20261104T030000Z_0000004.json").write_bytes(good)                      # names another run
    (folder / "20261105T030000Z_0000005.json\n##vso[task.complete]x").write_bytes(good)
    (folder / "##vso[task.setvariable variable=X]1.json").write_bytes(good)
    (folder / "20261106T030000Z_0000006.json").mkdir()                                 # a folder of a record's name
    (folder / "linked").symlink_to(tmp_path, target_is_directory=True)                # not followed
    listing = store.load_history(location, "tpdiff", "linux", "x64", 30)
    assert [r.time for r in listing.records] == ["20261101T030000Z"]
    text = "\n".join(listing.problems)
    assert len(listing.problems) == 5, text
    assert "20261102T030000Z_0000002.json: a symbolic link" in text
    assert "20261103T030000Z_0000003.json: larger than the 4,194,304 bytes allowed; not read" in text
    assert "names another run than its blob name" in text
    assert "##vso[" not in text and all("\n" not in p for p in listing.problems)


def test_a_folder_listing_is_capped(tmp_path, monkeypatch):
    folder = tmp_path / "superpmi" / "history" / "tpdiff"
    folder.mkdir(parents=True)
    for index in range(6):
        (folder / f"{index}.json").write_text(json.dumps({}), encoding="utf-8")
    monkeypatch.setattr(folder_store, "MAX_LISTED", 5)
    with pytest.raises(SuiteError, match="more than 5 files"):
        store.list_record_names(store.resolve_location(str(tmp_path)), "tpdiff")


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_an_unreadable_record_is_one_line(tmp_path):
    location = store.resolve_location(str(tmp_path))
    written = Path(store.upload_record(record(1), uploads.StorageCredentials(), location, tmp_path))
    written.chmod(0)
    try:
        if os.access(written, os.R_OK):
            pytest.skip("running as a user who reads any file")
        listing = store.load_history(location, "tpdiff", "linux", "x64", 30)
        assert listing.records == [] and len(listing.problems) == 1 and "cannot be read" in listing.problems[0]
    finally:
        written.chmod(0o644)


def history_cli(*args: object) -> "subprocess.CompletedProcess[str]":
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_STORAGE_", "SUPERPMI_"))}
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), "history", *map(str, args)], text=True,
                          capture_output=True, env=environment, timeout=120, cwd=str(REPO))


def test_show_without_flags_shows_every_recorded_kind_and_target(tmp_path):
    location = store.resolve_location(str(tmp_path / "store"))
    for day in (1, 2, 3):
        store.upload_record(record(day), uploads.StorageCredentials(), location, tmp_path)
        other = HistoryRecord("memdiff", "linux", "arm64", f"202611{day:02d}T040000Z", f"{day:07x}", collections=[
            CollectionTotals("b.mch", 10, {"BytesAllocated": [1e6, 1e6 + day]})])
        store.upload_record(other, uploads.StorageCredentials(), location, tmp_path)
    page = tmp_path / "trend.html"
    result = history_cli("show", "-storage_url", tmp_path / "store", "-output_html_path", page)
    assert result.returncode == 0, result.stdout + result.stderr
    heads = [line for line in result.stdout.splitlines() if line.endswith(":")]
    assert heads == ["memdiff linux/arm64:", "tpdiff linux/x64:"]
    text = page.read_text(encoding="utf-8")
    assert "<h2>memdiff linux arm64</h2>" in text and "<h2>tpdiff linux x64</h2>" in text
    assert text.count('class="fence"') == 2
    narrowed = history_cli("show", "-storage_url", tmp_path / "store", "-summary_type", "tpdiff")
    assert [line for line in narrowed.stdout.splitlines() if line.endswith(":")] == ["tpdiff linux/x64:"]


def test_history_help_names_its_verbs():
    result = history_cli("-h")
    assert result.returncode == 0 and "{upload,list,show,compare}" in result.stdout
    assert all(f"    {verb} " in result.stdout for verb in ("upload", "list", "show", "compare"))
