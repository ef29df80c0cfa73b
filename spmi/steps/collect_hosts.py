"""Running the host programs of `collect` under the shim collector (docs/contracts.md §14.1, §14.2).

Pure parts: the environment that puts the shim in front of the JIT, finding the
collection command, the assemblies and pmi.dll, the PMI and crossgen2 argument
vectors, the crossgen2 response file and the NativeAOT (ILC) response file made
from a test's `.ilc.rsp`. I/O at the edges: `run_command`, `run_pmi`,
`run_crossgen2`, `run_nativeaot` (every process through `runner.run`).
"""
from __future__ import annotations

import logging
import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

from spmi.base import fsutil, platforms, progress, runner
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")

ASSEMBLY_SUFFIXES = (".dll", ".exe")
PMI_DLL = "pmi.dll"
PMI_PATH_ENV = "PMIPATH"


class CollectionMode(Enum):
    """How the host programs are run (exactly one per collection)."""

    COMMAND = "command"
    PMI = "pmi"
    CROSSGEN2 = "crossgen2"
    NATIVEAOT = "nativeaot"


@dataclass(frozen=True)
class Tiering:
    """The tiering flags of `collect`; they apply to command mode only."""

    tiered_compilation: bool = False
    tiered_pgo: bool = False
    disable_r2r: bool = False
    jitoptrepeat_all: bool = False

    def flags_given(self) -> List[str]:
        names = ("tiered_compilation", "tiered_pgo", "disable_r2r", "jitoptrepeat_all")
        return ["--" + name for name in names if getattr(self, name)]


@dataclass(frozen=True)
class Shim:
    """The shim collector, the real JIT behind it and where it writes `.mc` files."""

    shim: Path
    jit: Path
    log_dir: Path


def own_jit_copy_name(jit: Path) -> str:
    """`libclrjit_superpmi.so` for `libclrjit.so`: the copy an ahead-of-time compiler's shim forwards to."""
    return f"{jit.stem}_superpmi{jit.suffix}"


def jit_for_compiler_hosts(jit: Path, temp_dir: Path) -> Path:
    """crossgen2 and ILC run beside superpmi on the same JIT badly (upstream's finding), so their shim
    forwards to a copy of the JIT in the work folder; when the copy cannot be made, the JIT itself."""
    copy = temp_dir / own_jit_copy_name(jit)
    try:
        shutil.copyfile(jit, copy)
    except OSError as exc:
        log.warning("Warning: could not copy %s to %s (%s); the compiler uses it directly", jit, copy,
                    exc.strerror or exc)
        return jit
    return copy


# ---------------------------------------------------------------- environment (pure)

def dotnet_variables(tiering: Tiering) -> Dict[str, str]:
    """The DOTNET variables the suite sets for collecting (§14.1); the host sees them too."""
    variables = {"DOTNET_EnableExtraSuperPmiQueries": "1"}
    if tiering.tiered_pgo:
        variables.update(DOTNET_TieredCompilation="1", DOTNET_TieredPGO="1")
    elif tiering.tiered_compilation:
        variables["DOTNET_TieredCompilation"] = "1"
    else:
        variables["DOTNET_TieredCompilation"] = "0"
    if tiering.disable_r2r:
        variables["DOTNET_ReadyToRun"] = "0"
    if tiering.jitoptrepeat_all:
        variables["DOTNET_JitOptRepeat"] = "*"
    return variables


def shim_environment(shim: Shim, dotnet: Mapping[str, str]) -> Dict[str, str]:
    """The runtime loads the shim as its JIT (by path and by name); the shim forwards to the real JIT."""
    env = {"DOTNET_JitName": shim.shim.name, "DOTNET_JitPath": str(shim.shim),
           "SuperPMIShimPath": str(shim.jit), "SuperPMIShimLogPath": str(shim.log_dir)}
    env.update(dotnet)
    return env


def pmi_environment(pmi_paths: Sequence[str], host_os: str) -> Dict[str, str]:
    """`PMIPATH` = the `-pmi_path` directories joined with the platform's separator (empty: unset)."""
    if not pmi_paths:
        return {}
    return {PMI_PATH_ENV: platforms.path_list_separator(host_os).join(str(Path(p).resolve()) for p in pmi_paths)}


# ---------------------------------------------------------------- command mode (pure lookups)

def split_collection_args(text: Optional[str]) -> List[str]:
    """`collection_args` is one string, split on spaces."""
    return [part for part in (text or "").split(" ") if part]


def resolve_collection_command(command: str, core_root: Optional[Path], path_value: Optional[str],
                               host_os: str) -> Path:
    """An existing file (made absolute), else a file in Core_Root, else found on PATH."""
    given = Path(command)
    if given.is_file():
        return given.resolve()
    if core_root is not None:
        for name in (command, platforms.exe_name(command, host_os)):
            candidate = core_root / name
            if candidate.is_file():
                return candidate
    found = shutil.which(command, path=path_value)
    if found:
        return Path(found).resolve()
    where = f"Core_Root {core_root}" if core_root is not None else "Core_Root (none found)"
    raise SuiteError(f"collection command '{command}' not found (not a file, not in {where}, not on PATH); "
                     "check the command or pass its full path")


# ---------------------------------------------------------------- PMI mode (pure)

def is_excluded(relative_name: str, excludes: Sequence[str]) -> bool:
    """`-exclude` substrings match the file's path below the searched folder, case-insensitively."""
    lowered = relative_name.lower()
    return any(e.lower() in lowered for e in excludes if e)


def _assemblies_below(directory: Path) -> List[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in ASSEMBLY_SUFFIXES)


def find_assemblies(specs: Sequence[str], excludes: Sequence[str]) -> List[Path]:
    """Every `.dll`/`.exe` of `-assemblies` (directories searched recursively), minus `-exclude` matches."""
    found: List[Path] = []
    for spec in specs:
        path = Path(spec).resolve()
        if path.is_dir():
            found += [p for p in _assemblies_below(path) if not is_excluded(p.relative_to(path).as_posix(), excludes)]
        elif path.is_file():
            if not is_excluded(path.name, excludes):
                found.append(path)
        else:
            raise SuiteError(f"-assemblies '{spec}' is neither a file nor a directory; check the path")
    unique = list(dict.fromkeys(found))
    if not unique:
        raise SuiteError(f"no .dll or .exe files to collect from in -assemblies {' '.join(specs)}"
                         + (f" (after -exclude {' '.join(excludes)})" if excludes else ""))
    return unique


def find_pmi_dll(pmi_location: Optional[str], path_value: Optional[str], core_root: Optional[Path],
                 host_os: str) -> Path:
    """`-pmi_location`, else `pmi.dll` in a PATH directory, else in Core_Root."""
    if pmi_location:
        given = Path(pmi_location)
        if given.is_file():
            return given.resolve()
        raise SuiteError(f"-pmi_location '{pmi_location}' is not a file; pass the path of pmi.dll")
    dirs = [Path(d) for d in platforms.search_path_dirs(path_value, host_os)]
    for directory in dirs + ([core_root] if core_root is not None else []):
        candidate = directory / PMI_DLL
        if candidate.is_file():
            return candidate.resolve()
    raise SuiteError(f"{PMI_DLL} not found on PATH or in Core_Root; pass -pmi_location")


def pmi_argv(corerun: Path, pmi_dll: Path, assembly: Path) -> List[str]:
    """`<Core_Root>/corerun <pmi.dll> DRIVEALL <assembly>`."""
    return [str(corerun), str(pmi_dll), "DRIVEALL", str(assembly)]


# ---------------------------------------------------------------- crossgen2 mode (pure)

CROSSGEN2_REFERENCE_PATTERNS = ("System.*.dll", "Microsoft.*.dll", "mscorlib.dll", "netstandard.dll")


def crossgen2_output_name(assembly: Path, index: int) -> str:
    """`crossgen2_<name>.out.dll`; the index keeps same-named assemblies of different folders apart."""
    suffix = f".{index}" if index else ""
    return f"crossgen2_{assembly.stem}{suffix}.out.dll"


def crossgen2_response_lines(assembly: Path, output: Path, core_root: Path, shim: Path,
                             dotnet: Mapping[str, str]) -> List[str]:
    """One response-file argument per line: the input, `-o:`, `-r:` references from Core_Root,
    `--parallelism:1`, `--jitpath:<shim>` and `--codegenopt:<k>=<v>` per DOTNET variable."""
    lines = [str(assembly), f"-o:{output}"]
    lines += [f"-r:{core_root / pattern}" for pattern in CROSSGEN2_REFERENCE_PATTERNS]
    lines += ["--parallelism:1", f"--jitpath:{shim}"]
    return lines + codegen_options(dotnet)


def crossgen2_argv(crossgen2: Path, response_file: Path) -> List[str]:
    return [str(crossgen2), f"@{response_file}"]


def codegen_options(dotnet: Mapping[str, str]) -> List[str]:
    """`--codegenopt:<k>=<v>` per DOTNET variable (an ahead-of-time compiler passes them to the JIT)."""
    return [f"--codegenopt:{name[len('DOTNET_'):]}={value}" for name, value in dotnet.items()
            if name.startswith("DOTNET_")]


# ---------------------------------------------------------------- NativeAOT mode (pure)

ILC_RSP_SUFFIX = ".ilc.rsp"
AOTSDK_DIR = "aotsdk"
#: options of a test's `.ilc.rsp` the suite replaces (the paths were the test build's)
ILC_REPLACED_PREFIXES = ("-r:", "-o:", "--directpinvokelist:")
#: options naming a file of the test, relocated to the test's folders: (prefix, levels above the rsp's folder)
ILC_RELOCATED = (("--exportsfile:", 0), ("--descriptor:", 2), ("--substitution:", 2))


def _ilc_rsps_below(directory: Path) -> List[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith(ILC_RSP_SUFFIX))


def find_ilc_rsps(specs: Sequence[str], excludes: Sequence[str]) -> List[Path]:
    """Every `*.ilc.rsp` of `-ilc_rsps` (directories searched recursively), minus `-exclude` matches."""
    found: List[Path] = []
    for spec in specs:
        path = Path(spec).resolve()
        if path.is_dir():
            found += [p for p in _ilc_rsps_below(path) if not is_excluded(p.relative_to(path).as_posix(), excludes)]
        elif path.is_file():
            if not path.name.endswith(ILC_RSP_SUFFIX):
                raise SuiteError(f"-ilc_rsps '{spec}' is not an ILC response file (*{ILC_RSP_SUFFIX})")
            if not is_excluded(path.name, excludes):
                found.append(path)
        else:
            raise SuiteError(f"-ilc_rsps '{spec}' is neither a file nor a directory; check the path")
    unique = list(dict.fromkeys(found))
    if not unique:
        raise SuiteError(f"no *{ILC_RSP_SUFFIX} files to collect from in -ilc_rsps {' '.join(specs)}"
                         + (f" (after -exclude {' '.join(excludes)})" if excludes else ""))
    return unique


def ilc_input_name(rsp: Path, lines: Sequence[str]) -> str:
    """The file name of the rsp's input: its last argument that is not an option."""
    inputs = [line for line in lines if not line.startswith("-")]
    if not inputs:
        raise SuiteError(f"{rsp} names no input assembly (every line is an option); pass a test's .ilc.rsp")
    return Path(inputs[-1].replace("\\", "/")).name


def _relocated(line: str, rsp_dir: Path) -> str:
    for prefix, levels in ILC_RELOCATED:
        if line.startswith(prefix):
            folder = rsp_dir
            for _ in range(levels):
                folder = folder.parent
            return prefix + str(folder / Path(line[len(prefix):].replace("\\", "/")).name)
    return line


@dataclass(frozen=True)
class NativeAotLayout:
    """Where the NativeAOT compile finds its parts: Core_Root, its `aotsdk/`, the shim and the host OS."""

    core_root: Path
    aotsdk: Path
    shim: Path
    host_os: str


def nativeaot_output_name(input_name: str, index: int, host_os: str) -> str:
    """`nativeaot_<name>.out.a` (`.out.obj` on Windows); the index keeps same-named tests apart."""
    suffix = f".{index}" if index else ""
    return f"nativeaot_{Path(input_name).stem}{suffix}.out{platforms.native_object_suffix(host_os)}"


def nativeaot_response_lines(rsp: Path, original: Sequence[str], output: Path, layout: NativeAotLayout,
                             dotnet: Mapping[str, str]) -> List[str]:
    """A test's `.ilc.rsp` made runnable here (docs/contracts.md §14.2): its options kept, except the test
    build's references, output, input and P/Invoke list; its exports, descriptor and substitution files
    taken from the test's folders; then the input assembly (beside the rsp's `native/` folder), `-o:`,
    references from `aotsdk/` and Core_Root, `--jitpath:<shim>` and `--codegenopt:` per DOTNET variable."""
    lines = [line.strip() for line in original if line.strip()]
    input_name = ilc_input_name(rsp, lines)
    rsp_dir = rsp.resolve().parent
    kept = [_relocated(line, rsp_dir) for line in lines
            if line.startswith("-") and not line.startswith(ILC_REPLACED_PREFIXES)]
    added = [str(rsp_dir.parent / input_name)]
    if layout.host_os == platforms.WINDOWS:
        added.append(f"--directpinvokelist:{layout.core_root / 'build' / 'WindowsAPIs.txt'}")
    added.append(f"-o:{output}")
    added.append(f"-r:{layout.aotsdk / 'System.*.dll'}")
    added += [f"-r:{layout.core_root / pattern}" for pattern in CROSSGEN2_REFERENCE_PATTERNS]
    added.append(f"--jitpath:{layout.shim}")
    return kept + added + codegen_options(dotnet)


def ilc_argv(ilc: Path, response_file: Path) -> List[str]:
    return [str(ilc), f"@{response_file}"]


# ---------------------------------------------------------------- running the hosts

@dataclass
class HostResult:
    """What running the host programs gave: how many ran, which failed (logged, not fatal)."""

    ran: int = 0
    failures: List[str] = field(default_factory=list)


def exit_text(outcome: platforms.ExitOutcome) -> str:
    """`exit code 1`, or `crashed (SIGSEGV)`."""
    if outcome.crashed:
        return f"crashed ({platforms.signal_name(outcome.signal_number)})"
    return outcome.describe()


def describe_host_exit(name: str, result: runner.RunResult) -> Optional[str]:
    """None for exit 0, else a warning that says recorded `.mc` files are still used."""
    if result.returncode == 0:
        return None
    return f"Warning: {name} {exit_text(result.outcome)}; the .mc files it wrote so far are still used"


def run_command(command: Path, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> HostResult:
    """Command mode: one run; its output goes to the log, a non-zero exit is a warning."""
    log.info("Running the collection command %s", runner.format_command([str(command), *args]))
    result = runner.run([command, *args], cwd=cwd, extra_env=env)
    warning = describe_host_exit(command.name, result)
    if warning:
        log.warning("%s", warning)
    return HostResult(ran=1, failures=[warning] if warning else [])


def _run_job(argv: List[str], label: str, env: Mapping[str, str], cwd: Path, stop: threading.Event) -> Optional[str]:
    """One host process of a parallel mode; its failure as text (None: it succeeded or never started)."""
    if stop.is_set():
        return None
    result = runner.run(argv, cwd=cwd, extra_env=env)
    if result.returncode == 0:
        return None
    return f"{label} ({exit_text(result.outcome)})"


def run_parallel(jobs: Sequence[Callable[[threading.Event], Optional[str]]], parallelism: int,
                 bar_description: str, show_progress: bool) -> List[str]:
    """Run jobs on `parallelism` threads with a progress bar (done / total); returns their failure texts.

    On Ctrl-C or SIGTERM no new job starts and every running child process tree is killed
    before the interrupt goes on."""
    stop = threading.Event()
    failures: List[str] = []
    with progress.progress_bar(len(jobs), bar_description, unit="assembly", enabled=show_progress) as bar:
        executor = ThreadPoolExecutor(max_workers=max(1, parallelism))
        futures: List[Future] = [executor.submit(job, stop) for job in jobs]
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    failure = future.result()
                    if failure:
                        failures.append(failure)
                    bar.update(1)
        except BaseException:
            _stop_jobs(stop, executor, futures)
            raise
        executor.shutdown(wait=True)
    return failures


def _stop_jobs(stop: threading.Event, executor: ThreadPoolExecutor, futures: Sequence[Future]) -> None:
    stop.set()
    for future in futures:
        future.cancel()
    while not all(f.done() for f in futures):
        runner.kill_all_children()
        wait(futures, timeout=0.1)
    executor.shutdown(wait=True)


def run_pmi(corerun: Path, pmi_dll: Path, assemblies: Sequence[Path], env: Mapping[str, str], cwd: Path,
            parallelism: int, show_progress: bool) -> HostResult:
    """PMI mode: `corerun pmi.dll DRIVEALL <assembly>` per assembly, several at once; failures logged."""
    log.info("Running PMI over %d assemblies (%d at a time)", len(assemblies), parallelism)

    def job_for(assembly: Path) -> Callable[[threading.Event], Optional[str]]:
        return lambda stop: _run_job(pmi_argv(corerun, pmi_dll, assembly), str(assembly), env, cwd, stop)

    failures = run_parallel([job_for(a) for a in assemblies], parallelism, "PMI", show_progress)
    for failure in failures:
        log.warning("Warning: PMI failed for %s; skipped", failure)
    log.info("PMI done: %d of %d assemblies succeeded", len(assemblies) - len(failures), len(assemblies))
    return HostResult(ran=len(assemblies), failures=failures)


def run_crossgen2(crossgen2: Path, assemblies: Sequence[Path], shim: Shim, core_root: Path,
                  dotnet: Mapping[str, str], temp_dir: Path, parallelism: int, show_progress: bool) -> HostResult:
    """crossgen2 mode: a response file per assembly, `crossgen2 @<rsp>`; failures logged."""
    env = {"SuperPMIShimPath": str(shim.jit), "SuperPMIShimLogPath": str(shim.log_dir)}
    jobs = []
    for index, assembly in enumerate(assemblies):
        output = temp_dir / crossgen2_output_name(assembly, index)
        rsp = temp_dir / (output.name + ".rsp")
        lines = crossgen2_response_lines(assembly, output, core_root, shim.shim, dotnet)
        fsutil.atomic_write_text(rsp, "\n".join(lines) + "\n")
        argv = crossgen2_argv(crossgen2, rsp)
        jobs.append(lambda stop, argv=argv, label=str(assembly): _run_job(argv, label, env, temp_dir, stop))
    failures = run_parallel(jobs, parallelism, "crossgen2", show_progress)
    for failure in failures:
        log.warning("Warning: crossgen2 failed for %s; skipped", failure)
    return HostResult(ran=len(assemblies), failures=failures)


def run_nativeaot(ilc: Path, rsps: Sequence[Path], shim: Shim, layout: NativeAotLayout, dotnet: Mapping[str, str],
                  temp_dir: Path, parallelism: int, show_progress: bool) -> HostResult:
    """NativeAOT mode: per test `.ilc.rsp`, a rewritten response file in the work folder and
    `ilc @<rsp>`; the shim is ILC's JIT (`--jitpath`), the DOTNET variables its `--codegenopt`s."""
    env = {"SuperPMIShimPath": str(shim.jit), "SuperPMIShimLogPath": str(shim.log_dir)}
    jobs = []
    for index, rsp in enumerate(rsps):
        original = _read_rsp(rsp)
        output = temp_dir / nativeaot_output_name(ilc_input_name(rsp, [x.strip() for x in original if x.strip()]),
                                                  index, layout.host_os)
        rewritten = temp_dir / (output.name + ".rsp")
        fsutil.atomic_write_text(rewritten, "\n".join(nativeaot_response_lines(rsp, original, output, layout,
                                                                                dotnet)) + "\n")
        argv = ilc_argv(ilc, rewritten)
        jobs.append(lambda stop, argv=argv, label=str(rsp): _run_job(argv, label, env, temp_dir, stop))
    log.info("Running ILC over %d response files (%d at a time)", len(rsps), parallelism)
    failures = run_parallel(jobs, parallelism, "ILC", show_progress)
    for failure in failures:
        log.warning("Warning: ILC failed for %s; skipped", failure)
    return HostResult(ran=len(rsps), failures=failures)


def _read_rsp(rsp: Path) -> List[str]:
    try:
        return rsp.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    except OSError as exc:
        raise SuiteError(f"cannot read the ILC response file {rsp}: {exc.strerror}") from None
