"""Pure building blocks of `superpmi.py asmdiffs` (docs/contracts.md §12.6, §12.9, §12.10).

Argument vectors for jit-analyze and git, the console lines asmdiffs prints, the
"to reproduce" command lines, option parsing for `-metrics`. No I/O here; the
command flow lives in `asmdiffs.py`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple

from spmi.base import platforms, runner
from spmi.base.errors import SuiteError
from spmi.tools import superpmi_tool

#: jit-analyze metric names (§8.1), exact case.
ANALYZE_METRICS = ("CodeSize", "PrologSize", "PerfScore", "InstrCount", "AllocSize", "ExtraAllocBytes",
                   "DebugClauseCount", "DebugVarCount", "SpillCount", "SpillWeight", "ResolutionCount",
                   "ResolutionWeight")
NO_TEXTUAL_DIFFS = "No textual differences. Is this an issue with coredistools?"
GIT_NOT_FOUND = "Could not find a git executable in PATH"


def parse_metrics(values: Optional[Sequence[str]]) -> List[str]:
    """`-metrics` values (repeatable, comma-separated allowed), validated, order kept, no duplicates."""
    metrics: List[str] = []
    for value in values or []:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            match = next((m for m in ANALYZE_METRICS if m.lower() == name.lower()), None)
            if match is None:
                raise SuiteError(f"-metrics '{name}' is not a jit-analyze metric; "
                                 f"use one of {', '.join(ANALYZE_METRICS)}")
            if match not in metrics:
                metrics.append(match)
    return metrics


def picking_metric(metrics: Sequence[str]) -> Optional[str]:
    """CSV metric that drives context picking (§12.9): None means "every diff-list row"."""
    if not metrics:
        return "ActualCodeBytes"
    if list(metrics) == ["PerfScore"]:
        return "PerfScore"
    return None


def format_override(value: float) -> str:
    """A total for `--override-total-*-metric`: shortest round-trip text, integers without `.0`."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return repr(float(value))


class OverrideForm(Enum):
    """How an analyzer takes `--override-total-*-metric` (docs/contracts.md §8.1, §8.8)."""

    PER_METRIC = "per-metric"   # `<metric>,<value>`, one pair per metric (built-in analyzer)
    BARE = "bare"               # one bare number per option, applied to every requested metric
    NONE = "none"               # the option is not known


_PER_METRIC_HELP_RE = re.compile(r"override-total-base-metric\S*\s+\S*(?:metric|METRIC)>?\]?\s*,")


def override_form_from_help(help_text: str) -> OverrideForm:
    """What an external jit-analyze's `--help` documents: a per-metric `<metric>,<value>` form,
    only the bare number, or no override option at all."""
    if "--override-total-base-metric" not in help_text:
        return OverrideForm.NONE
    if _PER_METRIC_HELP_RE.search(help_text):
        return OverrideForm.PER_METRIC
    return OverrideForm.BARE


def analyzed_metrics(metrics: Sequence[str]) -> List[str]:
    """The metrics the analyzer reports: the `-metrics` values, else its default `CodeSize`."""
    return list(metrics) or ["CodeSize"]


@dataclass(frozen=True)
class OverridePlan:
    """The override arguments for one analyzer run and a sentence for the log."""

    argv: Tuple[str, ...]
    description: str


def plan_overrides(metrics: Sequence[str], totals: Mapping[str, Tuple[float, float]],
                   form: OverrideForm) -> OverridePlan:
    """`--override-total-base-metric` / `--override-total-diff-metric` arguments.

    Per-metric form: one `<metric>,<value>` pair per requested metric whose totals are known.
    Bare form: a bare pair replaces the totals of every requested metric, so it is passed only
    when exactly one metric is requested and its totals are known (§8.8, §12.9).
    """
    requested = analyzed_metrics(metrics)
    known = [m for m in requested if m in totals]
    if form is OverrideForm.NONE:
        return OverridePlan((), "no total overrides: the analyzer documents no override option")
    if not known:
        return OverridePlan((), "no total overrides: the details CSV has no totals for " + ", ".join(requested))
    if form is OverrideForm.PER_METRIC:
        argv: List[str] = []
        for metric in known:
            base, diff = totals[metric]
            argv += ["--override-total-base-metric", f"{metric},{format_override(base)}",
                     "--override-total-diff-metric", f"{metric},{format_override(diff)}"]
        return OverridePlan(tuple(argv), "per-metric total overrides (<metric>,<value>) for " + ", ".join(known))
    if len(requested) == 1:
        base, diff = totals[requested[0]]
        return OverridePlan(("--override-total-base-metric", format_override(base),
                             "--override-total-diff-metric", format_override(diff)),
                            f"one bare total override pair ({requested[0]}); the analyzer documents no "
                            "per-metric form")
    return OverridePlan((), "no total overrides: the analyzer takes only one bare pair, which would replace the "
                            "totals of every one of " + ", ".join(requested))


def jit_analyze_argv(tool: str, asm_dir: Path, metrics: Sequence[str], overrides: Sequence[str],
                     subset_of_diffs: bool) -> List[str]:
    """`jit-analyze --md <asm>/summary.md -r --base <asm>/base --diff <asm>/diff [--metrics m]… [overrides] [--is-…]`."""
    argv = [tool, "--md", str(asm_dir / "summary.md"), "-r", "--base", str(asm_dir / "base"),
            "--diff", str(asm_dir / "diff")]
    for metric in metrics:
        argv += ["--metrics", metric]
    argv += list(overrides)
    argv.append("--is-subset-of-diffs" if subset_of_diffs else "--is-diffs-only")
    return argv


def git_diff_argv(git: str, asm_dir: Path) -> List[str]:
    return [git, "diff", f"--output={asm_dir / 'asm_diffs.diff'}", "--no-index", "--",
            str(asm_dir / "base"), str(asm_dir / "diff")]


def example_diff_argv(git: str, base_file: Path, diff_file: Path) -> List[str]:
    return [git, "diff", "--diff-algorithm=histogram", "--no-index", "--", str(base_file), str(diff_file)]


# ---------------------------------------------------------------- console lines

def percent(value: float, digits: int = 2) -> str:
    """Python's `{:.N%}`."""
    return f"{value:.{digits}%}"


@dataclass(frozen=True)
class ConsoleTotals:
    base_bytes: int
    diff_bytes: int
    base_perfscore: float
    diff_perfscore: float
    geomean: float
    geomean_diffs: float
    contexts_with_diffs: int
    size_improvements: int
    size_regressions: int
    same_size: int


def totals_lines(t: ConsoleTotals) -> List[str]:
    """§12.9 console totals."""
    def ratio(delta: float, base: float) -> str:
        return percent(delta / base) if base else "n/a"

    byte_delta = t.diff_bytes - t.base_bytes
    perf_delta = t.diff_perfscore - t.base_perfscore
    return [f"Total bytes of base: {t.base_bytes}",
            f"Total bytes of diff: {t.diff_bytes}",
            f"Total bytes of delta: {byte_delta} ({ratio(byte_delta, t.base_bytes)} of base)",
            f"Total PerfScore of base: {t.base_perfscore:.2f}",
            f"Total PerfScore of diff: {t.diff_perfscore:.2f}",
            f"Total PerfScore of delta: {perf_delta:.2f} ({ratio(perf_delta, t.base_perfscore)} of base)",
            f"Relative PerfScore Geomean: {percent(t.geomean - 1, 4)}",
            f"Relative PerfScore Geomean (Diffs): {percent(t.geomean_diffs - 1, 4)}",
            f"{t.contexts_with_diffs} contexts with diffs ({t.size_improvements} size improvements, "
            f"{t.size_regressions} size regressions, {t.same_size} same size)"]


def geomean(log_sum: float, count: int) -> float:
    return math.exp(log_sum / count) if count else 1.0


def replay_instruction_lines(env: Mapping[str, str], superpmi: Path, flags: Sequence[str], diff_jit: Path,
                             mch: Path, host_os: str) -> List[str]:
    """`Differences found. To replay SuperPMI use:`, the variables, and the superpmi command."""
    lines = ["Differences found. To replay SuperPMI use:", ""]
    lines += [platforms.env_var_assignment(name, value, host_os) for name, value in env.items()]
    head = runner.format_command([str(superpmi), *flags], host_os)
    tail = runner.format_command([str(diff_jit), str(mch)], host_os)
    return lines + [f"{head} -c ### {tail}", ""]


def example_superpmi_command(call: superpmi_tool.SuperpmiInvocation, jit: Path, mch: Path, context: int,
                             forced: Sequence[str], jit_options: Sequence[str], env: Mapping[str, str],
                             host_os: str) -> str:
    """Paste-ready `superpmi -c N …` printing one context's listing (listing settings as JIT options)."""
    listing_options = [f"{name[len('DOTNET_'):]}={value}" for name, value in env.items() if name.startswith("DOTNET_")]
    argv = superpmi_tool.build_listing_argv(call, jit, mch, [context], forced, list(jit_options) + listing_options,
                                            None)
    return runner.format_command(argv, host_os)


@dataclass(frozen=True)
class ReproInputs:
    """What the `python superpmi.py asmdiffs …` line must reconstruct."""

    arch: str
    target_os: str
    target_arch: str
    diff_jit: Path
    base_jit: Optional[Path]
    base_git_hash: Optional[str]
    collections: Sequence[Path]
    jit_options: Sequence[str] = ()
    base_jit_options: Sequence[str] = ()
    diff_jit_options: Sequence[str] = ()
    metrics: Sequence[str] = ()
    align_loops: bool = False
    altjit: bool = False
    jit_name: Optional[str] = None
    gcinfo: bool = False
    debuginfo: bool = False
    core_root: Optional[Path] = None


def asmdiffs_command_line(inputs: ReproInputs, host_os: str) -> str:
    """`python superpmi.py asmdiffs …` reproducing this run (target, JITs or baseline hash, collections, options)."""
    argv: List[str] = ["python", "superpmi.py", "asmdiffs", "-arch", inputs.arch, "-target_os", inputs.target_os,
                       "-target_arch", inputs.target_arch]
    if inputs.core_root is not None:
        argv += ["-core_root", str(inputs.core_root)]
    if inputs.base_git_hash:
        argv += ["-base_git_hash", inputs.base_git_hash]
    elif inputs.base_jit is not None:
        argv += ["-base_jit_path", str(inputs.base_jit)]
    argv += ["-diff_jit_path", str(inputs.diff_jit)]
    argv += ["-mch_files", *[str(p) for p in inputs.collections]]
    argv += _repeat("-jitoption", inputs.jit_options)
    argv += _repeat("-base_jit_option", inputs.base_jit_options)
    argv += _repeat("-diff_jit_option", inputs.diff_jit_options)
    argv += _repeat("-metrics", inputs.metrics)
    for flag, on in (("--alignloops", inputs.align_loops), ("--altjit", inputs.altjit),
                     ("--gcinfo", inputs.gcinfo), ("--debuginfo", inputs.debuginfo)):
        if on:
            argv.append(flag)
    if inputs.jit_name:
        argv += ["-jit_name", inputs.jit_name]
    return runner.format_command(argv, host_os)


def _repeat(flag: str, values: Iterable[str]) -> List[str]:
    out: List[str] = []
    for value in values:
        out += [flag, value]
    return out


def context_repro_argv(call: superpmi_tool.SuperpmiInvocation, base_jit: Path, diff_jit: Path, mch: Path,
                       context: int, jit_options: "superpmi_tool.JitPairOptions") -> List[str]:
    """`superpmi -a -c N [-target] [altjit] -jitoption … -jit2option … <base> <diff> <mch>`: one failing context."""
    argv = [str(call.superpmi), "-a", "-c", str(context)]
    argv += call.target_flags()
    if call.altjit:
        argv += superpmi_tool.altjit_flags(two_jits=True)
    argv += superpmi_tool.option_flags("-jitoption", jit_options.forced, force=True)
    argv += superpmi_tool.option_flags("-jitoption", jit_options.side("base"))
    argv += superpmi_tool.option_flags("-jit2option", jit_options.forced, force=True)
    argv += superpmi_tool.option_flags("-jit2option", jit_options.side("diff"))
    return argv + [str(base_jit), str(diff_jit), str(mch)]
