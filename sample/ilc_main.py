"""The sample ``ilc``: the NativeAOT compiler (docs/contracts.md §14.2, NativeAOT mode).

    ilc @<response file>
    ilc <input.dll> -o:<output> [-r:<file or pattern>]... [--jitpath:<jit>] [--codegenopt:<name>=<value>]...
        [--descriptor:<file>] [--substitution:<file>] [--exportsfile:<file>] [other options]

A response file holds one argument per line (blank lines are skipped). Exactly one
argument is not an option: the managed input assembly. ILC compiles every method
of it ahead of time, one FullOpts compilation each, through the JIT library
``--jitpath`` names (else the native JIT beside ``ilc``); ``--codegenopt`` values are
that JIT's configuration (what ``DOTNET_<name>`` is for a running app). When the
JIT is the shim collector, each compilation is forwarded to ``SuperPMIShimPath``
and recorded in ``SuperPMIShimLogPath``. Strict where the real compiler is:
``-o:`` is required and its folder must exist, ``System.Private.CoreLib.dll`` must
be among the references, a descriptor or substitution file must exist, the
folder of the exports file must exist. Other options are accepted (real response
files carry many). Errors: one line ``error: ...`` on stderr, exit 1.
"""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .assembly import AssemblySpec, Compilation, NotAnAssembly, read_assembly, runtime_settings
from .corerun_main import LoadedJit, load_real_jit, shim_recorder
from .jitfile import DEFAULT_GUID, host_os, jit_file_name
from .shim import SHIM_PATH_ENV, is_shim

CORELIB = "System.Private.CoreLib.dll"
AOT_TIER = "FullOpts"
USAGE = "Usage: ilc @<response file> | ilc <input.dll> -o:<output> [options]\n"


class IlcError(Exception):
    """A command-line or input problem: one line on stderr, exit 1."""


class Options:
    """What the sample compiler reads of its arguments."""

    def __init__(self) -> None:
        self.inputs: List[str] = []
        self.output: Optional[str] = None
        self.references: List[str] = []
        self.jit_path: Optional[str] = None
        self.codegen: Dict[str, str] = {}
        self.input_files: List[Tuple[str, str]] = []   # (option, path) that must exist
        self.output_files: List[Tuple[str, str]] = []  # (option, path) whose folder must exist


def expand_response_files(args: Sequence[str]) -> List[str]:
    expanded: List[str] = []
    for arg in args:
        if arg.startswith("@"):
            path = Path(arg[1:])
            try:
                text = path.read_text(encoding="utf-8-sig")
            except OSError:
                raise IlcError("Response file '%s' not found" % path) from None
            expanded += [line.strip() for line in text.splitlines() if line.strip()]
        else:
            expanded.append(arg)
    return expanded


def _value(arg: str) -> Tuple[str, str]:
    """``--name:value`` / ``-x:value`` -> (``--name``, ``value``); no value: (arg, '')."""
    name, _, value = arg.partition(":")
    return name, value


def parse_options(args: Sequence[str]) -> Options:
    options = Options()
    for arg in expand_response_files(args):
        if not arg.startswith("-"):
            options.inputs.append(arg)
            continue
        name, value = _value(arg)
        if name in ("-o", "--out"):
            options.output = value
        elif name in ("-r", "--reference"):
            options.references.append(value)
        elif name == "--jitpath":
            options.jit_path = value
        elif name == "--codegenopt":
            key, equals, setting = value.partition("=")
            if not equals or not key:
                raise IlcError("--codegenopt '%s' must look like <name>=<value>" % value)
            options.codegen[key] = setting
        elif name in ("--descriptor", "--substitution"):
            options.input_files.append((name, value))
        elif name == "--exportsfile":
            options.output_files.append((name, value))
    return options


def reference_files(patterns: Sequence[str]) -> List[Path]:
    """The files the `-r:` arguments name (a pattern's wildcard is in its file name only)."""
    found: List[Path] = []
    for pattern in patterns:
        found += [Path(p) for p in sorted(glob.glob(pattern)) if Path(p).is_file()]
    return found


def check_options(options: Options) -> Tuple[Path, Path, List[Path]]:
    """(input, output, references) once everything the compiler insists on holds."""
    if not options.inputs:
        raise IlcError("No input files specified")
    if len(options.inputs) > 1:
        raise IlcError("Multiple input files specified: %s" % ", ".join(options.inputs))
    source = Path(options.inputs[0])
    if not source.is_file():
        raise IlcError("Input file '%s' not found" % source)
    if not options.output:
        raise IlcError("Output filename must be specified (-o:<file>)")
    output = Path(options.output)
    if not output.parent.is_dir():
        raise IlcError("Output directory '%s' does not exist" % output.parent)
    for option, path in options.input_files:
        if not Path(path).is_file():
            raise IlcError("%s file '%s' not found" % (option, path))
    for option, path in options.output_files:
        if not Path(path).parent.is_dir():
            raise IlcError("%s: directory '%s' does not exist" % (option, Path(path).parent))
    references = reference_files(options.references)
    if not any(p.name == CORELIB for p in references):
        raise IlcError("%s not found among the references (-r:); pass the NativeAOT SDK's System.*.dll" % CORELIB)
    return source, output, references


def open_input(path: Path) -> AssemblySpec:
    try:
        return read_assembly(path)
    except NotAnAssembly:
        raise IlcError("Input file '%s' is not a managed assembly" % path) from None


def load_jit_library(jit_path: Path, codegen: Dict[str, str], guid: str) -> LoadedJit:
    """The JIT ILC compiles with; the shim collector forwards to ``SuperPMIShimPath``."""
    settings = runtime_settings({"DOTNET_" + key: value for key, value in codegen.items()})
    try:
        data = jit_path.read_bytes()
    except OSError:
        raise IlcError("Failed to load the JIT '%s'" % jit_path) from None
    if not is_shim(data):
        return LoadedJit(jit_path, load_real_jit(jit_path, guid), settings)
    real = os.environ.get(SHIM_PATH_ENV, "")
    if not real:
        raise IlcError("superpmi-shim-collector: %s is not set; it must name the real JIT" % SHIM_PATH_ENV)
    return LoadedJit(jit_path, load_real_jit(Path(real), guid), settings, shim_recorder(os.environ))


def aot_plan(assembly: AssemblySpec, source: Path, references: Sequence[Path]) -> List[Compilation]:
    """Every method, once, at FullOpts; a method using a reference found nowhere is left out."""
    available = {p.name.lower() for p in references} | {p.name.lower() for p in source.parent.glob("*.dll")}
    return [Compilation(assembly.name, method, AOT_TIER) for method in assembly.methods
            if not method.uses or (method.uses + ".dll").lower() in available]


def compile_native(args: Sequence[str], settings: Dict[str, str], ilc_dir: Path) -> int:
    options = parse_options(args)
    source, output, references = check_options(options)
    assembly = open_input(source)
    default_jit = ilc_dir / jit_file_name(host_os(), host_os(), settings.get("host_arch", "x64"),
                                          settings.get("host_arch", "x64"))
    jit = load_jit_library(Path(options.jit_path) if options.jit_path else default_jit, options.codegen,
                           settings.get("guid", DEFAULT_GUID))
    plan = aot_plan(assembly, source, references)
    try:
        for compilation in plan:
            jit.compile(compilation)
    finally:
        jit.close()
    output.write_bytes(b"\x7fSAMPLE-NATIVE-OBJECT\n" + assembly.name.encode("utf-8") + b"\n")
    for _, path in options.output_files:
        Path(path).write_text("".join("%s\n" % c.method.name for c in plan), encoding="utf-8")
    sys.stdout.write("Compiled %s: %d methods\n" % (source.name, len(plan)))
    return 0


def main(argv: Optional[List[str]] = None, settings: Optional[Dict[str, str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2 or argv[1] in ("-h", "--help", "-?"):
        sys.stdout.write(USAGE)
        return 0 if len(argv) >= 2 else 1
    try:
        return compile_native(argv[1:], dict(settings or {}), Path(argv[0]).resolve().parent)
    except IlcError as error:
        sys.stderr.write("error: %s\n" % error)
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
