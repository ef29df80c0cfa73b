"""Generate a self-contained sample toolchain (superpmi, mcs, pin, JITs, collections).

Usage::

    python sample/make_toolchain.py OUTDIR [--contexts N] [--seed S] [--host_arch x64|x86]
                                    [--targets linux-x64,...] [--collections libraries.pmi,...]
    python sample/make_toolchain.py jit PATH --target linux-x64 [--flavor checked] [--variant diff] ...
    python sample/make_toolchain.py collection PATH --target linux-x64 [--contexts N] [--faults JSON] ...

See sample/README.md.
"""
from __future__ import annotations

if __package__ in (None, ""):  # run as a script: make the package importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))
    __package__ = "sample"
    __import__("sample")

import argparse
import compileall
import json
import shutil
import stat
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .assembly import KIND_LIBRARY, AssemblySpec, write_assembly, write_sample_assemblies
from .collection import make_collection
from .coredistools import coredistools_file_name, write_coredistools
from .jitfile import DEFAULT_COMPILER, DEFAULT_GUID, JitSpec, host_os, jit_file_name, shared_library_suffix, write_jit
from .noise import INSTRUCTIONS, NoiseConfig, check_amplitudes
from .pin_main import PINTOOL_MAGIC
from .shim import shim_file_name, write_shim

HOST_TARGETS: Dict[str, List[str]] = {
    "x64": ["windows-x64", "windows-arm64", "linux-x64", "linux-arm64", "osx-arm64", "windows-x86", "linux-arm"],
    "x86": ["windows-x86", "linux-arm"],
}
DEFAULT_SETS = ["libraries.pmi", "benchmarks.run", "aspnet.run"]
OS_NAMES = ("windows", "linux", "osx")
ARCHES = ("x64", "x86", "arm64", "arm")
PACKAGE_DIR = Path(__file__).resolve().parent
PathLike = Union[str, Path]
#: folder of a toolchain holding the noise run counter (see noise.py)
NOISE_RUNS_DIR = "noise_runs"


class GeneratorError(Exception):
    """Bad generator input; the CLI prints it as one line and exits 1."""


def parse_target(text: str) -> Tuple[str, str]:
    os_name, _, arch = text.strip().lower().partition("-")
    if os_name not in OS_NAMES or arch not in ARCHES:
        raise GeneratorError("unknown target '%s': use <os>-<arch> with os in %s and arch in %s"
                             % (text, "/".join(OS_NAMES), "/".join(ARCHES)))
    return os_name, arch


# ---------------------------------------------------------------- single pieces

def make_jit(path: PathLike, target_os: str, target_arch: str, flavor: str = "checked", variant: str = "base",
             guid: str = DEFAULT_GUID, build_string: Optional[str] = None,
             faults: Optional[Mapping[str, Any]] = None, compiler: str = DEFAULT_COMPILER,
             native_pgo: Optional[bool] = None, tp_factor: float = 1.0,
             mem_factors: Optional[Mapping[str, float]] = None, altjit: bool = False,
             noise: Optional[NoiseConfig] = None) -> Path:
    """Write one sample JIT file (``noise``: run-to-run variation of its reported metrics, see noise.py).

    ``faults`` keys: ``<kind>_hashes`` (list of method hashes, 8-hex short
    hashes or full method names) and ``<kind>_every`` (N: methods whose short
    hash is a multiple of N) for kind in crash, hang, missing, assert,
    compile_error; ``load``: ``getjit`` or ``startup`` makes loading fail."""
    if flavor not in ("checked", "release"):
        raise GeneratorError("flavor must be checked or release, not '%s'" % flavor)
    spec = JitSpec(target_os=target_os, target_arch=target_arch, flavor=flavor, variant=variant, guid=guid,
                   compiler=compiler, native_pgo=native_pgo, tp_factor=tp_factor,
                   mem_factors=dict(mem_factors or {"*": 1.0}), faults=dict(faults or {}), altjit=altjit,
                   build_string=build_string)
    if noise is not None and noise.enabled:
        metric_noise = {k: v for k, v in noise.amplitudes.items() if k != INSTRUCTIONS}
        check_noise(noise.amplitudes)
        spec.noise, spec.noise_seed, spec.noise_runs = metric_noise, noise.seed, noise.runs_dir
    return write_jit(Path(path), spec)


def check_noise(amplitudes: Mapping[str, float]) -> None:
    try:
        check_amplitudes(amplitudes)
    except ValueError as error:
        raise GeneratorError(str(error)) from None


def parse_noise(items: Optional[Sequence[str]]) -> Dict[str, float]:
    """``--noise METRIC=PCT`` values (repeatable) as metric -> percent."""
    amplitudes: Dict[str, float] = {}
    for item in items or ():
        metric, equals, pct = item.partition("=")
        try:
            amplitudes[metric.strip()] = float(pct)
        except ValueError:
            raise GeneratorError("--noise %s: use METRIC=PCT, e.g. --noise instructions=0.05 "
                                 "--noise BytesAllocated=5" % item) from None
        if not equals:
            raise GeneratorError("--noise %s: use METRIC=PCT" % item)
    check_noise(amplitudes)
    return amplitudes


def make_invalid_jit(path: PathLike) -> Path:
    """A file with a JIT's name that is not a loadable JIT."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a shared library\n")
    return path


def make_pintool(path: PathLike, noise: Optional[NoiseConfig] = None) -> Path:
    """The pintool file; with ``noise`` naming ``instructions`` its counts vary run to run (noise.py)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = PINTOOL_MAGIC + b"clrjit_inscount sample pintool\n"
    if noise is not None and noise.amplitudes.get(INSTRUCTIONS, 0) > 0:
        only = NoiseConfig({INSTRUCTIONS: noise.amplitudes[INSTRUCTIONS]}, noise.seed, noise.runs_dir)
        text += json.dumps(only.to_json(), sort_keys=True).encode("utf-8") + b"\n"
    path.write_bytes(text)
    return path


#: the modules a generated toolchain runs (copied to ``OUTDIR/core_root/lib/sample``)
LIBRARY_MODULES = ("__init__", "assembly", "context", "coredistools", "corerun_main", "ilc_main", "jitfile", "jithost",
                   "listing", "mchfile", "mcs_main", "model", "names", "noise", "pin_main", "plain", "shim",
                   "superpmi_args", "superpmi_main", "superpmi_output", "superpmi_parallel")


def copy_library(lib_dir: Path) -> Path:
    """Copy the sample package to ``lib_dir/sample`` (with compiled bytecode, so
    every tool start is cheap) so the toolchain runs without the repo."""
    target = lib_dir / "sample"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for module in LIBRARY_MODULES:
        shutil.copy2(PACKAGE_DIR / (module + ".py"), target / (module + ".py"))
    compileall.compile_dir(str(target), quiet=1)
    return target


def _make_executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


_LAUNCHER = '''#!{python} -S
# Sample toolchain {tool} (generated by sample/make_toolchain.py; -S: the code needs only the
# standard library, and a native tool starts without Python's site set-up).
# The code it runs lives in lib/ next to this file, and nowhere else: a copy of this
# directory is self-contained, and a copy without lib/ fails like a tool missing a library.
import os
import sys

_lib = os.path.join(os.path.dirname(os.path.realpath(__file__)), {lib_parts})
if not os.path.isfile(os.path.join(_lib, "sample", "__init__.py")):
    sys.stderr.write("%s: error while loading shared libraries: the sample code is not in %s "
                     "(no sample/__init__.py)\\n" % (sys.argv[0], _lib))
    sys.exit({missing_code})
sys.path.insert(0, _lib)
from sample.{module} import main

sys.exit(main(sys.argv, {settings!r}))
'''

#: directory beside the launchers holding the code they run
LIB_DIR_NAME = "lib"
#: exit code of a launcher whose lib/ is missing (what a loader gives for a missing library)
MISSING_LIBRARY_EXIT = 127


def make_tool_launcher(path: PathLike, tool: str, settings: Mapping[str, str], lib_name: str = LIB_DIR_NAME) -> Path:
    """Write an executable script starting ``superpmi``, ``mcs``, ``corerun`` or ``ilc`` from ``lib/``
    beside it (see :func:`copy_library`), or from ``lib_name`` relative to its folder."""
    module = {"superpmi": "superpmi_main", "mcs": "mcs_main", "corerun": "corerun_main", "ilc": "ilc_main"}[tool]
    lib_parts = ", ".join(repr(part) for part in Path(lib_name).parts)
    text = _LAUNCHER.format(python=sys.executable, tool=tool, lib_parts=lib_parts, module=module,
                            settings=dict(settings), missing_code=MISSING_LIBRARY_EXIT)
    return _make_executable(Path(path), text)


def make_pin(path: PathLike) -> Path:
    """The stand-alone ``pin`` script (a copy of pin_main.py with a shebang, `-S` as the launchers)."""
    source = (PACKAGE_DIR / "pin_main.py").read_text(encoding="utf-8")
    return _make_executable(Path(path), "#!%s -S\n%s" % (sys.executable, source))


def make_collect_host(root: Path, host: str, settings: Mapping[str, str]) -> None:
    """What collecting needs: ``corerun`` and the shim collector in Core_Root, ``pmi/pmi.dll``,
    the sample apps in ``apps/`` and their dependency in ``deps/``, and for NativeAOT
    ``ilc-published/ilc``, ``aotsdk/`` and the tests of ``nativeaot/``."""
    core_root = root / "core_root"
    make_tool_launcher(core_root / ("corerun.exe" if host == "windows" else "corerun"), "corerun", settings)
    write_shim(core_root / shim_file_name(host))
    for folder in ("apps", "deps", "pmi", NATIVEAOT_DIR):
        if (root / folder).exists():
            shutil.rmtree(root / folder)
    write_sample_assemblies(root)
    make_nativeaot(root, host, settings)


#: the NativeAOT tests (``<root>/nativeaot/<Test>/<Test>/native/<Test>.ilc.rsp``)
NATIVEAOT_DIR = "nativeaot"
#: where the tests' response files say the test build was (it is gone: a collection rewrites the paths)
NATIVEAOT_BUILD_ROOT = "/__w/1/s/artifacts"
NATIVEAOT_TESTS = {"Hello": "apps/hello.dll", "Library": "apps/library.dll"}


def nativeaot_rsp_lines(test: str, host: str, arch: str) -> List[str]:
    """A test's ``.ilc.rsp`` as a test build writes it: paths of that build, plus the test's options."""
    build = NATIVEAOT_BUILD_ROOT
    return ["%s/tests/%s/%s/%s.dll" % (build, test, test, test),
            "-o:%s/obj/%s/native/%s.o" % (build, test, test),
            "-r:%s/microsoft.netcore.app.runtime/*.dll" % build,
            "--targetos:%s" % host, "--targetarch:%s" % arch, "-O", "--nativelib",
            "--descriptor:%s/src/tests/%s/ILLink.Descriptors.xml" % (build, test),
            "--exportsfile:%s/obj/%s/native/%s.exports" % (build, test, test),
            "--feature:System.Diagnostics.Tracing.EventSource.IsSupported=false"]


def make_nativeaot(root: Path, host: str, settings: Mapping[str, str]) -> None:
    """``core_root/ilc-published/ilc``, ``core_root/aotsdk/System.Private.CoreLib.dll`` and, per test,
    ``nativeaot/<T>/<T>/native/<T>.ilc.rsp``, its input ``nativeaot/<T>/<T>/<T>.dll`` and its
    descriptor ``nativeaot/<T>/ILLink.Descriptors.xml``."""
    core_root = root / "core_root"
    make_tool_launcher(core_root / "ilc-published" / ("ilc.exe" if host == "windows" else "ilc"), "ilc", settings,
                       lib_name="../" + LIB_DIR_NAME)
    write_assembly(core_root / "aotsdk" / "System.Private.CoreLib.dll",
                   AssemblySpec("System.Private.CoreLib", KIND_LIBRARY))
    for test, source in NATIVEAOT_TESTS.items():
        folder = root / NATIVEAOT_DIR / test
        (folder / test / "native").mkdir(parents=True)
        shutil.copyfile(root / source, folder / test / (test + ".dll"))
        (folder / "ILLink.Descriptors.xml").write_text("<linker />\n", encoding="utf-8")
        (folder / test / "native" / (test + ".ilc.rsp")).write_text(
            "\n".join(nativeaot_rsp_lines(test, host, settings.get("host_arch", "x64"))) + "\n", encoding="utf-8")


def pack_directory(directory: Path, archive: Path) -> Path:
    """Pack the contents of ``directory`` (members relative to it) as .tar.gz."""
    with tarfile.open(archive, "w:gz") as tar:
        for item in sorted(directory.rglob("*")):
            tar.add(item, arcname=item.relative_to(directory).as_posix(), recursive=False)
    return archive


# ---------------------------------------------------------------- whole layout

@dataclass
class Toolchain:
    root: Path
    host_os: str
    host_arch: str
    guid: str
    core_root: Path
    base_dir: Path
    release_base: Path
    release_diff: Path
    release_memblowup: Path
    pin: Path
    pintool: Path
    pin_archive: Path
    collections_dir: Path
    #: the noise knobs every JIT and the pintool carry (empty: none), with their seed
    noise: Dict[str, Any] = field(default_factory=dict)
    #: target ("linux-x64") -> JIT file name
    jit_names: Dict[str, str] = field(default_factory=dict)
    #: target -> collection files
    collections: Dict[str, List[Path]] = field(default_factory=dict)

    @property
    def superpmi(self) -> Path:
        return self.core_root / ("superpmi.exe" if self.host_os == "windows" else "superpmi")

    @property
    def mcs(self) -> Path:
        return self.core_root / ("mcs.exe" if self.host_os == "windows" else "mcs")

    @property
    def corerun(self) -> Path:
        return self.core_root / ("corerun.exe" if self.host_os == "windows" else "corerun")

    @property
    def coredistools(self) -> Path:
        """The disassembler library superpmi -a loads from its own directory (absent with coredistools=False)."""
        return self.core_root / coredistools_file_name(self.host_os)

    @property
    def shim(self) -> Path:
        """The shim collector (``libsuperpmi-shim-collector.so`` etc.) in Core_Root."""
        return self.core_root / shim_file_name(self.host_os)

    @property
    def native_jit(self) -> Path:
        """The Core_Root JIT for the host itself (what the shim wraps when collecting)."""
        return self.core_root / jit_file_name(self.host_os, self.host_os, self.host_arch, self.host_arch)

    @property
    def ilc(self) -> Path:
        """The NativeAOT compiler stand-in, ``core_root/ilc-published/ilc``."""
        return self.core_root / "ilc-published" / ("ilc.exe" if self.host_os == "windows" else "ilc")

    @property
    def nativeaot_dir(self) -> Path:
        """The NativeAOT tests (one ``.ilc.rsp`` each)."""
        return self.root / NATIVEAOT_DIR

    @property
    def pmi_dll(self) -> Path:
        return self.root / "pmi" / "pmi.dll"

    @property
    def apps_dir(self) -> Path:
        """The sample apps / assemblies (hello.dll, failing.dll, crash.dll, library.dll, native.dll)."""
        return self.root / "apps"

    @property
    def deps_dir(self) -> Path:
        """deps.dll, referenced by apps/library.dll (found by PMI only through PMIPATH)."""
        return self.root / "deps"

    def app(self, name: str) -> Path:
        return self.apps_dir / (name + ".dll")

    def collection(self, target: str, set_name: str) -> Path:
        for path in self.collections.get(target, []):
            if path.name.startswith(set_name + "."):
                return path
        raise KeyError("%s %s" % (target, set_name))


def jit_plan(host: str, host_arch: str, targets: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """JIT file name -> (target_os, target_arch) for a host and its targets."""
    plan: Dict[str, Tuple[str, str]] = {}
    plan[jit_file_name(host, host, host_arch, host_arch)] = (host, host_arch)
    plan[jit_file_name(host, host, host_arch, host_arch, force_cross=True)] = (host, host_arch)
    for target in targets:
        os_name, arch = parse_target(target)
        plan.setdefault(jit_file_name(host, os_name, host_arch, arch), (os_name, arch))
    return plan


def _write_jit_set(directory: Path, plan: Mapping[str, Tuple[str, str]], **spec: Any) -> None:
    for name, (os_name, arch) in plan.items():
        make_jit(directory / name, os_name, arch, **spec)


def make_toolchain(outdir: PathLike, contexts: int = 300, seed: int = 0, host_arch: str = "x64",
                   targets: Optional[Sequence[str]] = None, collections: Optional[Sequence[str]] = None,
                   guid: str = DEFAULT_GUID, base_compiler: str = DEFAULT_COMPILER,
                   diff_compiler: Optional[str] = None, diff_native_pgo: Optional[bool] = None,
                   tp_factor: float = 1.03, mem_factor: float = 1.02, memblowup_set: str = "aspnet",
                   memblowup_factor: float = 1.40, diff_faults: Optional[Mapping[str, Any]] = None,
                   collection_faults: Optional[Mapping[str, Any]] = None, coredistools: bool = True,
                   noise: Optional[Mapping[str, float]] = None, noise_seed: int = 0) -> Toolchain:
    """Write the whole sample layout under ``outdir`` (see sample/README.md); ``coredistools=False``
    leaves the disassembler library out of Core_Root (as a Core_Root made from a product build may).

    ``noise`` (metric -> percent, e.g. ``{"instructions": 0.05, "BytesAllocated": 5}``) gives every
    JIT and the pintool seeded run-to-run variation (``noise_seed``); see noise.py."""
    if host_arch not in HOST_TARGETS:
        raise GeneratorError("host arch must be one of %s, not '%s'" % (", ".join(HOST_TARGETS), host_arch))
    if contexts < 0:
        raise GeneratorError("--contexts must be >= 0")
    host = host_os()
    available = HOST_TARGETS[host_arch]
    chosen = list(targets) if targets else list(available)
    for target in chosen:
        if target not in available:
            raise GeneratorError("target '%s' is not diffed on an %s host (choose from %s)"
                                 % (target, host_arch, ",".join(available)))
    sets = list(collections) if collections else list(DEFAULT_SETS)
    root = Path(outdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    settings = {"guid": guid, "host_arch": host_arch}
    core_root = root / "core_root"
    copy_library(core_root / LIB_DIR_NAME)
    make_tool_launcher(core_root / ("superpmi.exe" if host == "windows" else "superpmi"), "superpmi", settings)
    make_tool_launcher(core_root / ("mcs.exe" if host == "windows" else "mcs"), "mcs", settings)
    library = core_root / coredistools_file_name(host)
    if coredistools:
        write_coredistools(library)
    elif library.exists():
        library.unlink()
    make_collect_host(root, host, settings)

    plan = jit_plan(host, host_arch, chosen)
    diff_compiler = diff_compiler or base_compiler
    noise_config = NoiseConfig(dict(noise or {}), noise_seed, str(root / NOISE_RUNS_DIR)) if noise else None
    if noise_config is not None:
        check_noise(noise_config.amplitudes)
    if (root / NOISE_RUNS_DIR).exists():
        shutil.rmtree(root / NOISE_RUNS_DIR)  # a fresh toolchain numbers its runs from 1 again
    common: Dict[str, Any] = {"guid": guid, "noise": noise_config}
    _write_jit_set(core_root, plan, flavor="checked", variant="diff", compiler=diff_compiler,
                   native_pgo=diff_native_pgo, tp_factor=tp_factor, mem_factors={"*": mem_factor},
                   faults=diff_faults, **common)
    _write_jit_set(root / "base", plan, flavor="checked", variant="base", compiler=base_compiler, **common)
    _write_jit_set(root / "release" / "base", plan, flavor="release", variant="base", compiler=base_compiler,
                   **common)
    _write_jit_set(root / "release" / "diff", plan, flavor="release", variant="diff", compiler=diff_compiler,
                   native_pgo=diff_native_pgo, tp_factor=tp_factor, mem_factors={"*": mem_factor}, **common)
    _write_jit_set(root / "release" / "diff_memblowup", plan, flavor="release", variant="diff",
                   compiler=diff_compiler, native_pgo=diff_native_pgo, tp_factor=tp_factor,
                   mem_factors={"*": mem_factor, memblowup_set: memblowup_factor}, **common)

    pin_root = root / "pintools" / "1.0" / host
    if pin_root.exists():
        shutil.rmtree(pin_root)
    pin = make_pin(pin_root / ("pin.exe" if host == "windows" else "pin"))
    tool_name = {"windows": "clrjit_inscount.dll", "osx": "libclrjit_inscount.dylib"}.get(host, "libclrjit_inscount.so")
    pintool = make_pintool(pin_root / ("clrjit_inscount_%s" % host_arch) / tool_name, noise_config)
    archive = pack_directory(pin_root, root / "pintools" / "1.0" / (host + (".zip" if host == "windows" else ".tar.gz")))

    collections_dir = root / "collections" / guid
    toolchain = Toolchain(root, host, host_arch, guid, core_root, root / "base", root / "release" / "base",
                          root / "release" / "diff", root / "release" / "diff_memblowup", pin, pintool, archive,
                          collections_dir)
    if noise_config is not None:
        toolchain.noise = noise_config.to_json()
    for target in chosen:
        os_name, arch = parse_target(target)
        toolchain.jit_names[target] = jit_file_name(host, os_name, host_arch, arch)
        files = []
        for set_name in sets:
            path = collections_dir / os_name / arch / ("%s.%s.%s.checked.mch" % (set_name, os_name, arch))
            make_collection(path, os_name, arch, contexts=contexts, seed=seed, set_name=set_name,
                            faults=collection_faults)
            files.append(path)
        toolchain.collections[target] = files
    write_manifest(toolchain)
    write_layout_readme(toolchain, contexts)
    return toolchain


def write_manifest(toolchain: Toolchain) -> Path:
    data = {
        "host_os": toolchain.host_os, "host_arch": toolchain.host_arch, "jit_ee_guid": toolchain.guid,
        "superpmi": str(toolchain.superpmi), "mcs": str(toolchain.mcs), "pin": str(toolchain.pin),
        "pintool": str(toolchain.pintool), "jit_names": toolchain.jit_names,
        "corerun": str(toolchain.corerun), "shim_collector": str(toolchain.shim), "pmi_dll": str(toolchain.pmi_dll),
        "apps_dir": str(toolchain.apps_dir), "deps_dir": str(toolchain.deps_dir),
        "coredistools": str(toolchain.coredistools) if toolchain.coredistools.is_file() else None,
        "collections": {t: [str(p) for p in paths] for t, paths in toolchain.collections.items()},
        "noise": toolchain.noise,
    }
    path = toolchain.root / "toolchain.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def write_layout_readme(toolchain: Toolchain, contexts: int) -> Path:
    suffix = shared_library_suffix(toolchain.host_os)
    lines = [
        "# Sample SuperPMI toolchain",
        "",
        "Generated by `sample/make_toolchain.py` for a %s %s host (JIT-EE GUID `%s`)."
        % (toolchain.host_os, toolchain.host_arch, toolchain.guid),
        "The tools are Python scripts; `core_root/lib/sample/` holds the code superpmi and mcs run "
        "(they look only there, so a copy of `core_root` is self-contained); `pin` is one self-contained file.",
        "",
        "| Path | What |",
        "|---|---|",
        "| `core_root/superpmi`, `core_root/mcs` | the superpmi and mcs stand-ins |",
        "| `core_root/lib/sample/` | the code the stand-ins run (a copy of the sample package) |",
        "| `core_root/%s` | the disassembler library `superpmi -a` loads from its own directory (left out with "
        "`--no_coredistools`) |" % coredistools_file_name(toolchain.host_os),
        "| `core_root/*%s` | checked **diff** JITs (the changed compiler) |" % suffix,
        "| `base/*%s` | checked **baseline** JITs (same names) |" % suffix,
        "| `release/base/`, `release/diff/` | release JITs for tpdiff/memdiff: the diff executes more instructions and allocates a little more memory |",
        "| `release/diff_memblowup/` | release diff JITs that allocate much more memory for the `aspnet` collections |",
        "| `pintools/1.0/%s/` | `pin` and the `clrjit_inscount_%s` pintool; `pintools/1.0/%s.tar.gz` is the same tree packed |"
        % (toolchain.host_os, toolchain.host_arch, toolchain.host_os),
        "| `collections/%s/<os>/<arch>/` | collections (`.mch` + `.mch.mct`), %d contexts each |" % (toolchain.guid, contexts),
        "| `core_root/corerun`, `core_root/%s` | the host program and the shim collector (collecting) |"
        % toolchain.shim.name,
        "| `pmi/pmi.dll` | PMI: `core_root/corerun pmi/pmi.dll DRIVEALL <assembly>` compiles every method |",
        "| `apps/` | sample apps: `hello.dll`, `failing.dll` (one context fails replay), `crash.dll` (crashes the "
        "host), `library.dll` (needs `deps/` on `PMIPATH`), `native.dll` (not managed) |",
        "| `deps/deps.dll` | the assembly `apps/library.dll` references |",
        "| `toolchain.json` | the same facts, machine-readable |",
        "",
        "JIT file per target:",
        "",
    ]
    for target, name in sorted(toolchain.jit_names.items()):
        lines.append("* `%s`: `%s`" % (target, name))
    if toolchain.noise:
        lines += ["", "Run-to-run noise (each compile's value varies by up to ±PCT %%): %s, seed %s; runs are numbered "
                  "in `%s/` (`SPMI_SAMPLE_NOISE_RUN` pins one)."
                  % (", ".join("`%s` %g" % item for item in sorted(toolchain.noise["noise"].items())),
                     toolchain.noise["noise_seed"], NOISE_RUNS_DIR)]
    lines += ["", "Example (run from `core_root`):", "",
              "    ./superpmi -a -v ewi -f fail.mcl -details details.csv ../base/libclrjit.so libclrjit.so \\",
              "        ../collections/%s/linux/x64/libraries.pmi.linux.x64.checked.mch" % toolchain.guid, ""]
    path = toolchain.root / "README.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


# ---------------------------------------------------------------- CLI

def _json_argument(text: Optional[str], what: str) -> Optional[Dict[str, Any]]:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise GeneratorError("%s is not valid JSON (%s): %s" % (what, error, text)) from None
    if not isinstance(value, dict):
        raise GeneratorError("%s must be a JSON object, e.g. '{\"assert_every\": 97}'" % what)
    return value


def _split(text: Optional[str]) -> Optional[List[str]]:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised as GeneratorError)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise GeneratorError("%s (see %s --help)" % (message, self.prog))


def toolchain_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="make_toolchain.py", description="Generate a sample SuperPMI toolchain.")
    parser.add_argument("outdir")
    parser.add_argument("--contexts", type=int, default=300, help="contexts per collection (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host_arch", choices=sorted(HOST_TARGETS), default="x64")
    parser.add_argument("--targets", help="comma-separated <os>-<arch> list (default: all the host diffs)")
    parser.add_argument("--collections", help="comma-separated sets (default: %s)" % ",".join(DEFAULT_SETS))
    parser.add_argument("--guid", default=DEFAULT_GUID, help="JIT-EE GUID of every tool, JIT and collection path")
    parser.add_argument("--base_compiler", default=DEFAULT_COMPILER)
    parser.add_argument("--diff_compiler", default=None)
    parser.add_argument("--diff_native_pgo", action="store_true", help="diff JITs say 'with native PGO'")
    parser.add_argument("--tp_factor", type=float, default=1.03, help="diff JIT instruction factor")
    parser.add_argument("--mem_factor", type=float, default=1.02, help="diff JIT memory factor")
    parser.add_argument("--memblowup_set", default="aspnet")
    parser.add_argument("--memblowup_factor", type=float, default=1.40)
    parser.add_argument("--diff_faults", help="JSON faults for the checked diff JITs")
    parser.add_argument("--collection_faults", help="JSON faults for every collection")
    parser.add_argument("--no_coredistools", action="store_true",
                        help="leave the disassembler library out of core_root (superpmi -a then fails to load it)")
    _add_noise_arguments(parser)
    return parser


def _add_noise_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--noise", action="append", metavar="METRIC=PCT",
                        help="run-to-run variation: each compile's METRIC varies by up to ±PCT %% "
                             "(instructions: the pintool's counts; any reported metric, e.g. BytesAllocated); "
                             "repeatable; off by default")
    parser.add_argument("--noise_seed", type=int, default=0, help="seed of the noise (default 0)")


def jit_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="make_toolchain.py jit", description="Write one sample JIT file.")
    parser.add_argument("path")
    parser.add_argument("--target", required=True, help="<os>-<arch> the JIT generates code for")
    parser.add_argument("--flavor", choices=["checked", "release"], default="checked")
    parser.add_argument("--variant", default="base", help="codegen variant: 'base' or any other name")
    parser.add_argument("--guid", default=DEFAULT_GUID)
    parser.add_argument("--build_string", default=None)
    parser.add_argument("--compiler", default=DEFAULT_COMPILER)
    parser.add_argument("--native_pgo", choices=["yes", "no"], default=None)
    parser.add_argument("--tp_factor", type=float, default=1.0)
    parser.add_argument("--mem_factors", default=None, help='JSON, e.g. {"*": 1.0, "aspnet": 1.4}')
    parser.add_argument("--faults", default=None, help='JSON, e.g. {"assert_every": 97}')
    parser.add_argument("--altjit", action="store_true")
    parser.add_argument("--invalid", action="store_true", help="write a file that is not a JIT")
    _add_noise_arguments(parser)
    parser.add_argument("--noise_runs", default="", help="folder of the noise run counter (default: none; "
                                                          "runs then differ only with SPMI_SAMPLE_NOISE_RUN)")
    return parser


def collection_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="make_toolchain.py collection", description="Write one collection.")
    parser.add_argument("path")
    parser.add_argument("--target", required=True, help="<os>-<arch> the contexts were recorded for")
    parser.add_argument("--contexts", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set_name", default=None, help="collection set (default: from the file name)")
    parser.add_argument("--faults", default=None, help='JSON, e.g. {"missing": [3, 7], "crash": [12]}')
    parser.add_argument("--stored_config", default=None, help='JSON recorded config, e.g. {"JitNoCSE": "1"}')
    parser.add_argument("--no_toc", action="store_true")
    return parser


def cli(argv: Sequence[str]) -> int:
    if argv and argv[0] == "jit":
        args = jit_parser().parse_args(argv[1:])
        if args.invalid:
            make_invalid_jit(args.path)
            return 0
        os_name, arch = parse_target(args.target)
        pgo = None if args.native_pgo is None else args.native_pgo == "yes"
        make_jit(args.path, os_name, arch, flavor=args.flavor, variant=args.variant, guid=args.guid,
                 build_string=args.build_string, faults=_json_argument(args.faults, "--faults"),
                 compiler=args.compiler, native_pgo=pgo, tp_factor=args.tp_factor,
                 mem_factors=_json_argument(args.mem_factors, "--mem_factors"), altjit=args.altjit,
                 noise=NoiseConfig(parse_noise(args.noise), args.noise_seed, args.noise_runs))
        return 0
    if argv and argv[0] == "collection":
        args = collection_parser().parse_args(argv[1:])
        os_name, arch = parse_target(args.target)
        stored = _json_argument(args.stored_config, "--stored_config")
        info = make_collection(args.path, os_name, arch, contexts=args.contexts, seed=args.seed,
                               set_name=args.set_name, faults=_json_argument(args.faults, "--faults"),
                               stored_config={str(k): str(v) for k, v in (stored or {}).items()},
                               toc=not args.no_toc)
        print("Wrote %s (%d contexts)" % (info.path, info.contexts))
        return 0
    args = toolchain_parser().parse_args(list(argv))
    toolchain = make_toolchain(
        args.outdir, contexts=args.contexts, seed=args.seed, host_arch=args.host_arch,
        targets=_split(args.targets), collections=_split(args.collections), guid=args.guid,
        base_compiler=args.base_compiler, diff_compiler=args.diff_compiler,
        diff_native_pgo=True if args.diff_native_pgo else None, tp_factor=args.tp_factor,
        mem_factor=args.mem_factor, memblowup_set=args.memblowup_set, memblowup_factor=args.memblowup_factor,
        diff_faults=_json_argument(args.diff_faults, "--diff_faults"),
        collection_faults=_json_argument(args.collection_faults, "--collection_faults"),
        coredistools=not args.no_coredistools, noise=parse_noise(args.noise), noise_seed=args.noise_seed)
    print("Wrote sample toolchain to %s (see %s)" % (toolchain.root, toolchain.root / "README.md"))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return cli(list(sys.argv[1:] if argv is None else argv))
    except (GeneratorError, ValueError) as error:
        sys.stderr.write("make_toolchain: error: %s\n" % error)
        return 1
    except OSError as error:
        sys.stderr.write("make_toolchain: error: %s: %s\n" % (error.filename or "", error.strerror))
        return 1


if __name__ == "__main__":
    sys.exit(main())
