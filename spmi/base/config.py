"""Options shared by the SuperPMI commands and the settings they resolve to.

Defaults follow the dotnet/runtime enlistment layout (docs/contracts.md §12.1–§12.4):
host OS/arch detected, target defaulting to the host, Core_Root and the
product directory under `artifacts/`, the cache/output root `spmi_location`.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Literal, Optional, Sequence, Tuple, TypeVar, overload

from spmi.base import fsutil, logs, platforms, progress, runner, usage
from spmi.base.errors import SuiteError
from spmi.base.invocation import SCRIPTS_DIR

log = logging.getLogger("superpmi")

UNKNOWN_JIT_EE_VERSION = "unknown-jit-ee-version"
JITEE_GUID_HEADER = Path("src/coreclr/inc/jiteeversionguid.h")
Number = TypeVar("Number", int, float)
_JITEE_GUID_RE = re.compile(r"^constexpr GUID JITEEVersionIdentifier *= *{ */\* *([^ ]*) *\*/")


class UnregisteredOption(AttributeError):
    """Code read an option its command's parser does not register."""


class StrictNamespace(argparse.Namespace):
    """Parsed options; reading a name no parser registered fails naming the option.

    Commands read their options as `args.<name>`, never with a fallback, so a
    command that reads an option it did not register fails in tests.
    """

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        known = ", ".join(sorted(vars(self))) or "none"
        raise UnregisteredOption(f"option '{name}' is read but not registered by this command (registered: {known})")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line usage error and exit code 2, a "did you mean" for an unknown
    command, option or choice (docs/contracts.md §12.1, base/usage), parsing into a `StrictNamespace`."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        return super().parse_known_args(args, StrictNamespace() if namespace is None else namespace)

    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = usage.chosen_parser(self, parsed)
            chosen.error(usage.unrecognized(extras, chosen))
        return parsed

    def _check_value(self, action: argparse.Action, value: object) -> None:
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(action, usage.invalid_choice(str(value), [str(c) for c in action.choices]))

    def error(self, message: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
        self.exit(usage.USAGE_EXIT, f"{self.prog}: error: {message}\n")


# ---------------------------------------------------------------- numeric option types
# One argparse `type=` per kind of number, so a bad value is refused while parsing,
# before anything starts, with one line naming the flag (argparse adds it).

#: No number on a command line is larger than this (beyond it arithmetic and the OS's waits overflow).
MAX_NUMBER = 10 ** 15
#: The longest time in seconds a command line may give (30 days; the OS's waits take no more than ~49 days).
MAX_SECONDS = 30 * 24 * 3600


def _number(text: str, convert: Callable[[str], Number], kind: str, most: str = f"{MAX_NUMBER:,}") -> Number:
    """`text` as a number; Python's digit separators are refused (`1_0` is not 10 on a command line)."""
    try:
        if "_" in text:
            raise ValueError(text)
        value = convert(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not {kind}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    if abs(value) > MAX_NUMBER:
        raise argparse.ArgumentTypeError(f"'{text}' is too large (at most {most})")
    return value


def _number_where(text: str, convert: Callable[[str], Number], kind: str,
                  accepted: Callable[[Number], bool], requirement: str) -> Number:
    """`text` as a number of `kind` that passes `accepted`, else "'text' must be <requirement>"."""
    value = _number(text, convert, kind)
    if not accepted(value):
        raise argparse.ArgumentTypeError(f"'{text}' must be {requirement}")
    return value


def positive_seconds(text: str) -> float:
    """A time in seconds: a finite number greater than 0 and at most `MAX_SECONDS`."""
    most = f"{MAX_SECONDS:,} seconds, 30 days"
    seconds = float(_number(text, float, "a number", most))
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be greater than 0")
    if seconds > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"'{text}' is too large (at most {most})")
    return seconds


def positive_float(text: str) -> float:
    """A finite number greater than 0 (a factor, a width)."""
    return float(_number_where(text, float, "a number", lambda v: v > 0, "greater than 0"))


def non_negative_float(text: str) -> float:
    """A finite number of 0 or more (e.g. a percentage where 0 disables)."""
    return float(_number_where(text, float, "a number", lambda v: v >= 0, "0 or more"))


def non_negative_int(text: str) -> int:
    """A whole number of 0 or more."""
    return int(_number_where(text, int, "a whole number", lambda v: v >= 0, "0 or more"))


def positive_int(text: str) -> int:
    """A whole number of 1 or more."""
    return int(_number_where(text, int, "a whole number", lambda v: v >= 1, "at least 1"))


def int_between(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high` (both included)."""
    def parse(text: str) -> int:
        return int(_number_where(text, int, "a whole number", lambda v: low <= v <= high, f"from {low} to {high}"))
    parse.__name__ = f"int_between_{low}_{high}"
    return parse


# ---------------------------------------------------------------- option groups

def common_options() -> "ArgumentParser":
    """Options every command takes."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("common options")
    group.add_argument("-arch", help="host architecture (default: this machine's)")
    group.add_argument("-host_os", help="host OS: windows, linux or osx (default: this machine's)")
    group.add_argument("-build_type", help="Debug, Checked or Release (default: Checked; Release for tpdiff/memdiff)")
    group.add_argument("-core_root", help="Core_Root directory (holds superpmi, mcs and the JITs)")
    group.add_argument("-product_location", help="built product directory (artifacts/bin/coreclr/<os>.<arch>.<build_type>)")
    group.add_argument("-runtime_repo", help="dotnet/runtime enlistment (default: the git work tree around the "
                                              "current directory, else the one around these scripts)")
    group.add_argument("-spmi_location", help="cache and output root (default: $SUPERPMI_CACHE_DIRECTORY, else <repo>/artifacts/spmi)")
    group.add_argument("-log_level", default="info", help="console level: critical, error, warning, info (default), debug")
    group.add_argument("-v", "--verbose", action="store_true",
                       help="also show the details on the console: commands run, superpmi's output, the analyzer's "
                            "lists (same as -log_level debug; the log file always has them)")
    group.add_argument("-log_file", help="log file (default: a new superpmi.log in spmi_location); always at debug level")
    group.add_argument("--no_progress", action="store_true", help="no progress bars")
    # Without `target_options` a command works for the host: the target is "not chosen".
    parser.set_defaults(target_os=None, target_arch=None, mch_arch=None)
    return parser


def target_options() -> "ArgumentParser":
    """Options naming the target a collection or JIT is for."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("target options")
    group.add_argument("-target_os", help="target OS (default: host OS)")
    group.add_argument("-target_arch", help="target architecture (default: -arch)")
    group.add_argument("-mch_arch", help="architecture the collections were recorded on (default: -target_arch)")
    return parser


_METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
#: k of the A/A calibration: a change must exceed k × the measured spread (docs/contracts.md §12.12b)
DEFAULT_NOISE_K = 3.0


def significance_override(text: str) -> Tuple[str, float]:
    """`-significance METRIC=PCT`: a metric name and a minimum meaningful change in % (0 = any change)."""
    name, equals, pct = text.partition("=")
    name = name.strip()
    if not equals or not _METRIC_NAME.match(name):
        raise argparse.ArgumentTypeError(f"'{text}' is not METRIC=PCT (e.g. instructions=0.01 or BytesAllocated=2)")
    try:
        value = non_negative_float(pct)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"'{text}': the percentage {exc}") from None
    return name, value


class SignificanceOverrides(argparse.Action):
    """`-significance` repeated: the overrides in order; a metric given twice is refused (the later one
    would otherwise win silently)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> None:
        override: Tuple[str, float] = values  # type: ignore[assignment]
        given: List[Tuple[str, float]] = list(getattr(namespace, self.dest, None) or [])
        if any(override[0] == earlier for earlier, _ in given):
            parser.error(f"argument {option_string}: {override[0]} is given twice; give each metric once")
        setattr(namespace, self.dest, given + [override])


def significance_options(calibration: bool = True) -> "ArgumentParser":
    """How a metric diff decides that a change is significant: the per-metric rule and, with
    `calibration`, the A/A noise check (docs/contracts.md §12.12b)."""
    parser = ArgumentParser(add_help=False)
    group = parser.add_argument_group("significance options")
    group.add_argument("-significance", action=SignificanceOverrides, type=significance_override, default=[],
                       metavar="METRIC=PCT",
                       help="minimum meaningful change of METRIC in %% (0 = any change), replacing the default "
                            "rule for that metric (instructions 0.005, code bytes any change, BytesAllocated 1, "
                            "PerfScore 0.01, other metrics 0.1); repeatable")
    if calibration:
        group.add_argument("--noise_check", action="store_true",
                           help="A/A calibration: also replay every collection with the base JIT as both sides "
                                "and call a change significant only when it exceeds -noise_k times the spread "
                                "that measures (costs one more replay per collection)")
        group.add_argument("-noise_k", type=positive_float, default=DEFAULT_NOISE_K, metavar="K",
                           help="with --noise_check: a change must exceed K times the A/A spread (default 3)")
    return parser


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


def resolve_settings(args: argparse.Namespace, default_build_type: str = "Checked") -> Settings:
    """Turn the shared options (`common_options`, `target_options`) into concrete settings (no side effects)."""
    target = resolve_target(args.host_os, args.arch, args.target_os, args.target_arch)
    host_os, arch, target_os, target_arch = target.host_os, target.arch, target.target_os, target.target_arch
    mch_arch = _pick_arch(args.mch_arch, "-mch_arch", target_arch)
    build_type = _pick_build_type(args.build_type, default_build_type)
    repo = resolve_repo_root(args.runtime_repo)
    core_root = _optional_dir(args.core_root,
                              default_core_root(repo, host_os, arch, build_type) if repo else None, "-core_root")
    product_dir = _optional_dir(args.product_location,
                                default_product_dir(repo, host_os, arch, build_type) if repo else None,
                                "-product_location")
    spmi_location = resolve_spmi_location(args.spmi_location, repo)
    no_progress = bool(args.no_progress)
    return Settings(host_os=host_os, arch=arch, target_os=target_os, target_arch=target_arch,
                    mch_arch=mch_arch, build_type=build_type, repo_root=repo, core_root=core_root,
                    product_dir=product_dir, spmi_location=spmi_location, no_progress=no_progress,
                    show_progress=progress.progress_enabled(no_progress))


def start_logging(args: argparse.Namespace, settings: Settings) -> Path:
    """Console (progress and results; the details too with -v) + DEBUG log file (a new
    `superpmi[.N].log` unless -log_file)."""
    level = logging.DEBUG if args.verbose else logs.parse_log_level(args.log_level or "info")
    if args.log_file:
        log_file = Path(args.log_file).resolve()
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
