"""The built-in analyzer's command line: jit-analyze's options, forms, messages, output order and exit
codes (docs/contracts.md §8.1), shared by `jitanalyze.py` and asmdiffs (which runs it in-process)."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import IO, Dict, List, Optional, Sequence, Set, Tuple

from spmi.analyzer import cmdline
from spmi.analyzer.cmdline import OptionSpec, ValueKind
from spmi.analyzer.compare import AnalysisResult, AnalyzeInputError, AnalyzeOptions, AnalyzeUsageError
from spmi.analyzer.core import (
    PARALLELISM_MESSAGE,
    analyze,
    retain_top_files,
    write_markdown_per_metric,
    write_text_atomically,
)
from spmi.analyzer.export import render_json, render_tsv
from spmi.analyzer.render import render_markdown, render_text, render_warnings
from spmi.analyzer.scan import METRICS
from spmi.base import invocation, platforms, runner
from spmi.base.errors import SuiteError, Terminated

PROGRAM = invocation.program_name("jitanalyze.py")
VERSION = "1.0.0"
DESCRIPTION = "Compare and analyze `*.dasm` files from baseline/diff (the suite's built-in jit-analyze)"

SPECS: Tuple[OptionSpec, ...] = (
    OptionSpec("--base", ("-b",), help="Base file or directory"),
    OptionSpec("--diff", ("-d",), help="Diff file or directory"),
    OptionSpec("--recursive", ("-r",), ValueKind.FLAG, "Search directories recursively"),
    OptionSpec("--file-extension", ("--fileExtension", "--ext"), help="File extension to look for "
               "(--fileExtension/--ext: the pre-2023 spellings, suite extension)", default=".dasm"),
    OptionSpec("--count", ("-c",), ValueKind.INT, "Count of files and methods (at most) to output in the summary; "
               "0 prints only the totals", default="20"),
    OptionSpec("--warn", ("-w",), ValueKind.FLAG, "List the files and methods found on one side only"),
    OptionSpec("--metrics", ("-m",), ValueKind.LIST, "Metric to report, repeatable (one value per -m; a comma list "
               "is a suite extension). Available metrics: " + ", ".join(METRICS), default="CodeSize"),
    OptionSpec("--note", help="Descriptive note to add to summary output"),
    OptionSpec("--no-reconcile", ("--noreconcile",), ValueKind.FLAG, "Do not reconcile unique methods in base/diff"),
    OptionSpec("--json", help="Dump analysis data to specified file in JSON format"),
    OptionSpec("--tsv", help="Dump analysis data to specified file in tab-separated format"),
    OptionSpec("--md", help="Dump analysis data to specified file in markdown format"),
    OptionSpec("--md-per-metric", value_name="dir", extension=True,
               help="Also write <dir>/<Metric>.md, one markdown summary per metric"),
    OptionSpec("--filter", help="Only consider assembly files whose names match the filter"),
    OptionSpec("--skip-text-diff", ("--skiptextdiff",), ValueKind.FLAG,
               "Do not count the files with textual diffs"),
    OptionSpec("--retain-only-top-files", ("--retainOnlyTopFiles",), ValueKind.FLAG,
               "Per metric, delete the paired .dasm files not in its top file lists"),
    OptionSpec("--override-total-base-metric", (), ValueKind.DOUBLE, value_name="[<metric>,]<value>", repeatable=True,
               help="Override the total base metric shown (a bare <value> applies to every metric; <metric>,<value> "
                    "or <metric>=<value>, repeatable, is a suite extension)"),
    OptionSpec("--override-total-diff-metric", (), ValueKind.DOUBLE, value_name="[<metric>,]<value>", repeatable=True,
               help="Override the total diff metric shown (same forms)"),
    OptionSpec("--is-diffs-only", (), ValueKind.FLAG, "The inputs hold only contexts with diffs"),
    OptionSpec("--is-subset-of-diffs", (), ValueKind.FLAG, "The inputs are a subset of the contexts with diffs"),
    OptionSpec("--concat-files", (), ValueKind.FLAG, "Treat all base files as one unit and all diff files as another"),
    OptionSpec("--report-release-listings", (), ValueKind.FLAG, extension=True,
               help="Say which listings come from a release JIT and leave them out where their footer has no value "
                    "(without it they count as jit-analyze counts them: zeros)"),
    OptionSpec("--parallelism", ("-parallelism",), value_name="N", extension=True, default="the number of CPUs",
               help="Processes that read, scan and compare the file pairs (1: this process only); the output is the same "
                    "for every N"),
)

HELP_EPILOG = """\
Output: per metric, "Found N files with textual diffs." (unless --skip-text-diff or --count 0),
then the report and a line of 80 '-'; the --warn lists come after all reports.

Exit code (as jit-analyze): the sum over the requested metrics of -1 for each metric whose total
delta is not 0 (0 = no diffs; on Unix -1 is seen as 255, -2 as 254). A parse error: the message on
stderr, this help on stdout, exit 1. Invalid values: "Error: ..." on stderr, exit 1. A missing input
path: "Error: ..." on stdout, exit 0.

Suite extensions (marked above; none changes a run that does not use them):
  comma lists in --metrics; per-metric --override-total-*-metric <metric>,<value>; --md-per-metric;
  the pre-2023 option spellings; --report-release-listings: the bare release footer
  "; Total bytes of code N" counts for nothing and says "No metrics: ...", the 2026 footer
  "; Total bytes of code N for method M (Tier)" counts for Code Size only, and other metrics
  say "No <metric> ..." instead of counting 0; --json elements carry their fields.
"""

_METRIC_NAME_RE = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*$")
_DOUBLE_RE = re.compile(r"^(?P<open>\()?(?P<sign>[+-])?\u00a4?(?P<int>[0-9,]*)(?:\.(?P<frac>[0-9]*))?"
                        r"(?:[eE](?P<exp>[+-]?[0-9]+))?(?P<tsign>[+-])?(?P<close>\))?$")
_SPECIAL_DOUBLES = {"infinity": float("inf"), "+infinity": float("inf"), "-infinity": float("-inf"),
                    "\u221e": float("inf"), "-\u221e": float("-inf"), "nan": float("nan")}


def help_text() -> str:
    return cmdline.format_help(PROGRAM, DESCRIPTION, SPECS, HELP_EPILOG)


def parse_double_any(text: str) -> Optional[float]:
    """.NET `double.TryParse(text, NumberStyles.Any, invariant culture)` (None when it would fail)."""
    t = text.strip()
    if t.lower() in _SPECIAL_DOUBLES:
        return _SPECIAL_DOUBLES[t.lower()]
    m = _DOUBLE_RE.match(t)
    if not m or bool(m.group("open")) != bool(m.group("close")) or (m.group("sign") and m.group("tsign")):
        return None
    digits = (m.group("int") or "").replace(",", "")
    frac = m.group("frac") or ""
    if not digits and not frac:
        return None
    value = float(f"{digits or '0'}.{frac or '0'}e{m.group('exp') or '0'}")
    negative = m.group("open") or "-" in (m.group("sign") or "", m.group("tsign") or "")
    return -value if negative else value


@dataclass
class _Overrides:
    bare: Optional[float]
    per_metric: Dict[str, float]


def _parse_overrides(values: List[str], option: str, parse_errors: List[str], messages: List[str]) -> _Overrides:
    """Each value: `<metric>,<value>` / `<metric>=<value>` (§8.8) or a bare invariant-culture double."""
    found = _Overrides(None, {})
    for value in values:
        at = min([i for i in (value.find(","), value.find("=")) if i >= 0], default=-1)
        name = value[:at] if at >= 0 else ""
        if at >= 0 and _METRIC_NAME_RE.match(name):
            number = parse_double_any(value[at + 1:])
            if name.strip() not in METRICS:
                messages.append(f"Unknown metric '{name.strip()}'. Available metrics: {', '.join(METRICS)}")
            elif number is None:
                parse_errors.append(f"Cannot parse argument '{value}' for option '{option}' as expected type "
                                    "'System.Double'.")
            else:
                found.per_metric[name.strip()] = number
            continue
        number = parse_double_any(value)
        if number is None:
            parse_errors.append(f"Cannot parse argument '{value}' for option '{option}' as expected type "
                                "'System.Double'.")
        else:
            found.bare = number
    return found


@dataclass
class Invocation:
    """A parsed command line: the analysis options and the outputs to write."""

    base: Optional[str]
    diff: Optional[str]
    options: AnalyzeOptions
    md: Optional[str]
    md_per_metric: Optional[str]
    tsv: Optional[str]
    json: Optional[str]
    retain_only_top_files: bool


def options_from_args(args: cmdline.ParsedArgs, parse_errors: List[str]) -> Tuple[Invocation, List[str]]:
    """The invocation plus its validation messages (empty when valid); value errors go to `parse_errors`."""
    messages: List[str] = []
    base, diff = args.last("--base"), args.last("--diff")
    if base is None:
        messages.append("Base path (--base) is required")
    if diff is None:
        messages.append("Diff path (--diff) is required")
    given = args.values.get("--metrics")
    metrics = [m.strip() for value in given for m in value.split(",") if m.strip()] if given else ["CodeSize"]
    metrics = list(dict.fromkeys(metrics))
    messages += [f"Unknown metric '{m}'. Available metrics: {', '.join(METRICS)}" for m in metrics if m not in METRICS]
    count = cmdline.parse_int32(args.last("--count") or "20") or 0
    if count < 0:
        messages.append("Count (--count) must not be negative")
    base_o = _parse_overrides(args.values.get("--override-total-base-metric", []), "--override-total-base-metric",
                              parse_errors, messages)
    diff_o = _parse_overrides(args.values.get("--override-total-diff-metric", []), "--override-total-diff-metric",
                              parse_errors, messages)
    override_base: Dict[str, float] = {}
    override_diff: Dict[str, float] = {}
    for m in metrics:
        b, d = base_o.per_metric.get(m, base_o.bare), diff_o.per_metric.get(m, diff_o.bare)
        if b is not None and d is not None:
            override_base[m], override_diff[m] = b, d
        elif (b is None) != (d is None):
            messages.append("override-total-base-metric and override-total-diff-metric must either both be "
                            "specified or both not be specified")
            break
    parallelism = _parse_parallelism(args.last("--parallelism"), messages)
    tsv, json_path = args.last("--tsv"), args.last("--json")
    options = AnalyzeOptions(
        metrics=metrics, recursive=args.flag("--recursive"), file_extension=args.last("--file-extension") or ".dasm",
        file_filter=args.last("--filter"), count=count, reconcile=not args.flag("--no-reconcile"),
        concat_files=args.flag("--concat-files"), skip_text_diff=args.flag("--skip-text-diff"),
        note=args.last("--note"), override_base=override_base, override_diff=override_diff,
        is_diffs_only=args.flag("--is-diffs-only"), is_subset_of_diffs=args.flag("--is-subset-of-diffs"),
        warn=args.flag("--warn"), export=tsv is not None or json_path is not None,
        keep_file_pairs=args.flag("--retain-only-top-files"), parallelism=parallelism,
        report_release=args.flag("--report-release-listings"))
    invocation = Invocation(base, diff, options, args.last("--md"), args.last("--md-per-metric"), tsv, json_path,
                            args.flag("--retain-only-top-files"))
    return invocation, messages


def _parse_parallelism(value: Optional[str], messages: List[str]) -> int:
    """`--parallelism N` (default: the CPUs this process may use); a bad value adds its message."""
    if value is None:
        return platforms.usable_cpu_count()
    number = cmdline.parse_int32(value)
    if number is None or number < 1:
        messages.append(f"{PARALLELISM_MESSAGE}, not '{value}'")
        return 1
    return number


def _write(stream: IO[str], text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def _read_response_file(path: str) -> str:
    with open(path, encoding="utf-8-sig") as f:
        return f.read()


def run_cli(argv: Optional[Sequence[str]] = None, stdout: Optional[IO[str]] = None,
            stderr: Optional[IO[str]] = None) -> int:
    """Run like the jit-analyze command line; returns its exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = cmdline.parse(list(sys.argv[1:] if argv is None else argv), SPECS, _read_response_file)
    if args.help:
        _write(out, help_text())
        return 0
    parse_errors = list(args.errors)
    invocation, messages = options_from_args(args, parse_errors)
    if parse_errors:  # System.CommandLine: the errors and an empty line on stderr, then the help on stdout
        _write(err, "".join(e + "\n" for e in parse_errors) + "\n")
        _write(out, help_text())
        return 1
    if args.version:
        _write(out, VERSION + "\n")
        return 0
    if messages:
        _write(err, "Error: " + "\n".join(messages) + "\n")
        return 1
    assert invocation.base is not None and invocation.diff is not None
    try:
        result = analyze(invocation.base, invocation.diff, invocation.options)
    except AnalyzeUsageError as e:
        _write(err, f"Error: {e}\n")
        return 1
    except AnalyzeInputError as e:
        _write(out, f"Error: {e}\n")
        return 0
    except SuiteError as e:  # a worker process ended unexpectedly
        _write(err, f"Error: {e}\n")
        return 1
    code = _print_reports(invocation, result, out, err)
    return code if code is not None else _write_outputs(invocation, result, err)


def _print_reports(invocation: Invocation, result: AnalysisResult, out: IO[str], err: IO[str]) -> Optional[int]:
    """Per metric: the textual-diff count, the deletions of --retain-only-top-files, the report; then the
    --warn lists. Returns an exit code only when deleting failed."""
    options = result.options
    text_diffs: Set[str] = set(result.text_diff_keys)
    for metric in options.metrics:
        if not options.skip_text_diff and options.count != 0 and text_diffs:
            _write(out, f"Found {len(text_diffs)} files with textual diffs.\n")
        if invocation.retain_only_top_files and options.count != 0 and result.file_pairs:
            try:
                deleted, gone = retain_top_files(result, metric, invocation.base or "", invocation.diff or "")
            except OSError as e:
                _write(err, f"Error: cannot delete listings: {e}\n")
                return 1
            text_diffs -= gone
            _write(out, f"Deleted {deleted} .dasm files.\n")
        _write(out, render_text(result, metric))
    if options.warn:
        _write(out, render_warnings(result))
    return None


def _write_outputs(invocation: Invocation, result: AnalysisResult, err: IO[str]) -> int:
    try:
        if invocation.tsv is not None:
            write_text_atomically(invocation.tsv, render_tsv(result))
        if invocation.json is not None:
            write_text_atomically(invocation.json, render_json(result))
        if invocation.md is not None:
            write_text_atomically(invocation.md, render_markdown(result))
        if invocation.md_per_metric:
            write_markdown_per_metric(result, invocation.md_per_metric)
    except OSError as e:
        _write(err, f"Error: cannot write {getattr(e, 'filename', None) or 'an output file'}: "
                    f"{e.strerror or e}\n")
        return 1
    return result.exit_code


def main() -> int:
    """`jitanalyze.py`: `run_cli`, with SIGTERM stopping it the way Ctrl-C does (worker processes
    are stopped before it exits; one line on stderr, exit 130 or 128 + the signal)."""
    try:
        with runner.stop_on_termination():
            return run_cli()
    except KeyboardInterrupt as e:
        _write(sys.stderr, f"{PROGRAM}: interrupted\n")
        return e.exit_code if isinstance(e, Terminated) else 130
