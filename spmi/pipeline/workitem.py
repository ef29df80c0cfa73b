"""The Helix work item (`superpmi_asmdiffs.py`, docs/contracts.md §12.15): download the
collections (the first diff type replaying each one as soon as it is ready), run each diff
type through `superpmi.py`, render its markdown from its JSON summary here (`steps/summary_render`,
as `superpmi.py summarize` would), and leave summaries, logs, `.dasm` zips, the asmdiffs HTML
diff explorer and a status document in the upload folder. Argument vectors are pure; steps do the I/O.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from spmi.base import cioutput, fsutil, platforms, runner
from spmi.base.errors import SuiteError, Terminated
from spmi.base.untrusted import neutralize_commands
from spmi.pipeline import common as pipeline
from spmi.pipeline.common import DiffType, Part, Partition
from spmi.reports import asm_model
from spmi.steps import summary_render

log = logging.getLogger("superpmi")
STATUS_VERSION = 1
ERROR_LIMIT = "100"
MAX_PROBLEMS = 20


@dataclass
class DriverConfig:
    payload: Path
    base_jit_directory: Path
    diff_jit_directory: Path
    upload: Path
    target_os: str
    target_arch: str
    host_os: str
    types: List[DiffType]
    base_jit_options: List[str] = field(default_factory=list)
    diff_jit_options: List[str] = field(default_factory=list)
    mch_files: List[str] = field(default_factory=list)
    private_stores: List[str] = field(default_factory=list)
    python: str = sys.executable
    part: Part = Part()
    replay_deadline: Optional[float] = None   # time.monotonic() by which replays must have stopped
    noise_check: bool = False                 # tpdiff/memdiff/metricdiff run the A/A calibration
    significance: List[Tuple[str, float]] = field(default_factory=list)  # -significance overrides
    include_noise: bool = False               # asmdiffs examples keep known-noise diffs
    overlap: bool = True                      # the first type replays while the collections download

    @property
    def host_arch(self) -> str:
        return pipeline.work_item_host_arch(self.target_arch)

    @property
    def jit_name(self) -> str:
        return platforms.jit_file_name(self.host_os, self.host_arch, self.target_os, self.target_arch,
                                       force_cross=True)

    @property
    def spmi_location(self) -> Path:
        return self.payload / pipeline.SPMI_LOCATION

    @property
    def partition(self) -> Partition:
        known = pipeline.partition_for_target(self.target_os, self.target_arch)
        return known or Partition(f"{self.target_os}-{self.target_arch}", self.target_os, self.target_arch)

    @property
    def name(self) -> str:
        """The work item: the partition, and which part of it when the target is split."""
        return self.partition.name + (f" ({self.part.label})" if self.part.split else "")

    def base_jit(self, diff_type: DiffType) -> Path:
        return self.base_jit_directory / diff_type.flavour / self.jit_name

    def diff_jit(self, diff_type: DiffType) -> Path:
        return self.diff_jit_directory / diff_type.flavour / self.jit_name

    @property
    def pin_directory(self) -> Path:
        return self.payload / pipeline.PIN_DIR

    def pin_files(self) -> List[Path]:
        return [self.payload / name for name in pipeline.pin_files(self.host_os, self.host_arch)]


def superpmi_script(cfg: DriverConfig) -> str:
    return str(cfg.payload / pipeline.SUPERPMI_SCRIPT)


def collection_args(cfg: DriverConfig) -> List[str]:
    argv: List[str] = []
    if cfg.mch_files:
        argv += ["-mch_files", *cfg.mch_files]
    for store in cfg.private_stores:
        argv += ["-private_store", store]
    return argv


def download_argv(cfg: DriverConfig) -> List[str]:
    log_file = cfg.upload / pipeline.download_log_name(cfg.target_os, cfg.target_arch, cfg.part)
    return [cfg.python, superpmi_script(cfg), "download", "--no_progress",
            "-core_root", str(cfg.payload), "-arch", cfg.host_arch,
            "-target_os", cfg.target_os, "-target_arch", cfg.target_arch,
            "-spmi_location", str(cfg.spmi_location), "-log_level", "debug", "-log_file", str(log_file),
            *collection_args(cfg)]


def diff_argv(cfg: DriverConfig, diff_type: DiffType) -> List[str]:
    log_file = cfg.upload / pipeline.type_log_name(diff_type.name, cfg.target_os, cfg.target_arch, cfg.part)
    argv = [cfg.python, superpmi_script(cfg), diff_type.name, "--no_progress",
            "-core_root", str(cfg.payload), "-arch", cfg.host_arch,
            "-target_os", cfg.target_os, "-target_arch", cfg.target_arch,
            "-spmi_location", str(cfg.spmi_location),
            "-base_jit_path", str(cfg.base_jit(diff_type)), "-diff_jit_path", str(cfg.diff_jit(diff_type)),
            "-error_limit", ERROR_LIMIT, "-log_level", "debug", "-log_file", str(log_file),
            "--summary_as_json"]
    budget = remaining_budget(cfg)
    if budget is not None:
        argv += ["--time_budget", f"{budget:.0f}"]
    if diff_type.uses_pin:
        argv += ["-pin_path", str(cfg.pin_directory)]
    argv += pipeline.signal_args(cfg.noise_check and diff_type.name != "asmdiffs", cfg.significance,
                                 cfg.include_noise and diff_type.name == "asmdiffs")
    for option in cfg.base_jit_options:
        argv += ["-base_jit_option", option]
    for option in cfg.diff_jit_options:
        argv += ["-diff_jit_option", option]
    return argv + collection_args(cfg)


def remaining_budget(cfg: DriverConfig, now: Optional[float] = None) -> Optional[float]:
    """Seconds the next diff step may replay for (at least 1: it then reports what it skipped)."""
    if cfg.replay_deadline is None:
        return None
    return max(1.0, cfg.replay_deadline - (time.monotonic() if now is None else now))


def replay_deadline(timeout_text: Optional[str], started: float) -> Optional[float]:
    """From `-work_item_timeout`: when replays must stop to leave the margin (§12.15)."""
    if not timeout_text:
        return None
    try:
        seconds = pipeline.parse_duration(timeout_text)
    except ValueError as exc:
        raise SuiteError(f"-work_item_timeout '{timeout_text}' {exc}") from None
    return started + pipeline.work_item_budget(seconds)


def _baseline_and_jit_options(baseline_hash: Optional[str], base_jit_options: Sequence[str],
                              diff_jit_options: Sequence[str]) -> List[str]:
    argv = ["-base_git_hash", baseline_hash] if baseline_hash else []
    for option in base_jit_options:
        argv += ["-base_jit_option", option]
    for option in diff_jit_options:
        argv += ["-diff_jit_option", option]
    return argv


def repro_command(target_os: str, target_arch: str, diff_type: DiffType, baseline_hash: Optional[str],
                  base_jit_options: Sequence[str], diff_jit_options: Sequence[str]) -> str:
    """What a developer runs in their enlistment to see the same diffs."""
    argv = ["python", "src/coreclr/scripts/superpmi.py", diff_type.name,
            "-target_os", target_os, "-target_arch", target_arch,
            "-arch", pipeline.work_item_host_arch(target_arch)]
    return " ".join(argv + _baseline_and_jit_options(baseline_hash, base_jit_options, diff_jit_options))


def context_repro_command(target_os: str, target_arch: str, diff_type: DiffType, baseline_hash: Optional[str],
                          base_jit_options: Sequence[str], diff_jit_options: Sequence[str], collection: str,
                          context: int) -> str:
    """One context of one collection, run in an enlistment: `-filter <collection> -c <N>` added."""
    name = collection[:-len(".mch")] if collection.lower().endswith(".mch") else collection
    head = repro_command(target_os, target_arch, diff_type, None, (), ())
    argv = [head, "-filter", name, "-c", str(context)]
    return " ".join(argv + _baseline_and_jit_options(baseline_hash, base_jit_options, diff_jit_options))


def tool_environment(payload: Path, environ: Mapping[str, str]) -> Dict[str, str]:
    """`<payload>/jit-analyze` and `<payload>/git/cmd` go first on PATH when present."""
    env = dict(environ)
    extra = [str(payload / d) for d in (pipeline.JIT_ANALYZE_DIR, pipeline.GIT_CMD_DIR) if (payload / d).is_dir()]
    if extra:
        separator = os.pathsep
        env["PATH"] = separator.join(extra + ([env["PATH"]] if env.get("PATH") else []))
    return env


_ASSERT_KEY_RE = re.compile(r"^=== Assertion #\d+/\d+ \(count: (\d+)\): (.*)$")
_ASSERT_LINE_RE = re.compile(r"ISSUE: <ASSERT> #([0-9]+) (.*) \(([0-9]*)\) - Assertion failed '(.*)' in '.*' "
                             r"during '.*' \(IL size ([0-9]*); hash .*\)")
_ERROR_RE = re.compile(r"^(?:\[\d\d:\d\d:\d\d\] )?((?:Error|ERROR|error)\b.*|.*: error: .*)$")
_FAILURE_FILES_RE = re.compile(r"^(?:\[\d\d:\d\d:\d\d\] )?\s*(Replay failures in \d+ MCH files?:?)\s*$")


def problems_in_output(text: str, limit: int = MAX_PROBLEMS) -> List[str]:
    """Assertion keys, replay-failure totals and error lines, each once, in order."""
    found: List[str] = []
    asserts: Dict[str, int] = {}
    for raw in text.splitlines():
        line = raw.strip()
        match = _ASSERT_KEY_RE.match(_strip_time(line))
        if match:
            key = match.group(2).strip()
            asserts[key] = max(asserts.get(key, 0), int(match.group(1)))
            continue
        match = _ASSERT_LINE_RE.search(line)
        if match:
            key = f"{match.group(4)} ({match.group(2)}:{match.group(3)})"
            asserts.setdefault(key, 1)
            continue
        for regex in (_FAILURE_FILES_RE, _ERROR_RE):
            match = regex.match(line)
            if match and match.group(1) not in found:
                found.append(match.group(1))
                break
    problems = [f"Assertion failed: {key} (count: {count})" for key, count in asserts.items()] + found
    if len(problems) > limit:
        problems = problems[:limit] + [f"... {len(problems) - limit} more in the log"]
    return problems


def _strip_time(line: str) -> str:
    return re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line)


@dataclass
class StepResult:
    name: str
    exit_code: int
    ok: bool
    log: str = ""
    problems: List[str] = field(default_factory=list)
    gate: bool = False   # failed because a gate was crossed (memdiff exit code 2), not a replay failure


def run_step(name: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log_name: str = "") -> StepResult:
    print(cioutput.azdo_group(f"{name}: {runner.format_command(argv)}"), flush=True)
    try:
        result = runner.run(argv, cwd=cwd, env=env, log_output=False)
    except SuiteError as exc:
        print(cioutput.AZDO_END_GROUP, flush=True)
        log.error("Error: step %s could not run: %s", name, exc)
        return StepResult(name, 1, False, log_name, [str(exc)])
    for stream in (result.stdout, result.stderr):
        if stream:
            relayed = neutralize_commands(stream)  # §12.20: relayed child output carries no command
            sys.stdout.write(relayed if relayed.endswith("\n") else relayed + "\n")
    print(cioutput.AZDO_END_GROUP, flush=True)
    ok = result.code == 0
    problems = problems_in_output(result.stdout + "\n" + result.stderr)
    if not ok:
        if result.outcome.crashed:
            problems.insert(0, f"{name} {result.outcome.describe()}")
        elif not problems:
            problems.append(f"{name} exited with {result.code}")
        log.error("Error: step %s failed (%s)", name, result.outcome.describe())
    return StepResult(name, result.code, ok, log_name, problems)


def remove_stale_summaries(spmi_location: Path, diff_type: DiffType) -> None:
    for pattern in (f"{diff_type.spmi_prefix}_summary*.json", f"{diff_type.spmi_prefix}_summary*.md",
                    f"{diff_type.spmi_prefix}_short_summary*.md", f"{diff_type.spmi_prefix}_report*.html"):
        for stale in spmi_location.glob(pattern):
            log.debug("Removing stale %s", stale)
            stale.unlink()


def newest_summary(spmi_location: Path, diff_type: DiffType, extension: str, kind: str = "summary") -> Optional[Path]:
    candidates = [p for p in spmi_location.glob(f"{diff_type.spmi_prefix}_{kind}*{extension}") if p.is_file()]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None


def upload_html_report(cfg: DriverConfig, diff_type: DiffType) -> Optional[Path]:
    """Copy the HTML diff explorer the diff step wrote into the upload folder (None: there is none)."""
    if not diff_type.html_report:
        return None
    report = newest_summary(cfg.spmi_location, diff_type, ".html", kind="report")
    if report is None:
        log.warning("Warning: superpmi.py %s wrote no HTML report", diff_type.name)
        return None
    target = cfg.upload / pipeline.html_report_name(diff_type.name, cfg.target_os, cfg.target_arch, cfg.part)
    shutil.copyfile(report, target)
    return target


def missing_jit_directories(cfg: DriverConfig) -> List[str]:
    """The JIT folders the command line names and that are not there (checked before any download)."""
    return [f"{flag} '{path}' is not a directory; the payload lacks its JITs"
            for flag, path in (("-base_jit_directory", cfg.base_jit_directory),
                               ("-diff_jit_directory", cfg.diff_jit_directory)) if not path.is_dir()]


def missing_inputs(cfg: DriverConfig, diff_type: DiffType) -> List[str]:
    """What the diff type needs from the payload and does not find there."""
    missing = [f"JIT {jit} is not in the payload" for jit in (cfg.base_jit(diff_type), cfg.diff_jit(diff_type))
               if not jit.is_file()]
    if diff_type.uses_pin:
        missing += [f"PIN package file {path} is not in the payload" for path in cfg.pin_files()
                    if not path.is_file()]
    return missing


def mark_gate(step: StepResult, diff_type: DiffType) -> None:
    """memdiff's exit code 2: the run worked, but a collection crossed the memory gate."""
    if not diff_type.gate_exit or step.exit_code != diff_type.gate_exit:
        return
    step.gate = True
    head = f"memory gate crossed ({diff_type.name} exit code {diff_type.gate_exit})"
    rest = [re.sub(r"^Error: (?=memory gate: )", "", p) for p in step.problems
            if p != f"{diff_type.name} exited with {step.exit_code}"]
    step.problems = [head] + rest


def run_diff_type(cfg: DriverConfig, diff_type: DiffType, env: Mapping[str, str]) -> List[StepResult]:
    """The diff step, then its summaries into the upload root."""
    steps: List[StepResult] = []
    missing = missing_inputs(cfg, diff_type)
    if missing:
        steps.append(StepResult(diff_type.name, 1, False, "", missing))
        return steps
    remove_stale_summaries(cfg.spmi_location, diff_type)
    log_name = pipeline.type_log_name(diff_type.name, cfg.target_os, cfg.target_arch, cfg.part)
    steps.append(run_step(diff_type.name, diff_argv(cfg, diff_type), cfg.payload, env, log_name))
    mark_gate(steps[-1], diff_type)
    summary_json = newest_summary(cfg.spmi_location, diff_type, ".json")
    if summary_json is None:
        steps[-1].problems.append(f"superpmi.py {diff_type.name} wrote no summary")
        steps[-1].ok = False
        return steps
    upload_json = cfg.upload / pipeline.summary_json_name(diff_type.name, cfg.target_os, cfg.target_arch, cfg.part)
    shutil.copyfile(summary_json, upload_json)
    if diff_type.name == "asmdiffs":
        annotate_asmdiffs_summary(upload_json, cfg, read_baseline_hashes(cfg.base_jit_directory).get(diff_type.flavour))
    else:
        annotate_metric_summary(upload_json, cfg)
    upload_html_report(cfg, diff_type)
    upload_md = cfg.upload / pipeline.summary_md_name(diff_type.name, cfg.target_os, cfg.target_arch, cfg.part)
    steps.append(render_markdown(diff_type, upload_json, upload_md))
    return steps


def render_markdown(diff_type: DiffType, summary_json: Path, output_md: Path) -> StepResult:
    """The `<type> markdown` step: the long markdown of the (annotated) JSON summary, and the short one
    beside it, rendered here exactly as `superpmi.py summarize` renders one summary."""
    name = f"{diff_type.name} markdown"
    print(cioutput.azdo_group(f"{name}: {output_md.name} from {summary_json.name}"), flush=True)
    try:
        document = summary_render.load_json(summary_json)
        rendered = summary_render.render_documents(diff_type.name, [(summary_json, document)])
        fsutil.atomic_write_text(output_md, rendered.long_text)
        fsutil.atomic_write_text(summary_render.short_path_for(output_md), rendered.short_text)
    except Exception as exc:  # noqa: BLE001 - whatever goes wrong, the status document and other results stay
        problem = render_problem(exc, summary_json, output_md)
        log.error("Error: step %s failed: %s", name, problem)
        return StepResult(name, 1, False, "", [problem])
    finally:
        print(cioutput.AZDO_END_GROUP, flush=True)
    log.info("Wrote %s", output_md)
    for line in rendered.verdicts:
        log.info("%s", line)
    return StepResult(name, 0, True)


def render_problem(exc: Exception, summary_json: Path, output_md: Path) -> str:
    """One line for a markdown step that failed: a bad summary names itself (SuiteError), a file that
    cannot be written names the file, and anything else (a fault of the renderer) is named as such,
    since it runs in the driver and must not cost the work item its other results."""
    if isinstance(exc, SuiteError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"cannot write {output_md.name}: {exc.strerror or exc}"
    return f"rendering {summary_json.name} failed: {type(exc).__name__}: {exc}"


def annotate_asmdiffs_summary(path: Path, cfg: DriverConfig, baseline_hash: Optional[str]) -> None:
    """Replace the payload-specific repro lines (the run's, the failures', the examples') by ones a
    developer runs in an enlistment, and record the baseline hash (asmdiffs only saw `-base_jit_path`)."""
    try:
        summary = asm_model.AsmDiffsSummary.from_json(path.read_text(encoding="utf-8"), str(path))
    except (SuiteError, OSError) as exc:
        log.warning("Warning: cannot annotate %s: %s", path.name, exc)
        return
    asmdiffs = pipeline.DIFF_TYPES["asmdiffs"]
    summary.repro_command = repro_command(cfg.target_os, cfg.target_arch, asmdiffs,
                                          baseline_hash, cfg.base_jit_options, cfg.diff_jit_options)

    def for_context(collection: str, context: int) -> str:
        return context_repro_command(cfg.target_os, cfg.target_arch, asmdiffs, baseline_hash,
                                     cfg.base_jit_options, cfg.diff_jit_options, collection, context)

    for collection in summary.collections:  # the work item's paths mean nothing on a developer's machine
        collection.repro_commands = [for_context(collection.name, c) for c in collection.failing_contexts]
        for example in collection.examples:
            example.repro_command = for_context(collection.name, example.context)
    if baseline_hash:
        summary.baseline = f"{baseline_hash} (rolling build used by the pipeline)"
    payload_relative = PayloadPaths(cfg.payload, cfg.host_os)
    summary.base_jit_path = payload_relative(summary.base_jit_path)
    summary.diff_jit_path = payload_relative(summary.diff_jit_path)
    fsutil.atomic_write_text(path, summary.to_json())


def annotate_metric_summary(path: Path, cfg: DriverConfig) -> None:
    """The repro line of a tpdiff/memdiff summary, with the payload's paths as the payload variable."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("Warning: cannot annotate %s: %s", path.name, exc)
        return
    if isinstance(document, dict) and isinstance(document.get("repro"), str):
        repro = PayloadPaths(cfg.payload, cfg.host_os)(document["repro"])
        if repro != document["repro"]:
            document["repro"] = repro
            fsutil.atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False) + "\n")


class PayloadPaths:
    """Text with this machine's correlation payload folder written as the Helix variable that
    names it (`$HELIX_CORRELATION_PAYLOAD`, `%HELIX_CORRELATION_PAYLOAD%` on Windows): the
    same on every work item, and what one types on a Helix machine."""

    def __init__(self, payload: Path, host_os: str) -> None:
        self.prefix = str(payload)
        self.variable = ("%HELIX_CORRELATION_PAYLOAD%" if host_os == platforms.WINDOWS
                         else "$HELIX_CORRELATION_PAYLOAD")

    def __call__(self, text: str) -> str:
        return text.replace(self.prefix, self.variable) if self.prefix else text


def zip_dasm_files(spmi_location: Path, target: Path) -> int:
    """Every `.dasm` under spmi_location; a `nodiff.txt` when there is none."""
    files = sorted(p for p in spmi_location.rglob("*.dasm") if p.is_file()) if spmi_location.is_dir() else []
    temp = target.with_name(target.name + ".tmp")
    with zipfile.ZipFile(temp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(spmi_location).as_posix())
        if not files:
            archive.writestr(pipeline.NODIFF_FILE, pipeline.NODIFF_TEXT)
    os.replace(temp, target)
    return len(files)


def write_placeholders(upload: Path, names: Sequence[str]) -> List[str]:
    """Helix fails on a declared result that is missing; write `<empty>` instead."""
    written = []
    for name in names:
        path = upload / name
        if not path.is_file():
            fsutil.atomic_write_text(path, pipeline.EMPTY_PLACEHOLDER)
            written.append(name)
    return written


def read_baseline_hashes(base_jit_directory: Path) -> Dict[str, Optional[str]]:
    info = base_jit_directory / Path(pipeline.BASELINE_INFO_FILE).name
    try:
        data = json.loads(info.read_text(encoding="utf-8"))
        return {str(k): (str(v) if v else None) for k, v in data.get("hashes", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def status_document(cfg: DriverConfig, steps: Sequence[StepResult], hashes: Mapping[str, Optional[str]],
                    placeholders: Sequence[str]) -> Dict[str, object]:
    return {
        "version": STATUS_VERSION,
        "partition": cfg.partition.name,
        "part": cfg.part.index,
        "parts": cfg.part.count,
        "target_os": cfg.target_os,
        "target_arch": cfg.target_arch,
        "host_arch": cfg.host_arch,
        "jit_name": cfg.jit_name,
        "types": [t.name for t in cfg.types],
        "ok": all(s.ok for s in steps),
        "steps": [asdict(s) for s in steps],
        "baseline_hashes": {t.name: hashes.get(t.flavour) for t in cfg.types},
        "repro": {t.name: repro_command(cfg.target_os, cfg.target_arch, t, hashes.get(t.flavour),
                                        cfg.base_jit_options, cfg.diff_jit_options) for t in cfg.types},
        "base_jit_options": cfg.base_jit_options,
        "diff_jit_options": cfg.diff_jit_options,
        "placeholders": list(placeholders),
    }


def overlaps_download(cfg: DriverConfig) -> bool:
    """Whether the first diff type downloads the collections itself, replaying each one as soon
    as it is ready, before the download step (which then finds them cached and only checks
    them: docs/contracts.md §12.15). Collections named by `-mch_files` need no download."""
    return cfg.overlap and not cfg.mch_files and bool(cfg.types)


def run_work_item(cfg: DriverConfig, environ: Mapping[str, str]) -> int:
    cfg.upload.mkdir(parents=True, exist_ok=True)
    cfg.spmi_location.mkdir(parents=True, exist_ok=True)
    env = tool_environment(cfg.payload, environ)
    steps: List[StepResult] = []
    interrupted: Optional[KeyboardInterrupt] = None
    log.info("Work item %s: %s with %s (host arch %s)", cfg.name, "/".join(t.name for t in cfg.types),
             cfg.jit_name, cfg.host_arch)
    missing = missing_jit_directories(cfg)
    if missing:  # nothing can be compared: not worth downloading the collections
        for problem in missing:
            log.error("Error: %s", problem)
        finish_work_item(cfg, [StepResult("driver", 1, False, "", missing)])
        return 1
    try:
        remaining = list(cfg.types)
        if overlaps_download(cfg):
            log.info("%s replays each collection as soon as it is downloaded", remaining[0].name)
            steps.extend(run_diff_type(cfg, remaining.pop(0), env))
        download = run_step("download", download_argv(cfg), cfg.payload, env,
                            pipeline.download_log_name(cfg.target_os, cfg.target_arch, cfg.part))
        steps.insert(0, download)  # the shared step every type depends on is listed first (the likely cause)
        if download.ok:
            for diff_type in remaining:
                steps.extend(run_diff_type(cfg, diff_type, env))
        if any(t.wants_dasm_zip for t in cfg.types):
            zip_path = cfg.upload / pipeline.dasm_zip_name(cfg.target_os, cfg.target_arch, cfg.part)
            count = zip_dasm_files(cfg.spmi_location, zip_path)
            log.info("%s: %d .dasm file(s)", zip_path.name, count)
    except (SuiteError, OSError) as exc:
        log.error("Error: %s", exc)
        steps.append(StepResult("driver", 1, False, "", [str(exc)]))
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (Helix ending the work item)
        interrupted = exc
        what = f"terminated by {exc.signal_name}" if isinstance(exc, Terminated) else "interrupted (Ctrl-C)"
        steps.append(StepResult("driver", getattr(exc, "exit_code", 130), False, "",
                                [f"work item {what}; results so far were kept"]))
    finish_work_item(cfg, steps)
    if interrupted is not None:
        raise interrupted
    failed = [s.name + (" (memory gate)" if s.gate else "") for s in steps if not s.ok]
    if failed:
        log.error("Error: work item %s failed in: %s", cfg.name, ", ".join(failed))
        return 1
    log.info("Work item %s done", cfg.name)
    return 0


def finish_work_item(cfg: DriverConfig, steps: Sequence[StepResult]) -> None:
    """Placeholders for what was not produced, then the status document (written last)."""
    declared = pipeline.declared_results(cfg.partition, cfg.types, cfg.part)
    status_file = pipeline.status_name(cfg.target_os, cfg.target_arch, cfg.part)
    placeholders = write_placeholders(cfg.upload, [n for n in declared if n != status_file])
    if placeholders:
        log.warning("Warning: not produced, written as %s: %s", pipeline.EMPTY_PLACEHOLDER, ", ".join(placeholders))
    hashes = read_baseline_hashes(cfg.base_jit_directory)
    document = status_document(cfg, steps, hashes, placeholders)
    fsutil.atomic_write_text(cfg.upload / status_file, json.dumps(document, indent=2) + "\n")


def split_options(text: Optional[str]) -> List[str]:
    return [part.strip() for part in (text or "").split(";") if part.strip()]


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> DriverConfig:
    target_os = platforms.normalize_os(args.platform)
    if target_os is None:
        raise SuiteError(f"-platform '{args.platform}' is not an OS; use windows, linux or osx")
    target_arch = args.arch.strip().lower()
    if target_arch not in platforms.ARCHES:
        raise SuiteError(f"-arch '{args.arch}' is not an architecture; use one of {', '.join(platforms.ARCHES)}")
    host_os = platforms.normalize_os(args.host_os) if args.host_os else platforms.detect_host_os()
    if host_os is None:
        raise SuiteError(f"-host_os '{args.host_os}' is not an OS; use windows, linux or osx")
    payload_text = args.payload_directory or environ.get("HELIX_CORRELATION_PAYLOAD")
    payload = Path(payload_text).resolve() if payload_text else Path(__file__).resolve().parents[2]  # the folder holding the scripts and spmi/
    if not payload.is_dir():
        raise SuiteError(f"correlation payload '{payload}' is not a directory")
    return DriverConfig(
        payload=payload,
        base_jit_directory=Path(args.base_jit_directory).resolve(),
        diff_jit_directory=Path(args.diff_jit_directory).resolve(),
        upload=Path(args.log_directory).resolve(),
        target_os=target_os, target_arch=target_arch, host_os=host_os,
        types=pipeline.expand_types(args.type),
        base_jit_options=split_options(args.base_jit_options),
        diff_jit_options=split_options(args.diff_jit_options),
        mch_files=list(args.mch_files or []),
        private_stores=list(args.private_store or []),
        python=environ.get("HELIX_PYTHONPATH") or sys.executable,
        part=part_from_args(args.part),
        replay_deadline=replay_deadline(args.work_item_timeout, time.monotonic()),
        noise_check=bool(args.noise_check), significance=list(args.significance),
        include_noise=bool(args.include_noise),
        overlap=not args.no_overlap)


def part_from_args(text: Optional[str]) -> Part:
    if not text:
        return Part()
    try:
        return Part.parse(text)
    except ValueError as exc:
        raise SuiteError(f"-part {exc}") from None
