"""Rendering of the sample JIT's text output: listings (checked and release
formats), unwind/EH blocks and JitDump text.  Pure functions of the method
context, its :class:`~model.CodePlan` and the display options.
"""
from __future__ import annotations

from .context import MethodContext, tier_long_name
from .model import CodePlan, allocated_code_bytes, loop_padding, mix, prolog_instruction_count
from .plain import FrozenRecord, Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Sequence, Tuple

DIFFABLE_HANDLE = "0xD1FFAB1E"
FOOTER_RULE = "; " + "=" * 60


class DisplayOptions(FrozenRecord):
    """What a listing shows; ``address_salt`` makes non-diffable addresses differ between JIT binaries."""

    __slots__ = ("checked", "diffable", "with_gc", "unwind_dump", "eh_dump", "address_salt")
    checked: bool
    diffable: bool
    with_gc: bool
    unwind_dump: bool
    eh_dump: bool
    address_salt: int

    def __init__(self, checked: bool = True, diffable: bool = False, with_gc: bool = False,
                 unwind_dump: bool = False, eh_dump: bool = False, address_salt: int = 0) -> None:
        self._init(checked, diffable, with_gc, unwind_dump, eh_dump, address_salt)


class Group(Record):
    """One instruction group of a listing: its instructions, bytes, block weight, PerfScore
    and the alignment paddings in it."""

    __slots__ = ("index", "instructions", "size", "weight", "perf", "align_pads")

    def __init__(self, index: int, instructions: int, size: int = 0, weight: str = "1", perf: float = 0.0,
                 align_pads: Optional[List[int]] = None) -> None:
        self._init(index, instructions, size, weight, perf, [] if align_pads is None else align_pads)

    @property
    def aligns(self) -> int:
        return len(self.align_pads)

    @property
    def align_bytes(self) -> int:
        return sum(self.align_pads)


_REGS = {
    "x64": (["rax", "rcx", "rdx", "rbx", "rsi", "rdi", "r8", "r9", "r10", "r11"],
            ["eax", "ecx", "edx", "ebx", "esi", "edi", "r8d", "r9d", "r10d", "r11d"]),
    "x86": (["eax", "ecx", "edx", "ebx", "esi", "edi"], ["eax", "ecx", "edx", "ebx", "esi", "edi"]),
    "arm64": (["x%d" % n for n in range(16)], ["w%d" % n for n in range(16)]),
    "arm": (["r%d" % n for n in range(8)], ["r%d" % n for n in range(8)]),
}

_X_TEMPLATES = [
    "mov      {a}, {b}",
    "mov      {a}, qword ptr [{fp}-0x{o:02X}]",
    "mov      dword ptr [{fp}-0x{o:02X}], {a32}",
    "add      {a32}, {b32}",
    "lea      {a}, [{b}+0x{o:02X}]",
    "cmp      {a32}, {b32}",
    "test     {a32}, {a32}",
    "movzx    {a32}, byte  ptr [{b}+0x{o:02X}]",
    "xor      {a32}, {a32}",
    "imul     {a32}, {b32}",
    "sub      {a32}, {k}",
    "mov      {a}, {handle}",
]
_ARM64_TEMPLATES = [
    "mov     {a}, {b}",
    "ldr     {a32}, [{b}, #0x{o:02X}]",
    "str     {a32}, [fp, #0x{o:02X}]",
    "add     {a32}, {b32}, #{k}",
    "cmp     {a32}, {b32}",
    "ldp     {a}, {b}, [fp, #0x{o:02X}]",
    "sub     {a32}, {a32}, #{k}",
    "and     {a32}, {b32}, #0xFF",
    "movz    {a}, #{handle}",
]
_ARM_TEMPLATES = [
    "mov     {a}, {b}",
    "ldr     {a}, [{b}+0x{o:02X}]",
    "str     {a}, [sp+0x{o:02X}]",
    "adds    {a}, {b}, {k}",
    "cmp     {a}, {b}",
    "movw    {a}, {handle}",
]
_CALLEES = [
    "CORINFO_HELP_NEWSFAST", "CORINFO_HELP_RNGCHKFAIL", "CORINFO_HELP_THROW",
    "System.ThrowHelper:ThrowArgumentOutOfRangeException()",
    "System.String:Concat(System.String,System.String):System.String",
    "System.SpanHelpers:IndexOf(byref,ushort,int):int",
    "System.Runtime.CompilerServices.CastHelpers:IsInstanceOfClass(ptr,System.Object):System.Object",
]
_LOCAL_TYPES = ["int", "long", "ref", "byref", "ubyte", "double", "struct (16)", "simd16"]


def method_label_number(context: MethodContext, checked: bool) -> str:
    return "%d" % (context.hash32 % 60000 + 1000) if checked else "000"


def target_description(context: MethodContext) -> str:
    os_text = {"windows": "Windows", "osx": "Apple"}.get(context.target_os, "Unix")
    arch = context.target_arch
    if arch == "x64":
        return "x64 + VEX + EVEX on %s" % os_text
    if arch == "arm64":
        return "generic ARM64 on %s" % os_text
    if arch == "arm":
        return "generic ARM on %s" % os_text
    return "generic X86 on %s" % os_text


def frame_line(context: MethodContext) -> str:
    arch = context.target_arch
    uses_frame_pointer = context.minopts or (context.hash64 >> 50) % 3 != 0
    if arch in ("arm64", "arm"):
        return "; fp based frame" if uses_frame_pointer else "; sp based frame"
    base = "rbp" if arch == "x64" else "ebp"
    stack = "rsp" if arch == "x64" else "esp"
    return "; %s based frame" % (base if uses_frame_pointer else stack)


def header_lines(context: MethodContext, plan: CodePlan, options: DisplayOptions) -> List[str]:
    f = context.features
    lines = [
        "; Assembly listing for method %s (%s)" % (context.name, context.tier),
        "; Emitting BLENDED_CODE for %s" % target_description(context),
        "; %s code" % tier_long_name(context.tier),
    ]
    if not context.minopts:
        lines.append("; optimized code")
    elif context.tier == "MinOpts":
        lines.append("; debuggable code")
    lines.append(frame_line(context))
    lines.append("; fully interruptible" if (f.loops or not context.minopts) else "; partially interruptible")
    if not context.minopts:
        lines.append("; No PGO data")
        if plan.inline_count:
            lines.append("; 0 inlinees with PGO data; %d single block inlinees; %d inlinees without PGO data"
                         % (plan.inline_count // 2, plan.inline_count - plan.inline_count // 2))
    if options.checked:
        lines.extend(_locals_block(context))
    lines.append("")
    return lines


def _locals_block(context: MethodContext) -> List[str]:
    f = context.features
    regs = _REGS.get(context.target_arch, _REGS["x64"])[0]
    count = min(f.args + f.locals, 40)
    lines = ["; Final local variable assignments", ";"]
    for number in range(count):
        kind = "arg%d" % number if number < f.args else "loc%d" % (number - f.args)
        type_name = _LOCAL_TYPES[mix(context.hash64, number) % len(_LOCAL_TYPES)]
        refs = 1 + mix(context.hash64, number, 1) % 9
        if context.minopts:
            home = "[rbp-0x%02X]" % (8 * (number + 1)) if context.target_arch in ("x64", "x86") else "[fp+0x%02X]" % (8 * (number + 1))
            tail = "do-not-enreg[]"
        else:
            home = "->  %s" % regs[number % len(regs)]
            tail = "single-def" if number < f.args else ""
        lines.append((";  V%02d %-12s [V%02d,T%02d] (%3d, %3d   ) %7s  %s %s" % (
            number, kind, number, number, refs, refs * 2, type_name, home, tail)).rstrip())
    lines.append(";")
    frame = 8 * f.locals if context.minopts else 8 * (f.locals // 4)
    lines.append("; Lcl frame size = %d" % frame)
    return lines


def layout_groups(context: MethodContext, plan: CodePlan) -> List[Group]:
    """Split the plan's instructions, bytes and PerfScore into instruction groups."""
    f = context.features
    h = context.hash64
    body_count = max(1, min(f.blocks, 48))
    regular = plan.instr_count - plan.aligned_loops
    prolog = prolog_instruction_count(f.args, regular)
    epilog = 2 if regular - prolog >= 3 else min(1, regular - prolog)
    body_total = regular - prolog - epilog
    weights = [1 + mix(h, index) % 5 for index in range(body_count)]
    weight_sum = sum(weights)
    body = [body_total * w // weight_sum for w in weights]
    for index in range(body_total - sum(body)):
        body[index % body_count] += 1
    groups = [Group(1, prolog)] + [Group(index + 2, count) for index, count in enumerate(body)]
    groups.append(Group(body_count + 2, epilog))
    _place_alignment(groups, plan, context)
    _assign_sizes(groups, plan, context.target_arch)
    _assign_weights(groups, context)
    _assign_perf(groups, plan)
    return groups


def _place_alignment(groups: List[Group], plan: CodePlan, context: MethodContext) -> None:
    if not plan.aligned_loops:
        return
    candidates = groups[1:-1] if len(groups) > 2 else groups
    for loop in range(plan.aligned_loops):
        group = candidates[(loop * 3) % len(candidates)]
        group.align_pads.append(loop_padding(context.hash64, loop, context.target_arch))


def _assign_sizes(groups: List[Group], plan: CodePlan, arch: str) -> None:
    if arch == "arm64":  # fixed-size encoding
        for group in groups:
            group.size = 4 * group.instructions + group.align_bytes
        return
    regular_bytes = plan.code_bytes - plan.align_padding
    total_instr = sum(g.instructions for g in groups)
    first = groups[0]
    first.size = min(plan.prolog_size, regular_bytes) if first.instructions else 0
    rest = regular_bytes - first.size
    rest_instr = total_instr - first.instructions
    assigned = 0
    largest = None
    for group in groups[1:]:
        if rest_instr:
            group.size = rest * group.instructions // rest_instr
        assigned += group.size
        if group.instructions and (largest is None or group.instructions > largest.instructions):
            largest = group
    leftover = rest - assigned
    (largest or first).size += leftover
    for group in groups:
        group.size += group.align_bytes


def _assign_weights(groups: List[Group], context: MethodContext) -> None:
    if context.minopts:
        return
    loops = context.features.loops
    for group in groups[1:-1]:
        roll = mix(context.hash64, group.index, 3) % 10
        if loops and roll < 3:
            group.weight = "4"
        elif roll == 9:
            group.weight = "0.50"


def _assign_perf(groups: List[Group], plan: CodePlan) -> None:
    scores = [g.instructions * float(g.weight) for g in groups]
    total = sum(scores) or 1.0
    used = 0.0
    last = max((i for i, g in enumerate(groups) if g.instructions), default=len(groups) - 1)
    for index, group in enumerate(groups):
        if index == last:
            group.perf = max(round(plan.perf_score - used, 2), 0.0)
        else:
            group.perf = round(plan.perf_score * scores[index] / total, 2)
            used += group.perf


class _Registers:
    """Register naming; a non-zero salt swaps two registers everywhere (text-only diffs)."""

    def __init__(self, arch: str, salt: int) -> None:
        full, narrow = _REGS.get(arch, _REGS["x64"])
        self.full = list(full)
        self.narrow = list(narrow)
        if salt:
            a = salt % len(full)
            b = (a + 1 + (salt >> 4) % (len(full) - 1)) % len(full)
            for names in (self.full, self.narrow):
                names[a], names[b] = names[b], names[a]

    def pick(self, value: int) -> Tuple[str, str]:
        index = value % len(self.full)
        return self.full[index], self.narrow[index]


def _handle_text(context: MethodContext, options: DisplayOptions, value: int) -> str:
    if options.diffable:
        return DIFFABLE_HANDLE
    return "0x7F%010X" % (mix(value, options.address_salt) & 0xFFFFFFFFFF)


def _body_instruction(context: MethodContext, regs: _Registers, options: DisplayOptions,
                      group: Group, position: int) -> str:
    arch = context.target_arch
    roll = mix(context.hash64, group.index, position)
    if roll % 23 == 0:
        callee = _CALLEES[(roll >> 8) % len(_CALLEES)]
        return ("bl      %s" % callee) if arch in ("arm64", "arm") else "call     [%s]" % callee
    a, a32 = regs.pick(roll >> 5)
    b, b32 = regs.pick(roll >> 11)
    templates = _X_TEMPLATES if arch in ("x64", "x86") else (_ARM64_TEMPLATES if arch == "arm64" else _ARM_TEMPLATES)
    template = templates[(roll >> 17) % len(templates)]
    fp = "rbp" if arch == "x64" else "ebp"
    return template.format(a=a, b=b, a32=a32, b32=b32, fp=fp, o=8 * (1 + (roll >> 23) % 12),
                           k=1 + (roll >> 29) % 16, handle=_handle_text(context, options, roll))


def _prolog_instructions(arch: str, count: int) -> List[str]:
    if arch in ("x64", "x86"):
        sp, bp = ("rsp", "rbp") if arch == "x64" else ("esp", "ebp")
        base = ["push     %s" % bp, "sub      %s, 48" % sp, "lea      %s, [%s+0x30]" % (bp, sp)]
        extra = "mov      qword ptr [%s-0x%02X], %s"
        return (base + [extra % (bp, 8 * (n + 1), "rdi" if arch == "x64" else "ecx") for n in range(count)])[:count]
    if arch == "arm64":
        base = ["stp     fp, lr, [sp, #-0x20]!", "mov     fp, sp"]
        return (base + ["str     x%d, [fp, #0x%02X]" % (n, 0x10 + 8 * n) for n in range(count)])[:count]
    base = ["push    {r11,lr}", "mov     r11, sp"]
    return (base + ["str     r%d, [sp+0x%02X]" % (n, 4 * n) for n in range(count)])[:count]


def _epilog_instructions(arch: str, count: int) -> List[str]:
    if arch in ("x64", "x86"):
        sp, bp = ("rsp", "rbp") if arch == "x64" else ("esp", "ebp")
        base = ["add      %s, 48" % sp, "pop      %s" % bp]
        return (base[:max(count - 1, 0)] + ["ret      "])[-count:] if count else []
    if arch == "arm64":
        return (["ldp     fp, lr, [sp], #0x20"][:max(count - 1, 0)] + ["ret     lr"])[-count:] if count else []
    return (["add     sp, 8"][:max(count - 1, 0)] + ["pop     {r11,pc}"])[-count:] if count else []


def _branch(arch: str, label: str) -> str:
    if arch in ("arm64", "arm"):
        return "b       %s" % label if arch == "arm" else "cbz     w0, %s" % label
    return "jne      SHORT %s" % label


def group_instructions(context: MethodContext, plan: CodePlan, groups: Sequence[Group],
                       group: Group, options: DisplayOptions, regs: _Registers) -> List[str]:
    arch = context.target_arch
    if group is groups[0]:
        lines = _prolog_instructions(arch, group.instructions)
    elif group is groups[-1]:
        lines = _epilog_instructions(arch, group.instructions)
    else:
        lines = [_body_instruction(context, regs, options, group, n) for n in range(group.instructions)]
        if lines and len(groups) > 3:
            target = groups[1 + mix(context.hash64, group.index, 5) % (len(groups) - 2)].index
            lines[-1] = _branch(arch, "G_M%s_IG%02d" % (method_label_number(context, options.checked), target))
    for pad in group.align_pads:
        lines.append("align    [%d bytes for IG%02d]" % (pad, group.index + 1))
    indent = " " * (12 if arch == "arm64" else 7)
    return [indent + line for line in lines]


def render_listing(context: MethodContext, plan: CodePlan, options: DisplayOptions) -> str:
    """The listing text of one compiled method, ending with its footer (and dumps)."""
    groups = layout_groups(context, plan)
    regs = _Registers(context.target_arch, plan.text_salt)
    number = method_label_number(context, options.checked)
    lines = header_lines(context, plan, options)
    offset = 0
    for group in groups:
        label = "G_M%s_IG%02d:" % (number, group.index)
        if options.checked:
            if options.with_gc:
                label += "  ; bbWeight=%s, gcrefRegs=0000 {}, byrefRegs=0000 {}, byref" % group.weight
            lines.append(label)
        else:
            lines.append("%-28s;; offset=0x%04X" % (label, offset))
        lines.extend(group_instructions(context, plan, groups, group, options, regs))
        if options.checked:
            lines.append("\t" * 6 + ";; size=%d bbWeight=%s PerfScore %.2f" % (group.size, group.weight, group.perf))
        else:
            lines.append(" ")
        offset += group.size
    lines.append("")
    if options.checked:
        lines.append(
            "; Total bytes of code %d, prolog size %d, PerfScore %.2f, instruction count %d, "
            "allocated bytes for code %d (MethodHash=%08x) for method %s (%s)" % (
                plan.code_bytes, plan.prolog_size, plan.perf_score, plan.instr_count,
                allocated_code_bytes(plan), context.hash32, context.name, context.tier))
        lines.append(FOOTER_RULE)
        lines.append("")
    else:
        lines.append("; Total bytes of code %d" % plan.code_bytes)
        lines.append("")
    if options.unwind_dump:
        lines.extend(unwind_block(context, plan))
    if options.eh_dump and context.features.eh:
        lines.extend(eh_block(context))
    return "\n".join(lines) + "\n"


def unwind_block(context: MethodContext, plan: CodePlan) -> List[str]:
    codes = 2 + context.features.args % 3
    return [
        "Unwind Info:",
        "  >> Start offset   : 0x000000 (not in unwind data)",
        "  >>   End offset   : 0x%06x (not in unwind data)" % plan.code_bytes,
        "  Version           : 1",
        "  Flags             : 0x00",
        "  SizeOfProlog      : 0x%02X" % plan.prolog_size,
        "  CountOfUnwindCodes: %d" % codes,
        "",
    ]


def eh_block(context: MethodContext) -> List[str]:
    count = context.features.eh
    lines = ["*************** EH table for %s" % context.name,
             "%d EH table entries, 0 duplicate clauses, 0 cloned finallys, %d total EH entries reported to VM"
             % (count, count)]
    for clause in range(count):
        lines.append("EH#%02d: try [IG%02d..IG%02d) handled by [IG%02d..IG%02d) (fault)"
                     % (clause, 2 + clause, 3 + clause, 4 + clause, 5 + clause))
    lines.append("")
    return lines


def render_dump(context: MethodContext, plan: CodePlan, jit_name: str) -> str:
    """Text printed by ``JitDump`` before the listing."""
    phases = ["Pre-import", "Importation", "Morph - Global", "Optimize loops",
              "Lowering nodes", "Linear scan register alloc", "Generate code"]
    lines = ["****** START compiling %s (MethodHash=%08x)" % (context.name, context.hash32),
             "Generating code for %s %s" % (target_description(context), context.tier),
             "OPTIONS: compCodeOpt = BLENDED_CODE",
             "OPTIONS: compDbgCode = %s" % ("true" if context.minopts else "false"),
             "IL size = %d, basic blocks = %d, JIT = %s" % (context.il_size, context.features.blocks, jit_name)]
    for phase in phases:
        lines.append("*************** Starting PHASE %s" % phase)
        lines.append("*************** Finishing PHASE %s" % phase)
    lines.append("****** DONE compiling %s" % context.name)
    return "\n".join(lines) + "\n"
