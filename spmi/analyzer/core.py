"""The built-in analyzer's input side: finding and pairing listing files, reading them
(whole or in chunks), running the comparison, and the files it writes (docs/contracts.md §8)."""
from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import os
import re
from pathlib import Path
from typing import List, Optional, Tuple, Union

from spmi.analyzer.compare import AnalysisResult, AnalyzeInputError, AnalyzeOptions, AnalyzeUsageError, _Analysis
from spmi.analyzer.render import render_markdown
from spmi.analyzer.scan import METRICS, _Unit
from spmi.base import fsutil

PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------ reading input

_WHOLE_FILE_LIMIT = 16 << 20  # larger files are read in chunks
_STREAM_CHUNK = 4 << 20  # read size for files above _WHOLE_FILE_LIMIT
_READ_SIZE = 1 << 16
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def _list_files(root: str, extension: str, file_filter: Optional[str], recursive: bool) -> List[str]:
    """Keys (paths relative to root) of the files matching `<filter or *><ext>`, sorted."""
    pattern = (file_filter or "*") + extension
    flags = re.IGNORECASE if os.name == "nt" else 0
    matcher = re.compile(fnmatch.translate(pattern), flags).match
    keys: List[str] = []
    if recursive:
        for dirpath, _dirs, names in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            prefix = "" if rel == os.curdir else rel + os.sep
            keys.extend(prefix + n for n in names if matcher(n))
    else:
        with os.scandir(root) as entries:
            keys.extend(e.name for e in entries if matcher(e.name) and e.is_file())
    keys.sort()
    return keys


def _open_if_file(path: str) -> Optional[int]:
    """A read-only descriptor, or None when there is no such file."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except PermissionError:
        if os.path.isdir(path):
            return None
        raise


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
    run = _Analysis(options)
    try:
        if options.concat_files or (base_kind == "file" and diff_kind == "file"):
            _analyze_as_one_pair(run, base, base_kind, diff, diff_kind)
        else:
            _analyze_by_key(run, base, base_kind, diff, diff_kind)
    except OSError as e:
        if isinstance(e, AnalyzeInputError):
            raise
        raise AnalyzeInputError(f"{e.strerror or e}: '{e.filename}'" if e.filename else str(e)) from e
    return run.finish()


def _side_files(path: str, kind: str, options: AnalyzeOptions) -> Tuple[str, List[str]]:
    if kind == "file":
        return os.path.dirname(path) or os.curdir, [os.path.basename(path)]
    return path, _list_files(path, options.file_extension, options.file_filter, options.recursive)


def _analyze_by_key(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str) -> None:
    options, result = run.options, run.result
    need_text = not options.skip_text_diff
    base_root, base_keys = _side_files(base, base_kind, options)
    diff_root, diff_keys = _side_files(diff, diff_kind, options) if diff_kind == "file" else (diff, None)
    base_prefix, diff_prefix = os.path.join(base_root, ""), os.path.join(diff_root, "")
    for key in base_keys:
        dfd = None if diff_keys is not None and key not in diff_keys else _open_if_file(diff_prefix + key)
        if dfd is None:
            if options.warn:
                result.base_only_files.append(key)
            continue
        try:
            bfd = os.open(base_prefix + key, _OPEN_FLAGS)
            try:
                bunit, dunit, differ = _pair_units(bfd, dfd, need_text)
            finally:
                os.close(bfd)
        finally:
            os.close(dfd)
        if differ:
            result.text_diff_files += 1
        run.compare(key, key, bunit, dunit)
    if options.warn:
        if diff_keys is None:
            diff_keys = _list_files(diff, options.file_extension, options.file_filter, options.recursive)
        base_set = set(base_keys)
        result.diff_only_files = [k for k in diff_keys if k not in base_set]


def _feed_path(unit: _Unit, path: str, starts_input: bool) -> None:
    fd = os.open(path, _OPEN_FLAGS)
    try:
        _feed_read(unit, fd, _read_whole(fd), starts_input, False)
    finally:
        os.close(fd)


def _analyze_as_one_pair(run: _Analysis, base: str, base_kind: str, diff: str, diff_kind: str) -> None:
    """Single files on both sides, or --concat-files: one unit per side."""
    options, result = run.options, run.result
    need_text = not options.skip_text_diff
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
            bfd = os.open(os.path.join(base_root, bkey), _OPEN_FLAGS)
            try:
                dfd = os.open(os.path.join(diff_root, dkey), _OPEN_FLAGS)
                try:
                    if _feed_pair(bunit, bfd, not base_started, dunit, dfd, not diff_started, need_text):
                        result.text_diff_files += 1
                finally:
                    os.close(dfd)
            finally:
                os.close(bfd)
            base_started = diff_started = True
        elif bkey is not None:
            _feed_path(bunit, os.path.join(base_root, bkey), not base_started)
            base_started = True
            if options.warn:
                result.base_only_files.append(bkey)
        elif dkey is not None:
            _feed_path(dunit, os.path.join(diff_root, dkey), not diff_started)
            diff_started = True
            if options.warn:
                result.diff_only_files.append(dkey)
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


def retain_only_top_files(result: AnalysisResult, base: PathLike, diff: PathLike) -> int:
    """Delete every listing (both trees) whose key is in no top list; returns the count.

    Only directories compared file by file are touched (not --concat-files or single files).
    """
    options = result.options
    base, diff = os.fspath(base), os.fspath(diff)
    if options.concat_files or not (os.path.isdir(base) and os.path.isdir(diff)):
        return 0
    keep = result.top_file_keys()
    deleted = 0
    for root in (base, diff):
        for key in _list_files(root, options.file_extension, options.file_filter, options.recursive):
            if key not in keep:
                os.remove(os.path.join(root, key))
                deleted += 1
    return deleted
