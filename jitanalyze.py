#!/usr/bin/env python3
"""Built-in equivalent of jit-analyze (CONTRACTS.md §8).

Compares two trees of JIT disassembly listings (`.dasm`) and prints, per metric, the same
report jit-analyze prints: totals, the top file and method regressions/improvements and
the final counts; `--md` also writes the markdown form asmdiffs embeds in its summary.

asmdiffs uses this module when the real `jit-analyze` is not on PATH::

    result = analyze(Path(base_dir), Path(diff_dir), AnalyzeOptions(metrics=["CodeSize"]))
    print(render_console(result))
    Path("summary.md").write_text(render_markdown(result), encoding="utf-8")

or simply ``run_cli([...jit-analyze arguments...])``.

Design (one module per concern; this one keeps the public API and re-exports the
names other modules and tests use):
* jitanalyze.py: walks and pairs the input files and reads them one file (or one
  base/diff file pair) at a time, streaming files too large to keep in memory; writes the
  output files; the command line.
* jitanalyze_scan.py: one listing -- the metrics, the single-regex scan of its bytes
  (§7, §8.2) and the per-method tables.
* jitanalyze_compare.py: options, results and the single pass that computes all requested
  metrics. Only the per-file method tables and the top `--count` entries of each list are
  kept, so memory does not grow with the number of files (apart from the sorted list of
  base file names).
* jitanalyze_report.py: rendering and number formatting, pure functions (§8.4-§8.6).

Extensions beyond jit-analyze (none of them changes the output of a run that does not
use them):
* `--override-total-base-metric CodeSize=123` (per metric, repeatable); a bare number
  still applies to every requested metric.
* `--md-per-metric DIR` writes `DIR/<Metric>.md` for each metric.
* Release-JIT listings (`; Total bytes of code N` without prolog size, §7.5) are not
  turned into 0-byte methods: their methods are left out and every report says
  `No metrics: <n> release JIT listing(s) ...` before the totals.
"""
from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import hashlib
import os
import re
import sys
import tempfile
from typing import IO, Dict, List, Optional, Sequence, Tuple, Union

from jitanalyze_compare import (  # noqa: F401  (re-exported)
    AnalysisResult, AnalyzeInputError, AnalyzeOptions, AnalyzeUsageError, FileEntry, MethodEntry, MethodMismatch,
    MetricSummary, _Analysis, _MetricAccumulator, _ratio, _TopN, collation_key)
from jitanalyze_report import (  # noqa: F401  (re-exported)
    format_fixed2, format_percent_current, format_percent_invariant, format_round_trip, format_value,
    render_console, render_markdown, render_text, render_warnings)
from jitanalyze_scan import (  # noqa: F401  (re-exported)
    METRICS, MethodMetrics, MetricInfo, ParsedListing, _Unit, parse_dasm, parse_dasm_text)

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
    """UTF-8 with LF line ends, written to a temp name in the same folder then renamed."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".~" + os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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


# ------------------------------------------------------------------ command line

_HELP_EPILOG = """\
Output: one report per metric on stdout (as jit-analyze prints it), preceded by
"Found N files with textual diffs." when paired files differ byte-wise.

Exit code (as jit-analyze): the sum over the requested metrics of -1 for each metric
whose total delta is not 0 (0 = no diffs; on Unix -1 is seen as 255, -2 as 254).
Invalid options: "Error: ..." on stderr, exit 1. A missing input path:
"Error: ..." on stdout, exit 0 (as jit-analyze).

Extensions beyond jit-analyze:
  --override-total-base-metric METRIC=VALUE (and the diff form) override one metric's
      printed totals; repeatable. A bare VALUE applies to every requested metric.
  --md-per-metric DIR writes DIR/<Metric>.md (one markdown summary per metric).
  Release-JIT listings (footer "; Total bytes of code N" without prolog size) are not
      counted as 0-byte methods; each report then says
      "No metrics: <n> release JIT listing(s) (...); use a checked JIT."

Differences from jit-analyze: --tsv/--json are not supported; textual diffs are counted
by comparing paired files' bytes (no git); ties in the top lists are broken by name
(an ICU-like culture order) and then file key; repeated -m values are reported once.
"""


class _UsageError(Exception):
    pass


class _ParserExit(Exception):
    def __init__(self, status: int, message: Optional[str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)

    def exit(self, status: int = 0, message: Optional[str] = None) -> None:  # type: ignore[override]
        raise _ParserExit(status, message)

    def print_help(self, file: Optional[IO[str]] = None) -> None:
        raise _ParserExit(0, self.format_help())


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="jitanalyze.py", allow_abbrev=False, epilog=_HELP_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Compare base and diff JIT disassembly (.dasm) listings; "
                            "a built-in equivalent of jit-analyze.")
    p.add_argument("-b", "--base", help="base file or directory (required)")
    p.add_argument("-d", "--diff", help="diff file or directory (required)")
    p.add_argument("-r", "--recursive", action="store_true", help="search directories recursively")
    p.add_argument("--file-extension", "--fileExtension", "--ext", dest="file_extension", default=".dasm",
                   help="files considered are *EXT (default .dasm)")
    p.add_argument("-c", "--count", default="20", help="entries per top list; 0 prints only the totals (default 20)")
    p.add_argument("-w", "--warn", action="store_true", help="list files and methods present on one side only")
    p.add_argument("-m", "--metrics", action="append", default=[], metavar="METRIC",
                   help="repeatable or comma list, exact case: " + ", ".join(METRICS) + " (default CodeSize)")
    p.add_argument("--note", help="extra first line of each report")
    p.add_argument("--no-reconcile", "--noreconcile", dest="no_reconcile", action="store_true",
                   help="do not count methods present on one side only")
    p.add_argument("--md", help="also write the reports as markdown to this file")
    p.add_argument("--md-per-metric", metavar="DIR", help="also write DIR/<Metric>.md per metric (extension)")
    p.add_argument("--filter", help="file-name pattern, joined with the extension")
    p.add_argument("--skip-text-diff", "--skiptextdiff", dest="skip_text_diff", action="store_true",
                   help="do not count files with textual diffs")
    p.add_argument("--retain-only-top-files", "--retainOnlyTopFiles", dest="retain_only_top_files",
                   action="store_true", help="delete every listing not named in a top list")
    p.add_argument("--override-total-base-metric", action="append", default=[], metavar="[METRIC=]VALUE",
                   help="printed base total; both or neither of the two overrides")
    p.add_argument("--override-total-diff-metric", action="append", default=[], metavar="[METRIC=]VALUE",
                   help="printed diff total")
    p.add_argument("--is-diffs-only", action="store_true", help="inputs hold only contexts with diffs")
    p.add_argument("--is-subset-of-diffs", action="store_true", help="inputs are a subset of the diffs")
    p.add_argument("--concat-files", action="store_true",
                   help="treat all base files as one unit and all diff files as another")
    return p


_NUMBER_RE = re.compile(r"^\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")


def _parse_double(text: str, option: str) -> float:
    if not _NUMBER_RE.match(text):
        raise _UsageError(f"Invalid value '{text}' for --{option} (expected a number or <Metric>=<number>)")
    return float(text)


def _parse_overrides(values: List[str], option: str, messages: List[str]) -> Tuple[Optional[float], Dict[str, float]]:
    bare: Optional[float] = None
    per_metric: Dict[str, float] = {}
    for value in values:
        metric, sep, number = value.partition("=")
        if not sep:
            bare = _parse_double(value, option)
        elif metric.strip() not in METRICS:
            messages.append(f"Unknown metric '{metric.strip()}'. Available metrics: {', '.join(METRICS)}")
        else:
            per_metric[metric.strip()] = _parse_double(number, option)
    return bare, per_metric


def options_from_args(args: argparse.Namespace) -> Tuple[AnalyzeOptions, List[str]]:
    """Options plus the list of validation messages (empty when valid)."""
    messages: List[str] = []
    if not args.base:
        messages.append("Base path (--base) is required")
    if not args.diff:
        messages.append("Diff path (--diff) is required")
    metrics = [m.strip() for value in args.metrics for m in value.split(",") if m.strip()] or ["CodeSize"]
    metrics = list(dict.fromkeys(metrics))
    messages += [f"Unknown metric '{m}'. Available metrics: {', '.join(METRICS)}" for m in metrics if m not in METRICS]
    try:
        count = int(args.count)
    except ValueError:
        count = -1
    if count < 0:
        messages.append(f"Count (--count) must be a non-negative integer, not '{args.count}'")
    base_bare, base_each = _parse_overrides(args.override_total_base_metric, "override-total-base-metric", messages)
    diff_bare, diff_each = _parse_overrides(args.override_total_diff_metric, "override-total-diff-metric", messages)
    override_base: Dict[str, float] = {}
    override_diff: Dict[str, float] = {}
    for m in metrics:
        b, d = base_each.get(m, base_bare), diff_each.get(m, diff_bare)
        if b is not None and d is not None:
            override_base[m], override_diff[m] = b, d
        elif (b is None) != (d is None):
            messages.append("override-total-base-metric and override-total-diff-metric must either both be "
                            "specified or both not be specified")
            break
    options = AnalyzeOptions(
        metrics=metrics, recursive=args.recursive, file_extension=args.file_extension,
        file_filter=args.filter, count=max(count, 0), reconcile=not args.no_reconcile,
        concat_files=args.concat_files, skip_text_diff=args.skip_text_diff, note=args.note,
        override_base=override_base, override_diff=override_diff, is_diffs_only=args.is_diffs_only,
        is_subset_of_diffs=args.is_subset_of_diffs, warn=args.warn)
    return options, messages


def _write(stream: IO[str], text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def run_cli(argv: Optional[Sequence[str]] = None, stdout: Optional[IO[str]] = None,
            stderr: Optional[IO[str]] = None) -> int:
    """Run like the jit-analyze command line; returns its exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        options, messages = options_from_args(args)
    except _ParserExit as e:
        if e.message:
            _write(out if e.status == 0 else err, e.message)
        return e.status
    except _UsageError as e:
        _write(err, f"Error: {e}\n")
        return 1
    if messages:
        _write(err, "Error: " + "\n".join(messages) + "\n")
        return 1
    try:
        result = analyze(args.base, args.diff, options)
    except AnalyzeUsageError as e:
        _write(err, f"Error: {e}\n")
        return 1
    except AnalyzeInputError as e:
        _write(out, f"Error: {e}\n")
        return 0
    if options.warn:
        _write(out, render_warnings(result))
    _write(out, render_console(result))
    try:
        if args.md:
            write_text_atomically(args.md, render_markdown(result))
        if args.md_per_metric:
            write_markdown_per_metric(result, args.md_per_metric)
    except OSError as e:
        _write(err, f"Error: cannot write markdown: {e}\n")
        return 1
    if args.retain_only_top_files:
        try:
            deleted = retain_only_top_files(result, args.base, args.diff)
        except OSError as e:
            _write(err, f"Error: cannot delete listings: {e}\n")
            return 1
        _write(out, f"Deleted {deleted} .dasm files.\n")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(run_cli())
