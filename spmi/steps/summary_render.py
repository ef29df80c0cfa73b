"""JSON summaries (`--summary_as_json`) to the long and short markdown a single run writes: read
through the one safe JSON reader, checked to be of the expected kind, merged (collections sorted by
name) and rendered (docs/contracts.md §12.13). `superpmi.py summarize` and the Helix work item
both render through here, so a work item's markdown is exactly what `summarize` writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from spmi.base import schema, untrusted
from spmi.base.errors import SuiteError
from spmi.formats import details
from spmi.reports import asm_markdown
from spmi.reports import metric_markdown as report
from spmi.reports import metric_model as model
from spmi.reports import summaries as asm_summaries
from spmi.reports.asm_model import FORMAT_NAME as ASMDIFFS_FORMAT
from spmi.reports.asm_model import MergedSummary

SUMMARY_TYPES = ("asmdiffs", "tpdiff", "memdiff", "metricdiff")

#: A JSON summary larger than this is not read (a run writes far less).
MAX_SUMMARY_BYTES = 64 * 1024 * 1024

Documents = Sequence[Tuple[Path, Dict[str, Any]]]


@dataclass(frozen=True)
class RenderedSummary:
    """The long and short markdown of one or more summaries, and the verdict line per target that
    both open with (plain text, for the console)."""
    long_text: str
    short_text: str
    verdicts: Tuple[str, ...]


def short_path_for(long_path: Path) -> Path:
    """`x/tpdiff_summary.md` → `x/tpdiff_short_summary.md`; `x/out.md` → `x/out_short.md`."""
    name = long_path.name
    if "_summary" in name:
        index = name.rindex("_summary")
        return long_path.with_name(name[:index] + "_short" + name[index:])
    return long_path.with_name(f"{long_path.stem}_short{long_path.suffix}")


def load_json(path: Path) -> Dict[str, Any]:
    """A JSON summary object through the one safe JSON reader (`schema.parse_json`: size, UTF-8,
    nesting), or one line naming the file."""
    try:
        size = path.stat().st_size
        if size > MAX_SUMMARY_BYTES:
            raise SuiteError(f"summary '{path}' has {size:,} bytes, more than the {MAX_SUMMARY_BYTES:,} a JSON "
                             "summary may have")
        data = schema.parse_json(path.read_bytes(), MAX_SUMMARY_BYTES)
    except FileNotFoundError:
        raise SuiteError(f"summary '{path}' not found") from None
    except IsADirectoryError:
        raise SuiteError(f"summary '{path}' is a directory; give the JSON file") from None
    except OSError as exc:
        raise SuiteError(f"cannot read summary '{path}': {exc.strerror}") from None
    except schema.SchemaError as exc:
        raise SuiteError(f"summary '{path}' is not a JSON summary: {exc}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"summary '{path}' is not a JSON summary object")
    return data


def summary_kind(data: Dict[str, Any]) -> Optional[str]:
    """What a JSON summary says it is: asmdiffs, tpdiff, memdiff, metricdiff (None: it does not say)."""
    found = data.get("summary_type", data.get("kind"))
    if isinstance(found, str) and found:
        return found
    return "asmdiffs" if data.get("format") == ASMDIFFS_FORMAT else None


def _with_article(kind: str) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def wrong_kind_message(path: Path, found: Optional[str], expected: str) -> str:
    """One line: what the summary is (or that it does not say) and what -summary_type expected."""
    if found is None:
        return (f"summary '{path}' does not say what kind of summary it is (no summary_type); -summary_type "
                f"{expected} expects what `{expected} --summary_as_json` writes")
    if found in SUMMARY_TYPES:
        return (f"summary '{path}' is {_with_article(found)} summary, not {expected}; "
                f"pass -summary_type {found} or {expected} summaries")
    return (f"summary '{path}' is of an unknown kind ('{shown_kind(found)}'); -summary_type {expected} expects "
            f"{expected} summaries")


#: how much of an unknown summary_type the message shows (the file's text, of any length)
MAX_SHOWN_KIND = 60


def shown_kind(found: str) -> str:
    """An unknown summary_type from the file, as one short line."""
    return untrusted.clip(untrusted.one_line(found), MAX_SHOWN_KIND)


def merge_metric_summaries(kind: str, documents: Documents) -> model.MetricDiffRun:
    """tpdiff/memdiff/metricdiff summaries of `kind` as one run; SuiteError naming a wrong or bad file."""
    runs = []
    for path, data in documents:
        found = summary_kind(data)
        if found != kind:
            raise SuiteError(wrong_kind_message(path, found, kind))
        try:
            runs.append(model.run_from_json(data))
        except ValueError as exc:
            raise SuiteError(f"summary '{path}': {exc}") from None
    try:
        return model.merge_runs(runs)
    except ValueError as exc:
        raise SuiteError(f"cannot merge the summaries: {exc}") from None


def merge_asmdiffs(documents: Documents) -> MergedSummary:
    """Merge asmdiffs JSON summaries (one entry per target, partitions combined)."""
    summaries = []
    for path, data in documents:
        found = summary_kind(data)
        if found not in (None, "asmdiffs"):
            raise SuiteError(wrong_kind_message(path, found, "asmdiffs"))
        try:
            summaries.append(asm_summaries.as_summary(data, str(path)))
        except (ValueError, KeyError, TypeError) as exc:
            raise SuiteError(f"summary '{path}' is not an asmdiffs summary ({exc})") from None
    return asm_summaries.merge_summaries(summaries)


def render_asmdiffs(merged: MergedSummary) -> RenderedSummary:
    """The markdown of merged asmdiffs summaries, as a single run renders them."""
    return RenderedSummary(asm_summaries.render_long_summary(merged), asm_summaries.render_short_summary(merged),
                           tuple(asm_markdown.verdict_line(summary, markdown=False) for summary in merged.platforms))


def render_metric(run: model.MetricDiffRun) -> RenderedSummary:
    """The markdown of a merged tpdiff/memdiff/metricdiff run."""
    return RenderedSummary(report.render(run, True, details.metric_direction),
                           report.render(run, False, details.metric_direction),
                           (report.verdict_line(run, markdown=False),))


def render_documents(kind: str, documents: Documents) -> RenderedSummary:
    """Summaries of `kind` merged and rendered; SuiteError naming a summary of another kind or a bad one."""
    if kind == "asmdiffs":
        return render_asmdiffs(merge_asmdiffs(documents))
    return render_metric(merge_metric_summaries(kind, documents))
