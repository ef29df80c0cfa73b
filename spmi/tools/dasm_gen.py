"""`.dasm` listing generation for picked contexts, batched (docs/contracts.md §6.4, §12.6, §12.9).

Instead of two superpmi processes per context, the picked contexts are split into
⌈W/S⌉ chunks (W = parallelism, S = the JITs, base and diff) and each chunk is compiled
by one process per JIT (`superpmi -c <list>`), each with its own `JitStdOutFile` (a
forced JIT option): the JITs' chunks run side by side, W processes at a time, each
process started once for as many contexts as it can take.
The file is split at `; Assembly listing for method ` header lines; the batch is
accepted only when superpmi exited 0, nothing precedes the first header, the number
of listings equals the number of contexts and every header's method name and tier
equal the details CSV's `Method full name` / `Tier name` of that context (the CSV
reports the diff JIT's names; a base listing named differently is accepted only when
its `Total bytes of code` equals that context's base `ActualCodeBytes`). A chunk
that fails any check is redone one context per process, so every file is exactly
what a one-context run writes. Contexts that fail even then are reported.

Pure parts: `split_listings`, `parse_header`, `check_batch`, `chunks_per_jit`, `chunk_contexts`,
`listing_env`. Processes run in threads (each thread waits on one superpmi).
"""
from __future__ import annotations

import concurrent.futures as futures
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from spmi.base import fsutil, runner
from spmi.tools import superpmi_tool

log = logging.getLogger("superpmi")

HEADER = b"; Assembly listing for method "
#: Above this many characters the `-c` list goes into an `.mcl` file (command-line limits).
MAX_INLINE_LIST = 2000


# ---------------------------------------------------------------- pure helpers

@dataclass(frozen=True)
class ExpectedMethod:
    """What the details CSV says about a context (diff JIT's report)."""

    name: str
    tier: str


def listing_env(gcinfo: bool = False, debuginfo: bool = False, jitdump: bool = False) -> Dict[str, str]:
    """Environment of a listing run (§12.6), without `JitStdOutFile` (passed as a forced option)."""
    env = {"DOTNET_JitDisasm": "*", "DOTNET_JitUnwindDump": "*", "DOTNET_JitEHDump": "*",
           "DOTNET_JitDisasmDiffable": "1", "DOTNET_JitDisasmWithGC": "1"}
    if gcinfo:
        env["DOTNET_JitGCDump"] = "*"
    if debuginfo:
        env["DOTNET_JitDebugDump"] = "*"
        env["DOTNET_JitDisasmWithDebugInfo"] = "1"
    if jitdump:
        env["DOTNET_JitDump"] = "*"
    return env


def split_listings(data: bytes) -> Tuple[bytes, List[bytes]]:
    """(text before the first header, listings each from its header line to the next header line)."""
    starts = []
    if data.startswith(HEADER):
        starts.append(0)
    position = data.find(b"\n" + HEADER)
    while position >= 0:
        starts.append(position + 1)
        position = data.find(b"\n" + HEADER, position + 1)
    if not starts:
        return data, []
    pieces = [data[start:end] for start, end in zip(starts, starts[1:] + [len(data)])]
    return data[:starts[0]], pieces


def parse_header(listing: bytes) -> Optional[ExpectedMethod]:
    """Name and tier from `; Assembly listing for method <name> (<tier>)`."""
    if not listing.startswith(HEADER):
        return None
    line = listing[len(HEADER):].split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")
    if line.endswith(")") and " (" in line:
        name, tier = line[:-1].rsplit(" (", 1)
        return ExpectedMethod(name, tier)
    return ExpectedMethod(line, "")


@dataclass(frozen=True)
class BatchCheck:
    ok: bool
    reason: str = ""
    listings: Tuple[bytes, ...] = ()


_FOOTER_SIZE = re.compile(rb"^; Total bytes of code (\d+)", re.MULTILINE)


def footer_code_bytes(listing: bytes) -> Optional[int]:
    """`Total bytes of code` of a listing (= the CSV's ActualCodeBytes for that JIT), if present."""
    match = _FOOTER_SIZE.search(listing)
    return int(match.group(1)) if match else None


def check_batch(data: bytes, contexts: Sequence[int], expected: Mapping[int, ExpectedMethod],
                strict_names: bool = True, sizes: Optional[Mapping[int, int]] = None) -> BatchCheck:
    """Can the batched output be split into exactly one listing per requested context?

    Each header's name and tier must equal the details CSV's (contexts whose name was
    not reported are not compared). With `strict_names` False -- the base JIT, whose
    names the CSV does not report -- a listing whose name differs is still accepted
    when its `Total bytes of code` equals that JIT's `ActualCodeBytes` in `sizes`:
    the JITs name methods differently, but the listing is the right one.
    """
    preamble, listings = split_listings(data)
    if preamble.strip():
        return BatchCheck(False, "text before the first listing header")
    if len(listings) != len(contexts):
        return BatchCheck(False, f"{len(listings)} listings for {len(contexts)} contexts")
    for context, listing in zip(contexts, listings):
        want = expected.get(context)
        if want is None or not want.name:
            continue  # the JIT did not report a name; nothing to compare
        got = parse_header(listing)
        if got is not None and got.name == want.name and (not want.tier or got.tier == want.tier):
            continue
        if not strict_names and sizes is not None and context in sizes \
                and footer_code_bytes(listing) == sizes[context]:
            continue
        shown = f"{got.name} ({got.tier})" if got else "?"
        return BatchCheck(False, f"context {context}: listing is for '{shown}', "
                                 f"details CSV says '{want.name} ({want.tier})'")
    return BatchCheck(True, listings=tuple(listings))


def chunks_per_jit(workers: int, jits: int) -> int:
    """⌈workers / jits⌉: the JITs' chunks run side by side, `workers` processes at a time."""
    return max(1, -(-workers // max(1, jits)))


def chunk_contexts(contexts: Sequence[int], workers: int) -> List[List[int]]:
    """Split sorted contexts into at most `workers` contiguous, nearly equal chunks."""
    ordered = sorted(set(contexts))
    count = max(1, min(workers, len(ordered)))
    size, extra = divmod(len(ordered), count)
    chunks: List[List[int]] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            chunks.append(ordered[start:end])
        start = end
    return chunks


# ---------------------------------------------------------------- configuration

@dataclass(frozen=True)
class JitSide:
    """One JIT whose listings are generated into `out_dir`."""

    name: str  # "base" or "diff"
    jit: Path
    jit_options: Sequence[str]
    out_dir: Path
    strict_names: bool = True  # False for the base JIT (the CSV reports the diff JIT's names)
    sizes: Optional[Mapping[int, int]] = None  # this JIT's ActualCodeBytes per context


@dataclass(frozen=True)
class ListingSetup:
    superpmi: Path
    core_root: Path
    mch: Path
    host_arch: str
    target_arch: str
    altjit: bool
    forced: Sequence[str]
    env: Mapping[str, str]
    scratch_dir: Path
    timeout: Optional[float] = None
    extension: str = ".dasm"

    @property
    def invocation(self) -> superpmi_tool.SuperpmiInvocation:
        return superpmi_tool.SuperpmiInvocation(self.superpmi, self.host_arch, self.target_arch,
                                                superpmi_tool.RunOptions(altjit=self.altjit))


@dataclass(frozen=True)
class ListingFailure:
    side: str
    context: int
    reason: str

    def describe(self) -> str:
        return f"{self.side} JIT, context {self.context}: {self.reason}"


@dataclass
class ListingReport:
    written: Dict[str, Dict[int, Path]] = field(default_factory=dict)
    failures: List[ListingFailure] = field(default_factory=list)
    processes: int = 0
    fallback_chunks: int = 0

    def files(self, side: str) -> Dict[int, Path]:
        return self.written.setdefault(side, {})


# ---------------------------------------------------------------- running

class _Generator:
    """One generation: shared state guarded by a lock, work in a thread pool."""

    def __init__(self, setup: ListingSetup, sides: Sequence[JitSide],
                 expected: Mapping[int, ExpectedMethod]) -> None:
        self.setup = setup
        self.sides = {side.name: side for side in sides}
        self.expected = expected
        self.report = ListingReport()
        self.lock = threading.Lock()
        self.serial = 0

    # -- helpers
    def _scratch_file(self, side: str, label: str) -> Path:
        with self.lock:
            self.serial += 1
            serial = self.serial
        return self.setup.scratch_dir / f"{side}-{label}-{serial}.out"

    def _argv(self, side: JitSide, contexts: Sequence[int], stdout_file: Path) -> List[str]:
        setup = self.setup
        argv = superpmi_tool.build_listing_argv(setup.invocation, side.jit, setup.mch, contexts, setup.forced,
                                                side.jit_options, stdout_file)
        if len(argv[2]) > MAX_INLINE_LIST:
            mcl = stdout_file.with_suffix(".mcl")
            mcl.write_bytes("".join(f"{c}\r\n" for c in sorted(contexts)).encode("ascii"))
            argv[2] = str(mcl)
        return argv

    def _run(self, side: JitSide, contexts: Sequence[int], label: str) -> Tuple[superpmi_tool.SuperpmiRun, Path]:
        stdout_file = self._scratch_file(side.name, label)
        stdout_file.unlink(missing_ok=True)  # JitStdOutFile appends: start empty
        argv = self._argv(side, contexts, stdout_file)
        run = superpmi_tool.run_superpmi(argv, self.setup.core_root, self.setup.timeout, self.setup.env)
        with self.lock:
            self.report.processes += 1
        return run, stdout_file

    def _write(self, side: JitSide, context: int, data: bytes) -> None:
        target = side.out_dir / f"{context}{self.setup.extension}"
        fsutil.atomic_write_bytes(target, data)
        with self.lock:
            self.report.files(side.name)[context] = target

    def _fail(self, side: str, context: int, reason: str) -> None:
        with self.lock:
            self.report.failures.append(ListingFailure(side, context, reason))

    # -- tasks
    def batch_task(self, side_name: str, contexts: List[int]) -> List[int]:
        """Run one chunk; returns the contexts that need one-per-process generation."""
        side = self.sides[side_name]
        run, stdout_file = self._run(side, contexts, f"batch{contexts[0]}")
        try:
            problem = _run_problem(run)
            if problem:
                log.debug("Batched listing run for %s contexts %s failed (%s); one per process",
                          side.name, superpmi_tool.format_context_list(contexts), problem)
                return contexts
            data = _read_bytes(stdout_file)
            if data is None:
                log.debug("Batched listing run for %s wrote no JitStdOutFile; one per process", side.name)
                return contexts
            check = check_batch(data, contexts, self.expected, side.strict_names, side.sizes)
            if not check.ok:
                log.debug("Batched %s listings for %s not usable (%s); one per process", side.name,
                          superpmi_tool.format_context_list(contexts), check.reason)
                return contexts
            for context, listing in zip(contexts, check.listings):
                self._write(side, context, listing)
            return []
        finally:
            stdout_file.unlink(missing_ok=True)
            stdout_file.with_suffix(".mcl").unlink(missing_ok=True)

    def single_task(self, side_name: str, context: int) -> None:
        side = self.sides[side_name]
        run, stdout_file = self._run(side, [context], f"ctx{context}")
        try:
            problem = _run_problem(run)
            data = _read_bytes(stdout_file)
            if problem or data is None or not data:
                reason = problem or "no listing written"
                self._fail(side.name, context, f"Failure while creating JitStdOutFile. {reason}"
                           + _output_excerpt(run))
                return
            self._write(side, context, data)
        finally:
            stdout_file.unlink(missing_ok=True)
            stdout_file.with_suffix(".mcl").unlink(missing_ok=True)


def _run_problem(run: superpmi_tool.SuperpmiRun) -> str:
    if run.timed_out:
        return run.timeout_message
    assert run.result is not None
    if run.result.outcome.crashed or run.result.code != 0:
        return f"superpmi {run.result.outcome.describe()}"
    return ""


def _output_excerpt(run: superpmi_tool.SuperpmiRun, limit: int = 600) -> str:
    text = " | ".join(line for line in (run.stdout + run.stderr).splitlines() if line.strip())
    if not text:
        return ""
    return " Output: " + (text if len(text) <= limit else text[:limit] + " ...")


def _read_bytes(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except OSError:
        return None


def generate_listings(setup: ListingSetup, sides: Sequence[JitSide], contexts: Sequence[int],
                      expected: Mapping[int, ExpectedMethod], workers: int, batched: bool = True) -> ListingReport:
    """Write `<out_dir>/<ctx><ext>` for every side and context; see the module doc."""
    generator = _Generator(setup, sides, expected)
    ordered = sorted(set(contexts))
    if not ordered:
        return generator.report
    setup.scratch_dir.mkdir(parents=True, exist_ok=True)
    for side in sides:
        side.out_dir.mkdir(parents=True, exist_ok=True)
    workers = max(1, workers)
    executor = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dasm")
    pending: Dict[futures.Future, Tuple[str, str]] = {}
    try:
        chunks = chunk_contexts(ordered, chunks_per_jit(workers, len(sides))) if batched else []
        for side in sides:
            if batched:
                for chunk in chunks:
                    if len(chunk) == 1:
                        pending[executor.submit(generator.single_task, side.name, chunk[0])] = (side.name, "single")
                    else:
                        pending[executor.submit(generator.batch_task, side.name, chunk)] = (side.name, "batch")
            else:
                for context in ordered:
                    pending[executor.submit(generator.single_task, side.name, context)] = (side.name, "single")
        while pending:
            done, _ = futures.wait(list(pending), return_when=futures.FIRST_COMPLETED)
            for future in done:
                side_name, kind = pending.pop(future)
                retry = future.result()
                if kind == "batch" and retry:
                    generator.report.fallback_chunks += 1
                    for context in retry:
                        pending[executor.submit(generator.single_task, side_name, context)] = (side_name, "single")
    except BaseException:
        for future in pending:
            future.cancel()
        runner.kill_all_children()
        executor.shutdown(wait=False)
        raise
    executor.shutdown(wait=True)
    generator.report.failures.sort(key=lambda f: (f.side, f.context))
    return generator.report
