"""Sample "managed assemblies" and what the sample runtime compiles when it runs them.

A sample assembly is a data file (usually named ``<name>.dll``) that the sample
``corerun`` reads. Layout::

    \\x7fSPMI-SAMPLE-ASSEMBLY\\n
    <one line of JSON: the AssemblySpec>\\n

Anything else is "not a managed assembly". Which methods get compiled, and at
which tier, is a pure function of the assembly and the runtime settings
(:func:`plan_run`, :func:`plan_pmi`), so the counts documented in
sample/README.md can be recomputed.
"""
from __future__ import annotations

import os
import zlib

from .context import Features
from .plain import FrozenRecord, Record, path_text, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Dict, List, Mapping, Optional, Sequence

    from .plain import PathLike

ASSEMBLY_MAGIC = b"\x7fSPMI-SAMPLE-ASSEMBLY\n"

#: calls after which a tiered method is re-jitted at Tier1 (the runtime's call-counting threshold)
CALL_COUNT_THRESHOLD = 30

KIND_APP = "app"
KIND_LIBRARY = "library"
KIND_PMI = "pmi"
KINDS = (KIND_APP, KIND_LIBRARY, KIND_PMI)

#: what a recorded context shows when replayed (the ``replay_fault`` of a method)
REPLAY_FAULTS = ("compile_error", "assert", "missing")


class MethodSpec(Record):
    """One method of a sample assembly.

    ``calls``: how often the app calls it in one run (0: never runs; PMI still
    compiles it). ``loops``: loops in the method; ``hot_loop``: a loop runs long
    enough for on-stack replacement. ``r2r``: precompiled in the ReadyToRun image.
    ``replay_fault``: the recorded context fails to replay (compile_error, assert
    or missing). ``extra_queries``: the context is replayable only when the
    runtime answered the extra SuperPMI queries. ``crash``: the host process
    crashes while this method is compiled. ``uses``: name of a referenced
    assembly the method needs (PMI resolves it next to the assembly or on PMIPATH).
    """

    __slots__ = ("name", "il_size", "calls", "loops", "hot_loop", "r2r", "replay_fault", "extra_queries", "crash",
                 "uses")

    def __init__(self, name: str, il_size: int, calls: int = 1, loops: int = 0, hot_loop: bool = False,
                 r2r: bool = False, replay_fault: str = "", extra_queries: bool = False, crash: bool = False,
                 uses: str = "") -> None:
        self._init(name, il_size, calls, loops, hot_loop, r2r, replay_fault, extra_queries, crash, uses)


class AssemblySpec(Record):
    """A sample assembly: its name, kind, methods and what it does when it runs."""

    __slots__ = ("name", "kind", "methods", "output", "exit_code", "references")

    def __init__(self, name: str, kind: str = KIND_APP, methods: Optional[List[MethodSpec]] = None,
                 output: Optional[List[str]] = None, exit_code: int = 0,
                 references: Optional[List[str]] = None) -> None:
        self.name = name
        self.kind = kind
        self.methods: List[MethodSpec] = [] if methods is None else methods
        #: lines the app writes to stdout when it runs (``{args}`` = its arguments)
        self.output: List[str] = [] if output is None else output
        self.exit_code = exit_code
        #: assemblies this one references (by simple name, file ``<name>.dll``)
        self.references: List[str] = [] if references is None else references

    def as_dict(self) -> Dict[str, object]:
        """The fields by name, each method as a dict (``dataclasses.asdict``)."""
        fields = super().as_dict()
        fields["methods"] = [method.as_dict() for method in self.methods]
        return fields


class NotAnAssembly(ValueError):
    """The file is not a sample managed assembly."""


def encode_assembly(spec: AssemblySpec) -> bytes:
    import json

    return ASSEMBLY_MAGIC + json.dumps(spec.as_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"


def decode_assembly(data: bytes) -> AssemblySpec:
    if not data.startswith(ASSEMBLY_MAGIC):
        raise NotAnAssembly("bad magic")
    end = data.find(b"\n", len(ASSEMBLY_MAGIC))
    import json

    try:
        fields = json.loads(data[len(ASSEMBLY_MAGIC):end if end >= 0 else len(data)].decode("utf-8"))
        methods = [MethodSpec(**method) for method in fields.pop("methods", [])]
        spec = AssemblySpec(methods=methods, **fields)
    except (ValueError, TypeError, AttributeError) as error:
        raise NotAnAssembly(str(error)) from error
    if spec.kind not in KINDS:
        raise NotAnAssembly("unknown kind '%s'" % spec.kind)
    return spec


def write_assembly(path: PathLike, spec: AssemblySpec) -> Path:
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_assembly(spec))
    return path


def read_assembly(path: PathLike) -> AssemblySpec:
    return decode_assembly(read_bytes(path))


# ---------------------------------------------------------------- runtime settings

class RuntimeSettings(FrozenRecord):
    """The runtime configuration that changes what gets compiled and recorded; ``jit_config``: the
    JIT config the JIT reads (and the shim records with every context)."""

    __slots__ = ("tiered_compilation", "tiered_pgo", "ready_to_run", "extra_superpmi_queries", "jit_config")
    tiered_compilation: bool
    tiered_pgo: bool
    ready_to_run: bool
    extra_superpmi_queries: bool
    jit_config: Mapping[str, str]

    def __init__(self, tiered_compilation: bool = True, tiered_pgo: bool = False, ready_to_run: bool = True,
                 extra_superpmi_queries: bool = False, jit_config: Optional[Mapping[str, str]] = None) -> None:
        self._init(tiered_compilation, tiered_pgo, ready_to_run, extra_superpmi_queries,
                   {} if jit_config is None else jit_config)


#: JIT config keys the sample JIT reads at startup; set values are recorded in each context
RECORDED_JIT_CONFIG = ("JitOptRepeat", "JitOptRepeatCount", "JitNoCSE", "JitNoInline", "JitAlignLoops")


def runtime_config(environ: Mapping[str, str], key: str) -> Optional[str]:
    """A runtime/JIT config value: ``DOTNET_<key>``, else ``COMPlus_<key>``."""
    for prefix in ("DOTNET_", "COMPlus_"):
        value = environ.get(prefix + key)
        if value is not None:
            return value
    return None


def _flag(environ: Mapping[str, str], key: str, default: bool) -> bool:
    value = runtime_config(environ, key)
    if value is None or not value.strip():
        return default
    try:
        return int(value.strip(), 0) != 0
    except ValueError:
        return default


def runtime_settings(environ: Mapping[str, str]) -> RuntimeSettings:
    """Settings from the environment. TieredCompilation and ReadyToRun default to on; the
    sample runtime's TieredPGO defaults to off (only ``TieredPGO=1`` instruments)."""
    tiered = _flag(environ, "TieredCompilation", True)
    config = {key: value for key in RECORDED_JIT_CONFIG
              for value in [runtime_config(environ, key)] if value is not None}
    return RuntimeSettings(
        tiered_compilation=tiered,
        tiered_pgo=tiered and _flag(environ, "TieredPGO", False),
        ready_to_run=_flag(environ, "ReadyToRun", True),
        extra_superpmi_queries=_flag(environ, "EnableExtraSuperPmiQueries", False),
        jit_config=config,
    )


# ---------------------------------------------------------------- what gets compiled

class Compilation(FrozenRecord):
    """One JIT compilation: a method of an assembly at a tier."""

    __slots__ = ("assembly", "method", "tier")
    assembly: str
    method: MethodSpec
    tier: str

    def __init__(self, assembly: str, method: MethodSpec, tier: str) -> None:
        self._init(assembly, method, tier)


def tiers_when_run(method: MethodSpec, settings: RuntimeSettings) -> List[str]:
    """Tiers at which a running app compiles ``method`` (empty: not jitted)."""
    if method.calls <= 0:
        return []
    precompiled = method.r2r and settings.ready_to_run
    if not settings.tiered_compilation:
        return [] if precompiled else ["FullOpts"]
    hot = method.calls >= CALL_COUNT_THRESHOLD
    pgo = settings.tiered_pgo
    if precompiled:
        if not hot:
            return []
        return ["Instrumented Tier1", "Tier1"] if pgo else ["Tier1"]
    first = "Instrumented Tier0" if (pgo and method.loops) else "Tier0"
    tiers = [first]
    if method.loops and method.hot_loop:
        tiers.append("Tier1-OSR")
    if hot:
        if pgo and first == "Tier0":
            tiers.append("Instrumented Tier0")
        tiers.append("Tier1")
    return tiers


def plan_run(assembly: AssemblySpec, settings: RuntimeSettings) -> List[Compilation]:
    """Compilations of one run of an app, in order (each method's tiers in turn)."""
    return [Compilation(assembly.name, method, tier)
            for method in assembly.methods for tier in tiers_when_run(method, settings)]


def tier_for_prepare(method: MethodSpec, settings: RuntimeSettings) -> Optional[str]:
    """Tier at which PMI's ``PrepareMethod`` compiles a method (None: precompiled code is used)."""
    if method.r2r and settings.ready_to_run:
        return None
    return "Tier0" if settings.tiered_compilation else "FullOpts"


def plan_prepare_all(target: AssemblySpec, settings: RuntimeSettings,
                     resolved: Sequence[str] = ()) -> List[Compilation]:
    """What PMI's DRIVEALL compiles of ``target``: every method not precompiled whose
    referenced assembly (``uses``) is in ``resolved``, in declaration order."""
    plan: List[Compilation] = []
    for method in target.methods:
        if method.uses and method.uses not in resolved:
            continue
        tier = tier_for_prepare(method, settings)
        if tier is not None:
            plan.append(Compilation(target.name, method, tier))
    return plan


def plan_pmi(pmi: AssemblySpec, target: AssemblySpec, settings: RuntimeSettings,
             resolved: Sequence[str] = ()) -> List[Compilation]:
    """Compilations of ``corerun pmi.dll DRIVEALL <target>``: PMI's own code as it runs
    (:func:`plan_run`), then :func:`plan_prepare_all`."""
    return plan_run(pmi, settings) + plan_prepare_all(target, settings, resolved)


def method_features(method: MethodSpec) -> Features:
    """Deterministic IL features for the codegen model (from the name and IL size)."""
    import random

    rng = random.Random(zlib.crc32(method.name.encode("utf-8")))
    size = method.il_size
    return Features(
        blocks=min(1 + size // 14 + rng.randint(0, 2), 400),
        loops=method.loops,
        cse=rng.randint(0, size // 25 + 1) if size > 8 else 0,
        inlinees=rng.randint(0, size // 30 + 1) if size > 4 else 0,
        calls=rng.randint(0, size // 20 + 1),
        eh=0,
        args=rng.randint(0, 4),
        locals=min(size // 15 + rng.randint(0, 2), 30),
    )


def resolve_reference(name: str, assembly_dir: PathLike, probe_dirs: Sequence[str]) -> Optional[str]:
    """``<name>.dll`` next to the assembly, else in the first probing directory that has it."""
    for directory in [str(assembly_dir)] + [d for d in probe_dirs if d]:
        candidate = path_text(os.path.join(directory, name + ".dll"))
        if os.path.isfile(candidate):
            return candidate
    return None


def pmi_path_dirs(environ: Mapping[str, str]) -> List[str]:
    return [part for part in environ.get("PMIPATH", "").split(os.pathsep) if part]


# ---------------------------------------------------------------- the sample apps

def _m(name: str, il_size: int, **kwargs: object) -> MethodSpec:
    return MethodSpec(name=name, il_size=il_size, **kwargs)  # type: ignore[arg-type]


def sample_assemblies() -> Dict[str, AssemblySpec]:
    """File name -> assembly, for the ``apps/`` folder of a toolchain (plus ``deps/``, ``pmi/``)."""
    hello = AssemblySpec("hello", KIND_APP, output=["Hello from the sample app!", "args: {args}"], methods=[
        _m("Hello.Program:Main(System.String[]):int", 64),
        _m("Hello.Program:.cctor()", 18, extra_queries=True),
        _m("Hello.Program:Greet(System.String):System.String:this", 24, calls=50),
        _m("Hello.Program:SumSquares(int):long", 40, loops=1, hot_loop=True),
        _m("Hello.Program:CountWords(System.String):int", 52, loops=1, calls=40),
        _m("Hello.Formatting:Pad(System.String,int):System.String", 30, calls=40, r2r=True),
        _m("Hello.Formatting:Join(System.String[]):System.String", 45, calls=2, r2r=True),
        _m("Hello.Program:Unused(int):int", 12, calls=0),
    ])
    failing = AssemblySpec("failing", KIND_APP, output=["Computing...", "done"], methods=[
        _m("Failing.Program:Main(System.String[]):int", 40),
        _m("Failing.Program:Compute(int):int", 22, calls=3),
        _m("Failing.Broken:Replay(ubyte,long):int", 36, replay_fault="compile_error"),
        _m("Failing.Program:Report(int):void", 16),
    ])
    crash = AssemblySpec("crash", KIND_APP, output=["Starting..."], methods=[
        _m("Crash.Program:Main(System.String[]):int", 30),
        _m("Crash.Program:Setup():void", 20),
        _m("Crash.Program:Load(System.String):int", 28, calls=5),
        _m("Crash.Program:Boom(int):int", 48, crash=True),
        _m("Crash.Program:NeverReached():void", 10),
    ])
    library = AssemblySpec("library", KIND_LIBRARY, references=["deps"], methods=[
        _m("Sample.Library.Shapes:Area(double,double):double", 14),
        _m("Sample.Library.Shapes:Perimeter(double,double):double", 16),
        _m("Sample.Library.Sorting:Sort(int[]):void", 70, loops=2),
        _m("Sample.Library.Sorting:Swap(byref,byref):void", 12, r2r=True),
        _m("Sample.Library.Bridge:Call():int", 20, uses="deps"),
        _m("Sample.Library.Bridge:CallTwice():int", 26, uses="deps"),
    ])
    deps = AssemblySpec("deps", KIND_LIBRARY, methods=[
        _m("Sample.Deps.Helper:Value():int", 6),
        _m("Sample.Deps.Helper:Twice(int):int", 8),
    ])
    pmi = AssemblySpec("pmi", KIND_PMI, methods=[
        _m("PMI.Program:Main(System.String[]):int", 90),
        _m("PMI.PrepareAll:DriveAll(System.String):int", 120, loops=2),
        _m("PMI.PrepareAll:PrepareType(System.Type):int", 84, loops=1),
    ])
    return {"apps/hello.dll": hello, "apps/failing.dll": failing, "apps/crash.dll": crash,
            "apps/library.dll": library, "deps/deps.dll": deps, "pmi/pmi.dll": pmi}


#: a file in ``apps/`` that is a native library, not a managed assembly (PMI fails on it)
NATIVE_DLL = "apps/native.dll"


def write_sample_assemblies(root: Path) -> Dict[str, Path]:
    """Write the sample assemblies below ``root``; returns relative name -> path."""
    written: Dict[str, Path] = {}
    for relative, spec in sample_assemblies().items():
        written[relative] = write_assembly(root / relative, spec)
    native = root / NATIVE_DLL
    native.parent.mkdir(parents=True, exist_ok=True)
    native.write_bytes(b"\x7fELF native library, not a managed assembly\n")
    written[NATIVE_DLL] = native
    return written
