"""Everything that differs between Windows, Linux and macOS, in one place.

Host detection, executable and shared-library names, JIT file names,
how a parent process sees a tool's exit code, path rules and file locks.
Every function takes the OS explicitly where it matters, so it can be tested
for all three hosts on any machine.
"""
from __future__ import annotations

import os
import platform
import re
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Iterator, List, Optional

WINDOWS = "windows"
LINUX = "linux"
OSX = "osx"
HOST_OSES = (WINDOWS, LINUX, OSX)
ARCHES = ("x64", "x86", "arm", "arm64", "loongarch64", "riscv64", "wasm")
BUILD_TYPES = ("Debug", "Checked", "Release")

_MACHINE_TO_ARCH = {
    "x86_64": "x64",
    "amd64": "x64",
    "x64": "x64",
    "i386": "x86",
    "i686": "x86",
    "x86": "x86",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv8l": "arm",
    "arm": "arm",
    "loongarch64": "loongarch64",
    "riscv64": "riscv64",
}


def detect_host_os(sys_platform: str = sys.platform) -> str:
    """Map Python's `sys.platform` to the suite's OS spelling."""
    if sys_platform.startswith("win") or sys_platform == "cygwin":
        return WINDOWS
    if sys_platform == "darwin":
        return OSX
    return LINUX


def arch_from_machine(machine: str) -> Optional[str]:
    """Map `platform.machine()` text to the suite's arch spelling (None if unknown)."""
    return _MACHINE_TO_ARCH.get(machine.strip().lower())


def detect_host_arch() -> str:
    arch = arch_from_machine(platform.machine())
    if arch is None:
        raise ValueError(f"unrecognised machine type '{platform.machine()}'; pass -arch")
    return arch


def normalize_os(text: str) -> Optional[str]:
    """Accept the spellings users and older blobs use (`Linux`, `OSX`, `win`)."""
    lowered = text.strip().lower()
    aliases = {"windows": WINDOWS, "win": WINDOWS, "linux": LINUX, "osx": OSX,
               "macos": OSX, "darwin": OSX, "mac": OSX}
    return aliases.get(lowered)


def normalize_build_type(text: str) -> Optional[str]:
    for build_type in BUILD_TYPES:
        if build_type.lower() == text.strip().lower():
            return build_type
    return None


# ---------------------------------------------------------------- file names

def usable_cpu_count() -> int:
    """CPUs this process may run on (its affinity where the OS tells, else all); at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def exe_name(tool: str, host_os: str) -> str:
    """`superpmi` -> `superpmi.exe` on Windows."""
    return tool + ".exe" if host_os == WINDOWS else tool


def shared_lib_suffix(host_os: str) -> str:
    return {WINDOWS: ".dll", LINUX: ".so", OSX: ".dylib"}[host_os]


def shared_lib_prefix(host_os: str) -> str:
    return "" if host_os == WINDOWS else "lib"


def jit_os_family(target_os: str, target_arch: str) -> str:
    """The OS part of a cross JIT's name and build string: universal, win or unix."""
    if target_arch in ("arm", "arm64"):
        return "universal"
    return "win" if target_os == WINDOWS else "unix"


def jit_file_name(host_os: str, host_arch: str, target_os: str, target_arch: str,
                  force_cross: bool = False) -> str:
    """Name of the JIT that runs on the host and generates code for the target."""
    prefix = shared_lib_prefix(host_os)
    suffix = shared_lib_suffix(host_os)
    native = host_os == target_os and host_arch == target_arch
    if native and not force_cross:
        return f"{prefix}clrjit{suffix}"
    family = jit_os_family(target_os, target_arch)
    return f"{prefix}clrjit_{family}_{target_arch}_{host_arch}{suffix}"


def shim_collector_file_name(host_os: str) -> str:
    """The shim collector the runtime loads in place of the JIT (docs/contracts.md §14.1)."""
    return f"{shared_lib_prefix(host_os)}superpmi-shim-collector{shared_lib_suffix(host_os)}"


def coredistools_file_name(host_os: str) -> str:
    """The disassembler library `superpmi -a` loads from its own directory (docs/contracts.md §2.8.6):
    `coredistools.dll`, `libcoredistools.so`, `libcoredistools.dylib`."""
    return f"{shared_lib_prefix(host_os)}coredistools{shared_lib_suffix(host_os)}"


def crossgen2_relative_path(host_os: str) -> str:
    """crossgen2 below Core_Root (docs/contracts.md §14.2)."""
    return "crossgen2/" + exe_name("crossgen2", host_os)


def ilc_relative_path(host_os: str) -> str:
    """The NativeAOT compiler below Core_Root (docs/contracts.md §14.2)."""
    return "ilc-published/" + exe_name("ilc", host_os)


def native_object_suffix(host_os: str) -> str:
    """What ILC writes for `-o:` (docs/contracts.md §14.2): an object file on Windows, an archive elsewhere."""
    return ".obj" if host_os == WINDOWS else ".a"


def pintool_file_name(host_os: str) -> str:
    return f"{shared_lib_prefix(host_os)}clrjit_inscount{shared_lib_suffix(host_os)}"


def build_string_target_matches(build_os: str, build_arch: str,
                                target_os: str, target_arch: str) -> bool:
    """Does a JIT build string's `targeting <os>-<arch>` fit the requested target?"""
    arch = "arm" if build_arch == "arm32" else build_arch
    if arch != target_arch:
        return False
    if build_os == "universal":
        return True
    return build_os == jit_os_family(target_os, target_arch)


# ---------------------------------------------------------------- exit codes

@dataclass(frozen=True)
class ExitOutcome:
    """A tool's exit as the tool meant it: a signed code, or a crash."""

    code: int
    crashed: bool = False
    signal_number: Optional[int] = None

    def describe(self) -> str:
        if self.crashed:
            return f"crashed (signal/status {self.signal_number})"
        return f"exit code {self.code}"


_WINDOWS_CRASH_STATUS_MIN = 0xC0000000
_SIGNAL_NAMES = {11: "SIGSEGV", 6: "SIGABRT", 4: "SIGILL", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL"}


def signal_name(number: Optional[int]) -> str:
    if number is None:
        return "unknown signal"
    return _SIGNAL_NAMES.get(number, f"signal {number}")


def normalize_exit_code(returncode: int, host_os: str) -> ExitOutcome:
    """Undo how the OS reports a tool's exit code (docs/contracts.md §2.9).

    Unix: -1 arrives as 255, -2 as 254; a signal as a negative return code
    (Python) or 128+signal (through a shell). Windows: -1 arrives as
    4294967295, -2 as 4294967294, a crash as an NTSTATUS >= 0xC0000000.
    """
    if host_os == WINDOWS:
        unsigned = returncode & 0xFFFFFFFF
        if unsigned >= _WINDOWS_CRASH_STATUS_MIN and unsigned not in (0xFFFFFFFF, 0xFFFFFFFE):
            return ExitOutcome(code=returncode, crashed=True, signal_number=unsigned)
        signed = unsigned - 0x100000000 if unsigned >= 0x80000000 else unsigned
        return ExitOutcome(code=signed)
    if returncode < 0:
        return ExitOutcome(code=returncode, crashed=True, signal_number=-returncode)
    if returncode in (255, 254):
        return ExitOutcome(code=returncode - 256)
    if 129 <= returncode <= 159:
        return ExitOutcome(code=returncode, crashed=True, signal_number=returncode - 128)
    return ExitOutcome(code=returncode)


# ---------------------------------------------------------------- paths

_URL_RE = re.compile(r"^https?://", re.IGNORECASE)


def is_url(text: str) -> bool:
    return bool(_URL_RE.match(text))


def is_unc_path(text: str) -> bool:
    """`\\\\server\\share\\...` (or `//server/share`), which Windows treats as remote."""
    return text.startswith("\\\\") or (text.startswith("//") and not is_url(text))


def path_list_separator(host_os: str) -> str:
    return ";" if host_os == WINDOWS else ":"


def search_path_dirs(path_value: Optional[str], host_os: str) -> List[str]:
    """The directories of a `PATH`-style value (empty entries dropped)."""
    return [part for part in (path_value or "").split(path_list_separator(host_os)) if part]


def env_var_assignment(name: str, value: str, host_os: str) -> str:
    """How a user sets an environment variable in their shell."""
    if host_os == WINDOWS:
        return f"set {name}={value}"
    return f"export {name}={value}"


def same_file_name(a: str, b: str, host_os: str) -> bool:
    """File names compare case-insensitively on Windows and macOS (default volumes)."""
    if host_os in (WINDOWS, OSX):
        return a.lower() == b.lower()
    return a == b


# ---------------------------------------------------------------- signals

def termination_signals() -> List[int]:
    """Signals that ask the suite to stop (besides Ctrl-C): SIGTERM, and SIGBREAK on Windows."""
    return [getattr(signal, name) for name in ("SIGTERM", "SIGBREAK") if hasattr(signal, name)]


# ---------------------------------------------------------------- worker processes

def worker_start_method(host_os: str, threads_running: int) -> str:
    """How the suite starts its own Python worker processes (`multiprocessing` start method).

    Windows and macOS: `spawn`, their default (macOS system libraries are not fork-safe). Linux:
    `fork` while this process runs no other thread (a new worker is ready in milliseconds,
    `bench/analyzer.py`), else `forkserver`: a fork copies the locks other threads hold.
    """
    if host_os in (WINDOWS, OSX):
        return "spawn"
    return "fork" if threads_running <= 1 else "forkserver"


def stop_signals() -> List[int]:
    """Ctrl-C (SIGINT) and the termination signals."""
    return [signal.SIGINT] + termination_signals()


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Within the block, Ctrl-C and SIGTERM wait (they arrive when it ends). A child process started
    here starts with them held too, so it can set its own handlers first (`release_stop_signals`).
    Windows has no signal mask: there the block changes nothing."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_stop_signals() -> None:
    """Let Ctrl-C and SIGTERM arrive again (in a child started within `stop_signals_held`)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())


# ---------------------------------------------------------------- locks

def lock_file(handle: IO[bytes]) -> None:
    """Block until this process holds an exclusive lock on an open file."""
    if sys.platform == "win32":
        import msvcrt
        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:
                continue
    else:
        import fcntl
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def unlock_file(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        import msvcrt
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def polite_stop_signal() -> Optional[int]:
    """The signal that asks a child process group to stop and clean up (None: only a hard kill exists)."""
    import signal
    return None if os.name == "nt" else signal.SIGTERM


def temp_dir_environment(path: str) -> dict:
    """Environment that points a child's temporary files at `path` (TMPDIR on Unix, TEMP/TMP on Windows)."""
    return {"TMPDIR": path, "TEMP": path, "TMP": path}


# ---------------------------------------------------------------- file modes

_UMASK_LOCK = threading.Lock()
_UMASK_LINE_RE = re.compile(r"^Umask:\s*([0-7]+)\s*$", re.MULTILINE)


def umask_from_proc_status(text: str) -> Optional[int]:
    """The `Umask:` line of Linux's /proc/self/status (None when absent)."""
    match = _UMASK_LINE_RE.search(text)
    return int(match.group(1), 8) if match else None


def current_umask() -> int:
    """The process umask without changing it where the OS allows (Linux); elsewhere set and
    restored under a lock, so no other thread of the suite creates files in between."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            found = umask_from_proc_status(handle.read())
        if found is not None:
            return found
    except OSError:
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def default_file_mode() -> int:
    """What `open(path, "w")` would give a new file: 0o666 minus the umask."""
    return 0o666 & ~current_umask()
