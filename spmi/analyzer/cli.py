"""The built-in analyzer's command line: the jit-analyze flags, messages and exit codes
(docs/contracts.md §8.1), shared by `jitanalyze.py` and asmdiffs (which runs it in-process)."""
from __future__ import annotations

import argparse
import re
import sys
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple

from spmi.analyzer.compare import AnalyzeInputError, AnalyzeOptions, AnalyzeUsageError
from spmi.analyzer.core import analyze, retain_only_top_files, write_markdown_per_metric, write_text_atomically
from spmi.analyzer.render import render_console, render_markdown, render_warnings
from spmi.analyzer.scan import METRICS
from spmi.base import config

# ------------------------------------------------------------------ command line

_HELP_EPILOG = """\
Output: one report per metric on stdout (as jit-analyze prints it), preceded by
"Found N files with textual diffs." when paired files differ byte-wise.

Exit code (as jit-analyze): the sum over the requested metrics of -1 for each metric
whose total delta is not 0 (0 = no diffs; on Unix -1 is seen as 255, -2 as 254).
Invalid options: "Error: ..." on stderr, exit 1. A missing input path:
"Error: ..." on stdout, exit 0 (as jit-analyze).

Extensions beyond jit-analyze:
  --override-total-base-metric METRIC,VALUE (also METRIC=VALUE; and the diff form)
      override one metric's printed totals; repeatable, one pair per metric. A bare
      VALUE applies to every requested metric (as jit-analyze).
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

    def print_help(self, file: Any = None) -> None:
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
    p.add_argument("-c", "--count", type=config.non_negative_int, default=20, help="entries per top list; 0 prints only the totals (default 20)")
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
    p.add_argument("--override-total-base-metric", action="append", default=[], metavar="[METRIC,]VALUE",
                   help="printed base total (METRIC,VALUE or METRIC=VALUE per metric, or a bare VALUE for "
                        "every metric); both or neither of the two overrides")
    p.add_argument("--override-total-diff-metric", action="append", default=[], metavar="[METRIC,]VALUE",
                   help="printed diff total (same forms)")
    p.add_argument("--is-diffs-only", action="store_true", help="inputs hold only contexts with diffs")
    p.add_argument("--is-subset-of-diffs", action="store_true", help="inputs are a subset of the diffs")
    p.add_argument("--concat-files", action="store_true",
                   help="treat all base files as one unit and all diff files as another")
    return p


_NUMBER_RE = re.compile(r"^\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")


def _parse_double(text: str, option: str) -> float:
    if not _NUMBER_RE.match(text):
        raise _UsageError(f"Invalid value '{text}' for --{option} (expected a number, <Metric>,<number> "
                          "or <Metric>=<number>)")
    return float(text)


def _split_override(value: str) -> Tuple[str, str, str]:
    """`<metric>,<value>` or `<metric>=<value>` (§8.8): split at the first `,` or `=`."""
    positions = [i for i in (value.find(","), value.find("=")) if i >= 0]
    if not positions:
        return value, "", ""
    at = min(positions)
    return value[:at], value[at], value[at + 1:]


def _parse_overrides(values: List[str], option: str, messages: List[str]) -> Tuple[Optional[float], Dict[str, float]]:
    bare: Optional[float] = None
    per_metric: Dict[str, float] = {}
    for value in values:
        metric, sep, number = _split_override(value)
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
    count = int(args.count)
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
        file_filter=args.filter, count=count, reconcile=not args.no_reconcile,
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
