"""The built-in analyzer spread over worker processes (`--parallelism`, docs/contracts.md §8.1): the same
bytes as one process, one line for a bad value, and no worker left after Ctrl-C or SIGTERM."""
from __future__ import annotations

import io
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spmi.analyzer import cli as analyzer_cli  # noqa: E402
from spmi.analyzer import compare, core, scan, workers
from spmi.base.errors import SuiteError

REPO = Path(__file__).resolve().parents[1]
SEPARATOR = "=" * 60

# The in-process tests fork their workers (as the analyzer does in a process without other threads).
# Under pytest-xdist this process also runs the xdist worker's I/O thread, which `threading` does not
# count, and Python warns at each fork. The workers only read listings or return integers, and they
# take no lock that thread holds, so the warning is dropped here, and only here.
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")


def listing(name: str, code: int, perf: float, body_lines: int = 3, line_end: str = "\n") -> str:
    """One method as a checked JIT lists it (docs/contracts.md §7.4)."""
    body = "".join(f"       mov      rax, qword ptr [rcx+0x{i:02X}]\n" for i in range(body_lines))
    text = (f"; Assembly listing for method {name}\n; Emitting BLENDED_CODE for x64 on Windows\n; Tier1 code\n\n"
            f"G_M1_IG01:\n{body}\t\t\t\t\t\t;; size={code} bbWeight=1 PerfScore {perf:.2f}\n\n"
            f"; Total bytes of code {code}, prolog size 4, PerfScore {perf:.2f}, instruction count {body_lines}, "
            f"allocated bytes for code {code} (MethodHash=0000abcd) for method {name}\n; {SEPARATOR}\n\n")
    return text.replace("\n", line_end)


def file_pair(i: int) -> Tuple[str, str]:
    """Base and diff text of file `i`: several methods, float PerfScores, identical pairs, methods on one
    side only, release listings, CR LF line ends."""
    methods = 1 + i % 4
    line_end = "\r\n" if i % 17 == 0 else "\n"
    base = "".join(listing(f"N{i % 9}.T:M{i}_{m}(int):long:this (Tier1)", 20 + (i * 7 + m) % 90,
                           1.25 * (i % 13) + 0.1 * m, line_end=line_end) for m in range(methods))
    if i % 5 == 0:
        return base, base
    diff = "".join(listing(f"N{i % 9}.T:M{i}_{m}(int):long:this (Tier1)", 20 + (i * 7 + m) % 90 + (i + m) % 7 - 3,
                           1.25 * (i % 13) + 0.1 * m + 0.01 * ((i * m) % 11), line_end=line_end)
                   for m in range(methods))
    if i % 11 == 0:
        diff += listing(f"Only.InDiff:M{i}() (Tier0)", 11, 3.5)
    if i % 7 == 0:
        base += "; Assembly listing for method Release:M()\n; Total bytes of code 40\n"
    if i % 19 == 0:
        diff += f"; Total bytes of code {30 + i % 5} for method N{i % 9}.T:R{i}() (Tier1)\n"
        base += f"; Total bytes of code 31 for method N{i % 9}.T:R{i}() (Tier1)\n"
    return base, diff


def unit(text: str) -> scan._Unit:
    found = scan._Unit()
    found.feed(text.encode("utf-8"), True)
    return found


def test_parts_absorbed_in_order_give_the_sums_and_ties_of_one_pass():
    """Workers' chunks are merged as if one process compared every pair: float sums are not
    associative, so each part's addends are added in order, and equal top-list keys keep pair order."""
    assert (0.1 + 0.2) + 0.3 != 0.1 + (0.2 + 0.3)  # summing per part would show
    pairs = []
    for i, perf in enumerate([0.1, 0.2, 0.3, 0.7, 0.1, 0.2]):
        name = f"T:M{i}() (Tier1)"
        pairs.append((f"{i}.dasm", unit(listing(name, 30, 1.0)), unit(listing(name, 31, 1.0 + perf))))
    options = compare.AnalyzeOptions(metrics=["PerfScore", "CodeSize"], count=2)
    one = compare._Analysis(options)
    for key, b, d in pairs:
        one.compare(key, key, b, d)
    merged = compare._Analysis(options)
    for chunk in (pairs[:1], pairs[1:4], pairs[4:]):
        part = compare._Analysis(options, part_of_many=True)
        for key, b, d in chunk:
            part.compare(key, key, b, d)
        merged.absorb(pickle.loads(pickle.dumps(part.part())))  # as a worker sends it
    expected, found = one.finish().summaries, merged.finish().summaries
    assert found == expected
    perf = expected["PerfScore"]
    assert perf.delta_total == ((((0.1 + 0.2) + 0.3) + 0.7) + 0.1) + 0.2
    # every CodeSize delta is 1: the tie is broken by name, then by the order of the pairs
    assert [m.name for m in expected["CodeSize"].top_method_regressions] == ["T:M0() (Tier1)", "T:M1() (Tier1)"]


#: the pairs a worker needs in the tests that run the analyzer in this process (fewer than by default,
#: to keep their trees small; `test_workers_pay_for_their_start` checks the real thresholds)
TEST_MIN_PAIRS = 256


@pytest.fixture
def few_pairs_per_worker(monkeypatch) -> None:
    monkeypatch.setattr(core, "_MIN_PAIRS_PER_FORKED_WORKER", TEST_MIN_PAIRS)
    monkeypatch.setattr(core, "_MIN_PAIRS_PER_STARTED_WORKER", TEST_MIN_PAIRS)


@pytest.mark.parametrize("parallelism, pairs, forked, expected", [
    (8, 2 * 1024 - 1, True, 0), (8, 2 * 1024, True, 2), (8, 5 * 1024, True, 5), (8, 10 ** 6, True, 8),
    (8, 2 * 8192 - 1, False, 0), (8, 2 * 8192, False, 2), (4, 10 ** 6, False, 4), (1, 10 ** 6, True, 0),
])
def test_workers_pay_for_their_start(parallelism, pairs, forked, expected):
    """A forked worker is ready in milliseconds; one started afresh (spawn on Windows and macOS,
    forkserver beside threads) costs a new Python, so it needs far more pairs to pay for itself."""
    assert core.worker_count(parallelism, pairs, forked) == expected


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Enough file pairs for several workers and chunks (`core.worker_count` with TEST_MIN_PAIRS), in
    two folders."""
    root = tmp_path_factory.mktemp("parallel_tree")
    pairs = 4 * TEST_MIN_PAIRS + 41
    for i in range(pairs):
        base, diff = file_pair(i)
        folder = f"part{i % 3}"
        for side, text in (("base", base), ("diff", diff)):
            if (side, i % 23) in (("base", 0), ("diff", 1)):
                continue  # files on one side only
            path = root / side / folder / f"{i}.dasm"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
    for side in ("base", "diff"):  # a pair outside the listing: counted as a textual diff only
        (root / side / "notes.txt").write_text(side, encoding="utf-8")
    return root


def run(argv: List[str]) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = analyzer_cli.run_cli(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def outputs(tree: Path, work: Path, parallelism: int, *extra: str) -> Dict[str, bytes]:
    """Everything one analysis writes: its exit code, stdout, stderr and files."""
    work.mkdir()
    code, out, err = run(["-b", str(tree / "base"), "-d", str(tree / "diff"), "-r", "-w",
                          "-m", "CodeSize", "-m", "PerfScore", "-m", "InstrCount", "--md", str(work / "summary.md"),
                          "--tsv", str(work / "a.tsv"), "--json", str(work / "a.json"),
                          "--md-per-metric", str(work / "per_metric"), "--parallelism", str(parallelism), *extra])
    found = {"exit code": str(code).encode(), "stdout": out.encode(), "stderr": err.encode()}
    found.update({str(p.relative_to(work)): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()})
    return found


@pytest.fixture
def pool_starts(monkeypatch) -> List[int]:
    """The worker processes each analysis asked for (the real pool still runs)."""
    started: List[int] = []
    real = workers.results_in_order

    def counting(task, shared, chunks, processes):  # type: ignore[no-untyped-def]
        started.append(processes)
        return real(task, shared, chunks, processes)

    monkeypatch.setattr(workers, "results_in_order", counting)
    return started


def test_several_processes_write_exactly_what_one_writes(tree, tmp_path, pool_starts, monkeypatch,
                                                         few_pairs_per_worker):
    with monkeypatch.context() as no_pool:  # one process: no pool, not even a stub of one
        no_pool.setattr(workers.concurrent.futures, "ProcessPoolExecutor", None)
        one = outputs(tree, tmp_path / "p1", 1)
    assert pool_starts == []
    assert one["exit code"] == b"-3" and b"Found " in one["stdout"] and b"Mismatched methods" in one["stdout"]
    assert {"summary.md", "a.tsv", "a.json", "per_metric/PerfScore.md"} <= set(one)
    for parallelism in (2, 3):
        several = outputs(tree, tmp_path / f"p{parallelism}", parallelism)
        assert several.keys() == one.keys()
        for name, data in one.items():
            assert several[name] == data, (parallelism, name)
    assert pool_starts == [2, 3]


def test_deleting_all_but_the_top_files_is_the_same_in_parallel(tree, tmp_path, pool_starts, few_pairs_per_worker):
    kept = {}
    for parallelism in (1, 2):
        copy = tmp_path / f"tree{parallelism}"
        shutil.copytree(tree, copy)
        code, out, err = run(["-b", str(copy / "base"), "-d", str(copy / "diff"), "-r", "-c", "5",
                              "--retain-only-top-files", "--parallelism", str(parallelism)])
        kept[parallelism] = (code, out, err, sorted(str(p.relative_to(copy)) for p in copy.rglob("*.dasm")))
    assert kept[1] == kept[2] and "Deleted " in kept[1][1]
    assert pool_starts == [2]


def test_few_pairs_are_read_in_this_process(tmp_path, pool_starts, few_pairs_per_worker):
    for i in range(TEST_MIN_PAIRS + 10):  # enough for one worker only: none is started
        base, diff = file_pair(i)
        for side, text in (("base", base), ("diff", diff)):
            (tmp_path / side).mkdir(exist_ok=True)
            (tmp_path / side / f"{i}.dasm").write_text(text, encoding="utf-8")
    code, out, _ = run(["-b", str(tmp_path / "base"), "-d", str(tmp_path / "diff"), "--parallelism", "8"])
    assert code == -1 and "Summary of Code Size diffs:" in out
    assert pool_starts == []


def test_beside_a_thread_workers_are_started_afresh_and_need_more_pairs(tree, tmp_path, pool_starts, monkeypatch):
    """With another thread running, Linux workers come from a fork server, not a fork of this process
    (`platforms.worker_start_method`): the same tree that two forked workers would share is read here."""
    monkeypatch.setattr(core, "_MIN_PAIRS_PER_FORKED_WORKER", TEST_MIN_PAIRS)
    monkeypatch.setattr(core, "_MIN_PAIRS_PER_STARTED_WORKER", 100 * TEST_MIN_PAIRS)
    monkeypatch.setattr(workers.platforms, "detect_host_os", lambda: workers.platforms.LINUX)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not workers.start_by_fork()
        code, out, _ = run(["-b", str(tree / "base"), "-d", str(tree / "diff"), "-r", "--parallelism", "2"])
    finally:
        release.set()
        other.join()
    assert code == -1 and "Summary of Code Size diffs:" in out
    assert pool_starts == []


@pytest.mark.parametrize("value", ["0", "-2", "abc", "1.5", ""])
def test_a_bad_parallelism_is_one_line_and_a_failure(tmp_path, value):
    proc = subprocess.run([sys.executable, str(REPO / "jitanalyze.py"), "-b", str(tmp_path), "-d", str(tmp_path),
                           "--parallelism", value], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == ("Error: Parallelism (--parallelism) must be a whole number of processes, at least 1, "
                           f"not '{value}'\n")


def child_pids(pid: int) -> List[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def large_tree(tmp_path_factory) -> Path:
    """Listings that take the workers a while (a stop arrives while they read)."""
    root = tmp_path_factory.mktemp("large_tree")
    for side in ("base", "diff"):
        (root / side).mkdir()
    for i in range(2 * core._MIN_PAIRS_PER_FORKED_WORKER + 50):  # enough for 2 forked workers
        text = "".join(listing(f"L.T:M{i}_{m}() (Tier1)", 10 + m, 2.5, body_lines=40) for m in range(7))
        (root / "base" / f"{i}.dasm").write_text(text, encoding="utf-8")
        (root / "diff" / f"{i}.dasm").write_text(text.replace("code 10,", "code 12,"), encoding="utf-8")
    return root


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find the workers")
@pytest.mark.parametrize("how", ["SIGTERM to the analyzer", "Ctrl-C in its terminal", "SIGTERM to its group"])
def test_a_stop_leaves_no_worker_and_no_output(large_tree, tmp_path, how):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, str(REPO / "jitanalyze.py"), "-b", str(large_tree / "base"),
                             "-d", str(large_tree / "diff"), "--md", str(out / "summary.md"), "--parallelism", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(child_pids(proc.pid)) < 2 and proc.poll() is None:
        time.sleep(0.01)
    pool = child_pids(proc.pid)
    assert len(pool) >= 2, "the workers did not start"
    if how == "SIGTERM to the analyzer":
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT if how == "Ctrl-C in its terminal" else signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == (130 if how == "Ctrl-C in its terminal" else 128 + signal.SIGTERM), stderr
    assert stderr == "jitanalyze.py: interrupted\n" and stdout == ""
    assert not [pid for pid in pool if running(pid)], "a worker outlived the analyzer"
    assert list(out.iterdir()) == []  # no summary, no temporary file


def kill_own_worker_at(doomed: int, chunk: List[int]) -> int:
    """A chunk task whose worker SIGKILLs itself on chunk `doomed` (a worker killed from outside)."""
    if chunk[0] == doomed:
        os.kill(os.getpid(), signal.SIGKILL)
    return chunk[0]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="kills a worker with SIGKILL")
def test_a_killed_worker_is_one_suite_error_whichever_call_notices_it(monkeypatch):
    """The pool breaks while results are taken and chunks handed out: sometimes taking a result notices
    it, sometimes handing out the next chunk (a race with the pool's own thread, about a third of the
    runs). Twenty runs with a worker killed at another chunk each: every one ends in the one SuiteError,
    and no worker outlives the block."""
    monkeypatch.setattr(workers, "_start_method", lambda: "fork")
    before = set(child_pids(os.getpid()))
    for run_number in range(20):
        doomed = 3 + run_number % 5
        taken: List[int] = []
        with pytest.raises(SuiteError) as raised:
            with workers.results_in_order(kill_own_worker_at, doomed, [[i] for i in range(40)], 4) as results:
                taken.extend(results)
        assert str(raised.value) == ("a worker process of the analyzer ended abruptly (killed, or out of memory); "
                                     "run again, or with --parallelism 1")
        assert taken == list(range(len(taken))) and len(taken) <= doomed  # in order, none past the dead chunk
    assert [pid for pid in child_pids(os.getpid()) if pid not in before and running(pid)] == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find the workers")
def test_a_killed_worker_is_one_line_and_a_failure(large_tree, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, str(REPO / "jitanalyze.py"), "-b", str(large_tree / "base"),
                             "-d", str(large_tree / "diff"), "--md", str(out / "summary.md"), "--parallelism", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(child_pids(proc.pid)) < 2 and proc.poll() is None:
        time.sleep(0.005)
    pool = child_pids(proc.pid)
    assert len(pool) >= 2, "the workers did not start"
    os.kill(pool[-1], signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (1, "")
    assert stderr == ("Error: a worker process of the analyzer ended abruptly (killed, or out of memory); "
                      "run again, or with --parallelism 1\n")
    assert not [pid for pid in pool if running(pid)], "a worker outlived the analyzer"
    assert list(out.iterdir()) == []
