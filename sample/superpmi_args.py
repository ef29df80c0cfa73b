"""Command line of the sample superpmi: switch recognition, values, help."""
from __future__ import annotations

import os

from .jitfile import shared_library_suffix
from .mchfile import parse_mcl_text
from .plain import Record, read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

#: switch names in matching order
SWITCH_ORDER = [
    "help", "HELP", "?", "load", "jit", "reproName", "failingMCList", "target", "boe", "boa", "box",
    "ignoreStoredConfig", "verbosity", "writeLogFile", "emitMethodStats", "details", "applyDiff",
    "compile", "coredistools", "matchHash", "streaming", "parallel", "failureLimit", "skipCleanup",
    "repeatCount", "stride", "jitoption", "jit2option",
]
#: names that compare only a fixed number of leading characters
_FIXED_PREFIX = {"target": 6, "boe": 3, "boa": 3, "box": 3, "ignoreStoredConfig": 18}
#: names that need the whole word
_WHOLE_WORD = {"skipCleanup", "repeatCount"}

TARGETS = {"x64": "x64", "amd64": "x64", "x86": "x86", "arm": "arm", "arm32": "arm", "arm64": "arm64",
           "loongarch64": "loongarch64", "riscv64": "riscv64", "wasm": "wasm", "wasm32": "wasm"}
MAX_WORKERS = 64

HELP_TEXT = """SuperPMI is a JIT compiler testing tool.
(sample toolchain stand-in)

Usage: superpmi [options] jitname [jitname2] filename.mc|filename.mch|filename.mct

 jitname         JIT to load (host shared-library suffix)
 jitname2        second JIT, compared with the first one in -applyDiff mode
 filename        method contexts to replay (.mc, .mch or .mct)

Options:
 -applyDiff          compile each context with both JITs and compare the results
 -boe / -boa / -box  break on error / on assert / on exception
 -compile <list>     compile only these contexts: 20 | 20,25,30 | 10-99 | file.mcl
 -details <file>     write one CSV row per compile attempt
 -failingMCList <f>  write the numbers of failing contexts to <f>
 -failureLimit <n>   stop after <n> compile errors
 -ignoreStoredConfig ignore JIT config values recorded in the contexts
 -jitoption [force] key=value    JIT config for the first JIT
 -jit2option [force] key=value   JIT config for the second JIT
 -matchHash <hash>   compile only the context with this method hash
 -parallel [n]       run n worker processes
 -repeatCount <n>    compile each context n times
 -reproName <prefix> write <prefix>-<N>.mc for each failing context
 -stride <i> <n>     compile contexts i, i+n, i+2n, ...
 -target <arch>      target architecture of the JIT(s)
 -verbosity <flags>  e errors, w warnings, m missing, i issues, n info, v verbose,
                     d debug, a all, q quiet (default ewminv)
 -writeLogFile <f>   also write all messages to <f>

Exit codes:
 0  success
 -1 general fatal error (bad arguments, unreadable input, output files)
 -2 JIT failed to initialize
 1  compilation failures
 2  asm diffs found
 3  missing data encountered
"""


class UsageError(Exception):
    """Bad command line. ``show_help`` prints the help text after ``message``."""

    def __init__(self, message: Optional[str] = None, show_help: bool = True,
                 extra: Optional[List[str]] = None) -> None:
        super().__init__(message or "usage")
        self.message = message
        self.show_help = show_help
        self.extra = extra or []


class Options(Record):
    """What superpmi's command line asks for (:func:`parse_args`)."""

    __slots__ = ("apply_diff", "verbosity", "verbosity_given", "fail_mcl", "details", "compile_list", "match_hash",
                 "parallel", "workers", "repro_prefix", "forced1", "plain1", "forced2", "plain2", "target",
                 "failure_limit", "log_file", "break_on_error", "break_on_assert", "ignore_stored", "repeat_count",
                 "stride", "jits", "input", "worker_args")

    def __init__(self, apply_diff: bool = False, verbosity: str = "ewminv", verbosity_given: bool = False,
                 fail_mcl: Optional[str] = None, details: Optional[str] = None,
                 compile_list: Optional[List[int]] = None, match_hash: Optional[str] = None, parallel: bool = False,
                 workers: Optional[int] = None, repro_prefix: Optional[str] = None,
                 forced1: Optional[Dict[str, str]] = None, plain1: Optional[Dict[str, str]] = None,
                 forced2: Optional[Dict[str, str]] = None, plain2: Optional[Dict[str, str]] = None,
                 target: Optional[str] = None, failure_limit: int = 0, log_file: Optional[str] = None,
                 break_on_error: bool = False, break_on_assert: bool = False, ignore_stored: bool = False,
                 repeat_count: int = 1, stride: Optional[Tuple[int, int]] = None, jits: Optional[List[str]] = None,
                 input: Optional[str] = None, worker_args: Optional[List[str]] = None) -> None:
        self.apply_diff = apply_diff
        self.verbosity = verbosity
        self.verbosity_given = verbosity_given
        self.fail_mcl = fail_mcl
        self.details = details
        self.compile_list = compile_list
        self.match_hash = match_hash
        self.parallel = parallel
        self.workers = workers
        self.repro_prefix = repro_prefix
        self.forced1: Dict[str, str] = {} if forced1 is None else forced1
        self.plain1: Dict[str, str] = {} if plain1 is None else plain1
        self.forced2: Dict[str, str] = {} if forced2 is None else forced2
        self.plain2: Dict[str, str] = {} if plain2 is None else plain2
        self.target = target
        self.failure_limit = failure_limit
        self.log_file = log_file
        self.break_on_error = break_on_error
        self.break_on_assert = break_on_assert
        self.ignore_stored = ignore_stored
        self.repeat_count = repeat_count
        self.stride = stride
        self.jits: List[str] = [] if jits is None else jits
        self.input = input
        #: the arguments a parallel parent passes on to its workers
        self.worker_args: List[str] = [] if worker_args is None else worker_args


def match_switch(text: str) -> Optional[str]:
    """Canonical switch name for the text after the dash, or None."""
    lowered = text.lower()
    if not text:
        return None
    for name in SWITCH_ORDER:
        if name == "?":
            if text == "?":
                return "help"
            continue
        key = name.lower()
        if name in _FIXED_PREFIX:
            width = _FIXED_PREFIX[name]
            if len(text) >= width and lowered[:width] == key[:width]:
                return name
        elif name in _WHOLE_WORD:
            if lowered == key:
                return name
        elif key.startswith(lowered):
            return "help" if name == "HELP" else name
    return None


def parse_compile_list(text: str) -> List[int]:
    """``-c`` value: numbers, ranges or an ``.mcl`` file; raises UsageError with the messages."""
    invalid = "Arg '%s' is invalid, needed method context list." % text
    if text and all(ch.isdigit() or ch in ",-" for ch in text):
        numbers: List[int] = []
        for part in text.split(","):
            if "-" in part:
                low_text, _, high_text = part.partition("-")
                if not low_text.isdigit() or not high_text.isdigit() or int(low_text) > int(high_text):
                    raise UsageError("Invalid range in '%s'" % part, show_help=False, extra=[invalid])
                numbers.extend(range(int(low_text), int(high_text) + 1))
            elif part.isdigit():
                numbers.append(int(part))
            else:
                raise UsageError("Invalid range in '%s'" % part, show_help=False, extra=[invalid])
    else:
        try:
            numbers = parse_mcl_text(read_text(text, encoding="ascii", errors="replace"))
        except (OSError, ValueError):
            raise UsageError("Unable to read method context list '%s'" % text, show_help=False, extra=[invalid]) from None
    check_increasing(numbers, invalid)
    return numbers


def check_increasing(numbers: List[int], invalid: str) -> None:
    if not numbers:
        raise UsageError("MCL list is empty", show_help=False, extra=[invalid])
    if numbers[0] < 1:
        raise UsageError("MCL list needs to start from 1!", show_help=False, extra=[invalid])
    for previous, current in zip(numbers, numbers[1:]):
        if current <= previous:
            raise UsageError("MCL list must be increasing.. found %d -> %d" % (previous, current),
                             show_help=False, extra=[invalid])


def _parse_int(text: str) -> Optional[int]:
    try:
        return int(text, 10)
    except ValueError:
        return None


def _jit_option(args: List[str], index: int, forced: Dict[str, str], plain: Dict[str, str]) -> int:
    """Parse ``[force] k=v`` starting at ``index``; returns the next index."""
    if index >= len(args):
        raise UsageError()
    target = plain
    value = args[index]
    if value and "force".startswith(value.lower()):
        target = forced
        index += 1
        if index >= len(args):
            raise UsageError()
        value = args[index]
    positions = [p for p in (value.find("="), value.find("#")) if p >= 0]
    if not positions:
        raise UsageError()
    split = min(positions)
    key = value[:split]
    if len(key) >= 1024:
        raise UsageError()
    target[key] = value[split + 1:]
    return index + 1


def parse_args(args: List[str], host_os: str) -> Options:
    """Parse superpmi's arguments (without the program name)."""
    if not args:
        raise UsageError()
    options = Options()
    lib_suffix = shared_library_suffix(host_os)
    index = 0

    def value() -> str:
        nonlocal index
        index += 1
        if index >= len(args):
            raise UsageError()
        return args[index]

    while index < len(args):
        arg = args[index]
        start = index
        is_switch = arg.startswith("-") or (host_os == "windows" and arg.startswith("/"))
        if not is_switch:
            _positional(options, arg, lib_suffix)
            options.worker_args.append(arg)
            index += 1
            continue
        name = match_switch(arg[1:])
        if arg in ("-", "/"):
            raise UsageError()
        if name is None:
            raise UsageError("Unknown switch '%s' passed as argument." % arg)
        pass_on = True
        if name == "help":
            raise UsageError()
        elif name == "load":
            options.input = value()
        elif name == "jit":
            options.jits.append(value())
        elif name == "reproName":
            options.repro_prefix = value()
        elif name == "failingMCList":
            options.fail_mcl = value()
        elif name == "target":
            text = value()
            if text.lower() not in TARGETS:
                raise UsageError("Illegal target architecture specified with -target.", show_help=False)
            options.target = TARGETS[text.lower()]
        elif name == "boe":
            options.break_on_error = True
        elif name == "boa":
            options.break_on_assert = True
        elif name == "box":
            pass
        elif name == "ignoreStoredConfig":
            options.ignore_stored = True
        elif name == "verbosity":
            options.verbosity = value()
            options.verbosity_given = True
        elif name == "writeLogFile":
            options.log_file = value()
            pass_on = False
        elif name == "emitMethodStats":
            value()
        elif name == "details":
            options.details = value()
        elif name == "applyDiff":
            options.apply_diff = True
        elif name == "compile":
            options.compile_list = parse_compile_list(value())
        elif name == "coredistools":
            pass_on = False
        elif name == "matchHash":
            options.match_hash = value().lower()
        elif name == "streaming":
            value()
        elif name == "parallel":
            options.parallel = True
            pass_on = False
            if index + 1 < len(args) and args[index + 1].isdigit():
                index += 1
                count = int(args[index])
                if count < 1:
                    raise UsageError("Invalid workers count specified, workers count must be at least 1.",
                                     show_help=False)
                if count > MAX_WORKERS:
                    raise UsageError("Invalid workers count specified, workers count cannot be more than %d."
                                     % MAX_WORKERS, show_help=False)
                options.workers = count
        elif name == "failureLimit":
            limit = _parse_int(value())
            if limit is None or limit < 1:
                raise UsageError("Incorrect limit specified for -failureLimit. Limit must be > 0.", show_help=False)
            options.failure_limit = limit
        elif name == "skipCleanup":
            pass_on = False
        elif name == "repeatCount":
            count = _parse_int(value())
            if count is None or count < 1 or count > 2 ** 31 - 1:
                raise UsageError("Invalid repeat count specified. Repeat count must be between 1 and INT_MAX.",
                                 show_help=False)
            options.repeat_count = count
        elif name == "stride":
            offset = _parse_int(value())
            increment = _parse_int(value())
            if offset is None or increment is None or offset < 1 or increment < 1:
                raise UsageError()
            options.stride = (offset, increment)
        elif name == "jitoption":
            index = _jit_option(args, index + 1, options.forced1, options.plain1) - 1
        elif name == "jit2option":
            index = _jit_option(args, index + 1, options.forced2, options.plain2) - 1
        index += 1
        if pass_on and name not in ("failingMCList", "details"):
            options.worker_args.extend(args[start:index])
    return options


def _positional(options: Options, arg: str, lib_suffix: str) -> None:
    base = os.path.basename(arg.replace("\\", "/"))
    if "." not in base:
        raise UsageError()
    extension = "." + base.rsplit(".", 1)[1].lower()
    if extension == lib_suffix:
        if len(options.jits) >= 2:
            raise UsageError("Too many JITs specified.", show_help=False)
        options.jits.append(arg)
    elif extension in (".mc", ".mch", ".mct"):
        options.input = arg
    else:
        raise UsageError("Unknown file type passed as argument, '%s'." % arg, show_help=False)
