"""The sample superpmi: replays method contexts through one or two sample JITs.

Entry point: :func:`main`, called by the generated ``superpmi`` executable with
the toolchain settings (JIT-EE GUID, host architecture).
"""
from __future__ import annotations

import os
import sys
import time

from .context import PayloadError, decode_context
from .coredistools import CoreDisToolsLoadError, load_coredistools
from .jitfile import DEFAULT_GUID, NotAJit, host_os, jit_file_name, read_jit
from .jithost import ConfigSource, JitInstance, JitLoadError, Outcome, load_jit
from .mchfile import (
    FramingError,
    RecordRef,
    find_toc,
    format_mcl,
    mch_paths_for_toc,
    record_at,
    record_bytes,
    record_payload,
    scan_records,
)
from .noise import config_from, prepare_run, read_pintool_config
from .plain import Record, parent_dir, path_suffix, path_text, read_bytes, read_text, with_suffix
from .superpmi_args import Options, UsageError, parse_args
from .superpmi_output import Console, diff_header, diff_row, print_help, replay_header, replay_row, summary_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Dict, Iterator, List, Optional, Set

START_COST_ENV = "SPMI_SAMPLE_START_MS"
COMPILE_COST_ENV = "SPMI_SAMPLE_COMPILE_US"
HANG_LIMIT_ENV = "SPMI_SAMPLE_HANG_SECONDS"
PIN_ENV = "SPMI_SAMPLE_PINTOOL"
PROGRESS_EVERY = 500


class FatalExit(Exception):
    """Ends the run at once with ``code`` after printing ``message`` as an ERROR."""

    def __init__(self, code: int, message: Optional[str] = None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


def env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class CostModel:
    """Modelled costs: a start-up delay per process and a delay per compile.

    Compile delays are accumulated and slept in chunks so that tiny costs
    stay accurate in total."""

    def __init__(self) -> None:
        self.compile_cost = max(env_number(COMPILE_COST_ENV, 50.0), 0.0) / 1e6
        self.debt = 0.0

    @staticmethod
    def start() -> None:
        delay = max(env_number(START_COST_ENV, 40.0), 0.0) / 1000.0
        if delay:
            time.sleep(delay)

    def compile(self) -> None:
        if not self.compile_cost:
            return
        self.debt += self.compile_cost
        if self.debt >= 0.002:
            self.settle()

    def settle(self) -> None:
        if self.debt > 0:
            started = time.perf_counter()
            time.sleep(self.debt)
            self.debt -= time.perf_counter() - started


class Counters(Record):
    """The counts of one replay (its summary line and exit code)."""

    __slots__ = ("loaded", "jitted", "failed", "excluded", "missing", "diffs", "errors", "failures_jit1",
                 "failures_jit2")

    def __init__(self, loaded: int = 0, jitted: int = 0, failed: int = 0, excluded: int = 0, missing: int = 0,
                 diffs: int = 0, errors: int = 0, failures_jit1: int = 0, failures_jit2: int = 0) -> None:
        self._init(loaded, jitted, failed, excluded, missing, diffs, errors, failures_jit1, failures_jit2)


class Run(Record):
    """State of one replay."""

    __slots__ = ("options", "console", "settings", "data", "jit_paths", "jits", "counters", "fail_list",
                 "fail_file", "details", "excluded_hashes", "costs")

    def __init__(self, options: Options, console: Console, settings: Dict[str, str], data: bytes = b"",
                 jit_paths: Optional[List[str]] = None, jits: Optional[List[JitInstance]] = None,
                 counters: Optional[Counters] = None, fail_list: Optional[List[int]] = None,
                 fail_file: Optional[IO[bytes]] = None, details: Optional[IO[bytes]] = None,
                 excluded_hashes: Optional[Set[str]] = None, costs: Optional[CostModel] = None) -> None:
        self.options = options
        self.console = console
        self.settings = settings
        self.data = data
        self.jit_paths: List[str] = [] if jit_paths is None else jit_paths
        self.jits: List[JitInstance] = [] if jits is None else jits
        self.counters = Counters() if counters is None else counters
        self.fail_list: List[int] = [] if fail_list is None else fail_list
        self.fail_file = fail_file
        self.details = details
        self.excluded_hashes: Set[str] = set() if excluded_hashes is None else excluded_hashes
        self.costs = CostModel() if costs is None else costs

    @property
    def target_arch(self) -> str:
        return self.options.target or self.settings.get("host_arch", "x64")


def main(argv: Optional[List[str]] = None, settings: Optional[Dict[str, str]] = None) -> int:
    """Run superpmi; unexpected internal failures end as a one-line ERROR and exit -1."""
    try:
        return run_main(argv, settings)
    except (KeyboardInterrupt, BrokenPipeError):
        return -1
    except Exception as error:  # a real tool never shows a Python traceback
        sys.stderr.write("ERROR: superpmi (sample) internal error: %s: %s\n" % (type(error).__name__, error))
        return -1


def run_main(argv: Optional[List[str]] = None, settings: Optional[Dict[str, str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    settings = dict(settings or {})
    settings.setdefault("guid", DEFAULT_GUID)
    settings.setdefault("host_arch", "x64")
    settings.setdefault("program", argv[0] if argv else "superpmi")
    console = Console()
    try:
        options = parse_args(argv[1:], host_os())
    except UsageError as error:
        if error.message:
            console.error(error.message)
        for line in error.extra:
            console.error(line)
        if error.show_help:
            print_help()
        console.flush()
        return -1
    CostModel.start()
    prepare_noise_run(options)
    if options.parallel:
        from .superpmi_parallel import run_parallel
        return run_parallel(options, argv, settings)
    log = None
    if options.log_file:
        try:
            log = open(options.log_file, "wb")
        except OSError:
            console.error("Could not create file %s" % options.log_file)
            return -1
    console = Console(options.verbosity, log)
    run = Run(options, console, settings)
    try:
        return replay(run)
    except FatalExit as fatal:
        if fatal.message:
            console.error(fatal.message)
        return fatal.code
    finally:
        finish(run)


def finish(run: Run) -> None:
    for jit in run.jits:
        jit.close()
    for stream in (run.fail_file, run.details):
        if stream is not None:
            stream.close()
    run.costs.settle()
    run.console.close()


# ---------------------------------------------------------------- set-up

def resolve_jits(run: Run) -> List[str]:
    options = run.options
    if options.jits:
        return list(options.jits)
    here = parent_dir(run.settings["program"])
    host = host_os()
    name = jit_file_name(host, host, run.settings["host_arch"], run.target_arch)
    default = os.path.join(here, name)
    if not os.path.isfile(default):
        raise FatalExit(-1, "Missing name of a Jit.")
    run.console.info("Using default JIT: %s" % default)
    return [default]


def resolve_input(text: str) -> str:
    path = path_text(text)
    if path_suffix(path).lower() == ".mct":
        for candidate in mch_paths_for_toc(path):
            if os.path.isfile(candidate):
                return candidate
    return path


def create_output(path_text: Optional[str]) -> Optional[IO[bytes]]:
    if not path_text:
        return None
    try:
        return open(path_text, "wb")
    except OSError:
        raise FatalExit(-1, "Could not create file %s" % path_text) from None


def load_exclusions(mch: str) -> Set[str]:
    for candidate in (mch + ".exc", with_suffix(mch, ".exc")):
        if os.path.isfile(candidate):
            try:
                return set(read_text(candidate, encoding="ascii", errors="replace").lower().split())
            except OSError:
                return set()
    return set()


def selected_records(run: Run, mch: str) -> Iterator[RecordRef]:
    options = run.options
    wanted = set(options.compile_list) if options.compile_list else None
    last_wanted = max(wanted) if wanted else None
    stride = options.stride

    def selected(number: int) -> bool:
        if wanted is not None and number not in wanted:
            return False
        if stride is not None:
            offset, increment = stride
            return number >= offset and (number - offset) % increment == 0
        return True

    toc = find_toc(mch) if (wanted or stride) else None
    if toc is not None:
        for entry in toc:
            if last_wanted is not None and entry.number > last_wanted:
                return
            if selected(entry.number):
                yield record_at(run.data, entry.offset, entry.number)
        return
    for ref in scan_records(run.data):
        if last_wanted is not None and ref.number > last_wanted:
            return
        if selected(ref.number):
            yield ref


# ---------------------------------------------------------------- replay

def replay(run: Run) -> int:
    options = run.options
    console = run.console
    if options.stride is not None and options.compile_list is not None:
        raise FatalExit(-1, "Cannot use method context list in parallel mode.")
    if options.match_hash is not None and options.compile_list is not None:
        raise FatalExit(-1, "Cannot use both -compile and -matchHash.")
    if not options.input:
        raise FatalExit(-1, "Missing name of an input file.")
    run.jit_paths = resolve_jits(run)
    mch = resolve_input(options.input)
    run.fail_file = create_output(options.fail_mcl)
    run.details = create_output(options.details)
    try:
        run.data = read_bytes(mch)
    except OSError:
        raise FatalExit(-1, "Failed to open input file '%s'." % options.input) from None
    run.excluded_hashes = load_exclusions(mch)
    if run.details is not None:
        header = diff_header() if options.apply_diff else replay_header()
        run.details.write(header.encode("ascii"))
    if options.apply_diff:
        load_differ(run)
    started = time.perf_counter()
    try:
        for ref in selected_records(run, mch):
            if not replay_record(run, ref, started):
                break
    except FramingError as error:
        raise FatalExit(-1, "Method %d is of low integrity." % error.number) from None
    counters = run.counters
    console.info(summary_line(counters.loaded, counters.jitted, counters.failed, counters.excluded,
                              counters.missing, counters.diffs if options.apply_diff else None))
    console.verbose("Total time: %fms" % ((time.perf_counter() - started) * 1000.0))
    return exit_code(run)


def load_differ(run: Run) -> None:
    """-a: the near-differ loads coredistools from superpmi's own directory before the first context."""
    here = parent_dir(run.settings["program"])
    try:
        load_coredistools(here, host_os())
    except CoreDisToolsLoadError as error:
        raise FatalExit(-1, str(error)) from None


def exit_code(run: Run) -> int:
    counters = run.counters
    if counters.errors:
        return 1
    if run.options.apply_diff and counters.diffs:
        return 2
    if counters.missing:
        return 3
    return 0


def add_failure(run: Run, number: int) -> None:
    """Record a failing context once, in processing order (written as it happens)."""
    if run.fail_list and run.fail_list[-1] == number:
        return
    run.fail_list.append(number)
    if run.fail_file is not None:
        run.fail_file.write(format_mcl([number]))


def prepare_noise_run(options: Options) -> None:
    """Fix the noise run key (see noise.py) before any worker starts, when a JIT or the pintool is noisy."""
    configs = [read_pintool_config(os.environ.get(PIN_ENV))]
    for path in options.jits[:2]:
        try:
            spec = read_jit(path)
        except (OSError, NotAJit):
            continue
        configs.append(config_from({"noise": spec.noise, "noise_seed": spec.noise_seed, "noise_runs": spec.noise_runs}))
    prepare_run(configs)


def ensure_jits_loaded(run: Run) -> None:
    if run.jits:
        return
    options = run.options
    under_pin = bool(os.environ.get(PIN_ENV))
    pin_noise = read_pintool_config(os.environ.get(PIN_ENV)) if under_pin else None
    sources = [
        ConfigSource(options.forced1, options.plain1, options.ignore_stored, os.environ),
        ConfigSource(options.forced2, options.plain2, options.ignore_stored, os.environ),
    ]
    paths = run.jit_paths[:2] if options.apply_diff else run.jit_paths[:1]
    if options.apply_diff and len(paths) < 2:
        paths = [paths[0], paths[0]]
    for index, path in enumerate(paths):
        try:
            spec = load_jit(path, run.settings["guid"])
        except JitLoadError as error:
            raise FatalExit(-2, str(error)) from None
        run.jits.append(JitInstance(path, spec, sources[index], under_pin, index + 1, pin_noise))


def replay_record(run: Run, ref: RecordRef, started: float) -> bool:
    """Replay one context; False when the run must stop (failure limit)."""
    options = run.options
    payload = record_payload(run.data, ref)
    try:
        context = decode_context(payload)
    except PayloadError:
        raise FramingError(ref.number, "payload") from None
    if options.match_hash is not None and context.method_hash != options.match_hash:
        return True
    counters = run.counters
    counters.loaded += 1
    if context.method_hash in run.excluded_hashes:
        counters.excluded += 1
        run.console.info("main method %d of size %d with was excluded from the compilation."
                         % (ref.number, context.il_size))
        return True
    ensure_jits_loaded(run)
    for _ in range(options.repeat_count):
        if not compile_attempt(run, ref, context):
            return False
        if counters.jitted % PROGRESS_EVERY == 0:
            report_progress(run, ref, started)
    return True


def report_progress(run: Run, ref: RecordRef, started: float) -> None:
    counters = run.counters
    elapsed = max(time.perf_counter() - started, 1e-6)
    percent = 100.0 * ref.end / max(len(run.data), 1)
    rate = int(counters.jitted / elapsed)
    if run.options.apply_diff:
        run.console.verbose(" %2.1f%% - Loaded %d  Jitted %d  Diffs %d  FailedCompile %d at %d per second"
                            % (percent, counters.loaded, counters.jitted, counters.diffs, counters.failed, rate))
    else:
        run.console.verbose(" %2.1f%% - Loaded %d  Jitted %d  FailedCompile %d at %d per second"
                            % (percent, counters.loaded, counters.jitted, counters.failed, rate))


def act_out(run: Run, action: str) -> None:
    """Crash or hang the way a broken JIT would."""
    run.console.flush()
    for stream in (run.fail_file, run.details):
        if stream is not None:
            stream.flush()
    if action == "crash":
        import signal

        if hasattr(signal, "SIGSEGV") and os.name != "nt":
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGSEGV)
        os._exit(0xC0000005 & 0xFF)
    limit = env_number(HANG_LIMIT_ENV, 3600.0)
    parent = os.getppid()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if os.getppid() != parent:
            break
    os._exit(1)


def compile_one(run: Run, jit: JitInstance, ref: RecordRef, context) -> Outcome:
    outcome = jit.compile(context, ref.number, run.target_arch)
    run.costs.compile()
    if outcome.action:
        act_out(run, outcome.action)
    return outcome


def report_failure(run: Run, outcome: Outcome, ref: RecordRef, context, which: int) -> None:
    console = run.console
    if outcome.assert_text:
        console.issue(outcome.assert_text + "\n")
    if outcome.result == "Miss":
        console.missing("Method context %d failed to replay: %s" % (ref.number, outcome.missing_text))
        return
    path = run.jits[which].path
    if which == 1:
        console.error("Method %d of size %d failed to load and compile correctly by JIT2 (%s)."
                      % (ref.number, context.il_size, path))
    else:
        by = " by JIT1" if run.options.apply_diff else ""
        console.error("Method %d of size %d failed to load and compile correctly%s (%s)."
                      % (ref.number, context.il_size, by, path))
    if run.options.break_on_error and run.options.compile_list is None:
        console.info("HINT: to repro add '-c %d' to cmdline" % ref.number)


def write_repro(run: Run, ref: RecordRef) -> None:
    prefix = run.options.repro_prefix
    if not prefix or run.options.compile_list is not None:
        return
    name = "%s-%d.mc" % (prefix, ref.number)
    try:
        with open(name, "wb") as stream:
            stream.write(record_bytes(run.data, ref))
    except OSError as error:
        raise FatalExit(-1, "Failed to open output '%s'. GetLastError()=%u" % (name, error.errno or 0)) from None
    run.console.info("Wrote out repro to '%s'" % name)


def compile_attempt(run: Run, ref: RecordRef, context) -> bool:
    options = run.options
    counters = run.counters
    counters.jitted += 1
    outcomes = [compile_one(run, run.jits[0], ref, context)]
    if options.apply_diff:
        outcomes.append(compile_one(run, run.jits[1], ref, context))
    results = [o.result for o in outcomes]
    for which, outcome in enumerate(outcomes):
        if outcome.result != "Success":
            report_failure(run, outcome, ref, context, which)
    failed = any(r != "Success" for r in results)
    has_error = "Error" in results
    if failed:
        counters.failed += 1
        add_failure(run, ref.number)
    if "Miss" in results:
        counters.missing += 1
    if has_error:
        counters.errors += 1
        write_repro(run, ref)
    has_diff = False
    if options.apply_diff and not failed:
        has_diff = outcomes[0].code_identity() != outcomes[1].code_identity()
        if has_diff:
            counters.diffs += 1
            run.console.issue("<ASM_DIFF> main method %d of size %d differs" % (ref.number, context.il_size))
            if run.details is None:
                add_failure(run, ref.number)
    if options.failure_limit and not limit_allows(run, results):
        return False
    write_row(run, ref, context, outcomes, has_diff)
    return True


def limit_allows(run: Run, results: List[str]) -> bool:
    counters = run.counters
    limit = run.options.failure_limit
    if results[0] == "Error":
        counters.failures_jit1 += 1
    if len(results) > 1 and results[1] == "Error":
        counters.failures_jit2 += 1
    if counters.failures_jit1 >= limit:
        by = " by JIT1" if run.options.apply_diff else ""
        run.console.error("More than %d methods failed%s. Skip compiling remaining methods." % (limit, by))
        return False
    if counters.failures_jit2 >= limit:
        run.console.error("More than %d methods compilation failed by JIT2. Skip compiling remaining methods."
                          % limit)
        return False
    return True


def write_row(run: Run, ref: RecordRef, context, outcomes: List[Outcome], has_diff: bool) -> None:
    if run.details is None:
        return
    if run.options.apply_diff:
        base, diff = outcomes
        row = diff_row(ref.number, ref.length, diff.reported_name, diff.reported_tier, base.result,
                       diff.result, context.minopts, has_diff, base.instructions, diff.instructions,
                       base.metrics, diff.metrics)
    else:
        only = outcomes[0]
        row = replay_row(ref.number, ref.length, only.reported_name, only.reported_tier, only.result,
                         context.minopts, only.instructions, only.metrics)
    run.details.write(row.encode("utf-8"))


if __name__ == "__main__":
    sys.exit(main())
