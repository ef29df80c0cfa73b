"""`jitrollingbuild.py` end to end: real git repositories, real Azurite, the script as a process."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from gitrepos import make_runtime_repos

import jitrollingbuild as jrb
from spmi.base import platforms
from spmi.base.errors import SuiteError
from spmi.commands import rollingbuild
from spmi.sources import baseline

SCRIPT = Path(__file__).resolve().parent.parent / "jitrollingbuild.py"
CONTAINER = "jitrollingbuild"
LINUX = ["-host_os", "linux", "-arch", "x64"]


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    return make_runtime_repos(tmp_path_factory.mktemp("runtime"))


def run_script(args: List[str], cwd: Path, storage_url: Optional[str] = None,
               extra_env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUPERPMI_STORAGE_URL", "SUPERPMI_CACHE_DIRECTORY", "AZURE_STORAGE_CONNECTION_STRING")}
    env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)
    if storage_url:
        env["SUPERPMI_STORAGE_URL"] = storage_url
    env.update(extra_env or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run `jitrollingbuild.main` in this process (faster than a new interpreter)."""
    def run(args: List[str], cwd: Path, storage_url: Optional[str] = None,
            extra_env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        for name in ("SUPERPMI_STORAGE_URL", "SUPERPMI_CACHE_DIRECTORY", "AZURE_STORAGE_CONNECTION_STRING"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(cwd.parent))
        if storage_url:
            monkeypatch.setenv("SUPERPMI_STORAGE_URL", storage_url)
        for name, value in (extra_env or {}).items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            code = jrb.main(args)
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        finally:
            logger = logging.getLogger("superpmi")
            for handler in list(logger.handlers):
                handler.close()
                logger.removeHandler(handler)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def blob_names(azurite, prefix: str = "") -> List[str]:
    client = azurite.service_client().get_container_client(CONTAINER)
    return sorted(b.name for b in client.list_blobs(name_starts_with=prefix or None))


def error_lines(result: subprocess.CompletedProcess) -> List[str]:
    return [line for line in (result.stdout + result.stderr).splitlines()
            if "] Error: " in line or (line.startswith("jitrollingbuild.py") and ": error: " in line)]


# ---------------------------------------------------------------- pure helpers

def test_list_scope_headers():
    plain = rollingbuild.list_scope("abc1234", False, False, "linux", "x64", "Checked")
    assert plain.prefix == "builds/abc1234/linux/x64/Checked"
    assert plain.header.format(n=2) == "2 JIT files for abc1234/linux/x64/Checked"
    every = rollingbuild.list_scope("abc1234", True, False, "linux", "x64", "Checked")
    assert every.prefix == "builds/abc1234/" and every.header.format(n=3) == "3 JIT files for abc1234/"
    everything = rollingbuild.list_scope(None, False, True, "linux", "x64", "Checked")
    assert everything.prefix == "builds/" and everything.header.format(n=4) == "4 JIT files"


def test_relative_blob_path_refuses_escapes():
    prefix = "builds/h/linux/x64/Checked"
    assert rollingbuild.relative_blob_path(prefix + "/libclrjit.so", prefix) == Path("libclrjit.so")
    for bad in (prefix + "/../x.so", prefix + "/", "elsewhere/libclrjit.so"):
        with pytest.raises(SuiteError, match="refusing"):
            rollingbuild.relative_blob_path(bad, prefix)


def test_jit_files_to_upload_by_host():
    names = ["libclrjit.so", "libclrjit_universal_arm64_x64.so", "libclrjit.so.dbg", "libcoreclr.so",
             "clrjit.dll", "libclrjit_win_x64_x64.so"]
    assert rollingbuild.jit_files_to_upload(names, "linux") == [
        "libclrjit.so", "libclrjit_universal_arm64_x64.so", "libclrjit_win_x64_x64.so"]
    assert rollingbuild.jit_files_to_upload(["clrjit.dll", "CLRJIT_win_x86_x64.DLL", "clrjit.pdb"], "windows") == [
        "CLRJIT_win_x86_x64.DLL", "clrjit.dll"]


# ---------------------------------------------------------------- command line errors

@pytest.mark.parametrize("args, code", [(["list", "--all", "--global_all"], 1),
                                        (["list", "--global_all", "-git_hash", "abcdef1"], 1),
                                        (["upload"], 2), (["frobnicate"], 2), ([], 2)])
def test_bad_command_lines_exit_with_one_line(cli, args, code, tmp_path):
    """Usage errors (argparse's) exit 2, flags that contradict each other 1."""
    result = cli(args + ["-spmi_location", str(tmp_path)] if args else args, cwd=tmp_path)
    assert result.returncode == code
    assert len(error_lines(result)) == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_conflicting_flags_as_a_process(tmp_path):
    result = run_script(["list", "--all", "--global_all", "-spmi_location", str(tmp_path)], cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "jitrollingbuild.py: error: --all and --global_all cannot be used together; pick one"]


def test_download_target_dir_must_exist(cli, repos, tmp_path):
    result = cli(["download", "-git_hash", "a" * 40, "-target_dir", str(tmp_path / "missing"),
                         "-spmi_location", str(tmp_path / "spmi")], cwd=repos.work)
    assert result.returncode == 1 and "-target_dir" in result.stdout + result.stderr


def test_not_a_git_checkout_is_one_line(cli, tmp_path, storage_account):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = cli(["download", "-runtime_repo", str(plain), "-spmi_location", str(tmp_path / "spmi")],
                        cwd=plain, storage_url=storage_account.account_url)
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1 and "git rev-parse HEAD" in lines[0] and "not a git repository" in lines[0]


@pytest.mark.parametrize("command", ["download", "list"])
def test_without_arguments_outside_an_enlistment_says_so(tmp_path, command):
    """Outside a dotnet/runtime enlistment (the scripts' own checkout is none) `download` and `list`
    with nothing named say which flag names one, before any storage access."""
    outside = tmp_path / "outside"
    outside.mkdir()
    result = run_script([command, "-spmi_location", str(tmp_path / "spmi")], cwd=outside,
                        storage_url="http://127.0.0.1:9")
    assert result.returncode == 1, result.stdout + result.stderr
    assert error_lines(result) == [
        next(line for line in result.stdout.splitlines() if "Error: " in line)]
    assert error_lines(result)[0].endswith(
        "] Error: not in a dotnet/runtime enlistment: pass -runtime_repo DIR or -git_hash HASH")
    assert "127.0.0.1" not in result.stdout + result.stderr


def test_runtime_repo_help_states_the_default():
    help_text = " ".join(jrb.build_parser()._subparsers._group_actions[0].choices["download"].format_help().split())
    assert ("-runtime_repo RUNTIME_REPO dotnet/runtime enlistment (default: the git work tree around the current "
            "directory, else the one around these scripts)") in help_text


# ---------------------------------------------------------------- download

def test_acceptance_download_without_arguments(tmp_path, storage_account):
    """From a checkout, `download` alone fetches the merge-base's build into the default cache."""
    repos = make_runtime_repos(tmp_path, base_touches_jit=True)
    host_os, arch = platforms.detect_host_os(), platforms.detect_host_arch()
    jit = platforms.jit_file_name(host_os, arch, host_os, arch)
    merge_base = repos.c["m5"]
    storage_account.upload(CONTAINER, baseline.build_blob_name(merge_base, host_os, arch, "Checked", jit),
                           b"\x7fELF baseline jit")
    # Decoys: another build type, another OS, an older JIT change.
    storage_account.upload(CONTAINER, baseline.build_blob_name(merge_base, host_os, arch, "Release", jit), b"rel")
    storage_account.upload(CONTAINER, baseline.build_blob_name(merge_base, "windows", "x64", "Checked",
                                                               "clrjit.dll"), b"win")
    storage_account.upload(CONTAINER, baseline.build_blob_name(repos.c["m4"], host_os, arch, "Checked", jit),
                           b"older")

    result = run_script(["download"], cwd=repos.work, storage_url=storage_account.account_url)

    assert result.returncode == 0, result.stdout + result.stderr
    cache = repos.work / "artifacts" / "spmi" / "basejit"
    expected_dir = cache / f"{merge_base}.{host_os}.{arch}.Checked"
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == [expected_dir.name]
    assert [p.name for p in expected_dir.iterdir()] == [jit]
    assert (expected_dir / jit).read_bytes() == b"\x7fELF baseline jit"
    assert f"try 1: {merge_base}" in result.stdout
    assert "not built with the first git hash" not in result.stdout


def test_download_skips_candidates_without_builds(cli, repos, storage_account, tmp_path):
    c = repos.c
    for name in ("libclrjit.so", "libclrjit_universal_arm64_x64.so"):
        storage_account.upload(CONTAINER, baseline.build_blob_name(c["m3"], "linux", "x64", "Checked", name),
                               name.encode())
    spmi = tmp_path / "spmi"
    result = cli(["download", *LINUX, "-spmi_location", str(spmi)], cwd=repos.work,
                        storage_url=storage_account.account_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"try 1: {c['m4']}" in result.stdout and f"try 2: {c['m3']}" in result.stdout
    assert baseline.NOT_FIRST_CANDIDATE_WARNING in result.stdout
    target = spmi / "basejit" / f"{c['m3']}.linux.x64.Checked"
    assert sorted(p.name for p in target.iterdir()) == ["libclrjit.so", "libclrjit_universal_arm64_x64.so"]
    # A second run keeps what the first one downloaded.
    again = cli(["download", *LINUX, "-spmi_location", str(spmi)], cwd=repos.work,
                       storage_url=storage_account.account_url)
    assert again.returncode == 0 and "Already downloaded" in again.stdout


def test_download_git_hash_into_target_dir(cli, repos, storage_account, tmp_path):
    wanted = "c" * 40
    storage_account.upload(CONTAINER, baseline.build_blob_name(wanted, "linux", "arm64", "Release", "libclrjit.so"),
                           b"arm64 release")
    out = tmp_path / "out"
    out.mkdir()
    result = cli(["download", "-host_os", "linux", "-arch", "arm64", "-build_type", "release",
                         "-git_hash", wanted, "-target_dir", str(out), "-spmi_location", str(tmp_path / "spmi")],
                        cwd=repos.work, storage_url=storage_account.account_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "libclrjit.so").read_bytes() == b"arm64 release"


def test_nothing_to_download(cli, repos, storage_account, tmp_path):
    result = cli(["download", *LINUX, "-spmi_location", str(tmp_path / "spmi")], cwd=repos.work,
                        storage_url=storage_account.account_url)
    assert result.returncode == 2
    assert "Error: nothing to download: no linux/x64/Checked build of" in result.stdout
    assert all(repos.c[k] in result.stdout for k in ("m4", "m3", "m1"))


# ---------------------------------------------------------------- list

def test_list_formats(cli, repos, storage_account, tmp_path):
    c = repos.c
    url = storage_account.account_url
    for git_hash, where, name in [(c["m4"], ("linux", "x64", "Checked"), "libclrjit.so"),
                                  (c["m4"], ("linux", "x64", "Checked"), "libclrjit_win_x64_x64.so"),
                                  (c["m4"], ("windows", "x64", "Checked"), "clrjit.dll"),
                                  (c["m1"], ("linux", "x64", "Checked"), "libclrjit.so")]:
        storage_account.upload(CONTAINER, baseline.build_blob_name(git_hash, *where, name), b"x")
    common = [*LINUX, "-spmi_location", str(tmp_path / "spmi")]

    plain = cli(["list", *common], cwd=repos.work, storage_url=url)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    lines = [line for line in plain.stdout.splitlines() if not line.startswith("[")]
    assert lines == [f"2 JIT files for {c['m4']}/linux/x64/Checked", "",
                     f"{url}/{CONTAINER}/builds/{c['m4']}/linux/x64/Checked/libclrjit.so",
                     f"{url}/{CONTAINER}/builds/{c['m4']}/linux/x64/Checked/libclrjit_win_x64_x64.so"]

    every = cli(["list", "--all", "-git_hash", c["m4"], *common], cwd=repos.work, storage_url=url)
    lines = [line for line in every.stdout.splitlines() if not line.startswith("[")]
    assert lines[0] == f"3 JIT files for {c['m4']}/" and lines[1] == "" and len(lines) == 5

    everything = cli(["list", "--global_all", *common], cwd=repos.work, storage_url=url)
    lines = [line for line in everything.stdout.splitlines() if not line.startswith("[")]
    assert lines[0] == "4 JIT files" and len(lines) == 6


# ---------------------------------------------------------------- upload

def make_product_dir(repo: Path) -> Path:
    product = repo / "artifacts" / "bin" / "coreclr" / "linux.x64.Checked"
    (product / "nested").mkdir(parents=True, exist_ok=True)
    for name in ("libclrjit.so", "libclrjit_universal_arm64_x64.so", "libclrjit_win_x64_x64.so",
                 "libclrjit.so.dbg", "libcoreclr.so", "nested/libclrjit_unix_x64_x64.so"):
        (product / name).write_bytes(name.encode())
    return product


def test_upload_then_download(cli, repos, storage_account, tmp_path):
    c = repos.c
    make_product_dir(repos.work)
    credentials = {"AZURE_STORAGE_CONNECTION_STRING": storage_account.connection_string}
    upload = run_script(["upload", *LINUX, "-git_hash", c["m5"], "--use_latest_jit_change",
                         "-spmi_location", str(tmp_path / "spmi")],
                        cwd=repos.work, storage_url=storage_account.account_url, extra_env=credentials)
    assert upload.returncode == 0, upload.stdout + upload.stderr
    prefix = f"builds/{c['m3']}/linux/x64/Checked/"
    assert blob_names(storage_account) == [prefix + n for n in (
        "libclrjit.so", "libclrjit_universal_arm64_x64.so", "libclrjit_win_x64_x64.so")]
    assert "AccountKey" not in upload.stdout + upload.stderr
    log_text = "".join(p.read_text() for p in (tmp_path / "spmi").glob("superpmi*.log"))
    assert "Eby8vdM02" not in log_text

    again = cli(["upload", *LINUX, "-git_hash", c["m3"], "-spmi_location", str(tmp_path / "spmi")],
                       cwd=repos.work, storage_url=storage_account.account_url, extra_env=credentials)
    assert again.returncode == 0 and "Warning: replacing existing blob!" in again.stdout

    out = tmp_path / "out"
    out.mkdir()
    download = cli(["download", *LINUX, "-git_hash", c["m3"], "-target_dir", str(out),
                           "-spmi_location", str(tmp_path / "spmi")],
                          cwd=repos.work, storage_url=storage_account.account_url)
    assert download.returncode == 0, download.stdout + download.stderr
    assert (out / "libclrjit_win_x64_x64.so").read_bytes() == b"libclrjit_win_x64_x64.so"


def test_upload_errors(cli, repos, storage_account, tmp_path):
    product = make_product_dir(repos.work)
    spmi = ["-spmi_location", str(tmp_path / "spmi")]
    no_credentials = cli(["upload", *LINUX, "-git_hash", "d" * 40, *spmi], cwd=repos.work,
                                storage_url=storage_account.account_url)
    assert no_credentials.returncode == 1 and len(error_lines(no_credentials)) == 1
    assert "credential" in no_credentials.stdout

    native_missing = tmp_path / "product"
    native_missing.mkdir()
    (native_missing / "libclrjit_win_x64_x64.so").write_bytes(b"x")
    missing = cli(["upload", *LINUX, "-git_hash", "d" * 40, "-product_location", str(native_missing), *spmi],
                         cwd=repos.work, storage_url=storage_account.account_url,
                         extra_env={"AZURE_STORAGE_CONNECTION_STRING": storage_account.connection_string})
    assert missing.returncode == 1 and "libclrjit.so" in missing.stdout
    assert blob_names(storage_account) == []
    assert product.is_dir()
