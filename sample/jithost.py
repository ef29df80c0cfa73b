"""A sample JIT loaded into the sample superpmi: config lookup, fault
injection, compiling one context and writing the JIT's own text output."""
from __future__ import annotations

import os
import sys

from .context import MethodContext
from .jitfile import JitSpec, NotAJit, decode_jit
from .model import METRIC_NAMES, CodePlan, Knobs, executed_instructions, metrics, plan_code, string_seed
from .noise import INSTRUCTIONS, NoiseConfig, config_from, current_run_key, factor, noisy_metrics
from .plain import FrozenRecord, Record, path_text, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Dict, List, Mapping, Optional, Sequence, Tuple

    from .plain import PathLike

FAULT_KINDS = ("crash", "hang", "missing", "assert", "compile_error")

_ASSERTS = [
    ("/runtime/src/coreclr/jit/morph.cpp", 3317, "!\"unexpected operator in morph\"", "Morph - Global"),
    ("/runtime/src/coreclr/jit/lsra.cpp", 8124, "interval->isActive", "Linear scan register alloc"),
    ("/runtime/src/coreclr/jit/importer.cpp", 1460, "verCurrentState.esStackDepth == 0", "Importation"),
    ("/runtime/src/coreclr/jit/optimizer.cpp", 2291, "block->bbNatLoopNum == BasicBlock::NOT_IN_LOOP", "Optimize loops"),
]
_MISSING_APIS = ["getMethodAttribs", "getClassAttribs", "embedGenericHandle", "resolveToken",
                 "getCallInfo", "getFieldInfo", "canInline"]


class JitLoadError(Exception):
    """The JIT could not be loaded or initialised (superpmi exits -2)."""


class ConfigSource(Record):
    """Answers a JIT's config questions in the order superpmi uses (forced
    option, recorded value, plain option, ``DOTNET_`` environment)."""

    __slots__ = ("forced", "plain", "ignore_stored", "environ")

    def __init__(self, forced: Dict[str, str], plain: Dict[str, str], ignore_stored: bool,
                 environ: Mapping[str, str]) -> None:
        self._init(forced, plain, ignore_stored, environ)

    def get(self, key: str, stored: Mapping[str, str]) -> Optional[str]:
        if key in self.forced:
            return self.forced[key]
        if not self.ignore_stored and key in stored:
            return stored[key]
        if key in self.plain:
            return self.plain[key]
        for prefix in ("DOTNET_", "COMPlus_"):
            value = self.environ.get(prefix + key)
            if value is not None:
                return value
        return None


class Settings(FrozenRecord):
    """Per-compile view of the JIT's configuration."""

    __slots__ = ("knobs", "disasm", "diffable", "with_gc", "unwind_dump", "eh_dump", "dump", "altjit", "opt_repeat",
                 "opt_repeat_count")
    knobs: Knobs
    disasm: Optional[str]
    diffable: bool
    with_gc: bool
    unwind_dump: bool
    eh_dump: bool
    dump: Optional[str]
    altjit: Optional[str]
    opt_repeat: Optional[str]
    opt_repeat_count: int

    def __init__(self, knobs: Knobs, disasm: Optional[str], diffable: bool, with_gc: bool, unwind_dump: bool,
                 eh_dump: bool, dump: Optional[str], altjit: Optional[str], opt_repeat: Optional[str] = None,
                 opt_repeat_count: int = 2) -> None:
        self._init(knobs, disasm, diffable, with_gc, unwind_dump, eh_dump, dump, altjit, opt_repeat, opt_repeat_count)


class Outcome(Record):
    """Result of one compile by one JIT: ``result`` is "Success", "Error" or "Miss"; ``action``
    "crash" or "hang" when the process must act it out."""

    __slots__ = ("result", "plan", "metrics", "reported_name", "reported_tier", "instructions", "assert_text",
                 "missing_text", "action")

    def __init__(self, result: str, plan: Optional[CodePlan] = None, metrics: Optional[Tuple[object, ...]] = None,
                 reported_name: str = "", reported_tier: str = "", instructions: int = 0, assert_text: str = "",
                 missing_text: str = "", action: str = "") -> None:
        self._init(result, plan, metrics, reported_name, reported_tier, instructions, assert_text, missing_text, action)

    def code_identity(self) -> object:
        return self.plan


def _truthy(value: Optional[str]) -> bool:
    if value is None:
        return False
    try:
        return int(value, 0) != 0
    except ValueError:
        return False


def _count(value: Optional[str], default: int) -> int:
    try:
        return max(int(value or "", 0), 1)
    except ValueError:
        return default


def optimizer_passes(settings: "Settings", context: MethodContext) -> int:
    """How often the optimizer runs: ``JitOptRepeatCount`` for methods ``JitOptRepeat`` selects."""
    if settings.opt_repeat and not context.minopts and method_patterns_match(settings.opt_repeat, context.name):
        return settings.opt_repeat_count
    return 1


def method_patterns_match(patterns: str, name: str) -> bool:
    """``JitDisasm``-style method list: ``*`` or space-separated wildcards over
    ``Class:Method`` (namespace optional) or the full name."""
    if patterns.strip() == "*":
        return True
    import fnmatch
    without_signature = name.split("(", 1)[0]
    method = without_signature.rsplit(":", 1)[-1]
    cls = without_signature.rsplit(":", 1)[0] if ":" in without_signature else ""
    short_cls = cls.rsplit(".", 1)[-1]
    candidates = {name, without_signature, method, short_cls + ":" + method}
    for pattern in patterns.replace(",", " ").split():
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            return True
    return False


def load_jit(path: PathLike, expected_guid: str) -> JitSpec:
    """Read and check a JIT file the way superpmi loads a JIT."""
    try:
        data = read_bytes(path)
    except OSError:
        raise JitLoadError("LoadLibrary failed (0x%08x)" % 0x7E) from None
    try:
        spec = decode_jit(data)
    except NotAJit:
        raise JitLoadError("LoadLibrary failed (0x%08x)" % 0xC1) from None
    load_fault = spec.faults.get("load")
    if load_fault == "getjit":
        raise JitLoadError("GetProcAddress 'getJit' failed")
    if load_fault == "startup":
        raise JitLoadError("Startup of JIT(%s) failed %d" % (path_text(path), 1))
    if spec.guid.lower() != expected_guid.lower():
        raise JitLoadError("Jit Compiler has wrong version identifier. Expected: %s. Actual: %s."
                           % (expected_guid, spec.guid))
    return spec


def _matches(entries: Sequence[str], context: MethodContext) -> bool:
    short = "%08x" % context.hash32
    for entry in entries:
        if entry in (context.method_hash, context.name, short):
            return True
    return False


def jit_fault(spec: JitSpec, context: MethodContext) -> str:
    """The fault this JIT shows for the method, or ""."""
    faults = spec.faults
    if not faults:
        return ""
    for kind in FAULT_KINDS:
        if kind == "assert" and not spec.checked:
            continue
        entries = faults.get(kind + "_hashes") or ()
        every = int(faults.get(kind + "_every") or 0)
        if (entries and _matches(entries, context)) or (every > 0 and context.hash32 % every == 0):
            return kind
    return ""


def assert_text(context: MethodContext, number: int) -> str:
    source, line, expression, phase = _ASSERTS[context.hash32 % len(_ASSERTS)]
    return ("<ASSERT> #%d %s (%d) - Assertion failed '%s' in '%s' during '%s' (IL size %d; hash 0x%08x; %s)"
            % (number, source, line, expression, context.name, phase, context.il_size, context.hash32, context.tier))


def missing_text(context: MethodContext) -> str:
    api = _MISSING_APIS[context.hash32 % len(_MISSING_APIS)]
    return "Encountered missing data for %s (key 0x%016x)" % (api, context.hash64)


class JitInstance:
    """One loaded JIT (JIT1 or JIT2) inside a superpmi process."""

    def __init__(self, path: str, spec: JitSpec, config: ConfigSource, under_pin: bool, slot: int = 1,
                 pin_noise: Optional[NoiseConfig] = None) -> None:
        self.path = path
        self.spec = spec
        self.config = config
        self.under_pin = under_pin
        self.slot = slot
        self.metric_noise = config_from({"noise": spec.noise, "noise_seed": spec.noise_seed})
        self.pin_noise = pin_noise or NoiseConfig()
        self.run_key = current_run_key()
        self.address_salt = string_seed(os.path.abspath(path) + spec.variant)
        self._stdout: Optional[IO[bytes]] = None
        self._stdout_ready = False
        self._plain_settings: Optional[Settings] = None

    # -- configuration
    def settings(self, stored: Mapping[str, str]) -> Settings:
        if not stored and self._plain_settings is not None:
            return self._plain_settings
        get = lambda key: self.config.get(key, stored)  # noqa: E731
        align = get("JitAlignLoops")
        settings = Settings(
            knobs=Knobs(
                align_loops=True if align is None else _truthy(align),
                no_cse=_truthy(get("JitNoCSE")),
                no_inline=_truthy(get("JitNoInline")),
                report_metrics=self.spec.checked or _truthy(get("JitReportMetrics")),
            ),
            disasm=get("JitDisasm"),
            diffable=_truthy(get("JitDisasmDiffable")),
            with_gc=_truthy(get("JitDisasmWithGC")),
            unwind_dump=bool(get("JitUnwindDump")),
            eh_dump=bool(get("JitEHDump")),
            dump=get("JitDump"),
            altjit=get("AltJit"),
            opt_repeat=get("JitOptRepeat"),
            opt_repeat_count=_count(get("JitOptRepeatCount"), 2),
        )
        if not stored:
            self._plain_settings = settings
        return settings

    # -- output
    def _text_stream(self, stored: Mapping[str, str]) -> Optional[IO[bytes]]:
        """The JIT's stdout: ``JitStdOutFile`` (append, opened once) for checked JITs."""
        if not self._stdout_ready:
            self._stdout_ready = True
            target = self.config.get("JitStdOutFile", stored) if self.spec.checked else None
            if target:
                try:
                    self._stdout = open(target, "ab", buffering=64 * 1024)
                except OSError:
                    self._stdout = None
        return self._stdout

    def write_text(self, text: str, stored: Mapping[str, str]) -> None:
        stream = self._text_stream(stored)
        data = text.encode("utf-8")
        if stream is not None:
            stream.write(data)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)

    def close(self) -> None:
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None

    # -- compiling
    def compile(self, context: MethodContext, number: int, target_arch: str) -> Outcome:
        settings = self.settings(context.stored_config)
        knobs = settings.knobs
        fault = context.fault if context.fault in FAULT_KINDS else ""
        if fault == "assert" and not self.spec.checked:
            fault = ""
        fault = fault or jit_fault(self.spec, context)
        if fault in ("crash", "hang"):
            return Outcome("Error", action=fault)
        if fault == "missing":
            return self._failed("Miss", context, knobs, missing=missing_text(context))
        if not self.spec.accepts(context.target_os, context.target_arch) or context.target_arch != target_arch:
            text = "context recorded for %s-%s, JIT targets %s-%s, superpmi target %s" % (
                context.target_os, context.target_arch, self.spec.family, self.spec.target_arch, target_arch)
            return self._failed("Miss", context, knobs, missing=text)
        if fault == "assert":
            return self._failed("Error", context, knobs, asserted=assert_text(context, number))
        if fault == "compile_error":
            return self._failed("Error", context, knobs)
        if self.spec.altjit and not (settings.altjit and method_patterns_match(settings.altjit, context.name)):
            return Outcome("Success", instructions=self._count(context, None, knobs, "Success") // 50)
        plan = plan_code(context, self.spec, knobs)
        reported = knobs.report_metrics
        outcome = Outcome(
            "Success", plan=plan,
            metrics=self._metrics(context, plan, settings) if reported else None,
            reported_name=context.name if reported else "",
            reported_tier=context.tier if reported else "",
            instructions=self._count(context, plan, knobs, "Success"),
        )
        self._emit_text(context, plan, settings)
        return outcome

    def _metrics(self, context: MethodContext, plan: CodePlan, settings: Settings) -> Tuple[object, ...]:
        values = metrics(context, self.spec, plan, optimizer_passes(settings, context))
        return noisy_metrics(self.metric_noise, self.run_key, self.slot, context.hash64, METRIC_NAMES, values)

    def _count(self, context: MethodContext, plan: Optional[CodePlan], knobs: Knobs, result: str) -> int:
        if not self.under_pin:
            return 0
        count = executed_instructions(context, self.spec, plan, knobs, result)
        multiplier = factor(self.pin_noise, self.run_key, self.slot, INSTRUCTIONS, context.hash64)
        return count if multiplier == 1.0 else max(1, int(round(count * multiplier)))

    def _failed(self, result: str, context: MethodContext, knobs: Knobs, missing: str = "",
                asserted: str = "") -> Outcome:
        return Outcome(result, instructions=self._count(context, None, knobs, result),
                       missing_text=missing, assert_text=asserted)

    def _emit_text(self, context: MethodContext, plan: CodePlan, settings: Settings) -> None:
        if not (settings.disasm or settings.dump):
            return
        from .listing import DisplayOptions, render_dump, render_listing
        parts: List[str] = []
        if settings.dump and self.spec.checked and method_patterns_match(settings.dump, context.name):
            parts.append(render_dump(context, plan, os.path.basename(self.path)))
        if settings.disasm and method_patterns_match(settings.disasm, context.name):
            options = DisplayOptions(
                checked=self.spec.checked, diffable=settings.diffable, with_gc=settings.with_gc,
                unwind_dump=settings.unwind_dump, eh_dump=settings.eh_dump, address_salt=self.address_salt)
            parts.append(render_listing(context, plan, options))
        if parts:
            self.write_text("".join(parts), context.stored_config)
