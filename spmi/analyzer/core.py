"""The built-in analyzer's input side: finding and pairing listing files, reading them
(whole or in chunks), running the comparison, and the files it writes (docs/contracts.md §8)."""
from __future__ import annotations

import dataclasses
import errno
import fnmatch
import gc
import hashlib
import os
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple, Union

from spmi.analyzer import workers
from spmi.analyzer.compare import (
    AnalysisPart,
    AnalysisResult,
    AnalyzeInputError,
    AnalyzeOptions,
    AnalyzeUsageError,
    _Analysis,
)
from spmi.analyzer.export import Exporter
from spmi.analyzer.render import render_markdown
from spmi.analyzer.scan import METRICS, _Unit
from spmi.base import fsutil

PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------ reading input

_WHOLE_FILE_LIMIT = 16 << 20  # larger files are read in chunks
_STREAM_CHUNK = 4 << 20  # read size for files above _WHOLE_FILE_LIMIT
_READ_SIZE = 1 << 16
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)


def _name_matcher(extension: str, file_filter: Optional[str]) -> Callable[[str], object]:
    """Whether a file name matches `<filter or *><ext>` (case-insensitive on Windows, as .NET there)."""
    flags = re.IGNORECASE if os.name == "nt" else 0
    return re.compile(fnmatch.translate((file_filter or "*") + extension), flags).match


def _list_files(root: str, extension: str, file_filter: Optional[str], recursive: bool) -> List[str]:
    """Keys (paths relative to root) of the regular files matching `<filter or *><ext>`, sorted.
    Anything else with a matching name (a FIFO, a socket, a device) is not a listing and is skipped."""
    matcher = _name_matcher(extension, file_filter)
    keys: List[str] = []
    pending = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            for e in entries:
                name = e.name
                if matcher(name) and e.is_file():
                    keys.append(prefix + name)
                elif recursive and e.is_dir(follow_symlinks=False):
                    pending.append((prefix + name + os.sep, e.path))
    keys.sort()
    return keys


@dataclass
class _ComparedPairs:
    """The file pairs the analysis already compared byte by byte (for the textual-diff count)."""

    compared: Set[str] = field(default_factory=set)  # keys of the pairs compared (--concat-files)
    differing: Set[str] = field(default_factory=set)  # the compared pairs whose bytes differ
    trees: Optional["_TwoTrees"] = None  # the walk of both folders, when the pairs came from one


@dataclass
class _TwoTrees:
    """One walk over a base and a diff folder: both listings and the pairs git would compare."""

    base_keys: List[str] = field(default_factory=list)  # the base listing, sorted (as `_list_files`)
    diff_keys: Set[str] = field(default_factory=set)  # the diff listing
    unlisted_pairs: List[str] = field(default_factory=list)  # regular files on both sides the listing leaves out
    links: Set[str] = field(default_factory=set)  # listed keys with a symlink on a side (git does not compare bytes)
    links_differ: Set[str] = field(default_factory=set)  # a symlink on both sides, other targets


def _walk_two_trees(base: str, diff: str, matcher: Callable[[str], object], recursive: bool) -> _TwoTrees:
    """The listings of both folders (regular files matching `matcher`, in subfolders with `recursive`)
    and what `git diff --no-index` pairs at any depth, whatever the name (for the textual diffs): the
    pairs of regular files the listing takes are compared by the analysis itself."""
    trees = _TwoTrees()
    base_keys, diff_keys, unlisted = trees.base_keys, trees.diff_keys, trees.unlisted_pairs
    pending: List[Tuple[str, Optional[str], Optional[str]]] = [("", base, diff)]
    while pending:
        prefix, base_dir, diff_dir = pending.pop()
        others: Dict[str, "os.DirEntry[str]"] = {}
        if diff_dir is not None:
            with os.scandir(diff_dir) as entries:
                others = {e.name: e for e in entries}
        listed = recursive or not prefix
        base_dirs: Set[str] = set()
        if base_dir is not None:
            with os.scandir(base_dir) as entries:
                for b in entries:
                    name = b.name
                    d = others.get(name)
                    if b.is_file():
                        taken = listed and matcher(name)
                        if taken:
                            base_keys.append(prefix + name)
                        if d is None:
                            continue
                        if not b.is_symlink() and not d.is_symlink():
                            if not taken and d.is_file():
                                unlisted.append(prefix + name)
                            continue
                        if taken:
                            trees.links.add(prefix + name)
                    if b.is_symlink():
                        if d is not None and d.is_symlink() and os.readlink(b.path) != os.readlink(d.path):
                            trees.links_differ.add(prefix + name)
                    elif b.is_dir():
                        base_dirs.add(name)
                        if d is not None and d.is_dir() and not d.is_symlink():
                            pending.append((prefix + name + os.sep, b.path, d.path))
                        elif recursive:
                            pending.append((prefix + name + os.sep, b.path, None))
        for name, d in others.items():
            if d.is_file():
                if listed and matcher(name):
                    diff_keys.add(prefix + name)
            elif recursive and name not in base_dirs and d.is_dir() and not d.is_symlink():
                pending.append((prefix + name + os.sep, None, d.path))
    base_keys.sort()
    return trees


def _open_regular(path: str) -> Optional[int]:
    """A read-only descriptor of a regular file (symlinks followed), or None when `path` is missing
    or not a regular file (a folder, a FIFO, a device)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except PermissionError:
        if os.path.isdir(path):
            return None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    return fd


def _open_listing(path: str) -> int:
    fd = _open_regular(path)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "Not a regular file", path)
    return fd


def _read_whole(fd: int) -> Optional[bytes]:
    """The whole file if it is at most _WHOLE_FILE_LIMIT bytes, else None."""
    first = os.read(fd, _READ_SIZE)
    if not first:
        return first
    parts = [first]
    total = len(first)
    while True:
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            return first if len(parts) == 1 else b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > _WHOLE_FILE_LIMIT:
            return None


def _feed_read(unit: _Unit, fd: int, data: Optional[bytes], starts_input: bool, need_digest: bool) -> Optional[bytes]:
    """Feed a file that `_read_whole` gave as `data` (None: too large to keep, so it is
    streamed from its start); returns the streamed file's digest when `need_digest`."""
    if data is not None:
        unit.feed(data, starts_input)
        return None
    hasher = hashlib.blake2b() if need_digest else None
    os.lseek(fd, 0, os.SEEK_SET)
    unit.feed_stream(fd, starts_input, _STREAM_CHUNK, hasher)
    return hasher.digest() if hasher is not None else None


def _feed_pair(bunit: _Unit, bfd: int, bstart: bool, dunit: _Unit, dfd: int, dstart: bool, need_text: bool) -> bool:
    """Feed a base/diff file pair; returns whether their bytes differ (if need_text).

    The textual-diff count is computed here by comparing bytes instead of running
    `git diff --no-index` as jit-analyze does; the count is the same for the paired files.
    Files too large to keep in memory are compared by size and a streamed digest.
    """
    bdata, ddata = _read_whole(bfd), _read_whole(dfd)
    bdigest = _feed_read(bunit, bfd, bdata, bstart, need_text)
    ddigest = _feed_read(dunit, dfd, ddata, dstart, need_text)
    return need_text and _differ(bdata, bdigest, ddata, ddigest)


def _differ(bdata: Optional[bytes], bdigest: Optional[bytes], ddata: Optional[bytes], ddigest: Optional[bytes]) -> bool:
    """Whether two files differ, from their bytes or (when too large to keep) streamed digests."""
    if bdata is not None and ddata is not None:
        return bdata != ddata
    if bdata is None and ddata is None:
        return bdigest != ddigest
    return True  # one fits in memory, the other does not: the sizes differ


def _pair_units(bfd: int, dfd: int, need_text: bool) -> Tuple[_Unit, _Unit, bool]:
    """A base/diff file pair, each file its own input: (base unit, diff unit, bytes differ).
    Identical files (most of a full listing dump) are parsed once and share one unit."""
    bdata, ddata = _read_whole(bfd), _read_whole(dfd)
    if bdata is not None and bdata == ddata:
        unit = _Unit()
        unit.feed(bdata, True)
        return unit, unit, False
    bunit, dunit = _Unit(), _Unit()
    bdigest = _feed_read(bunit, bfd, bdata, True, need_text)
    ddigest = _feed_read(dunit, dfd, ddata, True, need_text)
    return bunit, dunit, need_text and _differ(bdata, bdigest, ddata, ddigest)


# ------------------------------------------------------------------ analysis

PARALLELISM_MESSAGE = "Parallelism (--parallelism) must be a whole number of processes, at least 1"


def validate_options(options: AnalyzeOptions) -> None:
    """Raise AnalyzeUsageError with jit-analyze's messages for invalid options."""
    messages = [f"Unknown metric '{m}'. Available metrics: {', '.join(METRICS)}"
                for m in options.metrics if m not in METRICS]
    if not options.metrics:
        messages.append("At least one metric is required")
    if set(options.override_base) != set(options.override_diff):
        messages.append("override-total-base-metric and override-total-diff-metric must either both be "
                        "specified or both not be specified")
    if options.count < 0:
        messages.append("Count (--count) must not be negative")
    if options.parallelism < 1:
        messages.append(PARALLELISM_MESSAGE)
    if messages:
        raise AnalyzeUsageError("\n".join(messages))


def _existing_kind(path: str) -> str:
    if os.path.isdir(path):
        return "dir"
    if os.path.isfile(path):
        return "file"
    raise AnalyzeInputError(f"Could not find file '{os.path.abspath(path)}'.")


def _unit_key(path: str) -> str:
    return os.path.basename(os.path.normpath(path))


def analyze(base: PathLike, diff: PathLike, options: Optional[AnalyzeOptions] = None) -> AnalysisResult:
    """Compare the base and diff listings (files or directories) for every requested metric."""
    options = dataclasses.replace(options or AnalyzeOptions())
    options.metrics = list(dict.fromkeys(options.metrics))
    validate_options(options)
    base, diff = os.fspath(base), os.fspath(diff)
    base_kind, diff_kind = _existing_kind(base), _existing_kind(diff)
    run = _Analysis(options, Exporter(options) if options.export else None)
    known = _ComparedPairs()
    try:
        with _collection_paused():
            _analyze_inputs(run, base, base_kind, diff, diff_kind, known)
    except OSError as e:
        if isinstance(e, AnalyzeInputError):
            raise
        raise AnalyzeInputError(f"{e.strerror or e}: '{e.filename}'" if e.filename else str(e)) from e
    return run.finish()


def _analyze_inputs(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str,
                    known: _ComparedPairs) -> None:
    if run.options.concat_files or (base_kind == "file" and diff_kind == "file"):
        _analyze_as_one_pair(run, base, base_kind, diff, diff_kind, known)
    else:
        _analyze_by_key(run, base, base_kind, diff, diff_kind, known)
    if _wants_text_diffs(run.options):
        run.result.text_diff_keys = text_diff_keys(base, diff, known)


@contextmanager
def _collection_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: a scan makes many small objects without cycles, which
    reference counting frees, and the collector's passes over them cost a quarter of the time
    (`bench/analyzer.py`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _side_files(path: str, kind: str, options: AnalyzeOptions) -> Tuple[str, List[str]]:
    if kind == "file":
        return os.path.dirname(path) or os.curdir, [os.path.basename(path)]
    return path, _list_files(path, options.file_extension, options.file_filter, options.recursive)


def _wants_text_diffs(options: AnalyzeOptions) -> bool:
    """jit-analyze counts textual diffs unless told not to, and not with --count 0 (§8.4)."""
    return not options.skip_text_diff and options.count != 0


def _analyze_by_key(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str,
                    known: _ComparedPairs) -> None:
    """Files paired by key; `known` gets the paired keys whose two files' bytes differ."""
    options, result = run.options, run.result
    need_text = _wants_text_diffs(options)
    listed: Optional[Set[str]] = None  # the diff listing, when known
    if base_kind == "dir" and diff_kind == "dir" and need_text:
        trees = _walk_two_trees(base, diff, _name_matcher(options.file_extension, options.file_filter),
                                options.recursive)
        known.trees = trees
        base_root, base_keys, diff_root, listed = base, trees.base_keys, diff, trees.diff_keys
    else:
        base_root, base_keys = _side_files(base, base_kind, options)
        diff_root, diff_keys = _side_files(diff, diff_kind, options) if diff_kind == "file" else (diff, None)
        listed = set(diff_keys) if diff_keys is not None else None
    source = PairSource(os.path.join(base_root, ""), os.path.join(diff_root, ""), listed is None, need_text)
    # A file against a directory pairs nothing: jit-analyze keys a named file "" and a directory's files by path.
    mixed = base_kind != diff_kind
    keys: List[KeyToRead] = [(key, not mixed and (listed is None or key in listed)) for key in base_keys]
    processes = worker_count(options.parallelism, sum(1 for _, pairable in keys if pairable), workers.start_by_fork())
    if processes:
        _analyze_in_workers(run, source, keys, processes, known)
    else:
        _analyze_keys(run, source, keys, known.differing)
    if options.warn:
        if listed is None:
            listed = set(_list_files(diff, options.file_extension, options.file_filter, options.recursive))
        if mixed:  # nothing paired, but --warn compares the names, as jit-analyze's file lists do
            result.base_only_files = [key for key in base_keys if key not in listed]
        result.diff_only_files = sorted(listed.difference(base_keys))


@dataclass(frozen=True)
class PairSource:
    """Where the file pairs of an analysis are (what a worker process needs to read them)."""

    base_prefix: str  # the base root with a trailing separator; a key follows
    diff_prefix: str
    probe_diff: bool  # the diff side was not listed: a key may name no regular file there
    need_text: bool  # whether to tell if the two files' bytes differ


#: A pair read: (base unit, diff unit, bytes differ), or None when the diff side has no regular file.
PairRead = Optional[Tuple[_Unit, _Unit, bool]]
#: A base key, and whether the diff listing has it (or may have it, when the diff side was not listed).
KeyToRead = Tuple[str, bool]

#: Fewer pairs than this per worker are read in this process: starting workers would cost more than
#: they save. Measured on 2 cores with one-method pairs (`bench/analyzer.py --break-even`), 2 forked
#: workers break even with one process at 2,000 to 4,000 pairs; 2 workers started afresh (spawn, as on
#: Windows and macOS, or forkserver, when this process runs threads) at about 16,000.
_MIN_PAIRS_PER_FORKED_WORKER = 1024
_MIN_PAIRS_PER_STARTED_WORKER = 8192
#: Pairs per chunk handed to a worker, at most (a chunk is also the work a stop waits for: 4096
#: one-method pairs take a worker about 0.1 s). Below that, each worker gets about
#: _CHUNKS_PER_WORKER chunks: few enough that handing them out costs little (`bench/analyzer.py`),
#: enough that no worker idles long at the end.
_MAX_CHUNK_PAIRS = 4096
_CHUNKS_PER_WORKER = 8


def read_pair(source: PairSource, key: str) -> PairRead:
    """Read and scan one base/diff pair (the base file is a listed regular file)."""
    if source.probe_diff:
        dfd = _open_regular(source.diff_prefix + key)
        if dfd is None:
            return None
    else:
        dfd = os.open(source.diff_prefix + key, _OPEN_FLAGS)  # listed as a regular file just before
    try:
        bfd = os.open(source.base_prefix + key, _OPEN_FLAGS)  # listed as a regular file just before
        try:
            return _pair_units(bfd, dfd, source.need_text)
        finally:
            os.close(bfd)
    finally:
        os.close(dfd)


def _analyze_keys(run: _Analysis, source: PairSource, keys: List[KeyToRead], differing: Set[str]) -> None:
    """Compare the pairs of `keys`, in order; `differing` gets the keys whose two files' bytes differ."""
    warn = run.options.warn
    for key, listed in keys:
        read = read_pair(source, key) if listed else None
        if read is None:
            if warn:
                run.result.base_only_files.append(key)
            continue
        bunit, dunit, differ = read
        if differ:
            differing.add(key)
        run.compare(key, key, bunit, dunit)


@dataclass(frozen=True)
class ChunkTask:
    """What a worker process needs to analyze a chunk of the keys."""

    source: PairSource
    options: AnalyzeOptions


def analyze_chunk(task: ChunkTask, keys: List[KeyToRead]) -> Tuple[AnalysisPart, Set[str]]:
    """One worker process's chunk: its pairs read, scanned and compared, as a part of the whole
    analysis, and the keys whose bytes differ."""
    with _collection_paused():
        options = task.options
        part = _Analysis(options, Exporter(options) if options.export else None, part_of_many=True)
        differing: Set[str] = set()
        _analyze_keys(part, task.source, keys, differing)
        return part.part(), differing


def _analyze_in_workers(run: _Analysis, source: PairSource, keys: List[KeyToRead], processes: int,
                        known: _ComparedPairs) -> None:
    """`_analyze_keys` by `processes` worker processes, a chunk each at a time; every chunk's part
    is absorbed in the order of the keys, so the result is exactly that of one process."""
    chunk = min(_MAX_CHUNK_PAIRS, -(-len(keys) // (processes * _CHUNKS_PER_WORKER)))
    with workers.results_in_order(analyze_chunk, ChunkTask(source, run.options),
                                  workers.split_into_chunks(keys, chunk), processes) as parts:
        for part, differing in parts:
            run.absorb(part)
            known.differing |= differing


def worker_count(parallelism: int, pairs: int, forked: bool) -> int:
    """Worker processes for `pairs` file pairs: at most `parallelism`, each with enough pairs to pay
    for its start (`forked`: workers start by fork, which is cheap); 0 means this process reads them all."""
    least = _MIN_PAIRS_PER_FORKED_WORKER if forked else _MIN_PAIRS_PER_STARTED_WORKER
    count = min(parallelism, pairs // least)
    return count if count > 1 else 0


def _feed_path(unit: _Unit, path: str, starts_input: bool) -> None:
    fd = _open_listing(path)
    try:
        _feed_read(unit, fd, _read_whole(fd), starts_input, False)
    finally:
        os.close(fd)


def _analyze_as_one_pair(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str,
                         known: _ComparedPairs) -> None:
    """Single files on both sides, or --concat-files: one unit per side (no file lists for --warn,
    as jit-analyze)."""
    options = run.options
    need_text = _wants_text_diffs(options)
    base_root, base_keys = _side_files(base, base_kind, options)
    diff_root, diff_keys = _side_files(diff, diff_kind, options)
    bunit, dunit = _Unit(), _Unit()
    if base_kind == "file" and diff_kind == "file":
        pairs: List[Tuple[Optional[str], Optional[str]]] = [(base_keys[0], diff_keys[0])]
    else:
        pairs = _merge_keys(base_keys, diff_keys)
    base_started = diff_started = False
    for bkey, dkey in pairs:
        if bkey is not None and dkey is not None:
            bfd = _open_listing(os.path.join(base_root, bkey))
            try:
                dfd = _open_listing(os.path.join(diff_root, dkey))
                try:
                    differ = _feed_pair(bunit, bfd, not base_started, dunit, dfd, not diff_started, need_text)
                    if need_text and bkey == dkey:
                        known.compared.add(bkey)
                        if differ:
                            known.differing.add(bkey)
                finally:
                    os.close(dfd)
            finally:
                os.close(bfd)
            base_started = diff_started = True
        elif bkey is not None:
            _feed_path(bunit, os.path.join(base_root, bkey), not base_started)
            base_started = True
        elif dkey is not None:
            _feed_path(dunit, os.path.join(diff_root, dkey), not diff_started)
            diff_started = True
    run.compare(_unit_key(base), _unit_key(diff), bunit, dunit)


def _merge_keys(base_keys: List[str], diff_keys: List[str]) -> List[Tuple[Optional[str], Optional[str]]]:
    """Sorted union of both key lists, paired where a key is on both sides."""
    out: List[Tuple[Optional[str], Optional[str]]] = []
    i = j = 0
    while i < len(base_keys) or j < len(diff_keys):
        b = base_keys[i] if i < len(base_keys) else None
        d = diff_keys[j] if j < len(diff_keys) else None
        if b is not None and (d is None or b < d):
            out.append((b, None))
            i += 1
        elif d is not None and (b is None or d < b):
            out.append((None, d))
            j += 1
        else:
            out.append((b, d))
            i += 1
            j += 1
    return out


# ------------------------------------------------------------------ textual diffs


def _is_real_dir(path: str) -> bool:
    """A directory that is not a symlink (git compares a symlinked folder as a link)."""
    return os.path.isdir(path) and not os.path.islink(path)


def _contents_differ(base: str, diff: str) -> bool:
    bfd = _open_regular(base)
    dfd = _open_regular(diff) if bfd is not None else None
    try:
        if bfd is None or dfd is None or os.fstat(bfd).st_size != os.fstat(dfd).st_size:
            return bfd is not None and dfd is not None
        while True:
            chunk = os.read(bfd, _READ_SIZE)
            if chunk != os.read(dfd, _READ_SIZE):
                return True
            if not chunk:
                return False
    finally:
        for fd in (bfd, dfd):
            if fd is not None:
                os.close(fd)


def _modified_in_trees(base: str, diff: str, known: _ComparedPairs) -> Set[str]:
    """What `git diff --no-index --diff-filter=M <base> <diff>` reports as modified, at any depth and
    whatever the extension: two regular files with other bytes, or two symlinks with other targets.
    A file against a symlink or a folder is a type change (not counted); a FIFO, socket or device is
    never read. Pairs the analysis compared already are not read again."""
    found: Set[str] = set()
    pending = [("", base, diff)]
    while pending:
        prefix, base_dir, diff_dir = pending.pop()
        try:
            with os.scandir(diff_dir) as entries:
                others = {e.name: e for e in entries}
            with os.scandir(base_dir) as entries:
                mine = list(entries)
        except OSError:
            continue
        for b in mine:
            d = others.get(b.name)
            if d is None:
                continue
            key = prefix + b.name
            if b.is_file(follow_symlinks=False) and d.is_file(follow_symlinks=False):
                if key in known.compared:
                    if key in known.differing:
                        found.add(key)
                elif _contents_differ(b.path, d.path):
                    found.add(key)
            elif b.is_dir(follow_symlinks=False) and d.is_dir(follow_symlinks=False):
                pending.append((key + os.sep, b.path, d.path))
            elif b.is_symlink() and d.is_symlink() and os.readlink(b.path) != os.readlink(d.path):
                found.add(key)
    return found


def text_diff_keys(base: str, diff: str, known: _ComparedPairs) -> Set[str]:
    """Keys of the files that differ as text, counted as jit-analyze counts them (§8.4): both whole
    trees, whatever the extension, `-r` and `--filter`. `known`: the pairs already compared."""
    if _is_real_dir(base) and _is_real_dir(diff):
        if known.trees is None:
            return _modified_in_trees(base, diff, known)
        trees = known.trees
        found = (known.differing - trees.links) | trees.links_differ
        return found | {key for key in trees.unlisted_pairs
                        if _contents_differ(os.path.join(base, key), os.path.join(diff, key))}
    if _is_real_dir(base):
        base = os.path.join(base, os.path.basename(diff))
    elif _is_real_dir(diff):
        diff = os.path.join(diff, os.path.basename(base))
    return {os.path.basename(base)} if _contents_differ(base, diff) else set()


# ------------------------------------------------------------------ output files


def write_text_atomically(path: PathLike, text: str) -> None:
    """UTF-8 with the line ends given, written to a temp name in the same folder then renamed;
    the folder must exist (as jit-analyze expects)."""
    fsutil.atomic_write_text(Path(os.path.abspath(path)), text, make_parents=False)


def write_markdown_per_metric(result: AnalysisResult, folder: PathLike) -> List[str]:
    """`<folder>/<Metric>.md` for every metric of the result; returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for metric in result.summaries:
        path = os.path.join(os.fspath(folder), metric + ".md")
        write_text_atomically(path, render_markdown(result, [metric]))
        paths.append(path)
    return paths


def retain_top_files(result: AnalysisResult, metric: str, base: PathLike, diff: PathLike) -> Tuple[int, Set[str]]:
    """--retain-only-top-files for one metric, as jit-analyze does it after that metric's report
    (§8.1): every compared file pair not in the metric's top *file* lists is deleted on both sides
    and counted as 2 (even if an earlier metric deleted it already); unpaired files are never
    touched. Only folders compared file by file are changed: with single files or --concat-files
    jit-analyze's paths name nothing, so nothing is deleted (the count is the same).
    Returns the count and the keys deleted."""
    base, diff = os.fspath(base), os.fspath(diff)
    per_file = not result.options.concat_files and os.path.isdir(base) and os.path.isdir(diff)
    keep = result.top_file_keys(metric)
    deleted = 0
    gone: Set[str] = set()
    for base_key, diff_key in result.file_pairs:
        if (base_key, diff_key) in keep:
            continue
        deleted += 2
        if per_file:
            for path in (os.path.join(base, base_key), os.path.join(diff, diff_key)):
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            gone.add(base_key)
    return deleted, gone
