"""The text and markdown reports of jitanalyze.py (docs/contracts.md §8.4-§8.6).

Pure functions of an `AnalysisResult`: each metric's report as jit-analyze prints it on
the console (`render_text`), the `--md` markdown form
(`render_markdown`), the `--warn` lists (`render_warnings`), and the number formatting
.NET produces for values and percentages.
"""
from __future__ import annotations

import decimal
import math
from typing import List, Optional, Sequence

from spmi.analyzer.compare import AnalysisResult, FileEntry, MethodEntry, MetricSummary, _ratio
from spmi.analyzer.scan import METRICS

# -------------------------------------------------------------- number formatting
# The texts .NET produces (§8.6): invariant culture for the total percentage, en-US for
# the per-file/per-method percentages; non-finite values print as `Infinity`/`NaN` (§8.1).

_DEC_CONTEXT = decimal.Context(prec=1200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_TWO_PLACES = decimal.Decimal("0.01")


def _round2(x: float, scale_by_100: bool = False) -> decimal.Decimal:
    """x (×100) rounded to 2 decimals, half away from zero, on the exact double value."""
    d = decimal.Decimal(x)
    if scale_by_100:
        d = _DEC_CONTEXT.multiply(d, 100)
    return d.quantize(_TWO_PLACES, rounding=decimal.ROUND_HALF_UP, context=_DEC_CONTEXT)


def _non_finite(x: float) -> Optional[str]:
    """`Infinity`, `-Infinity`, `NaN` (invariant culture, §8.1), never the en-US `∞`."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return None


def format_round_trip(x: float) -> str:
    """Shortest round-trip text of a double, as .NET prints it (`86033549`, `1E+15`)."""
    x = float(x)
    special = _non_finite(x)
    if special is not None:
        return special
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    digits = all_digits.lstrip("0")
    point = len(int_part) + (int(exp_text) if exp_text else 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0")
    if not digits:
        return sign + "0"
    if point > max(len(digits), 15) or point < -3:
        exponent = point - 1
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return "%s%sE%s%02d" % (sign, body, "+" if exponent >= 0 else "-", abs(exponent))
    if point <= 0:
        return sign + "0." + "0" * (-point) + digits
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return sign + digits[:point] + "." + digits[point:]


def format_fixed2(x: float) -> str:
    """Two decimals, no grouping (`F2` / `0.00`): `-364.58`, `-0.00`."""
    special = _non_finite(float(x))
    return special if special is not None else "{:.2f}".format(_round2(float(x)))


def format_percent_invariant(f: float) -> str:
    """`P_inv`: `-0.39 %` (space before %, grouping from 1,000)."""
    special = _non_finite(float(f))
    return special if special is not None else "{:,.2f} %".format(_round2(float(f), True))


def format_percent_current(f: float) -> str:
    """`P_cur` (en-US): `-26.13%`, `1,900.00%`."""
    special = _non_finite(float(f))
    return special if special is not None else "{:,.2f}%".format(_round2(float(f), True))


def format_value(metric: str, x: float) -> str:
    """`V`: a metric value as jit-analyze prints it."""
    if METRICS[metric].value_format == "f2":
        return format_fixed2(x)
    return format_round_trip(float(x))


# ------------------------------------------------------------------ rendering

_MARKER = object()  # where console output has an empty line and markdown the <details> fence
_DETAILS_OPEN = "```\n<details>\n\n<summary>Detail diffs</summary>\n\n```\n"
_SEPARATOR = "-" * 80


def _release_line(count: int) -> str:
    return (f"No metrics: {count} release JIT listing(s) (footer has no prolog size/PerfScore); "
            "use a checked JIT.")


def _unavailable_line(count: int, display_name: str) -> str:
    return (f"No {display_name}: {count} method(s) from release JIT listings (their footer gives only the code "
            "size); use a checked JIT.")


def _totals_lines(result: AnalysisResult, s: MetricSummary, units: str) -> List[str]:
    metric, options = s.metric, result.options
    if metric in options.override_base:
        ob, od = float(options.override_base[metric]), float(options.override_diff[metric])
        return [f"Total {units} of base: {format_round_trip(ob)} (overridden on cmd)",
                f"Total {units} of diff: {format_round_trip(od)} (overridden on cmd)",
                f"Total {units} of delta: {format_round_trip(od - ob)} "
                f"({format_percent_invariant(_ratio(od - ob, ob))} of base)"]
    if s.base_total != 0:
        delta = s.diff_total - s.base_total
        lines = [f"Total {units} of base: {format_round_trip(s.base_total)}",
                 f"Total {units} of diff: {format_round_trip(s.diff_total)}",
                 f"Total {units} of delta: {format_value(metric, delta)} "
                 f"({format_percent_invariant(_ratio(delta, s.base_total))} of base)"]
        if s.relative_total != 0:
            lines.append(f"Total relative delta: {format_fixed2(s.relative_total)}")
        return lines
    return [f"Warning: the base metric is 0, the diff metric is {format_value(metric, s.diff_total)}, "
            "have you used a release version?"]


def _verdict_lines(s: MetricSummary) -> List[str]:
    lines = []
    if s.delta_total != 0:
        lines.append("    diff is an improvement." if s.delta_total < 0 else "    diff is a regression.")
    if s.relative_total != 0:  # NaN counts as non-zero and, not being < 0, as a regression
        lines.append("    relative diff is an improvement." if s.relative_total < 0
                     else "    relative diff is a regression.")
    return lines


def _reconciliation_lines(s: MetricSummary, unit: str) -> List[str]:
    """The first line has the net value as a plain double (`190.5`), the others the metric's format (§8.1)."""
    if s.base_unique_methods + s.diff_unique_methods == 0:
        return []
    net = s.diff_unique_value - s.base_unique_value
    return ["",
            f"Total {unit} diff includes {format_round_trip(net)} {unit}s from reconciling methods",
            f"\tBase had {s.base_unique_methods:>4} unique methods, "
            f"{format_value(s.metric, s.base_unique_value):>8} unique {unit}s",
            f"\tDiff had {s.diff_unique_methods:>4} unique methods, "
            f"{format_value(s.metric, s.diff_unique_value):>8} unique {unit}s"]


def _file_lines(title: str, metric: str, entries: List[FileEntry]) -> List[str]:
    if not entries:
        return []
    return ["", title] + [
        f"    {format_value(metric, f.delta):>8} : {f.diff_key} "
        f"({format_percent_current(_ratio(f.delta, f.base))} of base)" for f in entries]


def _instances_suffix(m: MethodEntry) -> str:
    if m.base_instances == m.diff_instances:
        return f" ({m.base_instances} methods)" if m.base_instances > 1 else ""
    return f" ({m.base_instances} base, {m.diff_instances} diff methods)"


def _method_lines(title: str, metric: str, entries: List[MethodEntry]) -> List[str]:
    if not entries:
        return []
    return ["", title] + [
        f"    {format_value(metric, m.delta):>8} ({format_percent_current(_ratio(m.delta, m.base)):>6} of base)"
        f" : {m.file_key} - {m.name}{_instances_suffix(m)}" for m in entries]


def _report_lines(result: AnalysisResult, metric: str) -> list:
    """The report of one metric as lines; `_MARKER` stands for the marker line (§8.4)."""
    options, s, info = result.options, result.summaries[metric], METRICS[metric]
    unit, units = info.unit, info.unit + "s"
    lines: list = []
    if options.note is not None:
        lines += ["", options.note]
    heading = f"Summary of {info.display_name} diffs:"
    if options.file_filter:
        heading += f" (using filter '{options.file_filter}')"
    lines += ["", heading, "(Lower is better)", ""]
    if result.release_listings:
        lines.append(_release_line(result.release_listings))
    if s.unavailable_methods:
        lines.append(_unavailable_line(s.unavailable_methods, info.display_name))
    lines += _totals_lines(result, s, units)
    lines += _verdict_lines(s)
    lines.append(_MARKER)
    if options.reconcile:
        lines += _reconciliation_lines(s, unit)
    if options.count == 0:
        return lines
    lines += _file_lines(f"Top file regressions ({units}):", metric, s.top_file_regressions)
    lines += _file_lines(f"Top file improvements ({units}):", metric, s.top_file_improvements)
    lines += ["", f"{s.changed_files} total files with {info.display_name} differences "
                  f"({s.files_improved} improved, {s.files_regressed} regressed), {s.files_unchanged} unchanged."]
    lines += _method_lines(f"Top method regressions ({units}):", metric, s.top_method_regressions)
    lines += _method_lines(f"Top method improvements ({units}):", metric, s.top_method_improvements)
    lines += _method_lines("Top method regressions (percentages):", metric, s.top_method_regressions_by_percentage)
    lines += _method_lines("Top method improvements (percentages):", metric,
                           s.top_method_improvements_by_percentage)
    if not options.is_subset_of_diffs:
        counts = (f"{s.changed_methods} total methods with {info.display_name} differences "
                  f"({s.methods_improved} improved, {s.methods_regressed} regressed)")
        lines += ["", counts + "." if options.is_diffs_only else f"{counts}, {s.unchanged_methods} unchanged."]
    return lines


def render_text(result: AnalysisResult, metric: str) -> str:
    """Console form of one metric's report: the marker line empty, the report, an empty line (the
    report's own line end and the console's), then 80 `-` (§8.4)."""
    text = "".join(("" if line is _MARKER else line) + "\n" for line in _report_lines(result, metric))
    return text + "\n" + _SEPARATOR + "\n"


def render_markdown(result: AnalysisResult, metrics: Optional[Sequence[str]] = None) -> str:
    """The `--md` file (§8.5) for the given metrics (default: all, in order)."""
    parts = []
    for metric in (metrics if metrics is not None else list(result.summaries)):
        body = "".join((_DETAILS_OPEN if line is _MARKER else line) + "\n"
                       for line in _report_lines(result, metric))
        parts.append("```\n" + body + "\n```\n\n</details>\n\n" + _SEPARATOR + "\n\n")
    return "".join(parts)


def render_warnings(result: AnalysisResult) -> str:
    """`--warn`, printed after all reports: files on one side only (not for a single pair of files or
    --concat-files), then per file pair the methods on one side only (§8.4)."""
    lines: List[str] = []
    for side, other, keys in (("base", "diff", result.base_only_files), ("diff", "base", result.diff_only_files)):
        if keys:
            lines += [f"Warning: {len(keys)} files in {side} but not in {other}.", "", f"Only in {side} files:"] + keys
    for mm in result.method_mismatches:
        lines.append(f"Mismatched methods in {mm.base_key}")
        if mm.only_in_base:
            lines += ["Base:"] + [f"    {n}" for n in mm.only_in_base]
        if mm.only_in_diff:
            lines += ["Diff:"] + [f"    {n}" for n in mm.only_in_diff]
    return "".join(line + "\n" for line in lines)
