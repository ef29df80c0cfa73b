"""Deterministic codegen model of the sample JIT.

Everything here is a pure function of (method context, JIT spec, JIT knobs):
the same method compiled by the same JIT with the same options gives the same
code plan, metrics and instruction count, whatever else the process compiles.

A :class:`CodePlan` is the "generated code": two plans are equal exactly when the
listings rendered from them are equal, which is what the diff check compares.
"""
from __future__ import annotations

import zlib
from collections import namedtuple
from functools import lru_cache

from .context import MethodContext
from .jitfile import JitSpec
from .plain import FrozenRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

MASK64 = (1 << 64) - 1

#: metric columns the sample JIT reports, in the contract's order, with their type
METRICS: List[Tuple[str, str]] = [
    ("ActualCodeBytes", "int"),
    ("AllocatedHotCodeBytes", "int"),
    ("AllocatedColdCodeBytes", "int"),
    ("ReadOnlyDataBytes", "int"),
    ("GCInfoBytes", "int"),
    ("EHClauseCount", "int"),
    ("LoopsFoundDuringOpts", "int"),
    ("LoopAlignmentCandidates", "int"),
    ("LoopsAligned", "int"),
    ("RedundantBranchesEliminated", "int"),
    ("CseCount", "int"),
    ("BasicBlocksAtCodegen", "int"),
    ("PerfScore", "double"),
    ("BytesAllocated", "int64"),
    ("InlineAttempt", "int"),
    ("InlineCount", "int"),
]
METRIC_NAMES = [name for name, _ in METRICS]

#: average encoded instruction size in tenths of a byte
_AVERAGE_SIZE = {"x64": 38, "x86": 31, "arm64": 40, "arm": 29}


def mix(*values: int) -> int:
    """A 64-bit avalanche hash of the given integers (splitmix64 finaliser)."""
    state = 0x9E3779B97F4A7C15
    for value in values:
        state = (state ^ (value & MASK64)) & MASK64
        state = (state * 0xBF58476D1CE4E5B9) & MASK64
        state ^= state >> 31
        state = (state * 0x94D049BB133111EB) & MASK64
        state ^= state >> 29
    return state


@lru_cache(maxsize=256)
def string_seed(text: str) -> int:
    return zlib.crc32(text.encode("utf-8")) | (zlib.adler32(text.encode("utf-8")) << 32)


class Knobs(FrozenRecord):
    """JIT config values that change generated code or what is reported."""

    __slots__ = ("align_loops", "no_cse", "no_inline", "report_metrics")
    align_loops: bool
    no_cse: bool
    no_inline: bool
    report_metrics: bool

    def __init__(self, align_loops: bool = True, no_cse: bool = False, no_inline: bool = False,
                 report_metrics: bool = False) -> None:
        self._init(align_loops, no_cse, no_inline, report_metrics)


class CodePlan(namedtuple("CodePlan", ["instr_count", "code_bytes", "prolog_size", "cold_bytes", "rodata_bytes",
                                       "alloc_slack", "perf_score", "aligned_loops", "align_padding", "cse_count",
                                       "inline_count", "text_salt"])):
    """Shape of the generated code; rendering a listing needs nothing else.

    Every field is an ``int`` but ``perf_score``, a ``float``."""

    __slots__ = ()


class Change(namedtuple("Change", ["kind", "amount", "salt"], defaults=(0, 0))):
    """How a non-baseline codegen variant changes one method: ``kind`` (str) is "none",
    "improvement", "regression", "text" or "perf"; ``amount`` and ``salt`` are ints."""

    __slots__ = ()


def variant_change(context: MethodContext, variant: str) -> Change:
    """Most methods are unchanged; some improve, some regress, a few change only text."""
    if variant == "base":
        return Change("none")
    roll = mix(context.hash64, string_seed(variant))
    bucket = roll % 1000
    scale = 4 if context.minopts else 1
    amount = 1 + (roll >> 20) % 3 + min(context.il_size // 400, 6)
    salt = ((roll >> 32) | 1) & 0xFFFF
    if bucket < 70 // scale:
        return Change("improvement", amount)
    if bucket < 125 // scale:
        return Change("regression", amount)
    if bucket < 145 // scale:
        return Change("text", 0, salt)
    if bucket < 155 // scale:
        return Change("perf", amount, salt)
    return Change("none")


def prolog_instruction_count(args: int, regular_instructions: int) -> int:
    """Instructions in the prolog group (shared by the plan and the listing layout)."""
    if regular_instructions < 3:
        return 0
    return min(regular_instructions - 2, 2 + min(args, 4))


def loop_padding(method_hash: int, loop: int, arch: str) -> int:
    """Alignment padding bytes before loop number ``loop``."""
    pad = (method_hash >> (16 + loop % 24)) % 16
    return pad - pad % 4 if arch in ("arm64", "arm") else pad


def inline_count(context: MethodContext, knobs: Knobs) -> int:
    if context.minopts or knobs.no_inline:
        return 0
    return (context.features.inlinees * 7 + 9) // 10


def plan_code(context: MethodContext, spec: JitSpec, knobs: Knobs) -> CodePlan:
    f = context.features
    h = context.hash64
    optimized = not context.minopts
    inlined = inline_count(context, knobs)
    if optimized:
        instr = 4 + context.il_size * 55 // 100 + f.blocks * 2 + f.calls * 2 + inlined * 6
        if knobs.no_inline:
            instr += f.inlinees * 3
        cse = 0 if knobs.no_cse else f.cse
        instr += (f.cse - cse) * 2
    else:
        instr = 6 + context.il_size * 105 // 100 + f.calls * 3 + f.args * 2
        cse = 0
    change = variant_change(context, spec.variant)
    if change.kind == "improvement":
        instr = max(3, instr - change.amount)
    elif change.kind == "regression":
        instr += change.amount
    aligned = f.loops if (optimized and knobs.align_loops) else 0
    arch = context.target_arch
    if arch == "arm64":
        code_bytes = instr * 4
    else:
        average = _AVERAGE_SIZE.get(arch, 38) + (h >> 8) % 7 - 3
        code_bytes = max(instr, instr * average // 10)
    padding = sum(loop_padding(h, loop, arch) for loop in range(aligned)) if aligned else 0
    code_bytes += padding
    instr += aligned
    if arch == "arm64":
        prolog = 4 * prolog_instruction_count(f.args, instr - aligned)
    else:
        prolog = min(code_bytes, 1 + f.args * 3 + (h >> 12) % 9 + (4 if optimized else 10))
    cold = code_bytes // 5 if (optimized and f.eh and (h >> 30) % 5 == 0) else 0
    rodata = 8 * (2 + (h >> 40) % 6) if (optimized and f.blocks > 8 and (h >> 33) % 6 == 0) else 0
    slack = (4 - code_bytes % 4) % 4 if (h >> 24) % 4 == 0 else 0
    perf = _perf_score(context, instr, cse, inlined, knobs)
    if change.kind == "improvement":
        perf -= change.amount * (1.25 + f.loops * 2)
    elif change.kind == "regression":
        perf += change.amount * (1.25 + f.loops * 2)
    elif change.kind == "perf":
        perf += change.amount * (0.5 if (change.salt & 2) else -0.25)
    perf = round(max(perf, 0.25), 2)
    salt = change.salt if change.kind in ("text", "perf") else 0
    return CodePlan(instr, code_bytes, prolog, cold, rodata, slack, perf, aligned, padding,
                    cse, inlined, salt)


def _perf_score(context: MethodContext, instr: int, cse: int, inlined: int, knobs: Knobs) -> float:
    f = context.features
    if context.minopts:
        return instr * 1.1 + f.calls * 3.0
    score = instr * 0.55 + f.loops * min(instr, 40) * 1.6 + f.calls * 2.5
    score += (f.cse - cse) * 1.75 * (1 + f.loops)
    if knobs.no_inline:
        score += f.inlinees * 4.0
    return score + inlined * 0.75


def memory_bytes(context: MethodContext, spec: JitSpec, plan: Optional[CodePlan], opt_passes: int = 1) -> int:
    """Bytes the JIT allocates from its arena while compiling the method (``opt_passes`` > 1:
    ``JitOptRepeat`` runs the optimizer that many times on an optimized method)."""
    f = context.features
    total = 24576 + context.il_size * 150 + f.blocks * 420 + f.locals * 96
    if plan is not None:
        total += plan.instr_count * 64
        if not context.minopts:
            total += plan.inline_count * 5200 + plan.cse_count * 380 + f.loops * 2600
            total += (max(opt_passes, 1) - 1) * (4096 + plan.instr_count * 40 + f.blocks * 300)
    factor = spec.memory_factor(context.set_name)
    if factor != 1.0:
        jitter = 1.0 + ((mix(context.hash64, string_seed(spec.variant), 7) % 2001) - 1000) / 100000.0
        total = int(total * factor * jitter)
    return total


def metrics(context: MethodContext, spec: JitSpec, plan: CodePlan, opt_passes: int = 1) -> Tuple[object, ...]:
    """Metric values in :data:`METRICS` order."""
    f = context.features
    h = context.hash64
    optimized = not context.minopts
    gc_info = 4 + plan.code_bytes // 12 + f.locals + f.eh * 3 + (0 if optimized else f.args * 2)
    redundant = (h >> 44) % 3 if (optimized and f.blocks > 3) else 0
    loops = f.loops if optimized else 0
    return (
        plan.code_bytes,
        plan.code_bytes - plan.cold_bytes + plan.rodata_bytes + plan.alloc_slack,
        plan.cold_bytes,
        plan.rodata_bytes,
        gc_info,
        f.eh,
        loops,
        loops,
        plan.aligned_loops,
        redundant,
        plan.cse_count,
        max(1, f.blocks + plan.inline_count - (h >> 46) % 2),
        plan.perf_score,
        memory_bytes(context, spec, plan, opt_passes),
        0 if context.minopts else f.inlinees,
        plan.inline_count,
    )


def metric_dict(values: Tuple[object, ...]) -> Dict[str, object]:
    return dict(zip(METRIC_NAMES, values))


def allocated_code_bytes(plan: CodePlan) -> int:
    return plan.code_bytes + plan.rodata_bytes + plan.alloc_slack


def executed_instructions(context: MethodContext, spec: JitSpec, plan: Optional[CodePlan],
                          knobs: Knobs, result: str) -> int:
    """Instructions executed inside the JIT for one compile (what PIN would count)."""
    f = context.features
    count = 180000 + context.il_size * 2600 + f.blocks * 9000
    if plan is not None:
        count += plan.instr_count * 1150
        if not context.minopts:
            count += plan.inline_count * 52000 + plan.cse_count * 7000 + f.loops * 30000
    if spec.checked:
        count *= 3
    if spec.tp_factor != 1.0:
        jitter = 1.0 + ((mix(context.hash64, string_seed(spec.variant), 11) % 801) - 400) / 100000.0
        count = int(count * spec.tp_factor * jitter)
    if knobs.report_metrics:
        count += 9000 + 600 * len(METRICS)
    if result == "Miss":
        count //= 4
    elif result == "Error":
        count //= 2
    return max(count, 1)
