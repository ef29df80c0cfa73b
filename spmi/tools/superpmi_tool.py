"""Driving `superpmi`: argument vectors, running it, and reading what it says.

Pure parts (tested without processes):

* the run options every replaying command shares (`RunOptions`, made from the command line
  in `spmi/commands/shared.py`) and how they map to superpmi switches (docs/contracts.md §12.6);
* argument vectors for replay, asmdiffs and listing runs (§12.6);
* what an exit code means for a command (§2.9, §12.7);
* JIT assert lines (§2.8.3), their grouping and report (§12.7);
* `.mcl` lists (§3.1) and the `-details` path rule (§12.1).

I/O at the edges: `run_superpmi` (one process through `runner.run`, a timeout
becomes a failed run with a one-line reason) and `collect_repros` (moves repro
`.mc` files into a unique `repro.<mch base>` directory).
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import math
import os
import re
import shutil
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from spmi.base import config, errors, fsutil, logs, platforms, runner
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

ASSERT_RE = re.compile(r"ISSUE: <ASSERT> #([0-9]+) (.*) \(([0-9]*)\) - Assertion failed '(.*)' in '.*' "
                       r"during '.*' \(IL size ([0-9]*); hash .*\)")
ASSERT_INSTANCES_SHOWN = 25
ALTJIT_OPTIONS = ("AltJit=*", "AltJitNgen=*")
#: Forced on both JITs in asmdiffs (§12.6); JitAlignLoops=0 is added unless --alignloops.
ASMDIFFS_REPLAY_OPTIONS = ("JitEnableNoWayAssert=1", "JitNoForceFallback=1")
ALIGN_LOOPS_OFF = "JitAlignLoops=0"
REPRO_PREFIX = "repro"
MAX_PARALLELISM = 64  # superpmi -p accepts at most this many workers


# ---------------------------------------------------------------- positional arguments (§2.3)

class PositionalKind(str, enum.Enum):
    """How superpmi reads a positional argument: by its last extension, case-insensitively."""

    JIT = "a JIT"
    INPUT = "a collection"
    UNKNOWN = "an unknown file type"
    NONE = "nothing (no extension)"


INPUT_EXTENSIONS = (".mc", ".mch", ".mct")


def positional_kind(path: str, host_os: str) -> PositionalKind:
    """What superpmi on `host_os` takes `path` for (docs/contracts.md §2.3). Pure."""
    name = Path(path).name
    extension = name[name.rfind("."):].lower() if "." in name else ""
    if not extension:
        return PositionalKind.NONE
    if extension == platforms.shared_lib_suffix(host_os):
        return PositionalKind.JIT
    return PositionalKind.INPUT if extension in INPUT_EXTENSIONS else PositionalKind.UNKNOWN


# ---------------------------------------------------------------- run options

@dataclass(frozen=True)
class RunOptions:
    sequential: bool = False
    parallelism: Optional[int] = None
    compile_list: Optional[str] = None
    error_limit: Optional[int] = None
    spmi_log_file: Optional[str] = None
    break_on_assert: bool = False
    break_on_error: bool = False
    produce_repro: bool = False
    details: Optional[str] = None
    skip_cleanup: bool = False
    jit_name: Optional[str] = None
    altjit: bool = False
    timeout: Optional[float] = None
    time_budget: Optional[float] = None
    started: float = field(default_factory=time.monotonic, compare=False)

    def validate(self) -> None:
        self.validate_common()
        for flag, seconds in (("--timeout", self.timeout), ("--time_budget", self.time_budget)):
            if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= config.MAX_SECONDS):
                raise SuiteError(f"{flag} {seconds:g} must be a positive number of seconds, at most "
                                 f"{config.MAX_SECONDS:,} (30 days)")
        if self.compile_list is not None and not self.compile_list.strip():
            raise SuiteError("-compile needs a context list such as 20, 5,10-99 or a .mcl file")

    def validate_common(self) -> None:
        """The checks of the `add_superpmi_common_options` switches and --parallelism."""
        if self.spmi_log_file and not self.sequential:
            raise SuiteError("-spmi_log_file requires --sequential (superpmi does not pass -w to its workers)")
        if self.parallelism is not None and self.parallelism < 1:
            raise SuiteError(f"--parallelism {self.parallelism} must be at least 1")
        if self.parallelism is not None and self.parallelism > MAX_PARALLELISM:
            raise SuiteError(f"--parallelism {self.parallelism} is more than superpmi allows ({MAX_PARALLELISM})")
        if self.parallelism is not None and self.sequential:
            raise SuiteError(f"--sequential and --parallelism {self.parallelism} contradict each other; pass one of them")
        if self.error_limit is not None and self.error_limit < 1:
            raise SuiteError(f"-error_limit {self.error_limit} must be at least 1")

    def run_timeout(self, now: Optional[float] = None) -> Optional[float]:
        """The timeout of the next superpmi process: `--timeout`, shortened to what is left of
        `--time_budget` (0 when it is used up: the process is not started)."""
        limits = [] if self.timeout is None else [self.timeout]
        if self.time_budget is not None:
            elapsed = (time.monotonic() if now is None else now) - self.started
            limits.append(max(0.0, self.time_budget - elapsed))
        return min(limits) if limits else None

    def timeout_flag(self, timeout: Optional[float]) -> str:
        """Which flag a run's timeout came from (for the message when it fires)."""
        return "--timeout" if self.timeout is not None and timeout is not None and timeout >= self.timeout \
            else "--time_budget"

    @property
    def uses_parallel(self) -> bool:
        return not self.sequential and self.compile_list is None

    def worker_count(self) -> int:
        """Processes the suite's own parallel work may use (listing generation)."""
        if self.sequential:
            return 1
        if self.parallelism:
            return self.parallelism
        return max(1, min(os.cpu_count() or 1, MAX_PARALLELISM))


# ---------------------------------------------------------------- argument pieces (pure)

def parallel_flags(options: RunOptions) -> List[str]:
    """`[par]`: `-p` or `-p N`, unless --sequential or -c."""
    if not options.uses_parallel:
        return []
    if options.parallelism:
        return ["-p", str(options.parallelism)]
    return ["-p"]


def common_flags(options: RunOptions) -> List[str]:
    """`[common]` = `[-boa] [-boe] [-c <list>] [-w <file>] [-failureLimit <N>]`."""
    flags: List[str] = []
    if options.break_on_assert:
        flags.append("-boa")
    if options.break_on_error:
        flags.append("-boe")
    if options.compile_list is not None:
        flags += ["-c", options.compile_list]
    if options.spmi_log_file:
        flags += ["-w", options.spmi_log_file]
    if options.error_limit is not None:
        flags += ["-failureLimit", str(options.error_limit)]
    return flags


def target_flags(host_arch: str, target_arch: str) -> List[str]:
    return ["-target", target_arch] if host_arch != target_arch else []


def option_flags(switch: str, values: Iterable[str], force: bool = False) -> List[str]:
    """`-jitoption [force] k=v` for each value."""
    flags: List[str] = []
    for value in values:
        flags += [switch, "force", value] if force else [switch, value]
    return flags


def altjit_flags(two_jits: bool) -> List[str]:
    flags = option_flags("-jitoption", ALTJIT_OPTIONS, force=True)
    if two_jits:
        flags += option_flags("-jit2option", ALTJIT_OPTIONS, force=True)
    return flags


def asmdiffs_replay_options(align_loops: bool) -> List[str]:
    values = list(ASMDIFFS_REPLAY_OPTIONS)
    if not align_loops:
        values.append(ALIGN_LOOPS_OFF)
    return values


@dataclass(frozen=True)
class RunFiles:
    """Per-collection files superpmi writes."""

    fail_mcl: Path
    details_csv: Path
    repro_prefix: Optional[Path] = None


@dataclass(frozen=True)
class SuperpmiInvocation:
    """What every superpmi run of one command shares (§12.6): the tool, the host
    and target architectures, and the run options (altjit, parallelism, timeout…)."""

    superpmi: Path
    host_arch: str
    target_arch: str
    options: RunOptions = RunOptions()

    @property
    def altjit(self) -> bool:
        return self.options.altjit

    def with_options(self, options: RunOptions) -> "SuperpmiInvocation":
        return dataclasses.replace(self, options=options)

    def target_flags(self) -> List[str]:
        return target_flags(self.host_arch, self.target_arch)


def build_replay_argv(call: SuperpmiInvocation, jit: Path, mch: Path, files: RunFiles,
                      jit_options: Sequence[str]) -> List[str]:
    """replay: `superpmi -v ewi [-r] [par] [common] [altjit] [-target] [-jitoption o]… -f -details <jit> <mch>`."""
    options = call.options
    argv = [str(call.superpmi), "-v", "ewi"]
    if files.repro_prefix is not None:
        argv += ["-r", str(files.repro_prefix)]
    argv += parallel_flags(options) + common_flags(options)
    if options.altjit:
        argv += altjit_flags(two_jits=False)
    argv += call.target_flags()
    argv += option_flags("-jitoption", jit_options)
    argv += ["-f", str(files.fail_mcl), "-details", str(files.details_csv), str(jit), str(mch)]
    return argv


@dataclass(frozen=True)
class JitPairOptions:
    """JIT config for a two-JIT run: forced replay vars, then side-specific, then shared options."""

    forced: Sequence[str] = ()
    shared: Sequence[str] = ()
    base_only: Sequence[str] = ()
    diff_only: Sequence[str] = ()

    def side(self, side: str) -> List[str]:
        """Non-forced options one JIT gets, in the §12.6 order (side-specific first)."""
        specific = self.base_only if side == "base" else self.diff_only
        return list(specific) + list(self.shared)


def build_asmdiffs_argv(call: SuperpmiInvocation, base_jit: Path, diff_jit: Path, mch: Path, files: RunFiles,
                        jit_options: JitPairOptions, ignore_stored_config: bool = False) -> List[str]:
    """asmdiffs: `superpmi -a -v ewi -f -details [-r] [-target] [altjit] -jitoption force …
    [-jitoption …] -jit2option force … [-jit2option …] [par] [common] [-ignoreStoredConfig] <base> <diff> <mch>`."""
    options = call.options
    argv = [str(call.superpmi), "-a", "-v", "ewi", "-f", str(files.fail_mcl), "-details", str(files.details_csv)]
    if files.repro_prefix is not None:
        argv += ["-r", str(files.repro_prefix)]
    argv += call.target_flags()
    if options.altjit:
        argv += altjit_flags(two_jits=True)
    argv += option_flags("-jitoption", jit_options.forced, force=True)
    argv += option_flags("-jitoption", jit_options.side("base"))
    argv += option_flags("-jit2option", jit_options.forced, force=True)
    argv += option_flags("-jit2option", jit_options.side("diff"))
    argv += parallel_flags(options) + common_flags(options)
    if ignore_stored_config:
        argv.append("-ignoreStoredConfig")
    argv += [str(base_jit), str(diff_jit), str(mch)]
    return argv


def build_listing_argv(call: SuperpmiInvocation, jit: Path, mch: Path, contexts: Sequence[int],
                       forced: Sequence[str], jit_options: Sequence[str], stdout_file: Optional[Path]) -> List[str]:
    """Listing run for one JIT: `superpmi -c <list> [-target] [altjit] -jitoption force … [-jitoption …] <jit> <mch>`.

    With `stdout_file` the JIT's stdout goes there through a forced option (so a
    value recorded in the collection cannot redirect it).
    """
    argv = [str(call.superpmi), "-c", format_context_list(contexts)]
    argv += call.target_flags()
    if call.altjit:
        argv += altjit_flags(two_jits=False)
    forced_values = list(forced)
    if stdout_file is not None:
        forced_values.append(f"JitStdOutFile={stdout_file}")
    argv += option_flags("-jitoption", forced_values, force=True)
    argv += option_flags("-jitoption", jit_options)
    argv += [str(jit), str(mch)]
    return argv


def format_context_list(contexts: Sequence[int]) -> str:
    """Strictly increasing context numbers as a superpmi `-c` list, ranges collapsed."""
    numbers = sorted(set(contexts))
    if not numbers or numbers[0] < 1:
        raise ValueError("context numbers start at 1")
    parts: List[str] = []
    start = prev = numbers[0]
    for number in numbers[1:] + [None]:  # type: ignore[list-item]
        if number is not None and number == prev + 1:
            prev = number
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if number is not None:
            start = prev = number
    return ",".join(parts)


# ---------------------------------------------------------------- results (pure)

class ResultKind(str, enum.Enum):
    """What kind of result one superpmi run had (§2.9, §12.7).

    The values are the words used in logs, JSON and markdown; a member equals
    its value as a string.
    """

    CLEAN = "clean"              # exit 0
    DIFFS = "diffs"              # exit 2 in diff mode
    MISSING = "missing"          # exit 3: missing data
    FAILURES = "failures"        # exit 1: compilation failures / JIT asserts
    FATAL = "fatal"              # exit -1
    JIT_INIT = "jit_init"        # exit -2: the JIT did not load or initialize
    CRASH = "crash"              # a signal or a crash status
    TIMEOUT = "timeout"          # killed after --timeout
    UNKNOWN = "unknown"          # any other exit code

    def __str__(self) -> str:
        return self.value

    @property
    def has_no_data(self) -> bool:
        """The run ended before producing a usable details CSV."""
        return self in _NO_DATA

    @property
    def explained_in_stderr(self) -> bool:
        """superpmi prints the reason as an `ERROR: ` line on stderr."""
        return self in _EXPLAINED_IN_STDERR


_NO_DATA = frozenset({ResultKind.FATAL, ResultKind.JIT_INIT, ResultKind.CRASH, ResultKind.UNKNOWN,
                      ResultKind.TIMEOUT})
_EXPLAINED_IN_STDERR = frozenset({ResultKind.FATAL, ResultKind.JIT_INIT, ResultKind.UNKNOWN})


@dataclass(frozen=True)
class Verdict:
    """What one superpmi run's exit means for the command."""

    failed: bool
    message: str
    kind: ResultKind
    warning: bool = False


@dataclass(frozen=True)
class ContextCounts:
    """From the details CSV: rows and misses (per side in diff mode)."""

    total: int = 0
    missing: int = 0
    missing_base: int = 0
    missing_diff: int = 0


def crash_message(outcome: platforms.ExitOutcome) -> str:
    number = outcome.signal_number
    if number == 11:
        return "Fatal error, SuperPMI has returned SIGSEGV (segmentation fault), please check the log for more details."
    if number is not None and number >= 0xC0000000:
        return (f"Fatal error, SuperPMI crashed with status 0x{number:08X}, "
                "please check the log for more details.")
    return (f"Fatal error, SuperPMI has returned {platforms.signal_name(number)} (crash), "
            "please check the log for more details.")


def interpret_exit(outcome: platforms.ExitOutcome, diff_mode: bool, counts: ContextCounts,
                   diff_with_release: bool = False, compares_code: bool = True) -> Verdict:
    """§12.7: exit code → failure or not, with the original console wording. A command that
    does not compare code (tpdiff, memdiff, metricdiff: `compares_code=False`) reads exit 2 as
    a finished diff, not as asm diffs."""
    if outcome.crashed or outcome.code == 139:
        crashed = outcome if outcome.crashed else platforms.ExitOutcome(139, True, 11)
        return Verdict(True, crash_message(crashed), ResultKind.CRASH)
    code = outcome.code
    if code == 0:
        what = "diff" if diff_mode else "replay"
        return Verdict(False, f"Clean SuperPMI {what} ({counts.total} contexts processed)", ResultKind.CLEAN)
    if code == 2 and diff_mode:
        if not compares_code:
            return Verdict(False, f"SuperPMI diff done ({counts.total} contexts processed)", ResultKind.DIFFS)
        if diff_with_release:
            return Verdict(True, "Asm diffs found (a failure with --diff_with_release)", ResultKind.DIFFS)
        return Verdict(False, "Asm diffs found", ResultKind.DIFFS)
    if code == 3:
        return Verdict(False, missing_message(counts, diff_mode), ResultKind.MISSING, warning=True)
    if code == 1:
        return Verdict(True, "Compilation failures", ResultKind.FAILURES, warning=True)
    if code == -1:
        return Verdict(True, "General fatal error, please check the log for more details.", ResultKind.FATAL)
    if code == -2:
        return Verdict(True, "JIT failed to initialize, please check the log for more details.", ResultKind.JIT_INIT)
    return Verdict(True, f"Unknown error code {code}, please check the log for more details.", ResultKind.UNKNOWN)


#: Added when every context of a collection missed data: what that usually means.
ALL_MISSING_HINT = ("every context missed data: the collection may not match the JIT's target "
                    "(check the collection's OS and architecture against -target_os and -target_arch)")


def missing_message(counts: ContextCounts, diff_mode: bool) -> str:
    if diff_mode:
        text = (f"SuperPMI encountered missing data. Missing with base JIT: {counts.missing_base}. "
                f"Missing with diff JIT: {counts.missing_diff}. Total contexts: {counts.total}.")
    else:
        text = f"SuperPMI encountered missing data for {counts.missing} out of {counts.total} contexts"
    return f"{text}; {ALL_MISSING_HINT}" if all_missing(counts) else text


def all_missing(counts: ContextCounts) -> bool:
    """Every context replayed missed data (nothing was compiled)."""
    return counts.total > 0 and counts.missing == counts.total


#: §2.8.5: what superpmi prints when a JIT cannot be loaded or initialised (then exit -2; in
#: parallel mode the workers' -2 reaches the parent as -1, their stderr is copied).
JIT_LOAD_ERROR_RE = re.compile(r"^ERROR: (LoadLibrary failed.*|GetProcAddress '[^']*' failed.*|"
                               r"Startup of JIT\(.*\) failed.*|Jit Compiler has wrong version identifier\..*)$",
                               re.MULTILINE)


#: §2.8.2: a corrupt record in the input (then exit -1; in parallel mode each worker prints it).
LOW_INTEGRITY_RE = re.compile(r"^ERROR: (Method [0-9]+ is of low integrity)\.", re.MULTILINE)


def unreadable_collection_verdict(verdict: Verdict, stderr: str, mch: Path) -> Optional[Verdict]:
    """A general failure (-1) because superpmi could not read the collection (§2.8.2): a
    verdict saying so and naming it; None when that is not what happened."""
    match = LOW_INTEGRITY_RE.search(stderr)
    if verdict.kind is not ResultKind.FATAL or match is None:
        return None
    return Verdict(True, f"superpmi cannot read the collection {mch.name}: {match.group(1)} (the file is truncated "
                         "or corrupt; download or copy it again)", ResultKind.FATAL)


def jit_load_error(output: str) -> Optional[str]:
    """The first JIT load/initialisation failure superpmi reported (§2.8.5), without `ERROR: `."""
    match = JIT_LOAD_ERROR_RE.search(output)
    return match.group(1).strip() if match else None


def build_load_probe_argv(superpmi: Path, jit: Path, mch: Path, host_arch: str, target_arch: str) -> List[str]:
    """`superpmi -c 1 [-target] <jit> <mch>`: loads the JIT at the first context, nothing else (§2.8.5)."""
    return [str(superpmi), "-v", "ew", "-c", "1", *target_flags(host_arch, target_arch), str(jit), str(mch)]


def first_missing_context(reached: Sequence[int]) -> int:
    done = set(reached)
    number = 1
    while number in done:
        number += 1
    return number


def reached_text(reached: Sequence[int]) -> str:
    """Where a stopped replay had got to (from the details rows written before the stop)."""
    if not reached:
        return "no context had finished"
    return (f"{len(reached)} contexts had finished (up to #{max(reached)}); "
            f"context #{first_missing_context(reached)} had not")


def timeout_verdict(seconds: float, reached: Optional[Sequence[int]] = None, not_started: bool = False,
                    flag: str = "--timeout") -> Verdict:
    if not_started:
        return Verdict(True, "superpmi was not started: the time budget (--time_budget) was used up", ResultKind.TIMEOUT)
    where = "" if reached is None else f"; {reached_text(reached)}"
    shown = f"{seconds:g}" if seconds == int(seconds) else f"{seconds:.1f}"
    return Verdict(True, f"superpmi did not finish within {shown} s ({flag}) and was killed{where}", ResultKind.TIMEOUT)


def parallel_shortfall_verdict(verdict: Verdict, replayed: int, expected: Optional[int], failures: int,
                               error_limit: Optional[int]) -> Verdict:
    """Parallel mode hides a crashed worker (§2.10: the parent exits 1 as for compile errors);
    fewer rows than contexts tells it. Stopping at `-error_limit` is no crash."""
    if expected is None or replayed >= expected or verdict.kind not in (ResultKind.FAILURES, ResultKind.FATAL, ResultKind.UNKNOWN):
        return verdict
    missing = expected - replayed
    if error_limit is not None and failures >= error_limit:
        return Verdict(verdict.failed, f"{verdict.message}; {missing} of {expected} contexts not replayed "
                                       f"(stopped after -error_limit {error_limit})", verdict.kind, verdict.warning)
    return Verdict(True, f"Crash: a superpmi worker crashed (parallel mode); {missing} of {expected} contexts "
                         "were not replayed, please check the log for more details.", ResultKind.CRASH)


def count_contexts(mch: Path) -> Optional[int]:
    """Contexts in a collection (§4.1, §4.3): the TOC count when `<mch>.mct` exists, else the
    records walked by their framing; None when the file cannot be read that way."""
    toc = Path(str(mch) + ".mct")
    try:
        if toc.is_file():
            with toc.open("rb") as handle:
                head = handle.read(8)
            if len(head) == 8 and head[:4] == b"INDX":
                return int(struct.unpack("<I", head[4:])[0])
        count = 0
        size = mch.stat().st_size
        with mch.open("rb") as handle:
            offset = 0
            while offset < size:
                handle.seek(offset)
                header = handle.read(6)
                if len(header) < 6 or header[:2] != b"mc":
                    return None
                offset += 8 + struct.unpack("<I", header[2:])[0]
                count += 1
        return count
    except OSError:
        return None


def contexts_in_details(text: str) -> List[int]:
    """Context numbers of the rows of a details CSV (§3.2; a cut last line is skipped)."""
    numbers = []
    for line in text.split("\n")[1:]:
        head = line.split(",", 1)[0]
        if head.isdigit() and "," in line:
            numbers.append(int(head))
    return numbers


def contexts_reached(paths: Iterable[Path]) -> List[int]:
    found: List[int] = []
    for path in paths:
        try:
            found += contexts_in_details(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return sorted(set(found))


# ---------------------------------------------------------------- asserts (pure)

@dataclass(frozen=True)
class AssertInstance:
    mch: str
    context: int
    file: str
    line: str
    expression: str
    il_size: int

    @property
    def key(self) -> str:
        return f"{self.expression} ({self.file}:{self.line})"


def parse_asserts(output: str, mch: str) -> List[AssertInstance]:
    """Every `ISSUE: <ASSERT>` line of superpmi's stdout (§2.8.3)."""
    found: List[AssertInstance] = []
    if "<ASSERT>" not in output:
        return found
    for line in output.splitlines():
        match = ASSERT_RE.search(line)
        if match:
            context, src, src_line, expression, il_size = match.groups()
            found.append(AssertInstance(mch, int(context), src, src_line, expression,
                                        int(il_size) if il_size else 0))
    return found


@dataclass
class AssertGroup:
    key: str
    instances: List[AssertInstance] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.instances)

    def sorted_instances(self) -> List[AssertInstance]:
        return sorted(self.instances, key=lambda a: (a.il_size, a.mch, a.context))

    def context_hits(self) -> List[Tuple[AssertInstance, int]]:
        """Each asserting context once (its first line, in `sorted_instances` order) with its
        number of assert lines: two JITs that both assert print one line each (§2.8.3)."""
        hits = Counter((a.mch, a.context) for a in self.instances)
        firsts: Dict[Tuple[str, int], AssertInstance] = {}
        for instance in self.sorted_instances():
            firsts.setdefault((instance.mch, instance.context), instance)
        return [(instance, hits[key]) for key, instance in firsts.items()]


def group_asserts(instances: Iterable[AssertInstance]) -> List[AssertGroup]:
    """Group by `<expression> (<file>:<line>)`; most frequent first, then by key."""
    groups: Dict[str, AssertGroup] = {}
    for instance in instances:
        groups.setdefault(instance.key, AssertGroup(instance.key)).instances.append(instance)
    return sorted(groups.values(), key=lambda g: (-g.count, g.key))


#: What follows a context's line in the assert report: (collection, context, assert lines) -> text.
HitsText = Callable[[str, int, int], str]


def plain_hits_text(mch: str, context: int, hits: int) -> str:
    """One JIT: nothing for one hit, else how many (a JIT that asserts more than once per compile)."""
    return "" if hits == 1 else f" ({hits} hits)"


def format_assert_report(instances: Sequence[AssertInstance], limit: int = ASSERT_INSTANCES_SHOWN,
                         hits_text: HitsText = plain_hits_text) -> List[str]:
    """The `============================== Assertions:` block (empty when no asserts): per
    assert, its count of contexts, then each context once, followed by `hits_text`."""
    groups = group_asserts(instances)
    if not groups:
        return []
    lines = ["============================== Assertions:"]
    for index, group in enumerate(groups, start=1):
        contexts = group.context_hits()
        lines.append(f"=== Assertion #{index}/{len(groups)} (count: {len(contexts)}): {group.key}")
        for instance, hits in contexts[:limit]:
            lines.append(f"  {instance.mch} # {instance.context} : IL size {instance.il_size}"
                         f"{hits_text(instance.mch, instance.context, hits)}")
        if len(contexts) > limit:
            lines.append(f"  ... omitting {len(contexts) - limit} instances")
    return lines


# ---------------------------------------------------------------- files (pure + small I/O)

def parse_mcl(text: str) -> List[int]:
    """An `.mcl` list, read tolerantly (LF or CRLF, blanks and whitespace ignored)."""
    numbers: List[int] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            try:
                numbers.append(int(stripped))
            except ValueError:
                raise SuiteError(f"'{stripped}' in a method-context list is not a context number") from None
    return numbers


def read_mcl(path: Path) -> List[int]:
    try:
        return parse_mcl(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return []


def details_csv_path(details: Optional[str], mch: Path, temp_dir: Path) -> Path:
    """§12.1: an existing dir → `<dir>/<mch name>.csv`; another value → that file; none → temp."""
    if details:
        target = Path(details)
        if target.is_dir():
            return target / f"{mch.name}.csv"
        return target
    return temp_dir / f"{mch.name}_details.csv"


def run_files(temp_dir: Path, mch: Path, options: RunOptions) -> RunFiles:
    repro = temp_dir / REPRO_PREFIX if options.produce_repro else None
    return RunFiles(fail_mcl=temp_dir / f"{mch.name}_fail.mcl",
                    details_csv=details_csv_path(options.details, mch, temp_dir), repro_prefix=repro)


def mch_base_name(mch: Path) -> str:
    """`<mch base>`: the collection file name without `.mch`."""
    name = mch.name
    return name[:-4] if name.lower().endswith(".mch") else name


def safe_tag(tag: Optional[str]) -> Optional[str]:
    """`-tag` made file-name safe (non-alphanumerics → `_`)."""
    if not tag:
        return None
    return re.sub(r"[^A-Za-z0-9]", "_", tag)


def output_dir_name(kind: str, mch: Path, tag: Optional[str] = None) -> str:
    """`<kind>.[<tag>.]<mch base>` (kind: asm, jitdump, repro)."""
    parts = [kind]
    cleaned = safe_tag(tag)
    if cleaned:
        parts.append(cleaned)
    parts.append(mch_base_name(mch))
    return ".".join(parts)


# ---------------------------------------------------------------- processes

@dataclass
class SuperpmiRun:
    argv: List[str]
    verdict: Optional[Verdict]
    result: Optional[runner.RunResult]
    timed_out: bool = False
    timeout_message: str = ""
    reached: Optional[List[int]] = None   # after a timeout: contexts whose rows were written
    not_started: bool = False

    @property
    def stdout(self) -> str:
        return self.result.stdout if self.result else ""

    @property
    def stderr(self) -> str:
        return self.result.stderr if self.result else ""


def run_superpmi(argv: Sequence[str], core_root: Path, timeout: Optional[float],
                 extra_env: Optional[Mapping[str, str]] = None) -> SuperpmiRun:
    """One superpmi process (cwd Core_Root). A timeout kills the tree and is reported, not raised.

    superpmi's own temporary files (`ParallelSuperPMI-*`, docs/contracts.md §2.10) go into a
    folder the suite owns and removes, also after a timeout kill, Ctrl-C or SIGTERM."""
    if timeout is not None and timeout <= 0:
        return SuperpmiRun(list(argv), None, None, timed_out=True, not_started=True, reached=[])
    with fsutil.temporary_directory(prefix="spmi-superpmi-tmp-") as tool_temp:
        env = dict(platforms.temp_dir_environment(str(tool_temp)), **(extra_env or {}))
        try:
            result = runner.run(argv, cwd=core_root, timeout=timeout, extra_env=env, log_output=False)
        except errors.ToolTimeout as exc:
            log.debug("%s", exc)
            reached = contexts_reached(details_files(argv, tool_temp))
            return SuperpmiRun(list(argv), None, None, timed_out=True, timeout_message=str(exc), reached=reached)
    log_output_block(result)
    return SuperpmiRun(list(argv), None, result)


def details_files(argv: Sequence[str], tool_temp: Path) -> List[Path]:
    """The details CSV of a run and, in parallel mode, its workers' (in superpmi's temp folder)."""
    found = sorted(tool_temp.glob("ParallelSuperPMI-Details-*.csv"))
    if "-details" in argv:
        index = list(argv).index("-details")
        if index + 1 < len(argv):
            found.append(Path(argv[index + 1]))
    return found


def log_output_block(result: runner.RunResult) -> None:
    """The process's output in the log as one record per stream (tens of thousands of
    `ISSUE:` lines cost real time as separate records)."""
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text.strip():
            logs.log_block(logging.DEBUG, f"{Path(result.argv[0]).name} {name} ({result.outcome.describe()}):",
                           text.rstrip("\n"))


def collect_repros(temp_dir: Path, spmi_location: Path, mch: Path, tag: Optional[str] = None) -> List[Path]:
    """Move `<temp>/repro-*.mc` into a new unique `repro.[<tag>.]<mch base>` directory."""
    produced = sorted(temp_dir.glob(f"{REPRO_PREFIX}-*.mc"), key=_repro_sort_key)
    if not produced:
        return []
    target = fsutil.unique_dir_path(spmi_location / output_dir_name("repro", mch, tag))
    target.mkdir(parents=True)
    moved = []
    for path in produced:
        destination = target / path.name
        shutil.move(str(path), str(destination))
        moved.append(destination)
    return moved


def _repro_sort_key(path: Path) -> tuple:
    match = re.search(r"-(\d+)\.mc$", path.name)
    return (int(match.group(1)) if match else 0, path.name)


def repro_report(repros: Sequence[Path], command_prefix: Sequence[str], host_os: str) -> List[str]:
    """`Repro <n> .mc file(s) created for failures:`, the files, and a paste-ready command."""
    if not repros:
        return []
    lines = [f"Repro {len(repros)} .mc file(s) created for failures:"]
    lines += [f"  {path}" for path in repros]
    placeholder = str(repros[0].parent / "xxxxx.mc")
    lines.append("To run a repro (replace xxxxx with the file name):")
    lines.append("  " + runner.format_command(list(command_prefix) + [placeholder], host_os))
    return lines
