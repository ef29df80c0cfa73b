"""Sample JIT "binaries": file format, build string and file names.

A sample JIT is a data file the sample superpmi loads.  Layout::

    \\x7fSPMI-SAMPLE-JIT\\n
    <one line of JSON: the JitSpec>\\n
    \\0RyuJIT built by <compiler> targeting <os>-<arch>[ (with native PGO)]\\0
    <padding>

Anything else is "not a valid JIT" (LoadLibrary failure).
"""
from __future__ import annotations

import sys

from .plain import Record, read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Dict, Optional

    from .plain import PathLike

JIT_MAGIC = b"\x7fSPMI-SAMPLE-JIT\n"
DEFAULT_GUID = "5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35"
DEFAULT_COMPILER = "GCC 13.2.0"
FLAVORS = ("checked", "release")


def host_os() -> str:
    if sys.platform.startswith("win"):
        return "windows"
    if sys.platform == "darwin":
        return "osx"
    return "linux"


def shared_library_suffix(os_name: str) -> str:
    return {"windows": ".dll", "osx": ".dylib"}.get(os_name, ".so")


def executable_name(name: str, os_name: str) -> str:
    return name + ".exe" if os_name == "windows" else name


def target_family(target_os: str, target_arch: str) -> str:
    """``universal`` for arm/arm64, else ``win`` for Windows, else ``unix`` (as in JIT names)."""
    if target_arch in ("arm", "arm64"):
        return "universal"
    return "win" if target_os == "windows" else "unix"


def jit_file_name(host_os_name: str, target_os: str, host_arch: str, target_arch: str,
                  force_cross: bool = False) -> str:
    """JIT file name for a host/target pair (native name unless cross or forced)."""
    suffix = shared_library_suffix(host_os_name)
    prefix = "" if host_os_name == "windows" else "lib"
    native = target_os == host_os_name and target_arch == host_arch
    if native and not force_cross:
        return prefix + "clrjit" + suffix
    family = target_family(target_os, target_arch)
    return "%sclrjit_%s_%s_%s%s" % (prefix, family, target_arch, host_arch, suffix)


def build_string_arch(target_arch: str) -> str:
    return "arm32" if target_arch == "arm" else target_arch


class JitSpec(Record):
    """Everything a sample JIT file carries."""

    __slots__ = ("target_os", "target_arch", "flavor", "variant", "guid", "compiler", "native_pgo", "tp_factor",
                 "mem_factors", "faults", "altjit", "build_string", "noise", "noise_seed", "noise_runs")

    def __init__(self, target_os: str, target_arch: str, flavor: str = "checked", variant: str = "base",
                 guid: str = DEFAULT_GUID, compiler: str = DEFAULT_COMPILER, native_pgo: Optional[bool] = None,
                 tp_factor: float = 1.0, mem_factors: Optional[Dict[str, float]] = None,
                 faults: Optional[Dict[str, Any]] = None, altjit: bool = False, build_string: Optional[str] = None,
                 noise: Optional[Dict[str, float]] = None, noise_seed: int = 0, noise_runs: str = "") -> None:
        self.target_os = target_os
        self.target_arch = target_arch
        self.flavor = flavor
        self.variant = variant
        self.guid = guid
        self.compiler = compiler
        self.native_pgo = native_pgo
        self.tp_factor = tp_factor
        self.mem_factors: Dict[str, float] = {"*": 1.0} if mem_factors is None else mem_factors
        self.faults: Dict[str, Any] = {} if faults is None else faults
        self.altjit = altjit
        self.build_string = build_string
        #: run-to-run noise of reported metrics (metric -> percent; see noise.py), its seed and run counter folder
        self.noise: Dict[str, float] = {} if noise is None else noise
        self.noise_seed = noise_seed
        self.noise_runs = noise_runs

    @property
    def family(self) -> str:
        return target_family(self.target_os, self.target_arch)

    @property
    def checked(self) -> bool:
        return self.flavor == "checked"

    def effective_build_string(self) -> str:
        if self.build_string is not None:
            return self.build_string
        pgo = ""
        if self.native_pgo is True:
            pgo = " (with native PGO)"
        elif self.native_pgo is False:
            pgo = " (without native PGO)"
        return "RyuJIT built by %s targeting %s-%s%s" % (
            self.compiler, self.family, build_string_arch(self.target_arch), pgo)

    def memory_factor(self, set_name: str) -> float:
        """Factor for a collection set: exact set name, then its first word, then ``*``."""
        for key in (set_name, set_name.split(".", 1)[0], "*"):
            if key in self.mem_factors:
                return float(self.mem_factors[key])
        return 1.0

    def accepts(self, context_os: str, context_arch: str) -> bool:
        """Whether this JIT generates code for contexts recorded for that target."""
        return context_arch == self.target_arch and target_family(context_os, context_arch) == self.family


def encode_jit(spec: JitSpec) -> bytes:
    import json

    body = json.dumps(spec.as_dict(), sort_keys=True, separators=(",", ":")).encode("utf-8")
    build = spec.effective_build_string().encode("ascii")
    padding = bytes((index * 37 + 11) % 251 for index in range(256))
    return JIT_MAGIC + body + b"\n\0" + build + b"\0" + padding


def write_jit(path: PathLike, spec: JitSpec) -> Path:
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_jit(spec))
    return path


class NotAJit(ValueError):
    """The file is not a sample JIT."""


def decode_jit(data: bytes) -> JitSpec:
    if not data.startswith(JIT_MAGIC):
        raise NotAJit("bad magic")
    end = data.find(b"\n", len(JIT_MAGIC))
    if end < 0:
        raise NotAJit("no spec line")
    import json

    try:
        fields = json.loads(data[len(JIT_MAGIC):end].decode("utf-8"))
        return JitSpec(**fields)
    except (ValueError, TypeError) as error:
        raise NotAJit(str(error)) from error


def read_jit(path: PathLike) -> JitSpec:
    return decode_jit(read_bytes(path))
