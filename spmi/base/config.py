"""The settings the shared options of the SuperPMI commands resolve to, tool discovery and the
JIT-EE version (the options themselves are defined and parsed in `spmi/commands/shared.py`).

Defaults follow the dotnet/runtime enlistment layout (docs/contracts.md §12.1–§12.4):
host OS/arch detected, target defaulting to the host, Core_Root and the
product directory under `artifacts/`, the cache/output root `spmi_location`.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Literal, Optional, Sequence, overload

from spmi.base import fsutil, logs, platforms, progress, runner
from spmi.base.errors import SuiteError
from spmi.base.invocation import SCRIPTS_DIR

log = logging.getLogger("superpmi")

UNKNOWN_JIT_EE_VERSION = "unknown-jit-ee-version"
JITEE_GUID_HEADER = Path("src/coreclr/inc/jiteeversionguid.h")
_JITEE_GUID_RE = re.compile(r"^constexpr GUID JITEEVersionIdentifier *= *{ */\* *([^ ]*) *\*/")


#: The longest time in seconds a command line may give (30 days; the OS's waits take no more than ~49 days).
MAX_SECONDS = 30 * 24 * 3600


# ---------------------------------------------------------------- settings

@dataclass
class Settings:
    host_os: str
    arch: str
    target_os: str
    target_arch: str
    mch_arch: str
    build_type: str
    repo_root: Optional[Path]
    core_root: Optional[Path]
    product_dir: Optional[Path]
    spmi_location: Path
    no_progress: bool = False
    show_progress: bool = False
    extra: dict = field(default_factory=dict)

    def tool_search_dirs(self) -> List[Path]:
        return [d for d in (self.core_root, self.product_dir) if d is not None]


def _pick_os(value: Optional[str], flag: str, default: str) -> str:
    if value is None:
        return default
    normalized = platforms.normalize_os(value)
    if normalized is None:
        raise SuiteError(f"{flag} '{value}' is not an OS; use windows, linux or osx")
    return normalized


def _pick_arch(value: Optional[str], flag: str, default: Optional[str]) -> str:
    if value is None:
        if default is None:
            raise SuiteError(f"cannot detect the host architecture; pass {flag}")
        return default
    lowered = value.strip().lower()
    arch = "x64" if lowered == "amd64" else lowered
    if arch not in platforms.ARCHES:
        raise SuiteError(f"{flag} '{value}' is not an architecture; use one of {', '.join(platforms.ARCHES)}")
    return arch


def _pick_build_type(value: Optional[str], default: str) -> str:
    if value is None:
        return default
    normalized = platforms.normalize_build_type(value)
    if normalized is None:
        raise SuiteError(f"-build_type '{value}' is not valid; use Debug, Checked or Release")
    return normalized


def find_git_work_tree(start: Path) -> Optional[Path]:
    """The nearest directory at or above `start` holding `.git` (dir or file)."""
    current = start.resolve()
    for candidate in (current, *current.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def is_runtime_enlistment(repo: Optional[Path]) -> bool:
    """A dotnet/runtime work tree (docs/contracts.md §12.2): it holds the CoreCLR sources."""
    return repo is not None and (repo / "src" / "coreclr").is_dir()


def resolve_repo_root(runtime_repo: Optional[str], cwd: Optional[Path] = None) -> Optional[Path]:
    """`-runtime_repo`, else the work tree around cwd, else the one around the scripts."""
    if runtime_repo:
        path = Path(runtime_repo).resolve()
        if not path.is_dir():
            raise SuiteError(f"-runtime_repo '{runtime_repo}' is not a directory")
        return path
    return find_git_work_tree(cwd or Path.cwd()) or find_git_work_tree(SCRIPTS_DIR)


def default_core_root(repo: Path, host_os: str, arch: str, build_type: str) -> Path:
    return repo / "artifacts" / "tests" / "coreclr" / f"{host_os}.{arch}.{build_type}" / "Tests" / "Core_Root"


def default_product_dir(repo: Path, host_os: str, arch: str, build_type: str) -> Path:
    return repo / "artifacts" / "bin" / "coreclr" / f"{host_os}.{arch}.{build_type}"


def resolve_spmi_location(flag: Optional[str], repo: Optional[Path],
                          environ: Optional[dict] = None) -> Path:
    environ = dict(os.environ) if environ is None else environ
    if flag:
        return Path(flag).resolve()
    from_env = environ.get("SUPERPMI_CACHE_DIRECTORY")
    if from_env:
        return Path(from_env).resolve()
    if repo is None:
        raise SuiteError("no -spmi_location given, SUPERPMI_CACHE_DIRECTORY unset and no git work tree found; "
                         "pass -spmi_location DIR")
    return repo / "artifacts" / "spmi"


def _optional_dir(flag_value: Optional[str], default: Optional[Path], flag: str) -> Optional[Path]:
    if flag_value:
        path = Path(flag_value).resolve()
        if not path.is_dir():
            raise SuiteError(f"{flag} '{flag_value}' is not a directory")
        return path
    if default is not None and default.is_dir():
        return default
    return None


@dataclass
class Target:
    """Host and target OS/architecture, as the shared options select them."""
    host_os: str
    arch: str
    target_os: str
    target_arch: str


def resolve_target(host_os: Optional[str] = None, arch: Optional[str] = None, target_os: Optional[str] = None,
                   target_arch: Optional[str] = None) -> Target:
    """Host OS/arch (detected unless given) and the target (default: the host)."""
    host = _pick_os(host_os, "-host_os", platforms.detect_host_os())
    try:
        detected_arch: Optional[str] = platforms.detect_host_arch()
    except ValueError:
        detected_arch = None
    host_arch = _pick_arch(arch, "-arch", detected_arch)
    target = _pick_os(target_os, "-target_os", host)
    return Target(host, host_arch, target, _pick_arch(target_arch, "-target_arch", host_arch))


@dataclass(frozen=True)
class SharedOptions:
    """The shared options (common and target) as given on the command line; None: not given."""
    host_os: Optional[str] = None
    arch: Optional[str] = None
    target_os: Optional[str] = None
    target_arch: Optional[str] = None
    mch_arch: Optional[str] = None
    build_type: Optional[str] = None
    runtime_repo: Optional[str] = None
    core_root: Optional[str] = None
    product_location: Optional[str] = None
    spmi_location: Optional[str] = None
    no_progress: bool = False


@dataclass(frozen=True)
class LogOptions:
    """Where and how much a command logs: `-v`, `-log_level`, `-log_file`."""
    verbose: bool = False
    log_level: Optional[str] = "info"
    log_file: Optional[str] = None


def resolve_settings(given: SharedOptions, default_build_type: str = "Checked") -> Settings:
    """Turn the shared options into concrete settings (no side effects)."""
    target = resolve_target(given.host_os, given.arch, given.target_os, given.target_arch)
    host_os, arch, target_os, target_arch = target.host_os, target.arch, target.target_os, target.target_arch
    mch_arch = _pick_arch(given.mch_arch, "-mch_arch", target_arch)
    build_type = _pick_build_type(given.build_type, default_build_type)
    repo = resolve_repo_root(given.runtime_repo)
    core_root = _optional_dir(given.core_root,
                              default_core_root(repo, host_os, arch, build_type) if repo else None, "-core_root")
    product_dir = _optional_dir(given.product_location,
                                default_product_dir(repo, host_os, arch, build_type) if repo else None,
                                "-product_location")
    spmi_location = resolve_spmi_location(given.spmi_location, repo)
    no_progress = bool(given.no_progress)
    return Settings(host_os=host_os, arch=arch, target_os=target_os, target_arch=target_arch,
                    mch_arch=mch_arch, build_type=build_type, repo_root=repo, core_root=core_root,
                    product_dir=product_dir, spmi_location=spmi_location, no_progress=no_progress,
                    show_progress=progress.progress_enabled(no_progress))


def start_logging(options: LogOptions, settings: Settings) -> Path:
    """Console (progress and results; the details too with -v) + DEBUG log file (a new
    `superpmi[.N].log` unless -log_file)."""
    level = logging.DEBUG if options.verbose else logs.parse_log_level(options.log_level or "info")
    if options.log_file:
        log_file = Path(options.log_file).resolve()
    else:
        settings.spmi_location.mkdir(parents=True, exist_ok=True)
        log_file = fsutil.unique_file_path(settings.spmi_location / "superpmi.log")
    try:
        logs.setup_logging(level, log_file)
    except OSError as exc:
        raise SuiteError(f"cannot write the log file '{log_file}': {exc.strerror}; pass -log_file or -spmi_location") from exc
    return log_file


# ---------------------------------------------------------------- tools

@overload
def find_tool(tool: str, settings: Settings) -> Path: ...


@overload
def find_tool(tool: str, settings: Settings, required: Literal[True]) -> Path: ...


@overload
def find_tool(tool: str, settings: Settings, required: bool) -> Optional[Path]: ...


def find_tool(tool: str, settings: Settings, required: bool = True) -> Optional[Path]:
    """Core_Root, then the product directory, then PATH (docs/contracts.md §2.1)."""
    name = platforms.exe_name(tool, settings.host_os)
    for directory in settings.tool_search_dirs():
        candidate = directory / name
        if candidate.is_file():
            return candidate
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    if required:
        places = ", ".join(str(d) for d in settings.tool_search_dirs()) or "no Core_Root/product directory"
        raise SuiteError(f"{name} not found (looked in {places} and PATH); pass -core_root")
    return None


def default_jit_name(settings: Settings, jit_name: Optional[str] = None, force_cross: bool = False) -> str:
    if jit_name:
        return jit_name
    return platforms.jit_file_name(settings.host_os, settings.arch, settings.target_os,
                                   settings.target_arch, force_cross)


def find_default_jit(settings: Settings, jit_name: Optional[str] = None) -> Path:
    name = default_jit_name(settings, jit_name)
    for directory in settings.tool_search_dirs():
        candidate = directory / name
        if candidate.is_file():
            return candidate
    places = ", ".join(str(d) for d in settings.tool_search_dirs()) or "no Core_Root/product directory found"
    raise SuiteError(f"JIT '{name}' for {settings.target_os}/{settings.target_arch} not found ({places}); "
                     "pass -core_root or the JIT path")


# ---------------------------------------------------------------- JIT-EE version

def guid_from_header_text(text: str) -> Optional[str]:
    for line in text.splitlines():
        match = _JITEE_GUID_RE.match(line)
        if match:
            return match.group(1).lower()
    return None


_SAFE_JIT_EE_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def checked_jit_ee_version(value: str, source: str = "-jit_ee_version") -> str:
    """A JIT-EE version names a folder and blob prefix: a GUID or a plain name (letters, digits,
    `.`, `_`, `-`), lower-cased; anything else is refused before it reaches a path (§9, §12.20)."""
    text = value.strip()
    if not _SAFE_JIT_EE_VERSION_RE.match(text) or ".." in text:
        raise SuiteError(f"{source} {value!r} is not a JIT-EE version GUID or a plain name "
                         "(letters, digits, '.', '_', '-'); pass the GUID, e.g. 5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35")
    reason = fsutil.unsafe_name_reason(text, single_segment=True)  # the one confinement rule (device names)
    if reason:
        raise SuiteError(f"{source} {value!r} is not a JIT-EE version GUID: it has {reason}, which cannot name "
                         "a folder; pass the GUID, e.g. 5f2a8c1e-3b7d-4e96-a0c4-9d81e6b27f35")
    return text.lower()


def resolve_jit_ee_version(settings: Settings, explicit: Optional[str]) -> str:
    """docs/contracts.md §9: flag, enlistment header, `mcs -printJITEEVersion`, else unknown."""
    if explicit:
        return checked_jit_ee_version(explicit)
    if settings.repo_root is not None:
        header = settings.repo_root / JITEE_GUID_HEADER
        if header.is_file():
            guid = guid_from_header_text(header.read_text(encoding="utf-8", errors="replace"))
            if guid:
                log.debug("JIT-EE version %s from %s", guid, header)
                return checked_jit_ee_version(guid, f"the GUID in {header}")
            log.warning("Warning: no JIT-EE GUID found in %s", header)
    mcs = find_tool("mcs", settings, required=False)
    if mcs is not None:
        result = runner.run([mcs, "-printJITEEVersion"])
        if result.code == 0 and result.stdout.strip():
            return checked_jit_ee_version(result.stdout.strip(), f"the output of {mcs} -printJITEEVersion")
    return UNKNOWN_JIT_EE_VERSION


def split_option_values(values: Optional[Sequence[str]], flag: str) -> List[str]:
    """`key=value` JIT options; warn about a `DOTNET_` prefix and drop it."""
    result: List[str] = []
    for value in values or []:
        if "=" not in value:
            raise SuiteError(f"{flag} '{value}' must look like key=value (e.g. JitNoCSE=1)")
        for prefix in ("DOTNET_", "COMPlus_"):
            if value.startswith(prefix):
                log.warning("Warning: %s '%s' should not start with %s; using '%s'",
                            flag, value, prefix, value[len(prefix):])
                value = value[len(prefix):]
        result.append(value)
    return result
