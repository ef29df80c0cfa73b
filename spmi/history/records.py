"""History records: one run's facts and per-collection, per-metric totals (docs/history.md).

A record is made from a JSON summary (asmdiffs, tpdiff, memdiff or metricdiff) plus the
facts the summary does not carry (target, JIT-EE version, git hashes, time). Records
read back from storage are untrusted: `record_from_bytes` checks size, encoding and
every field's type, and refuses names that could not be collection or metric names.
All of it is pure.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from spmi.base import schema
from spmi.base.errors import SuiteError
from spmi.reports import metric_model
from spmi.reports.asm_model import FORMAT_NAME as ASMDIFFS_FORMAT
from spmi.reports.asm_model import AsmDiffsSummary

FORMAT_NAME = "superpmi-history"
FORMAT_VERSION = 1
SUMMARY_TYPES = ("asmdiffs", "tpdiff", "memdiff", "metricdiff")
#: a record larger than this is refused unread (a real one is a few KB per collection)
MAX_RECORD_BYTES = 4 * 1024 * 1024
#: records live below this prefix in the `superpmi` container
HISTORY_PREFIX = "history/"
TIME_FORMAT = "%Y%m%dT%H%M%SZ"

TIME_RE = re.compile(r"^\d{8}T\d{6}Z$")
_HASH_RE = re.compile(r"^[0-9a-f]{7,40}$")
_PLATFORM_WORD_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+\-]{1,200}$")
#: asmdiffs' two headline metrics, named as in the details CSV and jit-analyze
ASM_METRICS = ("CodeSize", "PerfScore")


class RecordError(SuiteError):
    """A record (or a name for one) is not what history accepts; one line."""


#: a recorded change beyond this many percent either way is no data (see relative_change)
CHANGE_LIMIT = 1e6


def relative_change(base: float, diff: float) -> Optional[float]:
    """`base` -> `diff` in percent; None (no data) when the base is 0, or the change is not a finite
    number (a tiny base: `[5e-324, 1.0]`) or beyond ±CHANGE_LIMIT % (no JIT change multiplies a total
    by ten thousand: such a pair is broken, and fences and charts built on it would overflow)."""
    if base == 0:
        return None
    change = (diff - base) / abs(base) * 100.0
    return change if math.isfinite(change) and abs(change) <= CHANGE_LIMIT else None


@dataclass
class CollectionTotals:
    """One collection in one run: its size (contexts replayed) and metric -> [Σ base, Σ diff]."""

    name: str
    contexts: int
    totals: Dict[str, List[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, "collection name")
        if self.contexts < 0:
            raise ValueError(f"collection {self.name}: negative context count")
        for metric, pair in self.totals.items():
            check_name(metric, "metric name")
            if len(pair) != 2 or not all(math.isfinite(v) for v in pair):
                raise ValueError(f"collection {self.name}: metric {metric} is not [base, diff]")

    def change(self, metric: str) -> Optional[float]:
        """The metric's relative change in percent (`relative_change`); None when it is absent."""
        pair = self.totals.get(metric)
        return None if pair is None else relative_change(pair[0], pair[1])


@dataclass
class HistoryRecord:
    """One run (one summary type, one target) as kept in storage."""

    summary_type: str
    target_os: str
    target_arch: str
    time: str
    diff_hash: str
    base_hash: str = ""
    jit_ee_version: str = ""
    base_build: str = ""
    diff_build: str = ""
    focus: str = ""     # the summary's headline metric
    collections: List[CollectionTotals] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.summary_type not in SUMMARY_TYPES:
            raise ValueError(f"summary_type '{self.summary_type[:40]}' is not one of {', '.join(SUMMARY_TYPES)}")
        for label, value in (("target_os", self.target_os), ("target_arch", self.target_arch)):
            if not _PLATFORM_WORD_RE.match(value):
                raise ValueError(f"{label} is not a platform word")
        if not TIME_RE.match(self.time):
            raise ValueError("time is not YYYYMMDDTHHMMSSZ")
        for label, value in (("diff_hash", self.diff_hash), ("base_hash", self.base_hash)):
            if value and not _HASH_RE.match(value):
                raise ValueError(f"{label} is not a git hash")
        if self.jit_ee_version and not re.match(r"^[0-9a-fA-F-]{36}$", self.jit_ee_version):
            raise ValueError("jit_ee_version is not a GUID")
        if self.focus:
            check_name(self.focus, "focus metric")
        for label, value in (("base_build", self.base_build), ("diff_build", self.diff_build)):
            if len(value) > 500:
                raise ValueError(f"{label} is longer than 500 characters")
        seen: Set[str] = set()
        for collection in self.collections:
            if collection.name in seen:
                raise ValueError(f"collection {collection.name} is listed twice")
            seen.add(collection.name)

    @property
    def platform(self) -> Tuple[str, str]:
        return (self.target_os, self.target_arch)

    def collection(self, name: str) -> Optional[CollectionTotals]:
        return next((c for c in self.collections if c.name == name), None)

    def metrics(self) -> List[str]:
        ordered: List[str] = []
        for collection in self.collections:
            ordered.extend(m for m in collection.totals if m not in ordered)
        return ordered

    def blob_name(self) -> str:
        """`history/<type>/<target_os>/<target_arch>/<UTC time>_<diff git hash>.json`."""
        return (f"{HISTORY_PREFIX}{self.summary_type}/{self.target_os}/{self.target_arch}/"
                f"{self.time}_{self.diff_hash or 'unknown'}.json")

    def to_json_bytes(self) -> bytes:
        document = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "record": asdict(self)}
        return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8")


def check_name(value: str, what: str) -> str:
    """A collection or metric name as history keeps it: one path segment of plain characters."""
    if not _NAME_RE.match(value) or value in (".", "..") or ".." in value:
        raise ValueError(f"{what} is not a plain name")
    return value


def is_plain_name(value: str) -> bool:
    """Whether history keeps a collection of this name (others are left out of records)."""
    try:
        check_name(value, "name")
    except ValueError:
        return False
    return True


def utc_stamp(moment: Optional[datetime] = None) -> str:
    return (moment or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime(TIME_FORMAT)


def record_from_bytes(data: bytes, source: str) -> HistoryRecord:
    """A record read from storage or a file; RecordError naming `source` when it is not one."""
    try:
        document = schema.parse_json(data, MAX_RECORD_BYTES)
        if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
            raise schema.SchemaError("not a history record")
        if not schema.is_version(document.get("version"), FORMAT_VERSION):
            raise schema.SchemaError(f"history record version is not {FORMAT_VERSION}")
        return schema.build(HistoryRecord, document.get("record"), "record")
    except schema.SchemaError as exc:
        raise RecordError(f"{source}: {exc}") from None


# ---------------------------------------------------------------- from JSON summaries

@dataclass
class RunFacts:
    """What a record needs that a summary may lack (flags of `history upload`)."""

    target_os: str = ""
    target_arch: str = ""
    diff_hash: str = ""
    base_hash: str = ""
    jit_ee_version: str = ""
    time: str = ""


def summary_type_of(document: Mapping[str, Any]) -> str:
    """Which kind of JSON summary `document` is ('' when none)."""
    if document.get("format") == ASMDIFFS_FORMAT:
        return "asmdiffs"
    kind = document.get("summary_type", document.get("kind"))
    return kind if kind in ("tpdiff", "memdiff", "metricdiff") else ""


def record_from_summary(document: Mapping[str, Any], facts: RunFacts, source: str) -> HistoryRecord:
    """A record of the JSON summary `document` (read from `source`) with `facts` filled in."""
    kind = summary_type_of(document)
    if kind == "asmdiffs":
        return record_from_asmdiffs(AsmDiffsSummary.from_document(document, source), facts, source)
    if kind:
        try:
            run = metric_model.run_from_json(document)
        except ValueError as exc:
            raise RecordError(f"{source}: {exc}") from None
        return record_from_metric_run(run, facts, source)
    raise RecordError(f"{source}: not an asmdiffs, tpdiff, memdiff or metricdiff JSON summary")


def record_from_asmdiffs(summary: AsmDiffsSummary, facts: RunFacts, source: str) -> HistoryRecord:
    collections = [_asm_collection(c) for c in summary.collections if not c.status.no_data and is_plain_name(c.name)]
    return _record("asmdiffs", "CodeSize", facts.target_os or summary.target_os,
                   facts.target_arch or summary.target_arch, facts, "", "", collections, source)


def record_from_metric_run(run: metric_model.MetricDiffRun, facts: RunFacts, source: str) -> HistoryRecord:
    collections = [_metric_collection(c) for c in run.collections if is_plain_name(c.name)]
    return _record(run.kind, run.focus, facts.target_os or run.target_os, facts.target_arch or run.target_arch, facts,
                   run.base_build.text if run.base_build else "", run.diff_build.text if run.diff_build else "",
                   collections, source)


def _record(kind: str, focus: str, target_os: str, target_arch: str, facts: RunFacts, base_build: str,
            diff_build: str, collections: List[CollectionTotals], source: str) -> HistoryRecord:
    if not target_os or not target_arch:
        raise RecordError(f"{source}: a {kind} summary does not name its target; pass -target_os and -target_arch")
    try:
        return HistoryRecord(summary_type=kind, target_os=target_os, target_arch=target_arch,
                             time=facts.time or utc_stamp(), diff_hash=facts.diff_hash, base_hash=facts.base_hash,
                             jit_ee_version=facts.jit_ee_version, base_build=base_build[:500],
                             diff_build=diff_build[:500], focus=focus if is_plain_name(focus) else "",
                             collections=collections)
    except ValueError as exc:
        raise RecordError(f"{source}: {exc}") from None


def _asm_collection(report: Any) -> CollectionTotals:
    overall = report.aggregates.overall
    totals: Dict[str, List[float]] = {
        "CodeSize": [float(overall.base_code_bytes), float(overall.diff_code_bytes)],
        "PerfScore": [float(overall.base_perfscore), float(overall.diff_perfscore)],
    }
    for metric, pair in report.metric_totals.items():
        if metric not in totals and is_plain_name(metric) and len(pair) == 2:
            totals[metric] = [float(pair[0]), float(pair[1])]
    contexts = overall.base_successes + overall.base_misses + overall.base_failures
    return CollectionTotals(name=report.name, contexts=contexts, totals=totals)


def _metric_collection(result: Any) -> CollectionTotals:
    totals = {metric: [float(rows["Overall"].base), float(rows["Overall"].diff)]
              for metric, rows in result.totals.items() if "Overall" in rows and is_plain_name(metric)}
    return CollectionTotals(name=result.name, contexts=result.base_counts.total, totals=totals)
