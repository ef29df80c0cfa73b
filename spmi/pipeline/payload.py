"""The Helix correlation payload: what each work item needs from it, staging it (scripts,
the `spmi` package, tools, JITs, collections, PIN) and checking that nothing is missing.
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from spmi.base import config, fsutil, platforms, runner
from spmi.base.errors import SuiteError
from spmi.pipeline import common as pipeline
from spmi.pipeline.common import DiffType, Partition
from spmi.pipeline.helix import PAYLOAD, CollectionPlan, Token, WorkItem, literal, under
from spmi.steps import coredistools

log = logging.getLogger("superpmi")


@dataclass(frozen=True)
class Need:
    """One file a work item needs, relative to the payload root."""

    path: str
    what: str


def jit_pattern_matches(file_name: str, host_os: str) -> bool:
    """`[lib]clrjit_*.<ext>`: the cross JITs a product directory holds."""
    prefix = platforms.shared_lib_prefix(host_os) + "clrjit_"
    return file_name.startswith(prefix) and file_name.endswith(platforms.shared_lib_suffix(host_os))


def work_item_needs(partition: Partition, host_os: str, types: Sequence[DiffType]) -> List[Need]:
    """Everything a work item reads from the payload (pure); the tools' own libraries are
    whatever the product directory holds beside them and are copied as they are."""
    needs = [Need(pipeline.DRIVER_SCRIPT, "work-item driver"), Need(pipeline.SUPERPMI_SCRIPT, "superpmi.py"),
             Need(pipeline.PIPELINE_MODULE, "pipeline module"),
             Need(platforms.exe_name("superpmi", host_os), "superpmi tool"),
             Need(platforms.exe_name("mcs", host_os), "mcs tool")]
    if types:  # every diff type runs superpmi -a
        needs.append(Need(platforms.coredistools_file_name(host_os), "disassembler library superpmi -a loads"))
    jit = partition.jit_name(host_os)
    for flavour in pipeline.flavours_for(types):
        needs.append(Need(f"{pipeline.BASE_DIR}/{flavour}/{jit}", f"{flavour} baseline JIT"))
        needs.append(Need(f"{pipeline.DIFF_DIR}/{flavour}/{jit}", f"{flavour} diff JIT"))
    if any(t.uses_pin for t in types):
        pin, pintool = pipeline.pin_files(host_os, partition.host_arch)
        needs += [Need(pin, "PIN"), Need(pintool, f"{partition.host_arch} pintool")]
    return needs


def missing_needs(payload: Path, items: Sequence[WorkItem], host_os: str, types: Sequence[DiffType],
                  required_modules: Sequence[str] = ()) -> Dict[str, List[Need]]:
    """Per work item, what it needs that the payload lacks."""
    missing: Dict[str, List[Need]] = {}
    for item in items:
        needs = work_item_needs(item.partition, host_os, types)
        needs += [Need(name, "suite script") for name in required_modules]
        lacking = [need for need in needs if not (payload / need.path).is_file()]
        if lacking:
            missing[item.name] = lacking
    return missing


def describe_missing(missing: Mapping[str, List[Need]]) -> str:
    by_path: Dict[str, Tuple[Need, List[str]]] = {}
    for item_name, needs in missing.items():
        for need in needs:
            by_path.setdefault(need.path, (need, []))[1].append(item_name)
    parts = [f"{need.path} ({need.what}; needed by {', '.join(names)})" for need, names in by_path.values()]
    return "the payload lacks " + "; ".join(parts)


@dataclass
class StageOptions:
    source_directory: Path
    product_directory: Path
    payload: Path
    host_os: str
    host_arch: str
    types: List[DiffType]
    release_product_directory: Optional[Path] = None
    base_jit_directory: Optional[Path] = None
    release_base_jit_directory: Optional[Path] = None
    base_git_hash: Optional[str] = None
    baseline_of: Optional[str] = None    # find the baseline of this revision, not of HEAD (a main run: HEAD~1)
    runtime_repo: Optional[Path] = None
    storage_url: Optional[str] = None
    jit_analyze_directory: Optional[Path] = None
    git_directory: Optional[Path] = None
    pin_directory: Optional[Path] = None
    mch_files: List[str] = field(default_factory=list)
    private_stores: List[Path] = field(default_factory=list)
    jit_ee_version: Optional[str] = None
    work_items_per_target: Optional[int] = 1        # None: from the collections' sizes
    bytes_per_work_item: int = pipeline.AUTO_BYTES_PER_WORK_ITEM


def copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


def copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)


def suite_scripts(source_directory: Path) -> List[Path]:
    """The entry scripts and every module and data file (the HTML report's assets) of the `spmi`
    package, relative to `source_directory`; no byte code."""
    scripts = [p for p in source_directory.glob("*.py") if p.is_file()]
    package = [p for p in (source_directory / pipeline.PACKAGE_DIR).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")]
    return sorted(p.relative_to(source_directory) for p in scripts + package)


def tool_files(product_directory: Path, host_os: str) -> List[Path]:
    """superpmi and mcs (the disassembler library superpmi -a needs: `stage_coredistools`)."""
    names = [platforms.exe_name("superpmi", host_os), platforms.exe_name("mcs", host_os)]
    return [product_directory / n for n in names if (product_directory / n).is_file()]


def stage_coredistools(options: StageOptions) -> Path:
    """The disassembler library beside the payload's superpmi (every diff type runs `superpmi -a`):
    from the product directory (or its `R2RDump/`), else downloaded from storage here
    (docs/contracts.md §2.8.6)."""
    return coredistools.ensure_coredistools(options.payload, options.product_directory, options.host_os,
                                            options.host_arch, options.storage_url,
                                            fix="-product_directory with a directory that has it")


def tool_support_directories(product_directory: Path, host_os: str) -> List[Path]:
    """Directories superpmi/mcs load code from beside themselves (e.g. a stand-in's `lib/`);
    the payload needs them, since a work item sees nothing outside it."""
    return [d for d in (product_directory / "lib",) if d.is_dir()]


def copy_jits(source: Path, target: Path, host_os: str, what: str) -> List[str]:
    if not source.is_dir():
        raise SuiteError(f"{what} '{source}' is not a directory")
    names = sorted(p.name for p in source.iterdir() if p.is_file() and jit_pattern_matches(p.name, host_os))
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        copy_file(source / name, target / name)
    log.info("Copied %d JIT(s) from %s to %s", len(names), source, target)
    return names


def prepare_payload_directory(payload: Path, clean: bool) -> None:
    if payload.exists() and not payload.is_dir():
        raise SuiteError(f"-payload_directory '{payload}' is a file; pass a directory")
    if payload.is_dir() and any(payload.iterdir()):
        if not clean:
            raise SuiteError(f"-payload_directory '{payload}' is not empty; pass a new or empty directory, "
                             "or --clean to empty it first")
        if not (payload / pipeline.DRIVER_SCRIPT).is_file():
            raise SuiteError(f"-payload_directory '{payload}' is not empty and holds no earlier payload "
                             f"({pipeline.DRIVER_SCRIPT} missing); refusing to empty it with --clean")
        log.info("Emptying %s", payload)
        shutil.rmtree(payload)
    payload.mkdir(parents=True, exist_ok=True)


#: One collection file staged in the payload: its `-mch_files` token and its size in bytes
#: (0 when unknown: a URL).
_Staged = Tuple[Token, int]


def stage_collections(options: StageOptions) -> CollectionPlan:
    """Copy local collections into the payload so work items need nothing outside it.

    `-mch_files` go to every work item. A private store is split by target: each
    partition replays `<store>/<guid>/<os>/<arch>/` as its `-mch_files` (no download
    then); a partition the store has nothing for downloads its collections as usual.
    With more than one work item per target, each work item of a partition gets its share
    of the partition's collection files (`plan_parts`).
    """
    root = options.payload / pipeline.LOCAL_COLLECTIONS_DIR
    common: List[Token] = []
    common_files: List[_Staged] = []
    for index, spec in enumerate(options.mch_files):
        if platforms.is_url(spec):
            common.append(literal(spec))
            common_files.append((literal(spec), 0))
            continue
        source = Path(spec).resolve()
        if not source.exists():
            raise SuiteError(f"-mch_files '{spec}' does not exist")
        relative = ["mch_files", str(index), source.name]
        target = root.joinpath(*relative)
        if source.is_dir():
            copy_tree(source, target)
        else:
            copy_file(source, target)
            companion = source.with_name(source.name + ".mct")
            if companion.is_file():
                copy_file(companion, target.with_name(companion.name))
        common.append(under(PAYLOAD, options.host_os, pipeline.LOCAL_COLLECTIONS_DIR, *relative))
        common_files += staged_files(target, relative, options.host_os)
    per_partition: List[Tuple[str, Tuple[Token, ...]]] = []
    own_files: Dict[str, List[_Staged]] = {}
    if options.private_stores:
        guid = options.jit_ee_version or jit_ee_version_of(options.product_directory, options.host_os,
                                                            options.private_stores)
        for partition in pipeline.partitions_for_host(options.host_arch):
            tokens: List[Token] = []
            for index, store in enumerate(options.private_stores):
                source = store / guid / partition.target_os / partition.target_arch
                if not source.is_dir():
                    continue
                relative = [f"private_store_{index}", guid, partition.target_os, partition.target_arch]
                copy_tree(source, root.joinpath(*relative))
                tokens.append(under(PAYLOAD, options.host_os, pipeline.LOCAL_COLLECTIONS_DIR, *relative))
                own_files.setdefault(partition.name, []).extend(
                    staged_files(root.joinpath(*relative), relative, options.host_os))
            if tokens:
                per_partition.append((partition.name, tuple(tokens)))
            else:
                log.warning("Warning: no %s collections for %s/%s in the private store(s); work item %s "
                            "downloads them", guid, partition.target_os, partition.target_arch, partition.name)
    split = split_partitions(options, common_files, own_files, {name for name, _ in per_partition})
    return CollectionPlan(tuple(common), tuple(per_partition), split)


def staged_files(target: Path, relative: Sequence[str], host_os: str) -> List[_Staged]:
    """The collection files of a staged `-mch_files` entry (a file, or a directory searched
    as `superpmi.py` searches it), as tokens, in the order `superpmi.py` replays them."""
    from spmi.sources import mch_sources
    files = mch_sources.find_collection_files(target) if target.is_dir() else [target]
    staged: List[_Staged] = []
    for path in files:
        inner = list(path.relative_to(target).parts) if target.is_dir() else []
        staged.append((under(PAYLOAD, host_os, pipeline.LOCAL_COLLECTIONS_DIR, *relative, *inner),
                       path.stat().st_size))
    return staged


def split_partitions(options: StageOptions, common_files: Sequence[_Staged], own_files: Mapping[str, List[_Staged]],
                     with_store: set) -> Tuple[Tuple[str, Tuple[Tuple[Token, ...], ...]], ...]:
    """Each partition's work items (their `-mch_files`) when it gets more than one."""
    if options.work_items_per_target == 1:
        return ()
    split: List[Tuple[str, Tuple[Tuple[Token, ...], ...]]] = []
    for partition in pipeline.partitions_for_host(options.host_arch):
        files = list(common_files) + own_files.get(partition.name, [])
        if not files or (not common_files and partition.name not in with_store):
            (log.warning if options.work_items_per_target else log.debug)("Warning: %s downloads its collections in the work item, so it cannot be spread over "
                        "several work items (pass -mch_files or -private_store for that)", partition.name)
            continue
        sizes = [(str(position), size) for position, (_, size) in enumerate(files)]
        count = options.work_items_per_target or pipeline.auto_part_count(sizes, options.bytes_per_work_item)
        parts = pipeline.plan_parts(sizes, count)
        if len(parts) < 2:
            continue
        split.append((partition.name, tuple(tuple(files[int(key)][0] for key in part) for part in parts)))
        log.info("%s: %d collection(s) over %d work items (%s bytes)", partition.name, len(files), len(parts),
                 ", ".join(str(sum(files[int(key)][1] for key in part)) for part in parts))
    return tuple(split)


def jit_ee_version_of(product_directory: Path, host_os: str, stores: Sequence[Path]) -> str:
    """`mcs -printJITEEVersion`, else the one GUID directory the stores hold."""
    mcs = product_directory / platforms.exe_name("mcs", host_os)
    if mcs.is_file():
        result = runner.run([mcs, "-printJITEEVersion"])
        guid = result.stdout.strip().lower()
        if result.code == 0 and guid:
            return config.checked_jit_ee_version(guid, f"the output of {mcs} -printJITEEVersion")
    guids = sorted({d.name for store in stores if store.is_dir() for d in store.iterdir() if d.is_dir()})
    if len(guids) == 1:
        return guids[0]
    raise SuiteError("cannot tell which JIT-EE version's collections to take from the private store "
                     f"(mcs gave none; the store holds {', '.join(guids) or 'nothing'}); pass -jit_ee_version")


def stage_payload(options: StageOptions) -> Dict[str, Optional[str]]:
    """Fill the payload directory; returns the baseline hash per flavour (None if unknown)."""
    payload = options.payload
    for script in suite_scripts(options.source_directory):
        copy_file(options.source_directory / script, payload / script)
    requirements = options.source_directory / pipeline.REQUIREMENTS_FILE
    if requirements.is_file():
        copy_file(requirements, payload / requirements.name)
    tools = tool_files(options.product_directory, options.host_os)
    for tool in tools:
        copy_file(tool, payload / tool.name)
    for support in tool_support_directories(options.product_directory, options.host_os):
        copy_tree(support, payload / support.name)
    stage_coredistools(options)
    flavours = pipeline.flavours_for(options.types)
    diff_sources = {"checked": options.product_directory, "release": options.release_product_directory}
    for flavour in flavours:
        source = diff_sources[flavour]
        if source is None:
            raise SuiteError(f"{flavour} diff JITs are needed for {'/'.join(t.name for t in options.types)}; "
                             "pass -release_product_directory")
        copy_jits(source, payload / pipeline.DIFF_DIR / flavour, options.host_os,
                  "-product_directory" if flavour == "checked" else "-release_product_directory")
    hashes: Dict[str, Optional[str]] = {}
    base_sources = {"checked": options.base_jit_directory, "release": options.release_base_jit_directory}
    for flavour in flavours:
        target = payload / pipeline.BASE_DIR / flavour
        source = base_sources[flavour]
        if source is not None:
            copy_jits(source, target, options.host_os,
                      "-base_jit_directory" if flavour == "checked" else "-release_base_jit_directory")
            hashes[flavour] = options.base_git_hash
        else:
            hashes[flavour] = download_baseline(options, flavour, target)
    if options.jit_analyze_directory is not None:
        copy_tree(options.jit_analyze_directory, payload / pipeline.JIT_ANALYZE_DIR)
    if options.git_directory is not None:
        copy_tree(options.git_directory, payload / pipeline.GIT_DIR)
    if any(t.uses_pin for t in options.types):
        stage_pin(options, payload / pipeline.PIN_DIR)
    fsutil.atomic_write_text(payload / pipeline.BASELINE_INFO_FILE,
                              json.dumps({"version": 1, "hashes": hashes}, indent=2) + "\n")
    return hashes


def stage_pin(options: StageOptions, target: Path) -> None:
    """The PIN package into the payload: `-pin_directory`, else downloaded from storage here."""
    if options.pin_directory is not None:
        copy_tree(options.pin_directory, target)
        log.info("Copied the PIN package from %s to %s", options.pin_directory, target)
        return
    import tempfile

    from spmi.tools import pintools
    with tempfile.TemporaryDirectory(prefix="spmi-pin-") as scratch:
        downloaded = Path(scratch) / "pin"
        pintools.download_package(downloaded, options.host_os, options.storage_url, show_progress=False)
        copy_tree(downloaded, target)
    log.info("Downloaded the PIN package (%s) to %s", pintools.archive_blob_name(options.host_os), target)


def download_baseline(options: StageOptions, flavour: str, target: Path) -> str:
    """Fetch main, then `jitrollingbuild.py download` the first candidate that has the JITs."""
    from spmi.sources import baseline, git_utils
    repo = options.runtime_repo
    if options.base_git_hash is None:
        if repo is None:
            raise SuiteError("no -base_jit_directory and no git work tree to find a baseline from; "
                             "pass -base_jit_directory, -base_git_hash or -runtime_repo")
        try:
            git_utils.fetch_main(repo)
        except SuiteError as exc:
            log.warning("Warning: %s; using the history already fetched", exc)
    start = baseline.baseline_candidates(repo, options.baseline_of, options.base_git_hash,
                                         alternatives=("-base_git_hash", "-base_jit_directory"))
    required = pipeline.required_jit_names(options.host_os, options.host_arch)
    target.mkdir(parents=True, exist_ok=True)
    for index, candidate in enumerate(start.candidates):
        argv = [sys.executable, str(options.source_directory / "jitrollingbuild.py"), "download",
                "-git_hash", candidate, "-arch", options.host_arch, "-host_os", options.host_os,
                "-build_type", flavour.capitalize(), "-target_dir", str(target)]
        if options.storage_url:
            argv += ["-storage_url", options.storage_url]
        result = runner.run(argv, cwd=repo)
        if result.code == baseline.NO_ROLLING_BUILD_EXIT_CODE:
            log.info("No %s rolling build of %s", flavour, candidate)
            continue
        if result.code != 0:
            raise SuiteError(f"'{runner.format_command(argv)}' failed with exit code {result.code}: "
                             f"{_last_line(result.stdout + result.stderr)}")
        if all((target / name).is_file() for name in required):
            if index > 0:
                log.warning("Warning: the baseline found is not built with the first git hash with JIT code "
                            "changes; there may be extraneous diffs")
            log.info("Baseline %s JITs from %s", flavour, candidate)
            return candidate
    raise SuiteError(f"No baseline JIT found: no {flavour} rolling build with {', '.join(required)} for "
                     f"{options.host_os}/{options.host_arch} among {', '.join(start.candidates)}; "
                     "pass -base_jit_directory")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def validate_payload(payload: Path, items: Sequence[WorkItem], host_os: str, types: Sequence[DiffType],
                     source_directory: Path) -> None:
    modules = [p.as_posix() for p in suite_scripts(source_directory)]
    missing = missing_needs(payload, items, host_os, types, modules)
    if missing:
        raise SuiteError(describe_missing(missing))
