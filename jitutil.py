"""Shared helpers for the SuperPMI scripts.

One `run()` for every child process, logging set-up, one-line user errors,
safe file writes, progress bars and the Azure DevOps / GitHub output
conventions. Larger shared concerns have their own modules beside this one:
`storage.py` (Azure Blob Storage: listing, verified downloads, safe unzip,
uploads), `git_utils.py` (merge-base and JIT change history) and
`platforms.py` (everything that differs between Windows, Linux and macOS).
"""
from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import platforms

log = logging.getLogger("superpmi")

PathLike = Union[str, "os.PathLike[str]"]


class SuiteError(Exception):
    """An error the user can act on; printed as one line, exit code 1."""


class ToolTimeout(SuiteError):
    """A child process ran longer than allowed and was killed."""


# ---------------------------------------------------------------- processes

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


def kill_all_children() -> None:
    with _children_lock:
        running = list(_children.values())
    for proc in running:
        kill_process_tree(proc)


def run(argv: Sequence[PathLike], *, cwd: Optional[PathLike] = None,
        env: Optional[Mapping[str, str]] = None, extra_env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None, log_level: int = logging.DEBUG,
        log_output: bool = True) -> RunResult:
    """Run a tool with an argument vector (never a shell) and capture its output.

    stdout and stderr are captured separately and logged line by line after the
    process ends. On timeout the whole process tree is killed and `ToolTimeout`
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
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **_popen_group_kwargs())  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise SuiteError(f"cannot run '{args[0]}': {exc.strerror}; check the path") from exc
    except PermissionError as exc:
        raise SuiteError(f"cannot run '{args[0]}': permission denied; is it executable?") from exc
    with _children_lock:
        _children[proc.pid] = proc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_tree(proc)
        out, err = proc.communicate()
        _log_output(out, err, log_level if log_output else logging.DEBUG)
        raise ToolTimeout(f"'{Path(args[0]).name}' did not finish within {timeout:g} s and was killed "
                          f"(command: {format_command(args)}); raise --timeout if it is just slow")
    except BaseException:
        kill_process_tree(proc)
        proc.wait()
        raise
    finally:
        with _children_lock:
            _children.pop(proc.pid, None)
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    if log_output:
        _log_output(out, err, log_level)
    outcome = platforms.normalize_exit_code(proc.returncode, platforms.detect_host_os())
    return RunResult(args, proc.returncode, stdout, stderr, outcome, time.monotonic() - started)


def _log_output(out: bytes, err: bytes, level: int) -> None:
    for stream in (out, err):
        for line in stream.decode("utf-8", errors="replace").splitlines():
            log.log(level, "%s", line)


# ---------------------------------------------------------------- logging

class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever `sys.stdout` is at the time of each message.

    A handler bound to the stream object of the moment would keep writing to a
    replaced stdout (a test's capture, a redirected console) after it changed.
    """

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property  # type: ignore[override]
    def stream(self):  # type: ignore[no-untyped-def]
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:  # type: ignore[no-untyped-def]
        pass


class _ConsoleFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(message)s", datefmt="%H:%M:%S")


def parse_log_level(text: str) -> int:
    levels = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
              "info": logging.INFO, "debug": logging.DEBUG}
    try:
        return levels[text.strip().lower()]
    except KeyError:
        raise SuiteError(f"unknown -log_level '{text}'; use one of {', '.join(levels)}") from None


def setup_logging(console_level: int, log_file: Optional[Path]) -> None:
    """Console at `console_level` on stdout; the log file (if any) always at DEBUG."""
    log.handlers.clear()
    log.setLevel(logging.DEBUG)
    log.propagate = False
    console = _StdoutHandler()
    console.setLevel(console_level)
    console.setFormatter(_ConsoleFormatter())
    log.addHandler(console)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file, mode="a", encoding="utf-8")
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(_ConsoleFormatter())
        log.addHandler(handler)
        log.info("================ Logging to %s", log_file)


def report_error(prog: str, message: str, to_stderr: bool = False) -> None:
    """The one line a user sees for an error.

    Through the console log once logging is set up (so log readers and the
    log file see it), else, or when `to_stderr`, as `<prog>: error: ...` on stderr.
    """
    if log.handlers and not to_stderr:
        log.error("Error: %s", message)
        return
    log.debug("Error: %s", message)
    print(f"{prog}: error: {message}", file=sys.stderr)


def run_guarded(prog: str, body: Callable[[], int], errors_to_stderr: bool = False) -> int:
    """Run a script's body; every failure becomes one line and an exit code.

    SuiteError: its message, exit 1. OSError: what failed on which file, exit 1.
    Ctrl-C: children killed, exit 130. Anything else: a one-line summary (secrets
    redacted), the traceback only in the DEBUG log, exit 1.
    """
    def report(message: str) -> None:
        report_error(prog, _redacted(message), errors_to_stderr)

    try:
        return int(body())
    except SuiteError as exc:
        report(str(exc))
        return 1
    except KeyboardInterrupt:
        kill_all_children()
        report("interrupted; child processes stopped, finished outputs kept")
        return 130
    except OSError as exc:
        log.debug("I/O error", exc_info=True)
        where = f" ({exc.filename})" if exc.filename else ""
        report(f"{exc.strerror or exc}{where}; check the path, its permissions and the free space")
        return 1
    except Exception as exc:  # noqa: BLE001 - last line of defence
        log.debug("Unexpected error", exc_info=True)
        report(f"unexpected {type(exc).__name__}: {exc} (details in the log file)")
        return 1


def _redacted(text: str) -> str:
    import storage  # imported here: storage itself uses this module
    return storage.redact(text)


# ---------------------------------------------------------------- files

def unique_file_path(path: Path) -> Path:
    """Unique name for a file to be created: `base.ext`, `base.1.ext`, ..."""
    if not path.exists():
        return path
    index = 1
    while True:
        candidate = path.with_name(f"{path.stem}.{index}{path.suffix}")
        if not candidate.exists():
            return candidate
        index += 1


def unique_dir_path(path: Path) -> Path:
    """Unique name for a directory to be created: `x`, `x.1`, `x.2`, ..."""
    if not path.exists():
        return path
    index = 1
    while True:
        candidate = path.with_name(f"{path.name}.{index}")
        if not candidate.exists():
            return candidate
        index += 1


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary name next to `path`, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def temporary_directory(prefix: str = "spmi-", keep: bool = False) -> Iterator[Path]:
    """A scratch directory removed afterwards (also on Ctrl-C), unless `keep`."""
    import shutil
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            log.info("Keeping temporary directory %s", path)
        else:
            shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- progress

def progress_enabled(no_progress: bool, stream: object = None) -> bool:
    """Progress bars only for a terminal, and never with --no_progress."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return not no_progress and bool(isatty and isatty())


def progress_bar(total: Optional[float], desc: str, unit: str = "B", enabled: bool = True):  # type: ignore[no-untyped-def]
    from tqdm import tqdm
    scale = unit == "B"
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, unit_divisor=1024 if scale else 1000,
                disable=not enabled, leave=False)


# ---------------------------------------------------------------- AzDO / GitHub

def azdo_escape_data(value: str) -> str:
    """Logging-command message/value text must be one line (CONTRACTS §12.17)."""
    return value.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def azdo_escape_property(value: str) -> str:
    return azdo_escape_data(value).replace(";", "%3B").replace("]", "%5D")


def azdo_set_variable(name: str, value: str, is_output: bool = False, is_secret: bool = False) -> str:
    props = f"variable={azdo_escape_property(name)}"
    if is_output:
        props += ";isOutput=true"
    if is_secret:
        props += ";issecret=true"
    return f"##vso[task.setvariable {props}]{azdo_escape_data(value)}"


def azdo_upload_summary(path: Path) -> str:
    return f"##vso[task.uploadsummary]{azdo_escape_data(str(path.resolve()))}"


def azdo_log_issue(kind: str, message: str, source_path: Optional[str] = None,
                   line_number: Optional[int] = None) -> str:
    if kind not in ("error", "warning"):
        raise ValueError(f"AzDO issue type must be error or warning, not {kind}")
    props = f"type={kind}"
    if source_path:
        props += f";sourcepath={azdo_escape_property(source_path)}"
        if line_number is not None:
            props += f";linenumber={line_number}"
    return f"##vso[task.logissue {props}]{azdo_escape_data(message)}"


def running_under_azdo(environ: Optional[Mapping[str, str]] = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(environ.get("TF_BUILD"))


GITHUB_STEP_SUMMARY_LIMIT = 1024 * 1024
GITHUB_COMMENT_LIMIT = 65536


def append_github_step_summary(markdown: str, environ: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """Append to `$GITHUB_STEP_SUMMARY` when set; returns the file written."""
    environ = os.environ if environ is None else environ
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown)
        if not markdown.endswith("\n"):
            handle.write("\n")
    return path
