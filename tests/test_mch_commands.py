"""`superpmi.py download / upload / upload-private / list-collections / merge-mch`, end to end."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from azurite import ACCOUNT_KEY, closed_port_url

from spmi.commands import mch_commands

REPO_ROOT = Path(__file__).resolve().parent.parent
GUID = "11112222-3333-4444-5555-666677778888"
TARGET = ["-target_os", "linux", "-target_arch", "x64", "-mch_arch", "x64"]


def mc_record(payload: bytes) -> bytes:
    return b"mc" + struct.pack("<I", len(payload)) + payload + b"42"


def write_mch(path: Path, records: int = 50) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(mc_record(b"context %d " % i + b"x" * 100) for i in range(records)))
    return path


def superpmi(args: List[str], env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("AZURE_STORAGE_CONNECTION_STRING", "SUPERPMI_STORAGE_URL", "SUPERPMI_PRIVATE_STORE")}
    child_env["SUPERPMI_STORAGE_RETRIES"] = "1"
    child_env.update(env or {})
    return subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *args], capture_output=True, text=True,
                          env=child_env, timeout=120)


def all_text(result: subprocess.CompletedProcess, spmi: Path) -> str:
    logs = "".join(p.read_text(encoding="utf-8") for p in sorted(spmi.glob("superpmi*.log")))
    return result.stdout + result.stderr + logs


@pytest.fixture
def collections_dir(tmp_path) -> Path:
    source = tmp_path / "collected"
    write_mch(source / "libraries.pmi.linux.x64.checked.mch")
    (source / "libraries.pmi.linux.x64.checked.mch.mct").write_bytes(b"INDX\0\0\0\0INDX")
    write_mch(source / "sub" / "benchmarks.run.linux.x64.checked.mch", records=5)
    (source / "empty.mch").write_bytes(b"")
    return source


# ---------------------------------------------------------------- pure parts

def test_collections_to_publish_skips_empty_files(collections_dir):
    (collections_dir / "sub" / "benchmarks.run.linux.x64.checked.mch.mct").write_bytes(b"")
    names = [p.name for p in mch_commands.collections_to_publish([str(collections_dir)])]
    assert names == ["libraries.pmi.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch.mct",
                     "benchmarks.run.linux.x64.checked.mch"]


def test_remote_listing_selection():
    names = [f"collections/{GUID}/linux/x64/a.mch.zip", f"collections/{GUID}/linux/x64/a.mch.mct.zip",
             f"collections/{GUID}/Linux/x64/old.mch.zip", f"collections/{GUID}/windows/x64/w.mch.zip",
             "collections/other/linux/x64/b.mch"]
    assert mch_commands.remote_collection_blobs(names, f"{GUID}/linux/x64/") == [names[2], names[0]]
    assert len(mch_commands.remote_collection_blobs(names, None)) == 4


def test_zero_length_markers(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "job1.mch").write_bytes(b"ZEROLENGTH")
    (tmp_path / "big.mch").write_bytes(b"ZEROLENGTH" + b"x" * 20)
    (tmp_path / "other").write_bytes(b"tiny")
    assert mch_commands.remove_zero_length_markers(tmp_path) == [tmp_path / "a" / "job1.mch"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["big.mch", "other"]


# ---------------------------------------------------------------- end to end

def test_upload_download_and_list(storage_account, collections_dir, tmp_path):
    spmi = tmp_path / "spmi"
    common = ["-spmi_location", str(spmi), "-jit_ee_version", GUID, "--no_progress", *TARGET]
    env = {"AZURE_STORAGE_CONNECTION_STRING": storage_account.connection_string}
    upload = superpmi(["upload", *common, "-mch_files", str(collections_dir)], env)
    assert upload.returncode == 0, all_text(upload, spmi)
    text = all_text(upload, spmi)
    assert upload.stdout.count("Compressed ") == 3 and "Warning: replacing existing blob!" not in text
    assert ACCOUNT_KEY not in text
    prefix = f"collections/{GUID}/linux/x64/"
    blobs = sorted(b.name for b in storage_account.service_client().get_container_client("superpmi").list_blobs())
    assert blobs == [prefix + "benchmarks.run.linux.x64.checked.mch.zip",
                     prefix + "libraries.pmi.linux.x64.checked.mch.mct.zip",
                     prefix + "libraries.pmi.linux.x64.checked.mch.zip"]
    data = storage_account.service_client().get_blob_client("superpmi", blobs[2]).download_blob().readall()
    zipped = zipfile.ZipFile(__import__("io").BytesIO(data))
    assert [(i.filename, i.compress_type) for i in zipped.infolist()] == [
        ("libraries.pmi.linux.x64.checked.mch", zipfile.ZIP_DEFLATED)]

    again = superpmi(["upload", *common, "-mch_files", str(collections_dir / "sub")], env)
    assert again.returncode == 0 and "Warning: replacing existing blob!" in again.stdout

    url = storage_account.account_url
    listed = superpmi(["list-collections", *common, "-storage_url", url])
    assert listed.returncode == 0, listed.stderr
    lines = [line for line in listed.stdout.splitlines() if not line.startswith("[")]
    assert lines == [f"2 collections for {GUID}/linux/x64/",
                     f"{url}/superpmi/{prefix}benchmarks.run.linux.x64.checked.mch.zip",
                     f"{url}/superpmi/{prefix}libraries.pmi.linux.x64.checked.mch.zip"]
    listed_all = superpmi(["list-collections", *common, "-storage_url", url, "--all"])
    assert "2 collections" in listed_all.stdout.splitlines()

    missing_local = superpmi(["list-collections", *common, "--local"])
    cache = spmi / "mch" / f"{GUID}.linux.x64"
    assert missing_local.returncode == 1
    assert f'Local dir "{cache}" not found' in missing_local.stdout + missing_local.stderr

    download = superpmi(["download", *common, "-storage_url", url, "-filter", "LIBRARIES"])
    assert download.returncode == 0, all_text(download, spmi)
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith("superpmi_download")) == [
        "libraries.pmi.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch.mct"]
    assert (cache / "libraries.pmi.linux.x64.checked.mch").read_bytes() == \
        (collections_dir / "libraries.pmi.linux.x64.checked.mch").read_bytes()
    local = superpmi(["list-collections", *common, "--local"])
    assert [line for line in local.stdout.splitlines() if not line.startswith("[")] == [
        f"1 collections for {GUID}/linux/x64/", str(cache / "libraries.pmi.linux.x64.checked.mch")]

    offline = superpmi(["download", *common, "-storage_url", closed_port_url(), "-filter", "libraries"])
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "--force_download not set; skipping download" in offline.stdout
    cold = superpmi(["download", *common, "-storage_url", closed_port_url(), "-filter", "benchmarks"])
    assert cold.returncode == 1
    error_lines = [line for line in (cold.stdout + cold.stderr).splitlines() if "Error:" in line or "error:" in line]
    assert len(error_lines) == 1 and "Connection refused" in error_lines[0] and "Traceback" not in cold.stderr


def kept_folder(text: str, prefix: str) -> Path:
    """The folder a `--skip_cleanup` line names (`... in /tmp/<prefix>XXXX`)."""
    line = next(line for line in text.splitlines() if "--skip_cleanup:" in line)
    return Path(line.split(" in ", 1)[1].split()[0].rstrip(")"))


def test_skip_cleanup_keeps_the_archives_of_upload_and_download_and_says_where(storage_account, collections_dir,
                                                                               tmp_path):
    spmi = tmp_path / "spmi"
    temp = tmp_path / "temp"
    temp.mkdir()
    common = ["-spmi_location", str(spmi), "-jit_ee_version", GUID, "--no_progress", *TARGET,
              "-storage_url", storage_account.account_url]
    env = {"AZURE_STORAGE_CONNECTION_STRING": storage_account.connection_string, "TMPDIR": str(temp)}
    upload = superpmi(["upload", *common, "-mch_files", str(collections_dir / "sub"), "--skip_cleanup"], env)
    assert upload.returncode == 0, all_text(upload, spmi)
    kept = kept_folder(upload.stdout, "spmi-upload-")
    assert kept.parent == temp and kept.name.startswith("spmi-upload-")
    assert [p.name for p in kept.iterdir()] == ["benchmarks.run.linux.x64.checked.mch.zip"]
    assert "kept the 1 compressed file(s) in" in upload.stdout
    plain = superpmi(["upload", *common, "-mch_files", str(collections_dir / "sub")], env)
    assert plain.returncode == 0 and "--skip_cleanup" not in plain.stdout
    assert sorted(p.name for p in temp.iterdir()) == [kept.name]  # without the flag nothing stays

    download = superpmi(["download", *common, "--skip_cleanup"], env)
    assert download.returncode == 0, all_text(download, spmi)
    archives = kept_folder(download.stdout, "spmi-download-")
    assert "kept 1 downloaded archive(s) in" in download.stdout and archives.parent == temp
    assert [p.name for p in archives.iterdir()] == ["benchmarks.run.linux.x64.checked.mch.zip"]
    with zipfile.ZipFile(archives / "benchmarks.run.linux.x64.checked.mch.zip") as zipped:
        assert zipped.namelist() == ["benchmarks.run.linux.x64.checked.mch"]
    cache = spmi / "mch" / f"{GUID}.linux.x64"
    assert (cache / "benchmarks.run.linux.x64.checked.mch").is_file()
    assert not list(cache.glob("*.zip")) and not list(cache.glob("*.part*"))
    again = superpmi(["download", *common, "--skip_cleanup", "--force_download"], env)
    assert again.returncode == 0 and "kept 1 downloaded archive(s)" in again.stdout
    cached = superpmi(["download", *common, "--skip_cleanup"], env)
    assert cached.returncode == 0 and "nothing was extracted, nothing to keep" in cached.stdout


def test_upload_auth_failure_hides_the_key(storage_account, collections_dir, tmp_path):
    spmi = tmp_path / "spmi"
    wrong_key = "d3JvbmctYWNjb3VudC1rZXktZm9yLXRlc3Rpbmctb25seQ=="
    result = superpmi(["upload", "-spmi_location", str(spmi), "-jit_ee_version", GUID, *TARGET,
                       "-mch_files", str(collections_dir), "-storage_url", storage_account.account_url,
                       "-account_key", wrong_key, "-log_level", "debug"])
    assert result.returncode == 1
    text = all_text(result, spmi)
    assert wrong_key not in text
    errors = [line for line in (result.stdout + result.stderr).splitlines() if "Error:" in line]
    assert len(errors) == 1 and "account key" in errors[0] and "-connection_string" in errors[0]


def test_upload_private_and_use_it(collections_dir, tmp_path):
    spmi = tmp_path / "spmi"
    store = tmp_path / "store"
    result = superpmi(["upload-private", "-spmi_location", str(spmi), "-jit_ee_version", GUID, *TARGET,
                       "-mch_files", str(collections_dir)], {"SUPERPMI_PRIVATE_STORE": f"{store};{tmp_path}/x"})
    assert result.returncode == 0, result.stdout + result.stderr
    target = store / GUID / "linux" / "x64"
    assert sorted(p.name for p in target.iterdir()) == [
        "benchmarks.run.linux.x64.checked.mch", "libraries.pmi.linux.x64.checked.mch",
        "libraries.pmi.linux.x64.checked.mch.mct"]
    kept = superpmi(["upload-private", "-spmi_location", str(spmi), "-jit_ee_version", GUID, *TARGET,
                     "-mch_files", str(collections_dir / "sub"), "-private_store", str(store), "--skip_cleanup"])
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert f"--skip_cleanup: nothing to keep (upload-private copies straight into {target})" in kept.stdout


def test_merge_mch_with_the_sample_mcs(sample_toolchain, tmp_path):
    source = sample_toolchain / "collections"
    inputs = tmp_path / "in"
    for mch in sorted(source.glob("*/linux/x64/*.mch")):
        shutil.copy(mch, inputs / mch.name if inputs.is_dir() else (inputs.mkdir() or inputs / mch.name))
    shutil.copy(sorted(source.glob("*/linux/x64/*.mch"))[0], inputs / "duplicate.mch")
    (inputs / "nested").mkdir()
    (inputs / "nested" / "empty-job.mch").write_bytes(b"ZEROLENGTH")
    output = tmp_path / "out" / "merged.mch"
    core_root = ["-core_root", str(sample_toolchain / "core_root"), "-spmi_location", str(tmp_path / "spmi")]
    result = superpmi(["merge-mch", *core_root, "-output_mch_path", str(output), "-pattern", f"{inputs}/*.mch", "--ci"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (inputs / "nested" / "empty-job.mch").exists()
    assert output.read_bytes()[:2] == b"mc" and Path(str(output) + ".mct").read_bytes()[:4] == b"INDX"
    total = sum(p.stat().st_size for p in inputs.glob("*.mch") if p.name != "duplicate.mch")
    assert output.stat().st_size <= total
    failed = superpmi(["merge-mch", *core_root, "-output_mch_path", str(tmp_path / "none.mch"),
                       "-pattern", f"{tmp_path}/nothing/*.mch"])
    assert failed.returncode == 1
    assert "mcs -merge failed" in failed.stdout + failed.stderr


# ---------------------------------------------------------------- secrets from the environment

def container_sas(permission_write: bool = True) -> str:
    import datetime

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas
    return generate_container_sas("devstoreaccount1", "superpmi", account_key=ACCOUNT_KEY,
                                  permission=ContainerSasPermissions(read=True, write=permission_write, create=True),
                                  expiry=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))


@pytest.mark.parametrize("variable", ["AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_KEY"])
def test_upload_takes_its_secret_from_the_environment(storage_account, collections_dir, tmp_path, variable):
    """No secret on the command line (the process list): the environment variable authenticates."""
    spmi = tmp_path / "spmi"
    secret = container_sas() if variable == "AZURE_STORAGE_SAS_TOKEN" else ACCOUNT_KEY
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_STORAGE_")}
    env[variable] = secret
    argv = ["upload", "-spmi_location", str(spmi), "-jit_ee_version", GUID, *TARGET, "-mch_files",
            str(collections_dir / "sub"), "-storage_url", storage_account.account_url, "-log_level", "debug"]
    result = subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), *argv], capture_output=True, text=True,
                            env=env, timeout=300)
    text = all_text(result, spmi)
    assert result.returncode == 0, text
    assert secret not in text and secret.split("sig=")[-1] not in text
    names = [b.name for b in storage_account.service_client().get_container_client("superpmi").list_blobs()]
    assert f"collections/{GUID}/linux/x64/benchmarks.run.linux.x64.checked.mch.zip" in names


def test_upload_without_any_credential_names_the_environment_variables(collections_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AZURE_STORAGE_")}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "superpmi.py"), "upload", "-spmi_location",
                             str(tmp_path / "spmi"), "-jit_ee_version", GUID, *TARGET, "-mch_files",
                             str(collections_dir), "-storage_url", "http://127.0.0.1:9/devstoreaccount1"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert "AZURE_STORAGE_SAS_TOKEN" in result.stdout + result.stderr
    assert "AZURE_STORAGE_KEY" in result.stdout + result.stderr


@pytest.mark.parametrize("script, command", [("superpmi.py", "upload"), ("jitrollingbuild.py", "upload")])
def test_help_names_the_variables_and_warns_about_the_process_list(script, command):
    result = subprocess.run([sys.executable, str(REPO_ROOT / script), command, "-h"], capture_output=True, text=True)
    help_text = " ".join(result.stdout.split())
    for variable in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_KEY"):
        assert variable in help_text
    assert "visible to other local users in the process list" in help_text
