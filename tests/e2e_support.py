"""Helpers shared by the end-to-end tests that drive the suite against the sample toolchain."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent


def collection(toolchain: Path, name: str = "libraries.pmi", arch: str = "x64") -> Path:
    """The toolchain's linux collection of one set, e.g. `libraries.pmi.linux.x64.checked.mch`."""
    [mch] = sorted(toolchain.glob(f"collections/*/linux/{arch}/{name}.*.mch"))
    return mch


def superpmi_processes_for(mch: Path) -> List[int]:
    """superpmi processes replaying `mch` (its `-details` argument tells them from the suite's own
    process, and from a just-forked child that still shows the suite's command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
            except OSError:
                continue
            if str(mch) in args and "-details" in args:
                found.append(int(entry.name))
    return found


def interrupt_once_replaying(argv: List[str], env: Dict[str, str], mch: Path, settle: float = 0.3) -> Tuple[int, str]:
    """Start the suite, wait until superpmi replays `mch`, send Ctrl-C (SIGINT); returns exit code and output.

    Also checks that no superpmi replaying `mch` is left afterwards.
    """
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not superpmi_processes_for(mch):
        time.sleep(0.1)
    assert superpmi_processes_for(mch), "superpmi did not start"
    time.sleep(settle)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    time.sleep(0.3)
    assert superpmi_processes_for(mch) == [], "superpmi survived Ctrl-C"
    return proc.returncode, out


def assert_fails_in_one_line(command: str, toolchain: Path, spmi: Path, extra: List[str], message: str) -> None:
    """`superpmi.py <command>` with bad input: exit 1, `message`, exactly one error line, no traceback."""
    argv = [sys.executable, str(REPO / "superpmi.py"), command, "-core_root", str(toolchain / "core_root"),
            "-spmi_location", str(spmi), "-arch", "x64", "-target_os", "linux", *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=spmi.parent)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, (extra, text)
    assert message in text, (extra, text)
    assert "Traceback" not in text
    assert len([line for line in text.splitlines() if "rror" in line]) == 1, (extra, text)


def newest_log(spmi: Path) -> str:
    """The text of the newest `superpmi[.N].log` of a run (the details the console leaves out)."""
    logs = sorted(spmi.glob("superpmi*.log"), key=lambda p: p.stat().st_mtime_ns)
    assert logs, f"no superpmi log in {spmi}"
    return logs[-1].read_text(encoding="utf-8")


def superpmi_invocation(spmi: Path) -> str:
    """The first superpmi command line of a run, as its log records it (`Invoking: ...`)."""
    return next(line for line in newest_log(spmi).splitlines()
                if "Invoking:" in line and "/superpmi " in line)
