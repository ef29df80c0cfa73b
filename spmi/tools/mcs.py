"""Driving `mcs`, the method-context shell (docs/contracts.md §5).

Pure argument-vector builders, one per verb the suite uses, plus one runner that
treats any non-zero exit as failure and checks that the expected output exists.
"""
from __future__ import annotations

import logging
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from spmi.base import runner
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")
PathLike = Union[str, Path]

TOC_SUFFIX = ".mct"


# ---------------------------------------------------------------- argument vectors (pure)

def merge_argv(mcs: PathLike, output: PathLike, pattern: str, recursive: bool = True, dedup: bool = True,
               thin: bool = True) -> List[str]:
    """`mcs -merge <out.mch> <pattern> [-recursive] [-dedup] [-thin]`."""
    argv = [str(mcs), "-merge", str(output), pattern]
    if recursive:
        argv.append("-recursive")
    if dedup:
        argv.append("-dedup")
    if thin:
        argv.append("-thin")
    return argv


def concat_argv(mcs: PathLike, target: PathLike, source: PathLike) -> List[str]:
    """`mcs -concat <file1> <file2>`: append file2 to file1 (created if needed)."""
    return [str(mcs), "-concat", str(target), str(source)]


def strip_argv(mcs: PathLike, context_list: PathLike, source: PathLike, output: PathLike) -> List[str]:
    """`mcs -strip <list> <in.mch> <out.mch>`: copy without the listed contexts."""
    return [str(mcs), "-strip", str(context_list), str(source), str(output)]


def toc_argv(mcs: PathLike, mch: PathLike) -> List[str]:
    """`mcs -toc <file.mch>`: write `<file.mch>.mct`."""
    return [str(mcs), "-toc", str(mch)]


def remove_dup_argv(mcs: PathLike, source: PathLike, output: PathLike, legacy: bool = False,
                    thin: bool = False) -> List[str]:
    """`mcs -removeDup [-legacy] [-thin] <in> <out>` (a verb the toolchain may omit)."""
    argv = [str(mcs), "-removeDup"]
    if legacy:
        argv.append("-legacy")
    if thin:
        argv.append("-thin")
    return argv + [str(source), str(output)]


def print_jit_ee_version_argv(mcs: PathLike) -> List[str]:
    return [str(mcs), "-printJITEEVersion"]


def dump_map_argv(mcs: PathLike, mch: PathLike) -> List[str]:
    """`mcs -dumpMap <file>`: one CSV row per context (§5)."""
    return [str(mcs), "-dumpMap", str(mch)]


def toc_path(mch: Path) -> Path:
    """Where the suite keeps a collection's table of contents: `<name>.mch.mct` (§4.3)."""
    return Path(str(mch) + TOC_SUFFIX)


def warning_lines(output: str) -> List[str]:
    """mcs's `WARNING:` lines (e.g. a truncated last record skipped by -merge)."""
    return [line.strip() for line in output.splitlines() if line.strip().startswith("WARNING:")]


# ---------------------------------------------------------------- -dumpMap rows (pure)

@dataclass(frozen=True)
class DumpMapRow:
    """One context of `mcs -dumpMap` (§5)."""

    index: int
    method_name: str             # `<class>:<method>`, unquoted (may hold commas and brackets)
    signature: str               # `<attributes><return type> <method>[<inst>](<IL arg types>)`
    jit_flags: Tuple[str, ...]
    os: Optional[int]

    def arguments(self) -> Optional[str]:
        """The IL argument types of the signature (the text of its last `(...)`), None when unreadable."""
        if not self.signature.endswith(")"):
            return None
        depth = 0
        for position in range(len(self.signature) - 1, -1, -1):
            char = self.signature[position]
            depth += {")": 1, "(": -1}.get(char, 0)
            if depth == 0:
                return self.signature[position + 1:-1]
        return None

    def display_name(self, with_arguments: bool = False) -> str:
        """`<class>:<method>` from the method name field, optionally `(<args>)` from the signature;
        the signature's return type and attributes are never part of the name."""
        arguments = self.arguments() if with_arguments else None
        return self.method_name if arguments is None else f"{self.method_name}({arguments})"

    def jit_name(self) -> str:
        """The name as the JIT reports it in the details CSV (docs/contracts.md §5):
        `<class>:<method>[<inst>](<args>)[:<return>][:this]`, types in the JIT's spelling; the method
        name field alone when the signature cannot be read."""
        arguments = self.arguments()
        class_name, _, method = self.method_name.partition(":")
        head = self.signature[:len(self.signature) - len(arguments) - 2] if arguments is not None else ""
        at = head.rfind(" " + method)
        if arguments is None or not method or at < 0:
            return self.method_name
        words, groups = head[:at], _bracket_groups(head[at + 1 + len(method):])
        instance = not words.startswith("static ")
        returns = jit_type(words[len("static "):] if not instance else words)
        method_inst = groups[1] if len(groups) > 1 else (groups[0] if groups and "[" not in class_name else "")
        text = f"{class_name}:{method}"
        text += f"[{','.join(jit_type(t) for t in split_types(method_inst))}]" if method_inst else ""
        text += f"({','.join(jit_type(arg) for arg in split_types(arguments))})"
        text += f":{returns}" if returns != "void" else ""
        return text + (":this" if instance else "")


#: IL spellings of `mcs -dumpMap` signatures -> the JIT's spelling in method names (docs/contracts.md §5)
_JIT_PRIMITIVES = {
    "int8": "byte", "unsigned int8": "ubyte", "int16": "short", "unsigned int16": "ushort", "int32": "int",
    "unsigned int32": "uint", "int64": "long", "unsigned int64": "ulong", "native int": "nint",
    "native unsigned int": "nuint", "float32": "float", "float64": "double",
}


def jit_type(il_type: str) -> str:
    """`int32` -> `int`, `class System.String` -> `System.String`, `valueclass S` -> `S` (`pinned ` dropped),
    arrays and instantiations element by element (``valueclass System.Span`1[unsigned int8]`` -> ``System.Span`1[ubyte]``)."""
    text = il_type.strip()
    text = text[len("pinned "):] if text.startswith("pinned ") else text
    suffix = ""
    while text.endswith("[]"):
        text, suffix = text[:-2].rstrip(), "[]" + suffix
    for kind in ("class ", "valueclass "):
        if text.startswith(kind):
            text = text[len(kind):]
            break
    else:
        return _JIT_PRIMITIVES.get(text, text) + suffix
    start = text.find("[")
    if start > 0 and text.endswith("]"):
        text = text[:start] + "[" + ",".join(jit_type(part) for part in split_types(text[start + 1:-1])) + "]"
    return text + suffix


def split_types(text: str) -> List[str]:
    """A list of types joined by `,` (and spaces), split outside brackets."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def _bracket_groups(text: str) -> List[str]:
    """The contents of consecutive top-level `[...]` groups (`[A][B, C]` -> `A`, `B, C`)."""
    groups, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth == 1:
                start = index + 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                groups.append(text[start:index])
    return groups


def parse_dump_map_row(line: str) -> Optional[DumpMapRow]:
    """`%d,<class>:<method>,"<signature>", <flags>, %d`, read without assuming a column count:
    the index, the name up to the quoted signature, the signature up to the last quote (it may hold
    quotes itself), then the flags (none or several names joined by `, `) and the os number last.
    None for the header and anything else that is not a row."""
    number, comma, rest = line.rstrip("\r\n").partition(",")
    if not comma or not number.strip().isdigit():
        return None
    opening = rest.find(',"')
    closing = rest.rfind('"')
    if opening < 0 or closing <= opening + 1:
        return None
    tail = [part.strip() for part in rest[closing + 1:].split(",")]
    if tail and tail[0] == "":
        tail = tail[1:]  # the separator after the closing quote
    os_number = int(tail[-1]) if tail and tail[-1].isdigit() else None
    flags = tuple(part for part in (tail[:-1] if os_number is not None else tail) if part)
    return DumpMapRow(int(number.strip()), rest[:opening], rest[opening + 2:closing], flags, os_number)


def parse_dump_map(text: str) -> Dict[int, DumpMapRow]:
    """Every row of `mcs -dumpMap` output by context number (header and noise skipped)."""
    rows: Dict[int, DumpMapRow] = {}
    for line in text.splitlines():
        row = parse_dump_map_row(line)
        if row is not None:
            rows[row.index] = row
    return rows


# ---------------------------------------------------------------- running

@dataclass(frozen=True)
class McsRun:
    argv: List[str]
    stdout: str
    warnings: List[str]


def run_mcs(argv: List[str], produces: Optional[Path], cwd: Optional[Path] = None) -> McsRun:
    """Run one mcs verb; non-zero exit or a missing `produces` file is a SuiteError naming both.

    `WARNING:` lines mcs prints are logged as warnings."""
    result = runner.run(argv, cwd=cwd)
    verb = argv[1] if len(argv) > 1 else "mcs"
    created = produces is None or produces.is_file()
    if result.code != 0 or not created:
        reason = result.outcome.describe()
        first = _first_error(result.stdout + "\n" + result.stderr)
        missing = "" if created else f"; {produces} was not created"
        raise SuiteError(f"mcs {verb} failed ({reason}{': ' + first if first else ''}){missing}; "
                         "the log file has its full output")
    warnings = warning_lines(result.stdout + "\n" + result.stderr)
    for line in warnings:
        log.warning("mcs %s: %s", verb, line)
    return McsRun(list(argv), result.stdout, warnings)


def _first_error(output: str) -> str:
    for line in output.splitlines():
        if line.strip().startswith("ERROR:"):
            return line.strip()
    return ""


# ---------------------------------------------------------------- the context map, beside another run

class ContextMapJob:
    """`mcs -dumpMap <mch>` started now in a thread of its own, its rows taken later (`rows`).

    tpdiff starts it beside the measured replay, which needs the same collection but not the map:
    the map then costs no wall time of its own (docs/contracts.md §12.11). A failure leaves the
    contexts unnamed (logged at debug), never the run. A collection that ends without using the map
    calls `stop` (mcs killed if it still runs); on Ctrl-C or SIGTERM the guarded entry stops every
    child, this one included; the thread is a daemon and holds nothing else."""

    def __init__(self, mcs: PathLike, mch: PathLike) -> None:
        self.argv = dump_map_argv(mcs, mch)
        self._rows: Optional[Dict[int, DumpMapRow]] = None
        self._lock = threading.Lock()
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mcs-dumpMap", daemon=True)
        self._thread.start()

    def _started(self, proc: "subprocess.Popen[bytes]") -> None:
        with self._lock:
            self._proc = proc
            stopped = self._stopped
        if stopped:
            runner.kill_process_tree(proc)

    def _run(self) -> None:
        try:
            result = runner.run(self.argv, log_output=False, started_hook=self._started)
        except SuiteError as exc:
            log.debug("mcs -dumpMap %s could not run (%s); contexts stay without method names", self.argv[-1], exc)
            return
        if self._stopped:
            return
        if result.code != 0:
            log.debug("mcs -dumpMap %s failed (%s); contexts stay without method names", self.argv[-1],
                      result.outcome.describe())
            return
        self._rows = parse_dump_map(result.stdout)

    def stop(self) -> None:
        """The job ended without its rows (the collection failed, or the run stops): mcs is killed if
        it still runs, so no collection's map outlives it."""
        with self._lock:
            self._stopped = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            runner.kill_process_tree(proc)
        self._thread.join()

    def rows(self) -> Dict[int, DumpMapRow]:
        """The map's rows by context number once mcs has finished (empty when it failed)."""
        self._thread.join()
        return self._rows or {}
