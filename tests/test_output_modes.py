"""Output files get the permissions the umask allows, as files written directly would."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from spmi.base import platforms

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_umask_line_of_proc_status_is_read() -> None:
    assert platforms.umask_from_proc_status("Name:\tpython\nUmask:\t0027\nState:\tR\n") == 0o027
    assert platforms.umask_from_proc_status("Name:\tpython\n") is None


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_summary_written_with_umask_permissions(tmp_path: Path, umask: int) -> None:
    (tmp_path / "superpmi_tpdiff_summary_linux_x64.md").write_text("tp numbers\n")
    argv = [sys.executable, str(REPO / "superpmi_asmdiffs_summarize.py"), "-diff_summary_dir", str(tmp_path),
            "-arch", "x64", "-platform", "linux", "-type", "tpdiff"]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr
    output = tmp_path / "2_overall_tpdiff_summary_linux_x64.md"
    assert mode_of(output) == 0o666 & ~umask


def test_atomic_write_and_umask_reading_in_a_fresh_process(tmp_path: Path) -> None:
    """The umask is read without changing it, also where /proc is not available."""
    script = (
        "import os, sys\n"
        f"sys.path[:0] = [{str(REPO)!r}]\n"
        "from pathlib import Path\n"
        "from spmi.base import fsutil, platforms\n"
        "os.umask(0o037)\n"
        "assert platforms.current_umask() == 0o037\n"
        "open_ = open\n"
        "def no_proc(path, *a, **k):\n"
        "    if str(path).startswith('/proc'):\n"
        "        raise FileNotFoundError(path)\n"
        "    return open_(path, *a, **k)\n"
        "import builtins; builtins.open = no_proc\n"
        "assert platforms.current_umask() == 0o037\n"
        "builtins.open = open_\n"
        "assert os.umask(0o037) == 0o037, 'the umask is unchanged'\n"
        f"fsutil.atomic_write_text(Path({str(tmp_path / 'manifest.json')!r}), '{{}}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert mode_of(tmp_path / "manifest.json") == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_html_report_gets_the_same_permissions_as_the_summaries(sample_toolchain: Path, tmp_path: Path,
                                                                umask: int) -> None:
    [mch] = sorted(sample_toolchain.glob("collections/*/linux/x64/libraries.pmi.*.mch"))
    spmi = tmp_path / "spmi"
    argv = [sys.executable, str(REPO / "superpmi.py"), "asmdiffs", "-core_root", str(sample_toolchain / "core_root"),
            "-arch", "x64", "-target_os", "linux", "-base_jit_path", str(sample_toolchain / "base" / "libclrjit.so"),
            "-mch_files", str(mch), "-spmi_location", str(spmi), "--no_progress"]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_BUILD", "GITHUB_STEP_SUMMARY")}
    env["SPMI_SAMPLE_START_MS"] = "0"
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = 0o666 & ~umask
    modes = {name: mode_of(spmi / name) for name in ("diff_summary.md", "diff_short_summary.md", "diff_report.html")}
    assert modes == dict.fromkeys(modes, expected)
    assert not [p.name for p in spmi.iterdir() if p.name.endswith(".tmp")], "no temporary file left"
