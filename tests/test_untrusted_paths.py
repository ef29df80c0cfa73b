"""Names from outside never choose a path outside their folder (docs/contracts.md §12.20)."""
from __future__ import annotations

import io
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path
from typing import List

import pytest
from loopback_http import LoopbackServer

from spmi.base import config, fsutil
from spmi.base.errors import SuiteError
from spmi.storage import archives, downloads

REPO = Path(__file__).resolve().parent.parent


def files_under(root: Path) -> List[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def run_superpmi(args: List[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "superpmi.py"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def assert_one_line_refusal(proc: subprocess.CompletedProcess, needle: str) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    errors = [line for line in text.splitlines() if "rror" in line]
    assert len(errors) == 1 and needle in errors[0], text


# ---------------------------------------------------------------- the rule itself (pure)

@pytest.mark.parametrize("name, single, reason", [
    ("x.mch", True, None),
    ("sub/x.mch", False, None),
    ("../victim.txt", True, "'..'"),
    ("../../../../victim.txt", False, "'..'"),
    ("sub/x.mch", True, "separator"),
    ("a\\b.mch", True, "separator"),
    ("/tmp/victim.txt", True, "absolute"),
    ("C:\\victim.txt", False, "absolute"),
    ("C:victim.txt", False, "absolute"),
    ("x\0.mch", True, "NUL"),
    ("CON", True, "device"),
    ("sub/aux.txt", False, "device"),
    ("", True, "empty"),
    (".", True, "no file name"),
])
def test_confined_path_refuses_names_that_leave_the_folder(tmp_path, name, single, reason):
    if reason is None:
        path = fsutil.confined_path(tmp_path, name, single_segment=single)
        assert path.parent == tmp_path / Path(name).parent
        return
    with pytest.raises(SuiteError) as info:
        fsutil.confined_path(tmp_path, name, "test name", single_segment=single)
    assert reason in str(info.value) and "\n" not in str(info.value)
    assert "test name" in str(info.value)


DEVICE_NAMES = ["COM\u00b9", "LPT\u00b2", "lpt\u00b3.txt", "x/con .so", "con .so", "sub/NUL  .tar.gz", "aux . .so",
                "COM1:", "prn", "conout$.log"]
NOT_DEVICE_NAMES = ["console.so", "com10.dll", "com.txt", "x.con", "con_x.so", "coma.so", ".con", "lpt.so", "sub/nulls"]


@pytest.mark.parametrize("host_os", ["windows", "linux", "osx"])
def test_windows_device_names_are_refused_in_every_form_on_every_os(tmp_path, monkeypatch, host_os):
    """Windows reads `COM¹` as COM1, and a segment up to its first `.`, without trailing spaces or a colon, as
    the device name (`con .so` is `con`): refused wherever the suite runs, since a name from storage may reach
    a Windows machine later (a cache, an uploaded artifact)."""
    monkeypatch.setattr(fsutil.platforms, "detect_host_os", lambda: host_os)
    for name in DEVICE_NAMES:
        with pytest.raises(SuiteError) as info:
            fsutil.confined_path(tmp_path, name, "blob name")
        assert str(info.value).startswith(f"refusing blob name {name!r}: it has a device name and would be written "
                                          "outside ")
        assert fsutil.unsafe_name_reason(name.split("/")[-1], single_segment=True) == "a device name"
    for name in NOT_DEVICE_NAMES:
        assert fsutil.confined_path(tmp_path, name) == tmp_path / name


def test_confined_path_follows_links_out_of_the_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(SuiteError, match="leaves its folder"):
        fsutil.confined_path(root, "link/x.mch")


@pytest.mark.parametrize("value", ["../../etc", "..", "a/b", "/etc", "x\0y", "", "g uid", "C:\\x"])
def test_jit_ee_version_must_be_a_guid_or_a_plain_name(value):
    with pytest.raises(SuiteError, match="not a JIT-EE version GUID"):
        config.checked_jit_ee_version(value)


def test_jit_ee_version_guid_is_lower_cased():
    assert config.checked_jit_ee_version("5F2A8C1E-3B7D-4E96-A0C4-9D81E6B27F35") == \
        "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"
    assert config.checked_jit_ee_version("unknown-jit-ee-version") == "unknown-jit-ee-version"


def test_zip_entry_through_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "sub").symlink_to(outside)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("sub/evil.mch", b"mc")
    archive = tmp_path / "x.zip"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(archives.UnsafeArchive, match="leaves its folder"):
        archives.extract_zip(archive, target)
    assert files_under(outside) == []


@pytest.mark.parametrize("segment", ["..%2F..%2Fvictim.txt", "%2Ftmp%2Fvictim.txt", "a%5Cb.mch", "x%00.mch"])
def test_download_item_names_are_checked_after_decoding(tmp_path, segment):
    item = downloads.DownloadItem(f"http://127.0.0.1:1/x/{segment}", tmp_path)
    with pytest.raises(SuiteError, match="refusing"):
        downloads.download_files([item])


# ---------------------------------------------------------------- the reproductions (real processes)

@pytest.fixture
def layout(tmp_path):
    """`work/spmi` as -spmi_location, a victim file beside it."""
    work = tmp_path / "work"
    spmi = work / "spmi"
    spmi.mkdir(parents=True)
    victim = work / "victim.txt"
    victim.write_text("original")
    return work, spmi, victim


def replay_url(url: str, sample_toolchain: Path, spmi: Path) -> subprocess.CompletedProcess:
    return run_superpmi(["replay", "-core_root", str(sample_toolchain / "core_root"), "-spmi_location", str(spmi),
                         "-arch", "x64", "-target_os", "linux", "-mch_files", url], cwd=spmi.parent)


def test_percent_encoded_dot_dot_in_a_url_writes_nothing_outside_the_cache(sample_toolchain, layout):
    work, spmi, victim = layout
    with LoopbackServer(b"overwritten by the download") as server:
        proc = replay_url(f"{server.base_url}/x/..%2F..%2F..%2F..%2Fvictim.txt", sample_toolchain, spmi)
        assert server.requests == []  # refused before anything is fetched
    assert_one_line_refusal(proc, "'..'")
    assert victim.read_text() == "original"
    assert [p for p in files_under(work) if spmi not in p.parents] == [victim]


def test_absolute_percent_encoded_name_in_a_url_is_refused(sample_toolchain, layout, tmp_path):
    work, spmi, _ = layout
    target = tmp_path / "absolute_victim.txt"
    encoded = urllib.parse.quote(str(target), safe="")
    assert encoded.startswith("%2F")
    with LoopbackServer(b"overwritten by the download") as server:
        proc = replay_url(f"{server.base_url}/x/{encoded}", sample_toolchain, spmi)
    assert_one_line_refusal(proc, "absolute path")
    assert not target.exists()


def test_a_plain_url_still_downloads(sample_toolchain, layout):
    from e2e_support import collection
    work, spmi, _ = layout
    with LoopbackServer(collection(sample_toolchain).read_bytes()) as server:
        proc = replay_url(f"{server.base_url}/x/libraries.pmi.mch", sample_toolchain, spmi)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(spmi.glob("mch/urls/*/libraries.pmi.mch"))


def test_jit_ee_version_with_dot_dot_creates_nothing_outside_spmi_location(sample_toolchain, layout):
    work, spmi, _ = layout
    before = files_under(work)
    proc = run_superpmi(["download", "-core_root", str(sample_toolchain / "core_root"), "-spmi_location", str(spmi),
                         "-arch", "x64", "-target_os", "linux", "-jit_ee_version", "../../etc",
                         "-storage_url", "http://127.0.0.1:9"], cwd=work)
    assert_one_line_refusal(proc, "-jit_ee_version '../../etc'")
    outside = [p for p in work.rglob("*") if spmi not in p.parents and p != spmi]
    assert sorted(outside) == before
