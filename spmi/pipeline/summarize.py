"""`superpmi_asmdiffs_summarize.py`'s body (docs/contracts.md §12.16): gather each platform's
results, render one overall summary per diff type within the size budgets, and publish it
(AzDO upload summary, GitHub step summary).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote

from spmi.base import cioutput, fsutil, platforms, schema
from spmi.base.errors import SuiteError
from spmi.base.untrusted import code_block, console_line, escape_html_inline, escape_md_inline, sanitize_markdown
from spmi.commands import parsing
from spmi.formats import details
from spmi.history import judge, store
from spmi.pipeline import common as pipeline
from spmi.pipeline import history_step
from spmi.pipeline.common import DiffType, Part
from spmi.reports import asm_overall, metric_model, summaries
from spmi.reports import metric_markdown as metric_report
from spmi.reports import pipeline_markdown as md
from spmi.storage import uploads

log = logging.getLogger("superpmi")
FILE_LIMIT_BYTES = cioutput.GITHUB_STEP_SUMMARY_LIMIT
SHORT_LIMIT_CHARS = cioutput.GITHUB_COMMENT_LIMIT
MAX_PROBLEMS_PER_PLATFORM = 5
MAX_ISSUE_CHARS = 400
DEFAULT_ARTIFACT = "SuperPMI_Asmdiffs_<os>_<arch>"


@dataclass
class PlatformFiles:
    target_os: str
    target_arch: str
    markdown: Optional[Path] = None
    summary_json: Optional[Path] = None
    status: Optional[Path] = None
    html: Optional[Path] = None
    #: a target spread over several work items: each work item's files
    parts: Dict[Part, "PlatformFiles"] = field(default_factory=dict)
    #: result files found but not read (a symbolic link, not a regular file, ...): one line each
    refused: List[str] = field(default_factory=list)

    @property
    def whole(self) -> bool:
        """Files of one work item for the whole target."""
        return bool(self.markdown or self.summary_json or self.status or self.html)

    @property
    def found(self) -> bool:
        """Anything of this platform was found, usable or not."""
        return self.whole or bool(self.refused) or any(p.whole or p.refused for p in self.parts.values())

    def for_part(self, part: Part) -> "PlatformFiles":
        if not part.split:
            return self
        return self.parts.setdefault(part, PlatformFiles(self.target_os, self.target_arch))


def candidate_files(directory: Path) -> List[Path]:
    """Every entry under `directory` that may be a result file, sorted; a linked folder is not
    entered (its own entry is listed, so a result name on it is refused like a linked file)."""
    found: List[Path] = []
    for folder, folders, files in os.walk(directory):  # followlinks=False
        base = Path(folder)
        linked = [name for name in folders if (base / name).is_symlink()]
        for name in linked:
            log.warning("Warning: not looking in %s: a symbolic link", base / name)
        found.extend(base / name for name in files + linked)
    return sorted(found)


def result_name_of(file_name: str, type_name: str) -> Optional[Tuple[str, str, Part, str]]:
    """(os, arch, part, which file) of a result file of `type_name` or of a status file; None
    for anything else. Which file: `markdown`, `summary_json`, `html` or `status`."""
    result = pipeline.parse_result_name(file_name)
    if result is not None and result.type_name == type_name:
        which = "markdown" if result.extension == "md" else "summary_json"
        return result.target_os, result.target_arch, result.part, which
    report = pipeline.parse_report_name(file_name)
    if report is not None and report.type_name == type_name:
        return report.target_os, report.target_arch, report.part, "html"
    status = pipeline.parse_status_name_part(file_name)
    if status is not None:
        return status[0], status[1], status[2], "status"
    return None


def refusal(directory: Path, path: Path, part: Part) -> str:
    """Why a result file is not read ('' when it may be): §12.16, a result file is a regular
    file inside the results folder, of a work item a target may have."""
    reason = fsutil.not_a_regular_file_inside(directory, path)
    if reason is not None:
        return f"{path.name}: {reason}; not read (a result file must be a regular file inside {directory})"
    if part.count > pipeline.MAX_WORK_ITEMS_PER_TARGET:
        return (f"{path.name}: names {part.count:,} work items, more than the "
                f"{pipeline.MAX_WORK_ITEMS_PER_TARGET} a target may have; not read")
    return ""


def gather_files(directory: Path, type_name: str) -> Dict[Tuple[str, str], PlatformFiles]:
    """Result files of `type_name` anywhere under `directory`, per (os, arch) (and per
    work item of a target spread over several); a file that may not be read is its
    platform's `refused` line."""
    found: Dict[Tuple[str, str], PlatformFiles] = {}
    for path in candidate_files(directory):
        named = result_name_of(path.name, type_name)
        if named is None:
            continue
        target_os, target_arch, part, which = named
        platform = found.setdefault((target_os, target_arch), PlatformFiles(target_os, target_arch))
        problem = refusal(directory, path, part)
        if problem:
            (platform if part.count > pipeline.MAX_WORK_ITEMS_PER_TARGET else platform.for_part(part)
             ).refused.append(problem)
            continue
        entry = platform.for_part(part)
        if getattr(entry, which) is None:
            setattr(entry, which, path)
        elif which in ("markdown", "summary_json"):
            log.warning("Warning: ignoring %s; already have %s", path, getattr(entry, which))
    return {k: v for k, v in found.items() if v.found}


@dataclass
class FileRead:
    """A result file's bytes (None when absent or the `<empty>` placeholder), or why it is unusable."""

    data: Optional[bytes] = None
    problem: str = ""


def read_result_file(path: Optional[Path], limit: int = pipeline.MAX_RESULT_FILE_BYTES) -> FileRead:
    """Read one result file, refusing what is too big to be one."""
    if path is None:
        return FileRead()
    try:
        size = path.stat().st_size
        if size > limit:
            return FileRead(problem=f"{path.name}: {size:,} bytes, more than the {limit:,} a result file may have; "
                                    "not read")
        data = path.read_bytes()
    except OSError as exc:
        return FileRead(problem=f"{path.name}: cannot be read ({exc.strerror or exc})")
    if data.startswith(pipeline.EMPTY_PLACEHOLDER.encode("ascii")):
        return FileRead()
    return FileRead(data)


def decode_markdown(path: Optional[Path]) -> Tuple[Optional[str], str]:
    """A platform's markdown (sanitized) and the problem with it ('' when none)."""
    read = read_result_file(path)
    if read.data is None:
        return None, read.problem
    try:
        return sanitize_markdown(read.data.decode("utf-8-sig")), ""  # untrusted: only the suite's tags stay (§12.20)
    except UnicodeDecodeError as exc:
        return None, f"{path.name}: not UTF-8 text (byte {exc.start}); not shown"  # type: ignore[union-attr]


def load_status(path: Optional[Path]) -> Tuple[Optional[pipeline.WorkItemStatus], str]:
    """The work item's status document and the problem with it ('' when none)."""
    read = read_result_file(path)
    if read.data is None:
        return None, read.problem
    try:
        return pipeline.WorkItemStatus.from_bytes(read.data), ""
    except SuiteError as exc:
        return None, f"{path.name}: not a status document: {exc}"  # type: ignore[union-attr]


def load_json_summary(path: Optional[Path], load_summary: Callable[[object, str], object]) -> Tuple[Optional[object], str]:
    """The platform's JSON summary (through `load_summary(document, source)`) and the problem with it."""
    read = read_result_file(path)
    if read.data is None:
        return None, read.problem
    try:
        document = schema.parse_json(read.data, pipeline.MAX_RESULT_FILE_BYTES)
        return load_summary(document, path.name), ""  # type: ignore[union-attr]
    except schema.SchemaError as exc:
        return None, f"{path.name}: not a JSON summary: {exc}"  # type: ignore[union-attr]
    except SuiteError as exc:
        return None, str(exc)


def is_report(path: Path) -> bool:
    """A real HTML report, not the `<empty>` placeholder."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        log.warning("Warning: cannot read %s: %s", path, exc.strerror)
        return False
    return bool(head) and not pipeline.is_placeholder(head.decode("utf-8", errors="replace"))


def report_links(states: Sequence["PlatformState"], host_arch: str, github: bool) -> List[md.ReportLink]:
    """The HTML reports of the known partitions, named by the artifact that carries them."""
    links = []
    for state in states:
        partition = pipeline.partition_for_target(state.target_os, state.target_arch)
        if partition is None:
            continue
        artifact = (pipeline.github_results_artifact(host_arch, partition) if github
                    else pipeline.azdo_results_artifact(partition))
        if state.html_report:
            links.append(md.ReportLink(state.label, state.html_report, artifact))
        for part, report in state.part_reports:  # a target over several work items: one report each
            links.append(md.ReportLink(f"{state.label} ({part.label})", report, artifact))
    return links


def artifacts_url(environ: Mapping[str, str], github: bool) -> str:
    """The run page listing the artifacts ('' when the CI variables are not there)."""
    if github:
        parts = [environ.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
        if not all(parts):
            return ""
        return f"{quote(parts[0].rstrip('/'), safe=':/')}/{quote(parts[1])}/actions/runs/{quote(parts[2])}#artifacts"
    parts = [environ.get(name, "") for name in ("SYSTEM_COLLECTIONURI", "SYSTEM_TEAMPROJECT", "BUILD_BUILDID")]
    if not all(parts):
        return ""
    return (f"{quote(parts[0].rstrip('/'), safe=':/')}/{quote(parts[1])}/_build/results?buildId={quote(parts[2])}"
            "&view=artifacts")


@dataclass
class PlatformState:
    """What one work item left, and what went wrong in the pipeline (not the replay)."""

    target_os: str
    target_arch: str
    markdown: Optional[str] = None
    summary: Optional[object] = None          # asm_model.AsmDiffsSummary for asmdiffs
    status: Optional[pipeline.WorkItemStatus] = None
    problems: List[str] = field(default_factory=list)
    unreadable: List[str] = field(default_factory=list)  # summary files present but unusable (why, which)
    expected: bool = True
    type_name: str = ""      # the diff type summarized; '' = every step of the work item counts
    html_report: str = ""    # file name of the HTML diff explorer the work item left ('' for none)
    part_statuses: List[pipeline.WorkItemStatus] = field(default_factory=list)  # a target over several work items
    part_reports: List[Tuple[Part, str]] = field(default_factory=list)    # their HTML reports

    @property
    def statuses(self) -> List[pipeline.WorkItemStatus]:
        if self.part_statuses:
            return list(self.part_statuses)
        return [self.status] if self.status is not None else []

    @property
    def label(self) -> str:
        return f"{self.target_os} {self.target_arch}"

    @property
    def missing(self) -> bool:
        """Nothing came back (an unusable file is reported as such, not as missing)."""
        return self.markdown is None and self.summary is None and not self.unreadable

    @property
    def without_results(self) -> bool:
        """No summary to show: missing, or present but unusable."""
        return self.markdown is None and self.summary is None

    @property
    def work_item_failed(self) -> bool:
        """A step of this type (or a shared one, such as download) failed (in any of its work items)."""
        for status in self.statuses:
            if not status.steps:
                if not status.ok:
                    return True
            elif any(not step.ok for step in relevant_steps(status, self.type_name)):
                return True
        return False

    @property
    def gate_failed(self) -> bool:
        """A step of this type crossed its gate (memdiff: BytesAllocated grew too much)."""
        return any(step.gate and not step.ok
                   for status in self.statuses for step in relevant_steps(status, self.type_name))

    @property
    def replay_problems(self) -> bool:
        return bool(getattr(self.summary, "has_problems", False))

    @property
    def failed(self) -> bool:
        return self.missing or self.work_item_failed or bool(self.problems) or self.replay_problems


def relevant_steps(status: pipeline.WorkItemStatus, type_name: str = "") -> List[pipeline.StatusStep]:
    """The work item's steps that matter for `type_name`: its own and the shared ones."""
    if not type_name:
        return list(status.steps)
    return [s for s in status.steps if pipeline.step_type(s.name) in (None, type_name)]


def status_problems(status: Optional[pipeline.WorkItemStatus], limit: int = MAX_PROBLEMS_PER_PLATFORM,
                    brief: bool = False, type_name: str = "") -> List[str]:
    """The failed steps (of `type_name` and shared ones) of a work item as short lines
    (`brief`: one line per step, no details). A crossed gate is stated as such."""
    if not status:
        return []
    lines: List[str] = []
    for step in relevant_steps(status, type_name):
        if step.ok:
            continue
        head = f"{step.name} failed (exit code {step.exit_code})"
        problems = list(step.problems)
        if step.gate and problems:
            lines.extend(problems[:1] if brief else problems)
            continue
        if brief:
            lines.append(head)
            continue
        lines.append(head + (": " + problems[0] if problems else ""))
        lines.extend(problems[1:])
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more in the logs"]
    return lines


def build_states(files: Mapping[Tuple[str, str], PlatformFiles], expected: Sequence[Tuple[str, str]],
                 load_summary: Optional[Callable[[object, str], object]], type_name: str = "") -> List[PlatformState]:
    """One state per expected platform (MISSING when nothing came back) plus any others found;
    only the status steps of `type_name` (and shared steps) count against a platform.
    `load_summary(document, source)` makes the JSON summary (asmdiffs) from parsed JSON."""
    keys = list(expected) + sorted(k for k in files if k not in expected)
    states = []
    for key in keys:
        entry = files.get(key, PlatformFiles(*key))
        state = PlatformState(key[0], key[1], expected=key in expected, type_name=type_name)
        if entry.parts and not entry.whole:
            merge_parts(state, entry, load_summary)
            state.unreadable.extend(entry.refused)
            state.problems.extend(entry.refused)
        else:
            if entry.parts:
                log.warning("Warning: %s has results of one work item and of several; using the one's",
                            state.label)
            read_work_item(state, entry, load_summary)
        if state.missing:
            state.problems.insert(0, "MISSING: the work item left no summary")
        # With a summary, its replay problems (asserts, failures) are shown in detail below.
        brief = state.summary is not None and state.replay_problems
        if state.part_statuses:
            for part, status in zip(part_list(entry), state.part_statuses):
                state.problems.extend(f"{part.label}: {line}"
                                      for line in status_problems(status, brief=brief, type_name=type_name))
        else:
            state.problems.extend(status_problems(state.status, brief=brief, type_name=type_name))
        if brief:
            state.problems.append("replay problems: see below")
        states.append(state)
    return states


def read_work_item(state: PlatformState, entry: PlatformFiles,
                   load_summary: Optional[Callable[[object, str], object]]) -> None:
    """What one work item left: its markdown, HTML report, status and (when loadable) JSON summary;
    a file that cannot be used is a problem naming it (a summary file also goes to `unreadable`)."""
    state.markdown, markdown_problem = decode_markdown(entry.markdown)
    state.html_report = entry.html.name if entry.html is not None and is_report(entry.html) else ""
    state.status, status_problem = load_status(entry.status)
    summary_problem = ""
    if load_summary is not None:
        state.summary, summary_problem = load_json_summary(entry.summary_json, load_summary)
    state.unreadable = [p for p in (summary_problem, markdown_problem) if p] + entry.refused
    state.problems.extend([status_problem] if status_problem else [])
    state.problems.extend(state.unreadable)


def part_list(entry: PlatformFiles) -> List[Part]:
    """Every work item of a split target: 1..N (N as the result names say; the largest)."""
    count = max(part.count for part in entry.parts)
    return [Part(index, count) for index in range(1, count + 1)]


def merge_parts(state: PlatformState, entry: PlatformFiles,
                load_summary: Optional[Callable[[object, str], object]]) -> None:
    """A target spread over several work items, as one platform: the parts' JSON summaries
    merged into what one work item for all the collections writes (asmdiffs: the summary;
    tpdiff/memdiff/metricdiff: the merged run and the markdown rendered from it). A part that left nothing
    (or whose work item failed) shows as that part's problem; the others are still summarized."""
    summaries: List[object] = []
    documents: List[Dict[str, object]] = []
    for part in part_list(entry):
        files = entry.parts.get(part, PlatformFiles(entry.target_os, entry.target_arch))
        piece = PlatformState(entry.target_os, entry.target_arch, type_name=state.type_name)
        read_work_item(piece, files, load_summary)
        state.problems.extend(f"{part.label}: {problem}" for problem in piece.problems)
        state.part_statuses.append(piece.status if piece.status is not None else pipeline.WorkItemStatus(ok=False))
        if piece.html_report:
            state.part_reports.append((part, piece.html_report))
        if load_summary is not None:
            if piece.summary is not None:
                summaries.append(piece.summary)
            else:
                state.problems.append(f"{part.label}: the work item left no summary")
            continue
        document = metric_document(files)
        if document is not None:
            documents.append(document)
        else:
            state.problems.append(f"{part.label}: the work item left no summary")
    state.status = next((s for s in state.part_statuses if s.steps), None)
    if summaries:
        combine_summaries(state, summaries)
    elif documents:
        try:
            state.markdown = render_metric_documents(documents)
        except (ValueError, KeyError, TypeError) as exc:
            state.problems.append(f"cannot merge the work items' summaries ({exc})")


def combine_summaries(state: PlatformState, summaries: Sequence[object]) -> None:
    """The parts' loaded summaries as one: asmdiffs summaries combined, metric diff runs merged
    (and their long markdown rendered, as one work item writes it)."""
    if all(isinstance(summary, metric_model.MetricDiffRun) for summary in summaries):
        try:
            run = metric_model.merge_runs(summaries)  # type: ignore[arg-type]
            state.markdown = metric_report.render(run, True, details.metric_direction)
        except (ValueError, KeyError, TypeError) as exc:
            state.problems.append(f"cannot merge the work items' summaries ({exc})")
            return
        state.summary = run
        return
    from spmi.reports import asm_model
    try:
        state.summary = asm_model.combine_partitions(summaries)  # type: ignore[arg-type]
    except SuiteError as exc:  # e.g. one collection in two work items: this platform's problem only
        state.problems.append(f"cannot merge the work items' summaries ({exc})")


def metric_document(files: PlatformFiles) -> Optional[Dict[str, object]]:
    """A part's tpdiff/memdiff JSON document (None when absent or unusable)."""
    read = read_result_file(files.summary_json)
    if read.data is None:
        return None
    try:
        document = schema.parse_json(read.data, pipeline.MAX_RESULT_FILE_BYTES)
    except schema.SchemaError:
        return None
    return document if isinstance(document, dict) else None


def render_metric_documents(documents: Sequence[Mapping[str, object]]) -> str:
    """The long markdown a tpdiff/memdiff/metricdiff work item writes for the merged runs."""
    run = metric_model.merge_runs([metric_model.run_from_json(document) for document in documents])
    return metric_report.render(run, True, details.metric_direction)


def load_metric_summary(document: object, source: str) -> object:
    """A tpdiff/memdiff/metricdiff JSON summary (for the headline table) from parsed JSON;
    SuiteError when it does not have that shape."""
    if not isinstance(document, dict):
        raise SuiteError(f"{source}: not a metric diff JSON summary (expected an object, not "
                         f"{schema.kind_name(document)})")
    try:
        return metric_model.run_from_json(document)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SuiteError(f"{source}: not a metric diff JSON summary ({type(exc).__name__}: {exc})") from None


def title_for(diff_type: DiffType, platform: str, arch: str) -> str:
    return diff_type.title.format(platform=platform, arch=arch)


def pipeline_box(states: Sequence[PlatformState]) -> str:
    """Work items that failed or left nothing, on top of everything (never dropped);
    a crossed memory gate gets its own line above the table."""
    bad = [s for s in states if s.missing or s.work_item_failed or s.problems]
    if not bad:
        return ""
    from spmi.reports.asm_markdown import colored
    gated = [s for s in bad if s.gate_failed]
    text = ""
    if gated:
        text += (f"**{colored('red', 'Memory gate failed')}** on {', '.join(escape_md_inline(s.label) for s in gated)}: "
                 "BytesAllocated grew by at least the memdiff threshold; the work item failed.\n\n")
    text += (f"**{colored('red', 'Work item problems')}** on {len(bad)} of {len(states)} platforms "
             f"({', '.join(escape_md_inline(s.label) for s in bad)}):\n\n|Platform|Result|Problems|\n|---|---|---|\n")
    for state in bad:
        if state.missing:
            result = colored("#d35400", "MISSING")
        elif state.unreadable and state.without_results:
            result = colored("red", "unreadable")
        else:
            result = colored("red", "memory gate" if state.gate_failed else "failed")
        problems = [p for p in state.problems if not p.startswith("MISSING:")] or ["see the logs"]
        text += f"|{escape_md_inline(state.label)}|{result}|{'<br>'.join(escape_md_inline(p) for p in problems)}|\n"
    return text + "\n"


def verdict_of(state: PlatformState) -> str:
    """The platform's verdict line (the one its summaries open with), or what is missing."""
    if isinstance(state.summary, metric_model.MetricDiffRun):
        return metric_report.verdict_line(state.summary, state.label)
    if state.summary is not None:
        from spmi.reports.asm_markdown import verdict_line
        return verdict_line(state.summary)  # type: ignore[arg-type]
    head = escape_md_inline(f"{'' if state.type_name in ('', 'asmdiffs') else state.type_name + ' '}{state.label}")
    if state.missing:
        return f"{head}: no results came back"
    if state.without_results:
        return f"{head}: the results cannot be used"
    return f"{head}: see its summary below"


def verdict_lines(states: Sequence[PlatformState]) -> str:
    """One verdict line per platform, first on every overall page (docs/signal.md §6)."""
    return "".join(verdict_of(state) + "\n\n" for state in states)


def missing_section(state: PlatformState) -> str:
    """The section of a platform whose work item left no summary (or none that can be used)."""
    label = escape_md_inline(state.label)
    if state.missing:
        text = f"## {label}\n\nMISSING: no {label} results came back"
    else:
        text = f"## {label}\n\nUNREADABLE: the {label} results cannot be used"
    problems = [p for p in state.problems if not p.startswith("MISSING:")]
    text += (": " + escape_md_inline(problems[0]) + "\n") if problems else ".\n"
    command = state.status.repro.get(state.type_name or "asmdiffs") if state.status else None
    if command:
        text += f"\nTo reproduce:\n\n{code_block([str(command)])}\n"
    return text + "\n---\n\n"


def markdown_section(state: PlatformState) -> str:
    """§12.16: `## <os> <arch>` + the platform's markdown, collapsed."""
    from spmi.reports.asm_markdown import details_block
    body = (state.markdown or "").rstrip("\n")
    title = escape_html_inline(f"{state.label} summary")
    return f"## {escape_md_inline(state.label)}\n\n" + details_block(title, body) + "\n---\n\n"


def render_asmdiffs(states: Sequence[PlatformState], title: str, budget: int, short: bool, artifact: str,
                    reports: str = "", history: str = "") -> str:
    """Box + `render_overall` of the platforms with JSON summaries + `reports` (the HTML reports section,
    after the problems and the impact) + the other sections, within `budget`."""
    with_summary = [s for s in states if s.summary is not None]
    markdown_only = [s for s in states if s.summary is None and s.markdown is not None]
    missing = [s for s in states if s.without_results]
    head = f"# {title}\n\n" + verdict_lines(states) + pipeline_box(states) + history
    tail = reports + "".join(markdown_section(s) for s in markdown_only) + "".join(missing_section(s) for s in missing)
    if not with_summary:
        nothing = DIFF_NOTHING["asmdiffs"] + "\n\n---\n\n"
        return head + nothing + tail
    merged = summaries.merge_summaries([s.summary for s in with_summary])  # type: ignore[misc]
    order = [(s.target_os, s.target_arch) for s in states]  # the same platform order on every overall page
    merged.platforms.sort(key=lambda p: order.index((p.target_os, p.target_arch))
                          if (p.target_os, p.target_arch) in order else len(order))
    measure = md.char_size if short else md.utf8_size
    room = max(1024, budget - measure(head) - measure(tail))
    body = asm_overall.render_overall(merged, room, artifact=artifact, short=short, title="", verdicts=False)
    return head + body + tail


DIFF_NOTHING = {name: t.nothing_found for name, t in pipeline.DIFF_TYPES.items()}


def render_metric_type(states: Sequence[PlatformState], diff_type: DiffType, title: str, budget: int, short: bool,
                       artifact: str, transform: Callable[[str], str], history: str = "") -> str:
    """tpdiff/memdiff (§12.16): heading, sentence, each platform's markdown; sections drop to fit."""
    measure = md.char_size if short else md.utf8_size
    head = f"# {title}\n\n" + verdict_lines(states) + (diff_type.intro + "\n\n" if diff_type.intro else "")
    head += pipeline_box(states)
    runs = [(s.label, s.summary) for s in states if s.summary is not None]
    head += metric_report.headline_table(runs, details.metric_direction)  # type: ignore[arg-type]
    head += history
    sections = [md.Section(head)]
    present = [s for s in states if s.markdown is not None]
    if not present:
        sections.append(md.Section(diff_type.nothing_found + "\n"))
    for state in present:
        sections.append(md.Section(markdown_section(state), drop_rank=1, title=state.label))
    for state in states:
        if state.without_results:
            sections.append(md.Section(missing_section(state)))

    def note(titles: List[str]) -> str:
        where = f"see the artifact `{artifact}`" if artifact else "see the per-platform summaries"
        return (f"**Truncated:** the summaries of {', '.join(titles)} were left out to stay within the size "
                f"limit; {where}.\n\n")

    return md.fit_sections(sections, budget, note, measure, transform)


def fit_with_transform(render: Callable[[int], str], limit: int, measure: Callable[[str], int],
                       transform: Callable[[str], str]) -> str:
    """`render(budget)` fits its own budget; shrink it until the transformed text fits `limit` too."""
    budget = limit
    text = transform(render(budget))
    for _ in range(12):
        size = measure(text)
        if size < limit:
            return text
        budget = max(1024, budget - (size - limit) - max(1, budget // 20))
        text = transform(render(budget))
    if measure(text) < limit:
        return text
    return md.hard_cut(text, limit, "**Truncated:** the rest was cut to stay within the size limit.")


_NOTE_LIMIT_RE = re.compile(r"(\*\*Truncated:\*\*[^\n]*? to stay within )([^;\n]+)(;)")


def limit_label(limit: int, short: bool) -> str:
    if short:
        return f"{limit:,} characters"
    return "1 MiB" if limit == FILE_LIMIT_BYTES else f"{limit:,} bytes"


def state_real_limit(text: str, label: str) -> str:
    """The truncation note names the file's limit, not the smaller budget used inside."""
    return _NOTE_LIMIT_RE.sub(lambda m: m.group(1) + label + m.group(3), text, count=1)


def final_markdown_transform(html_diffs: bool) -> Callable[[str], str]:
    """Diff fences as HTML (AzDO), then one last pass of the untrusted-markdown rule over the whole
    document: only the suite's own tags stay raw, no pipeline command (§12.20)."""
    if html_diffs:
        return lambda text: sanitize_markdown(md.diff_fences_to_html(text))
    return sanitize_markdown


def render_document(states: Sequence[PlatformState], diff_type: DiffType, platform: str, arch: str, short: bool,
                    html_diffs: bool, artifact: str, limit: Optional[int] = None, reports: str = "",
                    history: str = "") -> str:
    """The whole overall summary within its limit (bytes, or characters for --short); `reports` is the
    asmdiffs HTML reports section, `history` the History section (docs/history.md)."""
    measure = md.char_size if short else md.utf8_size
    limit = limit if limit is not None else (SHORT_LIMIT_CHARS if short else FILE_LIMIT_BYTES)
    label = limit_label(limit, short)
    transform = final_markdown_transform(html_diffs)
    title = title_for(diff_type, platform, arch)
    if diff_type.name == "asmdiffs":
        def render(budget: int) -> str:
            return state_real_limit(render_asmdiffs(states, title, budget - 1, short, artifact, reports, history),
                                    label)
        return fit_with_transform(render, limit, measure, transform)
    return render_metric_type(states, diff_type, title, limit - 1, short, artifact, transform, history)


def failure_messages(states: Sequence[PlatformState], type_name: str) -> List[str]:
    """One line per failed platform for `##vso[task.logissue type=error]`."""
    messages = []
    for state in states:
        if not state.failed:
            continue
        reasons = [p for p in state.problems if p != "replay problems: see below"]
        summary = state.summary
        if summary is not None and getattr(summary, "has_problems", False):
            collections = getattr(summary, "collections", [])
            asserts = sum(getattr(c, "assert_contexts", 0) for c in collections)
            failed = sum(1 for c in collections if getattr(getattr(c, "status", None), "failed", False))
            if asserts:
                reasons.append(f"JIT asserts in {asserts} context(s)")
            if failed:
                reasons.append(f"replay failed for {failed} collection(s)")
            if not asserts and not failed:
                reasons.append("missing data")
        message = f"{type_name} on {state.label}: " + "; ".join(reasons or ["failed"])
        if len(message) > MAX_ISSUE_CHARS:
            message = message[:MAX_ISSUE_CHARS - 3] + "..."
        messages.append(message)
    return messages


def expected_platforms(host_arch: str) -> List[Tuple[str, str]]:
    try:
        return [(p.target_os, p.target_arch) for p in pipeline.partitions_for_host(host_arch)]
    except ValueError:
        return []


def step_summary_room(environ: Mapping[str, str]) -> Optional[int]:
    """Bytes still allowed in `$GITHUB_STEP_SUMMARY` (None when it is not set)."""
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    try:
        used = Path(target).stat().st_size
    except OSError:
        used = 0
    return FILE_LIMIT_BYTES - used - 1


def add_history_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("history (main-branch runs in storage, docs/history.md)")
    group.add_argument("--history_upload", action="store_true",
                       help="record each platform's summary as a main-branch run (writing needs a credential in "
                            f"${uploads.CONNECTION_STRING_ENV}, ${uploads.SAS_TOKEN_ENV} or ${uploads.ACCOUNT_KEY_ENV})")
    group.add_argument("--history", action="store_true",
                       help="judge each platform's changes against the last main runs recorded in storage")
    group.add_argument("-history_last", type=parsing.int_between(1, 1000), default=judge.DEFAULT_LAST, metavar="N",
                       help=f"how many main runs to compare with (default {judge.DEFAULT_LAST})")
    group.add_argument("-history_record_timeout", type=parsing.positive_float, default=store.DEFAULT_RECORD_TIMEOUT,
                       metavar="SECONDS",
                       help=f"skip a history record that has not arrived within this time (default "
                            f"{store.DEFAULT_RECORD_TIMEOUT:g}); each platform's read has {store.DEADLINE_FACTOR} times it")
    group.add_argument("-diff_git_hash", metavar="HASH", help="commit the diff JITs were built from (recorded)")
    group.add_argument("-base_git_hash", metavar="HASH", help="commit the base JITs were built from (recorded)")
    group.add_argument("-jit_ee_version", metavar="GUID", help="JIT-EE version of the collections (recorded)")
    group.add_argument("-storage_url", help="storage account of the history, or a folder (path or file:// URL) "
                                            "with the same layout (default: $SUPERPMI_STORAGE_URL, else the "
                                            "public account)")


def history_request(args: argparse.Namespace) -> history_step.HistoryRequest:
    """The history options (`add_history_options`)."""
    return history_step.HistoryRequest(upload=bool(args.history_upload), compare=bool(args.history),
                                       last=args.history_last, record_timeout=args.history_record_timeout,
                                       diff_hash=args.diff_git_hash or "",
                                       base_hash=args.base_git_hash or "", jit_ee_version=args.jit_ee_version or "",
                                       storage_url=args.storage_url)


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    directory = Path(args.diff_summary_dir)
    if not directory.is_dir():
        raise SuiteError(f"-diff_summary_dir '{args.diff_summary_dir}' is not a directory")
    directory = directory.resolve()
    platform = platforms.normalize_os(args.platform) or args.platform.lower()
    arch = args.arch.lower()
    for diff_type in pipeline.expand_types(args.type):
        summarize_type(directory, diff_type, platform, arch, args, environ)
    return 0


def summarize_type(directory: Path, diff_type: DiffType, platform: str, arch: str, args: argparse.Namespace,
                   environ: Mapping[str, str]) -> None:
    """Write, print and announce the overall summary of one diff type."""
    load_summary: Callable[[str, str], object]
    if diff_type.name == "asmdiffs":
        from spmi.reports import asm_model
        load_summary = asm_model.AsmDiffsSummary.from_document
    else:
        load_summary = load_metric_summary
    states = build_states(gather_files(directory, diff_type.name), expected_platforms(arch), load_summary,
                          diff_type.name)
    artifact = args.artifact_name or DEFAULT_ARTIFACT
    on_github = cioutput.running_under_github(environ) and not cioutput.running_under_azdo(environ)

    def reports(github: bool) -> str:
        return md.html_reports_section(report_links(states, arch, github), artifacts_url(environ, github))

    history = ""
    request = history_request(args)
    if request.wanted:
        history = history_step.run_history(
            [(s.target_os, s.target_arch, s.summary) for s in states if s.summary is not None], request, directory)
    text = render_document(states, diff_type, platform, arch, args.short, html_diffs=True, artifact=artifact,
                           reports=reports(on_github), history=history)
    output = directory / pipeline.overall_summary_name(diff_type.name, platform, arch, short=args.short)
    fsutil.atomic_write_text(output, text)
    print(console_line(f"Writing {output}"), file=sys.stderr, flush=True)
    print(text, end="" if text.endswith("\n") else "\n")
    if cioutput.running_under_azdo(environ):
        print(cioutput.azdo_upload_summary(output))
    for message in failure_messages(states, diff_type.name):
        print(cioutput.azdo_log_issue("error", message))
    room = step_summary_room(environ)
    if room is not None:
        if room <= 1024:
            print(f"{pipeline.SUMMARIZE_SCRIPT}: warning: $GITHUB_STEP_SUMMARY is full; not appending", file=sys.stderr)
        else:
            budget = min(room, SHORT_LIMIT_CHARS if args.short else FILE_LIMIT_BYTES)
            github_text = render_document(states, diff_type, platform, arch, args.short, html_diffs=False,
                                          artifact=artifact, limit=budget if not args.short else min(budget, SHORT_LIMIT_CHARS),
                                          reports=reports(True), history=history)
            cioutput.append_github_step_summary(github_text, environ)
    sys.stdout.flush()
