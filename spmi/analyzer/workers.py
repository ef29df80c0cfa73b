"""Worker processes of the built-in analyzer (`--parallelism`, docs/contracts.md §8.1).

`results_in_order` runs `task(shared, chunk)` for chunks of a list in worker processes and hands
back the chunks' results in the order of the chunks, whatever the workers' speed. Only a few
chunks are in flight at a time, so memory does not grow with the input.

Workers start with Ctrl-C and SIGTERM held (`platforms.stop_signals_held`), then ignore SIGINT (a
Ctrl-C in a terminal reaches the whole process group, and the parent alone decides what stops) and
end at once on SIGTERM, without a traceback. When the caller's block ends, normally or by an exception (Ctrl-C,
SIGTERM turned into `Terminated` by `runner.stop_on_termination`), chunks not started are
cancelled and the running ones waited for: no worker outlives the block. A worker that dies (killed,
out of memory) breaks the pool: whichever call notices it first (taking a result, or handing out the
next chunk, which races with the pool's own thread), the block raises one SuiteError. The task and its
arguments must be picklable (a top-level function): Windows and macOS start workers afresh
(`platforms.worker_start_method`).
"""
from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Deque, Iterator, List, Sequence, TypeVar

from spmi.base import platforms
from spmi.base.errors import SuiteError

Shared = TypeVar("Shared")
Item = TypeVar("Item")
Result = TypeVar("Result")

#: chunks in flight per worker: one running, one waiting, so a worker never idles between chunks
_CHUNKS_IN_FLIGHT_PER_WORKER = 2
#: the one line for a dead worker (Python's own texts differ by version and by the call that noticed it)
WORKER_DIED_MESSAGE = ("a worker process of the analyzer ended abruptly (killed, or out of memory); "
                       "run again, or with --parallelism 1")


def _worker_signals() -> None:
    """A new worker (started with Ctrl-C and SIGTERM held): Ctrl-C ignored, SIGTERM ends it at once
    (a forked worker would otherwise have the parent's handlers), then both let through."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in platforms.termination_signals():
        signal.signal(number, signal.SIG_DFL)
    platforms.release_stop_signals()


def split_into_chunks(items: Sequence[Item], size: int) -> List[List[Item]]:
    """Consecutive chunks of at most `size` items (at least one item each), in order."""
    size = max(1, size)
    return [list(items[start:start + size]) for start in range(0, len(items), size)]


def _start_method() -> str:
    return platforms.worker_start_method(platforms.detect_host_os(), threading.active_count())


def start_by_fork() -> bool:
    """Whether new workers are forked from this process (ready in milliseconds) rather than started
    afresh, a new Python importing the analyzer (a fifth of a second or more each, `bench/analyzer.py`)."""
    return _start_method() == "fork"


@contextmanager
def results_in_order(task: Callable[[Shared, List[Item]], Result], shared: Shared,
                     chunks: Sequence[List[Item]], processes: int) -> Iterator[Iterator[Result]]:
    """Within the block: an iterator of `task(shared, chunk)` for each chunk in order, computed by
    `processes` worker processes. A worker that dies raises SuiteError."""
    executor = concurrent.futures.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context(_start_method()),
                                                      initializer=_worker_signals)
    waiting = iter(chunks)
    pending: Deque["concurrent.futures.Future[Result]"] = collections.deque()

    def submit_next() -> None:
        chunk = next(waiting, None)
        if chunk is not None:
            pending.append(executor.submit(task, shared, chunk))

    try:
        with platforms.stop_signals_held():  # the first chunks start the workers
            for _ in range(processes * _CHUNKS_IN_FLIGHT_PER_WORKER):
                submit_next()
        yield _collect(pending, submit_next)
    except concurrent.futures.process.BrokenProcessPool:
        raise SuiteError(WORKER_DIED_MESSAGE) from None
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def _collect(pending: Deque["concurrent.futures.Future[Result]"],
             submit_next: Callable[[], None]) -> Iterator[Result]:
    """The chunks' results in order; each result taken makes room for the next chunk. A broken pool
    raises BrokenProcessPool here, from either call, into the block of `results_in_order`."""
    while pending:
        result = pending.popleft().result()
        submit_next()
        yield result
