"""Parallel mode (``-p``) of the sample superpmi: runs worker processes with
``-stride i N`` and merges their outputs the way the real tool does."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import uuid

from .mchfile import format_mcl, parse_mcl_text
from .plain import Record, path_text, read_bytes, write_bytes
from .superpmi_args import MAX_WORKERS, Options
from .superpmi_output import Console, summary_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence

HELP_FIRST_LINE = b"SuperPMI is a JIT compiler testing tool."
_STATUS = re.compile(r"^Loaded (\d+)  Jitted (\d+)  FailedCompile (\d+) Excluded (\d+) Missing (\d+)(?: Diffs (\d+))?\s*$")


class WorkerFiles(Record):
    """The files of one worker, in the temporary folder."""

    __slots__ = ("mcl", "details", "stdout", "stderr")

    def __init__(self, mcl: str, details: str, stdout: str, stderr: str) -> None:
        self._init(mcl, details, stdout, stderr)

    def all(self) -> List[str]:
        return [self.mcl, self.details, self.stdout, self.stderr]


def worker_files(directory: str, tag: str, index: int) -> WorkerFiles:
    return WorkerFiles(
        os.path.join(directory, "ParallelSuperPMI-%s-%d.mcl" % (tag, index)),
        os.path.join(directory, "ParallelSuperPMI-Details-%s-%d.csv" % (tag, index)),
        os.path.join(directory, "ParallelSuperPMI-stdout-%s-%d.txt" % (tag, index)),
        os.path.join(directory, "ParallelSuperPMI-stderr-%s-%d.txt" % (tag, index)),
    )


def worker_command(program: str) -> List[str]:
    """How to start this superpmi again (a worker is the same executable)."""
    path = os.path.abspath(program)
    if os.name != "nt" and os.access(path, os.X_OK) and not path.endswith(".py"):
        return [path]
    return [sys.executable, path]


def combine_exit_codes(codes: Sequence[int]) -> int:
    """Parent exit code from the workers' codes as the parent sees them."""
    for wanted in (1, 2, 3, -2):
        if wanted in codes:
            return wanted
    if any(code != 0 for code in codes):
        return -1
    return 0


def worker_code(returncode: int) -> int:
    """A worker's code as a Unix parent sees it: 0-255, a signal death as 1."""
    if returncode < 0:
        return 1
    if os.name == "nt":
        return returncode if returncode < 2 ** 31 else returncode - 2 ** 32
    return returncode & 0xFF


def run_parallel(options: Options, argv: List[str], settings: Dict[str, str]) -> int:
    console = Console(options.verbosity)
    if options.log_file:
        try:
            console = Console(options.verbosity, open(options.log_file, "wb"))
        except OSError:
            console.error("Could not create file %s" % options.log_file)
            return -1
    try:
        return _run(options, settings, console)
    finally:
        console.close()


def _create(path: Optional[str], console: Console) -> bool:
    if not path:
        return True
    try:
        open(path, "wb").close()
        return True
    except OSError:
        console.error("Could not create file %s" % path)
        return False


def _run(options: Options, settings: Dict[str, str], console: Console) -> int:
    count = options.workers or min(os.cpu_count() or 1, MAX_WORKERS)
    if not _create(options.fail_mcl, console) or not _create(options.details, console):
        return -1
    directory = path_text(tempfile.gettempdir())
    tag = uuid.uuid4().hex[:12]
    files = [worker_files(directory, tag, index) for index in range(1, count + 1)]
    processes = []
    handles = []
    try:
        for index, worker in enumerate(files, start=1):
            command = worker_command(settings["program"]) + ["-v", "ewmin"] + options.worker_args
            command += ["-stride", str(index), str(count)]
            if options.fail_mcl:
                command += ["-f", worker.mcl]
            if options.details:
                command += ["-details", worker.details]
            try:
                out = open(worker.stdout, "wb")
                err = open(worker.stderr, "wb")
            except OSError:
                console.error("Could not create worker file in %s" % directory)
                return -1
            handles.extend([out, err])
            try:
                processes.append(subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL))
            except OSError as error:
                console.error("Failed to start worker %d: %s" % (index, error))
                return -1
        codes = [worker_code(process.wait()) for process in processes]
        for handle in handles:
            handle.close()
        merge_outputs(options, files, console, codes)
        return combine_exit_codes(codes)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        for handle in handles:
            if not handle.closed:
                handle.close()
        for worker in files:
            for path in worker.all():
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _read(path: str) -> bytes:
    try:
        return read_bytes(path)
    except OSError:
        return b""


def merge_outputs(options: Options, files: List[WorkerFiles], console: Console, codes: List[int]) -> None:
    totals = [0, 0, 0, 0, 0, 0]
    saw_diffs = False
    usage_error = False
    out = sys.stdout.buffer
    for worker in files:
        sys.stdout.flush()
        sys.stderr.buffer.write(_read(worker.stderr))
        sys.stderr.flush()
        for line in _read(worker.stdout).splitlines(keepends=True):
            if usage_error or line.startswith(HELP_FIRST_LINE):
                usage_error = True
                out.write(line)
                continue
            if line.startswith(b"Loaded "):
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                match = _STATUS.match(text)
                if match is None:
                    console.error('Couldn\'t parse status message: "%s"' % text)
                    continue
                for position in range(5):
                    totals[position] += int(match.group(position + 1))
                if match.group(6) is not None:
                    saw_diffs = True
                    totals[5] += int(match.group(6))
                continue
            out.write(line)
        out.flush()
    if usage_error:
        return
    if options.fail_mcl:
        numbers = set()
        for worker in files:
            numbers.update(parse_mcl_text(_read(worker.mcl).decode("ascii", "replace")))
        write_bytes(options.fail_mcl, format_mcl(sorted(numbers)))
    if options.details:
        merge_details(path_text(options.details), [w.details for w in files])
    diffs = totals[5] if (options.apply_diff or saw_diffs) else None
    console.info(summary_line(totals[0], totals[1], totals[2], totals[3], totals[4], diffs))


def merge_details(target: str, parts: List[str]) -> None:
    header: Optional[bytes] = None
    rows: List[bytes] = []
    for part in parts:
        lines = _read(part).splitlines(keepends=True)
        if not lines:
            continue
        if header is None:
            header = lines[0]
        rows.extend(lines[1:])
    with open(target, "wb") as stream:
        if header is not None:
            stream.write(header)
        stream.writelines(rows)
