"""What the benchmark scripts share: a sample toolchain to measure, a scratch folder, and a big details CSV
(also read by the tests; this module needs nothing beyond the standard library)."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent


def make_sample_toolchain(out: Path, contexts: int, extra: Sequence[str] = ("--targets", "linux-x64",
                                                                              "--collections", "libraries.pmi")) -> None:
    """`sample/make_toolchain.py OUT --contexts N ...` (linux-x64 libraries.pmi unless `extra` says otherwise)."""
    subprocess.run([sys.executable, str(ROOT / "sample" / "make_toolchain.py"), str(out),
                    "--contexts", str(contexts), *extra], check=True, stdout=subprocess.DEVNULL)


@contextmanager
def work_folder(keep: Optional[str], prefix: str) -> Iterator[Path]:
    """`keep` (created, left in place) or a new temporary folder removed afterwards."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        yield work
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def children_cpu() -> float:
    """User + system CPU seconds of every finished child process (0 where unsupported)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def mean_child_cpu_ms(argv: Sequence[str], runs: int, env: Optional[Mapping[str, str]] = None,
                      warm_up: bool = False) -> float:
    """Mean user + system CPU milliseconds of `argv` over `runs` starts, one after the other (output
    discarded); `warm_up`: one uncounted start first (byte code written, files cached)."""
    def start() -> None:
        subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if warm_up:
        start()
    before = children_cpu()
    for _ in range(runs):
        start()
    return (children_cpu() - before) / runs * 1000


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of runs, files or rounds)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got '{text}'")
    return value


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, for the printed figures ("n/a" where unknown)."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except (OSError, AttributeError):
        return "n/a"


#: The current era's metric columns, in order (docs/contracts.md §3.2.5).
CURRENT_METRICS = (
    "ActualCodeBytes AllocatedHotCodeBytes AllocatedColdCodeBytes ReadOnlyDataBytes GCInfoBytes EHClauseCount "
    "PhysicallyPromotedFields LoopsFoundDuringOpts LoopsInverted LoopsCloned LoopsUnrolled LoopAlignmentCandidates "
    "LoopsAligned LoopsIVWidened WidenedIVs UnusedIVsRemoved LoopsMadeDownwardsCounted LoopsStrengthReduced "
    "VarsInSsa HoistedExpressions RedundantBranchesEliminated JumpThreadingsPerformed CseCount "
    "BasicBlocksAtCodegen PerfScore BytesAllocated ImporterBranchFold ImporterSwitchFold DevirtualizedCall "
    "DevirtualizedCallUnboxedEntry DevirtualizedCallRemovedBox GDV ClassGDV MethodGDV MultiGuessGDV ChainedGDV "
    "EnumeratorGDV InlinerBranchFold InlineAttempt InlineCount ProfileConsistentBeforeInline "
    "ProfileConsistentAfterInline ProfileConsistentBeforeMorph ProfileConsistentAfterMorph "
    "ProfileSynthesizedBlendedOrRepaired ProfileInconsistentInitially ProfileInconsistentResetLeave "
    "ProfileInconsistentImporterBranchFold ProfileInconsistentImporterSwitchFold ProfileInconsistentChainedGDV "
    "ProfileInconsistentScratchBB ProfileInconsistentInlinerBranchFold ProfileInconsistentInlineeScale "
    "ProfileInconsistentInlinee ProfileInconsistentNoReturnInlinee ProfileInconsistentMayThrowInlinee "
    "NewRefClassHelperCalls StackAllocatedRefClasses NewBoxedValueClassHelperCalls "
    "StackAllocatedBoxedValueClasses NewArrayHelperCalls StackAllocatedArrays NewFastAllocateStringCalls "
    "StackAllocatedStrings LocalAssertionCount LocalAssertionOverflow MorphTrackedLocals MorphLocals "
    "EnumeratorGDVProvisionalNoEscape EnumeratorGDVCanCloneToEnsureNoEscape").split()


def big_current_era_csv(rows: int) -> str:
    """A diff-layout details CSV of the current era (§3.2.5's metrics) with `rows` rows: a few metrics
    differ between the sides, most are 0 on both."""
    header = ("Context,Context size,Method full name,Tier name,Base result,Diff result,MinOpts,Has diff,"
              "Base instructions,Diff instructions" + "".join(f",Base {m},Diff {m}" for m in CURRENT_METRICS))
    tail_zeros = ",0,0" * (len(CURRENT_METRICS) - 26)
    middles = [",".join(f"{ctx % 7},{ctx % 5}" for _ in range(19)) for ctx in range(35)]
    lines = [header]
    for ctx in range(1, rows + 1):
        size = 100 + ctx % 900
        middle = middles[ctx % 35]
        lines.append(f'{ctx},{size * 3},"Ns.Type{ctx % 500}:Method{ctx}(int,int):this",Tier0,Success,Success,'
                     f'{ctx % 2 == 0},{ctx % 3 == 0},0,0,{size},{size - ctx % 4},{size},{size},0,0,0,0,8,8,'
                     f'{middle},{size / 3:f},{size / 3 - ctx % 4:f},{size * 40},{size * 41}{tail_zeros}')
    return "\n".join(lines) + "\n"
