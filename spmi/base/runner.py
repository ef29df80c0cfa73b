"""The one runner for every child process.

Argument vectors only (never a shell), stdout/stderr captured, a timeout that kills
the whole process tree, Ctrl-C that stops every child, and exit codes normalized
per OS (docs/contracts.md §2.9).
"""
from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from spmi.base import platforms
from spmi.base.errors import SuiteError, Terminated, ToolTimeout

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class RunResult:
    argv: List[str]
    returncode: int
    stdout: str
    stderr: str
    outcome: platforms.ExitOutcome
    seconds: float
    timed_out: bool = False

    @property
    def code(self) -> int:
        """The tool's own exit code (-1, -2 ... restored)."""
        return self.outcome.code


def format_command(argv: Sequence[str], host_os: Optional[str] = None) -> str:
    """A command line a user can paste into their shell."""
    host_os = host_os or platforms.detect_host_os()
    parts = [str(a) for a in argv]
    if host_os == platforms.WINDOWS:
        return subprocess.list2cmdline(parts)
    return " ".join(shlex.quote(p) for p in parts)


_children_lock = threading.Lock()
_children: Dict[int, "subprocess.Popen[bytes]"] = {}


def _popen_group_kwargs() -> Dict[str, object]:
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    return {"start_new_session": True}


def kill_process_tree(proc: "subprocess.Popen[bytes]") -> None:
    """Kill a child and everything it started (superpmi starts workers)."""
    if proc.poll() is not None:
        return
    try:
        if os.name == "nt":
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        proc.kill()


STOP_GRACE_SECONDS = 5.0


def stop_process_tree(proc: "subprocess.Popen[bytes]", grace: float = STOP_GRACE_SECONDS) -> None:
    """Ask a child's process group to stop (so a child suite can clean up its own temp folders
    and children), then kill what is left after `grace` seconds."""
    polite = platforms.polite_stop_signal()
    if polite is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, polite)
            proc.wait(timeout=grace)
        except (ProcessLookupError, PermissionError, OSError, subprocess.TimeoutExpired):
            pass
    kill_process_tree(proc)
    if polite is not None:
        try:  # grandchildren the child left behind in its group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def kill_all_children() -> None:
    with _children_lock:
        running = list(_children.values())
    for proc in running:
        kill_process_tree(proc)


def _raise_terminated(signal_number: int, _frame: object) -> None:
    raise Terminated(signal_number)


@contextmanager
def stop_on_termination() -> Iterator[None]:
    """Within the block, SIGTERM (SIGBREAK on Windows) stops the suite the way Ctrl-C does:
    `Terminated` (a KeyboardInterrupt) is raised, so running children are killed and
    temporary folders removed. Only in the main thread; signals someone set to be
    ignored stay ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for number in platforms.termination_signals():
        if signal.getsignal(number) == signal.SIG_IGN:
            continue
        previous[number] = signal.signal(number, _raise_terminated)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(argv: Sequence[PathLike], *, cwd: Optional[PathLike] = None,
        env: Optional[Mapping[str, str]] = None, extra_env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None, log_level: int = logging.DEBUG,
        log_output: bool = True, output_file: Optional[IO[bytes]] = None,
        inherit_output: bool = False,
        started_hook: Optional[Callable[["subprocess.Popen[bytes]"], None]] = None) -> RunResult:
    """Run a tool with an argument vector (never a shell) and capture its output.

    stdout and stderr are captured separately and logged line by line after the
    process ends; with `output_file` both go, interleaved, into that open file
    instead, and with `inherit_output` to this process's own stdout and stderr
    (the result's texts are then empty); `started_hook` gets the process once it runs (so another
    thread can stop it). On timeout the whole process tree is killed and `ToolTimeout`
    raised; on Ctrl-C the tree is killed and KeyboardInterrupt re-raised.
    A missing executable raises `SuiteError`.
    """
    args = [os.fspath(a) for a in argv]
    child_env = dict(os.environ if env is None else env)
    if extra_env:
        child_env.update(extra_env)
    log.log(log_level, "Invoking: %s", format_command(args))
    if extra_env:
        log.debug("  with environment: %s", " ".join(f"{k}={v}" for k, v in extra_env.items()))
    started = time.monotonic()
    try:
        proc = subprocess.Popen(args, cwd=None if cwd is None else os.fspath(cwd), env=child_env,
                                stdin=subprocess.DEVNULL, **_output_kwargs(output_file, inherit_output),
                                **_popen_group_kwargs())  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise SuiteError(f"cannot run '{args[0]}': {exc.strerror}; check the path") from exc
    except PermissionError as exc:
        raise SuiteError(f"cannot run '{args[0]}': permission denied; is it executable?") from exc
    with _children_lock:
        _children[proc.pid] = proc
    try:
        if started_hook is not None:
            started_hook(proc)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_tree(proc)
        out, err = proc.communicate()
        _log_output(out or b"", err or b"", log_level if log_output else logging.DEBUG)
        raise ToolTimeout(f"'{Path(args[0]).name}' did not finish within {timeout:g} s and was killed "
                          f"(command: {format_command(args)})") from None
    except BaseException:  # Ctrl-C, SIGTERM: stop the tree, keep what is finished
        stop_process_tree(proc)
        proc.wait()
        raise
    finally:
        with _children_lock:
            _children.pop(proc.pid, None)
    out, err = out or b"", err or b""
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    if log_output:
        _log_output(out, err, log_level)
    outcome = platforms.normalize_exit_code(proc.returncode, platforms.detect_host_os())
    return RunResult(args, proc.returncode, stdout, stderr, outcome, time.monotonic() - started)


def _output_kwargs(output_file: Optional[IO[bytes]], inherit_output: bool) -> Dict[str, Any]:
    """Where the child's stdout and stderr go: captured (default), one file, or ours."""
    if output_file is not None:
        return {"stdout": output_file, "stderr": subprocess.STDOUT}
    if inherit_output:
        return {"stdout": None, "stderr": None}
    return {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}


def _log_output(out: bytes, err: bytes, level: int) -> None:
    for stream in (out, err):
        for line in stream.decode("utf-8", errors="replace").splitlines():
            log.log(level, "%s", line)
