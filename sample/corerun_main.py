"""The sample ``corerun``: "runs" a sample assembly with the JIT the environment names.

    corerun <assembly.dll> [args...]
    corerun <pmi.dll> DRIVEALL <assembly.dll>

The JIT is ``DOTNET_JitPath`` (a full path), else ``DOTNET_JitName`` (a file in
corerun's own directory), else the native JIT there (``libclrjit.so``, ...).
When that file is the shim collector, every compilation is forwarded to the
JIT named by ``SuperPMIShimPath`` and recorded in ``SuperPMIShimLogPath``.
See sample/README.md for the tiering rules and the sample apps.
"""
from __future__ import annotations

import os
import sys

from .assembly import (
    KIND_APP,
    KIND_PMI,
    AssemblySpec,
    Compilation,
    NotAnAssembly,
    RuntimeSettings,
    method_features,
    plan_prepare_all,
    plan_run,
    pmi_path_dirs,
    read_assembly,
    resolve_reference,
    runtime_config,
    runtime_settings,
)
from .context import MethodContext, compute_method_hash, pseudo_il
from .jitfile import DEFAULT_GUID, JitSpec, host_os, jit_file_name
from .jithost import JitLoadError, load_jit
from .plain import Record, parent_dir, path_text, read_bytes
from .shim import SHIM_LOG_PATH_ENV, SHIM_PATH_ENV, McWriter, compile_result_bytes, is_shim

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence

    from .plain import PathLike

USAGE = """Usage: corerun <assembly.dll> [arguments...]
       corerun <pmi.dll> DRIVEALL <assembly.dll>
(sample toolchain stand-in; the JIT comes from DOTNET_JitPath or DOTNET_JitName)
"""
PMI_USAGE = "Usage: pmi DRIVEALL <assembly>\n"
#: exit code of PMI when it cannot process an assembly
PMI_FAILURE = 1


class HostError(Exception):
    """corerun cannot start the app: one line on stderr, exit -1."""


class LoadedJit(Record):
    """The JIT the runtime loaded: the real JIT, maybe behind the shim collector."""

    __slots__ = ("path", "spec", "settings", "recorder")

    def __init__(self, path: PathLike, spec: JitSpec, settings: RuntimeSettings,
                 recorder: Optional[McWriter] = None) -> None:
        self._init(path, spec, settings, recorder)

    def compile(self, compilation: Compilation) -> None:
        context = recorded_context(compilation, self.spec, self.settings)
        if compilation.method.crash:
            if self.recorder is not None:
                self.recorder.write_truncated(context)
            crash()
        if self.recorder is not None:
            self.recorder.write(context)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()


def recorded_context(compilation: Compilation, spec: JitSpec, settings: RuntimeSettings) -> MethodContext:
    """The method context the shim records for one compilation."""
    method = compilation.method
    il = pseudo_il(method.name, method.il_size)
    fault = method.replay_fault
    if not fault and method.extra_queries and not settings.extra_superpmi_queries:
        fault = "missing"
    context = MethodContext(
        name=method.name, tier=compilation.tier, il_size=method.il_size,
        method_hash=compute_method_hash(method.name, il), set_name=compilation.assembly,
        target_os=spec.target_os, target_arch=spec.target_arch, features=method_features(method),
        stored_config=dict(settings.jit_config), fault=fault)
    context.compile_result = compile_result_bytes(context)
    return context


def crash() -> None:
    """Die the way a native crash does (SIGSEGV on Unix)."""
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    if hasattr(signal, "SIGSEGV") and os.name != "nt":
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    os._exit(0xC0000005 & 0xFF)


def fail_jit_load(detail: str) -> None:
    """The runtime cannot load its JIT: a fatal error (abort, SIGABRT on Unix)."""
    sys.stderr.write(detail + "\n")
    sys.stderr.write("Fatal error. Failed to load JIT compiler.\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os.abort()


# ---------------------------------------------------------------- loading the JIT

def jit_location(runtime_dir: PathLike, environ: Mapping[str, str], host_arch: str) -> str:
    jit_path = runtime_config(environ, "JitPath")
    if jit_path:
        return path_text(jit_path)
    jit_name = runtime_config(environ, "JitName")
    if jit_name:
        return path_text(os.path.join(runtime_dir, jit_name))
    host = host_os()
    return path_text(os.path.join(runtime_dir, jit_file_name(host, host, host_arch, host_arch)))


def load_real_jit(path: PathLike, guid: str) -> JitSpec:
    try:
        return load_jit(path, guid)
    except JitLoadError as error:
        fail_jit_load("ERROR: cannot load the JIT '%s': %s" % (path, error))
        raise  # not reached


def shim_recorder(environ: Mapping[str, str]) -> Optional[McWriter]:
    log_path = environ.get(SHIM_LOG_PATH_ENV, "")
    if not log_path or not os.path.isdir(path_text(log_path)):
        sys.stderr.write("WARNING: superpmi-shim-collector: %s is not set to an existing directory; "
                         "nothing is recorded.\n" % SHIM_LOG_PATH_ENV)
        return None
    return McWriter(path_text(log_path))


def load_runtime_jit(runtime_dir: PathLike, environ: Mapping[str, str], settings: Dict[str, str]) -> LoadedJit:
    path = jit_location(runtime_dir, environ, settings.get("host_arch", "x64"))
    guid = settings.get("guid", DEFAULT_GUID)
    runtime = runtime_settings(environ)
    try:
        data = read_bytes(path)
    except OSError:
        data = b""
    if not is_shim(data):
        return LoadedJit(path, load_real_jit(path, guid), runtime)
    real = environ.get(SHIM_PATH_ENV, "")
    if not real:
        fail_jit_load("ERROR: superpmi-shim-collector: %s is not set; it must name the real JIT to forward to."
                      % SHIM_PATH_ENV)
    spec = load_real_jit(path_text(real), guid)
    return LoadedJit(path, spec, runtime, shim_recorder(environ))


# ---------------------------------------------------------------- running

def open_assembly(path: str) -> AssemblySpec:
    if not os.path.isfile(path):
        raise HostError("Could not find the assembly '%s'." % path)
    try:
        return read_assembly(path)
    except NotAnAssembly:
        raise HostError("'%s' is not a managed assembly (BadImageFormatException)." % path) from None
    except OSError as error:
        raise HostError("Could not read the assembly '%s': %s" % (path, error.strerror)) from None


def compile_all(jit: LoadedJit, plan: Sequence[Compilation]) -> None:
    for compilation in plan:
        jit.compile(compilation)


def run_app(jit: LoadedJit, app: AssemblySpec, args: List[str]) -> int:
    text = "".join(line.replace("{args}", " ".join(args)) + "\n" for line in app.output)
    sys.stdout.write(text)
    sys.stdout.flush()
    compile_all(jit, plan_run(app, jit.settings))
    return app.exit_code


def run_pmi(jit: LoadedJit, pmi: AssemblySpec, args: List[str], environ: Mapping[str, str]) -> int:
    if len(args) != 2 or args[0].upper() != "DRIVEALL":
        sys.stdout.write(PMI_USAGE)
        return PMI_FAILURE
    compile_all(jit, plan_run(pmi, jit.settings))  # PMI's own code runs first
    target_path = path_text(args[1])
    try:
        target = open_assembly(target_path)
    except HostError as error:
        sys.stdout.write("PMI: %s\n" % error)
        return PMI_FAILURE
    resolved: List[str] = []
    for reference in target.references:
        if resolve_reference(reference, parent_dir(target_path), pmi_path_dirs(environ)) is not None:
            resolved.append(reference)
        else:
            skipped = sum(1 for m in target.methods if m.uses == reference)
            sys.stdout.write("PMI: could not resolve reference '%s' (not next to the assembly or on PMIPATH); "
                             "skipping %d methods\n" % (reference, skipped))
    plan = plan_prepare_all(target, jit.settings, resolved)
    compile_all(jit, plan)
    sys.stdout.write("Completed assembly %s - #methods: %d, #jitted: %d\n"
                     % (target_path, len(target.methods), len(plan)))
    return 0


def run_host(argv: List[str], settings: Dict[str, str]) -> int:
    args = argv[1:]
    if not args or args[0].startswith("-"):
        sys.stderr.write(USAGE)
        return -1
    assembly_path = path_text(args[0])
    assembly = open_assembly(assembly_path)
    if assembly.kind not in (KIND_APP, KIND_PMI):
        raise HostError("Main method not found in assembly '%s'." % assembly_path)
    runtime_dir = parent_dir(argv[0])
    jit = load_runtime_jit(runtime_dir, os.environ, settings)
    try:
        if assembly.kind == KIND_PMI:
            return run_pmi(jit, assembly, args[1:], os.environ)
        return run_app(jit, assembly, args[1:])
    finally:
        jit.close()


def main(argv: Optional[List[str]] = None, settings: Optional[Dict[str, str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    try:
        return run_host(argv, dict(settings or {}))
    except HostError as error:
        sys.stderr.write("corerun: %s\n" % error)
        return -1
    except (KeyboardInterrupt, BrokenPipeError):
        return -1


if __name__ == "__main__":
    sys.exit(main())
