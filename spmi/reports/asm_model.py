"""The asmdiffs run model: what a summary is rendered from (docs/contracts.md §12.9, §12.10, §12.13).

Plain records, filled by the asmdiffs command (aggregates come from
`asmdiffs_analysis`, texts such as example diffs and jit-analyze output from the
caller), serialisable to JSON so that partitions run elsewhere can be merged
and rendered later (`combine_partitions`, `merge_summaries`).
"""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from spmi.base import schema
from spmi.base.columns import Labels, Numbers, Texts, as_list
from spmi.base.errors import SuiteError

FORMAT_NAME = "superpmi-asmdiffs-summary"
FORMAT_VERSION = 1

OVERALL = "Overall"
MINOPTS = "MinOpts"
FULLOPTS = "FullOpts"
ROW_NAMES = (OVERALL, MINOPTS, FULLOPTS)

IMPROVEMENT = "improvement"
REGRESSION = "regression"
SAME_SIZE = "same size"
TEXT_ONLY = "text-only"


# ---------------------------------------------------------------- aggregates

@dataclass
class Aggregate:
    """Sums over the rows of one class (Overall, MinOpts or FullOpts) of one collection.

    Counts per side come from every row; the `diffed_*` sums only from rows where
    both JITs succeeded. `perfscore_log_sum` = Σ ln(max(diff,1) / max(base,1)).
    """

    base_successes: int = 0
    base_misses: int = 0
    base_failures: int = 0
    diff_successes: int = 0
    diff_misses: int = 0
    diff_failures: int = 0
    diffed_contexts: int = 0
    contexts_with_diffs: int = 0
    base_code_bytes: int = 0
    diff_code_bytes: int = 0
    base_perfscore: float = 0.0
    diff_perfscore: float = 0.0
    base_instructions: int = 0
    diff_instructions: int = 0
    perfscore_log_sum: float = 0.0

    @property
    def base_total(self) -> int:
        return self.base_successes + self.base_misses + self.base_failures

    @property
    def diff_total(self) -> int:
        return self.diff_successes + self.diff_misses + self.diff_failures

    @property
    def relative_geomean(self) -> float:
        """Relative PerfScore Geomean over all diffed contexts (1 when none)."""
        return math.exp(self.perfscore_log_sum / self.diffed_contexts) if self.diffed_contexts else 1.0

    @property
    def relative_geomean_diffs(self) -> float:
        """Relative PerfScore Geomean (Diffs) (1 when no contexts with diffs)."""
        return math.exp(self.perfscore_log_sum / self.contexts_with_diffs) if self.contexts_with_diffs else 1.0

    def plus(self, other: "Aggregate") -> "Aggregate":
        return Aggregate(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass
class DiffListStats:
    """Improvement/regression counts over the diff list (Overall rows with `Has diff`).

    Size compares `ActualCodeBytes`; PerfScore compares values clamped to >= 1,
    "same" when they differ by less than 0.01. The log sums are Σ ln(diff/base)
    over improved and regressed rows.
    """

    contexts_with_diffs: int = 0
    size_improvements: int = 0
    size_regressions: int = 0
    size_same: int = 0
    bytes_improved: int = 0       # Σ shrink, positive
    bytes_regressed: int = 0      # Σ growth
    perfscore_improvements: int = 0
    perfscore_regressions: int = 0
    perfscore_same: int = 0
    perfscore_improvement_log_sum: float = 0.0
    perfscore_regression_log_sum: float = 0.0

    @property
    def improvement_geomean(self) -> float:
        """Geometric mean of diff/base over improved rows, minus 1 (0 when none)."""
        count = self.perfscore_improvements
        return math.exp(self.perfscore_improvement_log_sum / count) - 1 if count else 0.0

    @property
    def regression_geomean(self) -> float:
        count = self.perfscore_regressions
        return math.exp(self.perfscore_regression_log_sum / count) - 1 if count else 0.0

    def plus(self, other: "DiffListStats") -> "DiffListStats":
        return DiffListStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass
class CollectionAggregates:
    """MinOpts and FullOpts sums (Overall is their sum) and the diff-list stats."""

    minopts: Aggregate = field(default_factory=Aggregate)
    fullopts: Aggregate = field(default_factory=Aggregate)
    diff_stats: DiffListStats = field(default_factory=DiffListStats)

    @property
    def overall(self) -> Aggregate:
        return self.minopts.plus(self.fullopts)

    def row(self, name: str) -> Aggregate:
        if name == OVERALL:
            return self.overall
        if name == MINOPTS:
            return self.minopts
        if name == FULLOPTS:
            return self.fullopts
        raise ValueError(f"unknown row '{name}'")

    def plus(self, other: "CollectionAggregates") -> "CollectionAggregates":
        return CollectionAggregates(self.minopts.plus(other.minopts), self.fullopts.plus(other.fullopts),
                                    self.diff_stats.plus(other.diff_stats))


# ---------------------------------------------------------------- per collection

@dataclass
class AssertInstance:
    context: int
    il_size: int


@dataclass
class AssertGroup:
    """All asserts with one key `<expression> (<file>:<line>)`; `instances` are the first few.

    `count` is the number of assert lines (hits): with two JITs a context can assert in both.
    `contexts` is the number of distinct contexts (0 in summaries written before it existed:
    then `count` stands in); `base_hits`/`diff_hits` split the hits by JIT when every hit
    could be attributed (None otherwise).
    """

    key: str
    count: int
    instances: List[AssertInstance] = field(default_factory=list)
    contexts: int = 0
    base_hits: Optional[int] = None
    diff_hits: Optional[int] = None

    @property
    def context_count(self) -> int:
        return self.contexts or self.count


@dataclass
class ReplayStatus:
    """How superpmi ended for a collection.

    `failed` with a one-line `reason` (and the exit code when there was one);
    `missing_contexts` counts MISSING messages; `no_data` means the details CSV
    was missing or empty, so the aggregates are all zero.
    """

    failed: bool = False
    reason: str = ""
    exit_code: Optional[int] = None
    missing_contexts: int = 0
    no_data: bool = False


@dataclass
class ExampleDiff:
    """One example of §12.10 item 3.

    `title` is the text after `; Assembly listing for method ` on line 1 of the
    base listing; `diff_text` the body (see `asmdiffs_markdown.example_diff_text`);
    `repro_command` the superpmi command line that replays this context.
    """

    context: int
    kind: str  # IMPROVEMENT or REGRESSION
    title: str
    base_bytes: int
    diff_bytes: int
    base_perfscore: float = 0.0
    diff_perfscore: float = 0.0
    diff_text: str = ""
    repro_command: str = ""
    touches_code: bool = True   # the diff changes more than the `;` header/locals/footer lines

    @property
    def label(self) -> str:
        """improvement / regression (code size), same size (code changed), text-only (comments only)."""
        if self.diff_bytes < self.base_bytes:
            return IMPROVEMENT
        if self.diff_bytes > self.base_bytes:
            return REGRESSION
        return SAME_SIZE if self.touches_code else TEXT_ONLY

    @property
    def display_name(self) -> str:
        return f"{self.context}.dasm - {self.title}"


@dataclass
class DiffRows:
    """Every context with diffs of a collection (the diff list, §12.9), column-wise.

    Position i of each column describes one context; the JSON summary writes each
    column on one line. A run fills the columns compactly (`Numbers`, `Texts`, `Labels` of
    base/columns, shared with the kept diff-list table); read from JSON they are lists.
    Summaries written before these rows existed read as empty.
    """

    context: Sequence[int] = field(default_factory=list)
    method: Sequence[str] = field(default_factory=list)
    tier: Sequence[str] = field(default_factory=list)
    minopts: Sequence[bool] = field(default_factory=list)
    base_bytes: Sequence[int] = field(default_factory=list)
    diff_bytes: Sequence[int] = field(default_factory=list)
    base_perfscore: Sequence[float] = field(default_factory=list)
    diff_perfscore: Sequence[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Columns of one length and of their types (JSON from elsewhere is checked here)."""
        kinds = {"context": (int,), "method": (str,), "tier": (str,), "minopts": (bool,), "base_bytes": (int,),
                 "diff_bytes": (int,), "base_perfscore": (int, float), "diff_perfscore": (int, float)}
        length = len(self.context) if _is_column(self.context, kinds["context"]) else -1
        for name, types in kinds.items():
            column = getattr(self, name)
            if not _is_column(column, types) or len(column) != length:
                raise ValueError(f"diff_rows.{name} must be a list as long as diff_rows.context")
            if isinstance(column, list) and not all(
                    isinstance(value, types) and (bool not in types or type(value) is bool) for value in column):
                raise ValueError(f"diff_rows.{name} holds a value that is not {types[0].__name__}")

    def __len__(self) -> int:
        return len(self.context)

    def append(self, context: int, method: str, tier: str, minopts: bool, base_bytes: int, diff_bytes: int,
               base_perfscore: float, diff_perfscore: float) -> None:
        for name, value in (("context", context), ("method", method), ("tier", tier), ("minopts", minopts),
                            ("base_bytes", base_bytes), ("diff_bytes", diff_bytes),
                            ("base_perfscore", base_perfscore), ("diff_perfscore", diff_perfscore)):
            getattr(self, name).append(value)


def _is_column(column: object, types: Tuple[type, ...]) -> bool:
    """A list, or a compact column whose values are of `types` by construction."""
    if isinstance(column, list):
        return True
    if isinstance(column, Texts):
        return str in types
    if isinstance(column, Labels):
        return all(isinstance(value, types) and (bool not in types or type(value) is bool) for value in column.values)
    return isinstance(column, Numbers) and column.typecode == ("d" if float in types else "q")


@dataclass
class CollectionReport:
    """Everything about one collection (`name` is the .mch file name)."""

    name: str
    aggregates: CollectionAggregates = field(default_factory=CollectionAggregates)
    examples: List[ExampleDiff] = field(default_factory=list)
    jit_analyze_markdown: str = ""
    status: ReplayStatus = field(default_factory=ReplayStatus)
    asserts: List[AssertGroup] = field(default_factory=list)
    repro_commands: List[str] = field(default_factory=list)  # reproduce the failures
    diff_rows: DiffRows = field(default_factory=DiffRows)
    failing_contexts: List[int] = field(default_factory=list)  # failed contexts (MISSING ones excluded)
    # every metric column of the details CSV: [Σ base, Σ diff] over contexts both JITs compiled
    metric_totals: Dict[str, List[float]] = field(default_factory=dict)
    asserting_contexts: int = 0  # distinct contexts with an assert (0: not recorded)
    #: example candidates skipped because their diff is known noise (reports/noise_patterns)
    noise_skipped: int = 0

    def __post_init__(self) -> None:
        for metric, pair in self.metric_totals.items():
            if len(pair) != 2:
                raise ValueError(f"metric_totals.{metric} is not [base, diff] (it has {len(pair)} values)")

    @property
    def has_diffs(self) -> bool:
        return self.aggregates.overall.contexts_with_diffs > 0

    @property
    def assert_count(self) -> int:
        """Assert lines (hits) over all asserts."""
        return sum(group.count for group in self.asserts)

    @property
    def assert_contexts(self) -> int:
        """Distinct contexts that asserted (older summaries: the per-assert counts added up)."""
        return self.asserting_contexts or sum(group.context_count for group in self.asserts)

    @property
    def has_problems(self) -> bool:
        """Failures, asserts, missing data or no data: shown in the failures box."""
        overall = self.aggregates.overall
        return (self.status.failed or self.status.no_data or bool(self.asserts)
                or self.status.missing_contexts > 0 or overall.base_misses > 0 or overall.diff_misses > 0)


# ---------------------------------------------------------------- the run

@dataclass
class JitOptions:
    """`-jitoption` values (both JITs), then the base- and diff-specific ones."""

    common: List[str] = field(default_factory=list)
    base: List[str] = field(default_factory=list)
    diff: List[str] = field(default_factory=list)

    @property
    def base_options(self) -> List[str]:
        return self.common + self.base

    @property
    def diff_options(self) -> List[str]:
        return self.common + self.diff


@dataclass
class RunFacts:
    """Where a run ran and with which JITs: the facts every asmdiffs report starts with."""

    target_os: str
    target_arch: str
    host_os: str = ""
    host_arch: str = ""
    base_jit_path: str = ""
    diff_jit_path: str = ""


@dataclass
class AsmDiffsSummary(RunFacts):
    """One asmdiffs run (one target): header facts and the collections in processing order.

    `baseline` describes how the base JIT was chosen (hash, candidates tried);
    `analyzer` is "jit-analyze", "built-in" or "" (none); `repro_command` is the
    `python superpmi.py asmdiffs ...` line that reproduces the run.
    """

    jit_options: JitOptions = field(default_factory=JitOptions)
    baseline: str = ""
    analyzer: str = ""
    repro_command: str = ""
    collections: List[CollectionReport] = field(default_factory=list)
    #: `-significance` overrides (metric -> minimum %) the "Other metrics" table applied
    significance: Dict[str, float] = field(default_factory=dict)
    #: the known-noise patterns example diffs skipped ("" with --include_noise)
    noise_source: str = ""

    @property
    def platform(self) -> str:
        return f"{self.target_os} {self.target_arch}"

    @property
    def has_diffs(self) -> bool:
        return any(collection.has_diffs for collection in self.collections)

    @property
    def has_problems(self) -> bool:
        return any(collection.has_problems for collection in self.collections)

    def to_json(self) -> str:
        """Indented JSON; each column of the diff rows on one line (they can be 100,000s of values)."""
        document = self._document()
        nonce = uuid.uuid4().hex
        columns: Dict[str, Sequence[Any]] = {}
        for index, collection in enumerate(document["summary"]["collections"]):
            rows = collection.get("diff_rows") or {}
            for name in list(rows):
                marker = f"{nonce}:{index}:{name}"
                columns[marker] = rows[name]
                rows[name] = marker
        text = json.dumps(document, indent=1, ensure_ascii=False)
        for marker in list(columns):  # one column as a list at a time
            column = json.dumps(as_list(columns.pop(marker)), ensure_ascii=False, separators=(",", ":"))
            text = text.replace(json.dumps(marker), column, 1)
        return text + "\n"

    def to_document(self) -> Dict[str, Any]:
        """The JSON document as Python data (what `to_json` writes)."""
        document = self._document()
        for collection in document["summary"]["collections"]:
            rows = collection.get("diff_rows") or {}
            for name in rows:
                rows[name] = as_list(rows[name])
        return document

    def _document(self) -> Dict[str, Any]:
        """The document with the diff rows' columns as they are held (compact ones copied)."""
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "summary": asdict(self)}

    @staticmethod
    def from_json(text: str, source: str = "<json>") -> "AsmDiffsSummary":
        data = text.encode("utf-8")
        try:
            document = schema.parse_json(data, len(data))
        except schema.SchemaError as exc:
            raise SuiteError(f"{source}: not a JSON summary ({exc})") from None
        return AsmDiffsSummary.from_document(document, source)

    @staticmethod
    def from_document(document: Any, source: str = "<json>") -> "AsmDiffsSummary":
        """The summary from parsed JSON; a foreign, newer or malformed document raises `SuiteError`."""
        if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
            raise SuiteError(f"{source}: not an asmdiffs JSON summary (format '{_get(document, 'format')}')")
        version = document.get("version")
        if not schema.is_version(version, FORMAT_VERSION):
            raise SuiteError(f"{source}: asmdiffs JSON summary version {version} is not supported "
                             f"(this suite reads version {FORMAT_VERSION})")
        try:
            return schema.build(AsmDiffsSummary, document.get("summary"), "summary")
        except schema.SchemaError as exc:
            raise SuiteError(f"{source}: malformed asmdiffs JSON summary ({exc})") from None


@dataclass
class MergedSummary:
    """The summaries of several targets (one per platform), sorted by platform."""

    platforms: List[AsmDiffsSummary] = field(default_factory=list)

    @property
    def has_diffs(self) -> bool:
        return any(summary.has_diffs for summary in self.platforms)

    @property
    def has_problems(self) -> bool:
        return any(summary.has_problems for summary in self.platforms)


# ---------------------------------------------------------------- merging

def combine_partitions(summaries: Iterable[AsmDiffsSummary]) -> AsmDiffsSummary:
    """Join runs of one target over different collections; collections sorted by name (§12.13)."""
    parts = list(summaries)
    if not parts:
        raise SuiteError("no asmdiffs summaries to combine")
    first = parts[0]
    for part in parts[1:]:
        if (part.target_os, part.target_arch) != (first.target_os, first.target_arch):
            raise SuiteError(f"cannot combine summaries of different targets ({first.platform} and {part.platform})")
    for part in parts:
        own = [collection.name for collection in part.collections]
        twice = sorted({name for name in own if own.count(name) > 1})
        if twice:
            raise SuiteError(f"collection(s) {', '.join(twice)} listed twice in one {first.platform} summary; "
                             "each collection is replayed once per target")
    collections = [collection for part in parts for collection in part.collections]
    names = [collection.name for collection in collections]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SuiteError(f"collection(s) {', '.join(duplicates)} listed twice: in more than one {first.platform} "
                         "summary; each collection is replayed once per target")
    combined = AsmDiffsSummary(**{f.name: getattr(first, f.name) for f in fields(first) if f.name != "collections"})
    for name in ("host_os", "host_arch", "base_jit_path", "diff_jit_path", "baseline", "analyzer", "repro_command"):
        if not getattr(combined, name):
            setattr(combined, name, next((getattr(p, name) for p in parts if getattr(p, name)), ""))
    combined.collections = sorted(collections, key=lambda collection: collection.name)
    return combined


def merge_summaries(summaries: Iterable[AsmDiffsSummary]) -> MergedSummary:
    """Group summaries by target (partitions of one target are combined), platforms sorted."""
    groups: Dict[Tuple[str, str], List[AsmDiffsSummary]] = {}
    for summary in summaries:
        groups.setdefault((summary.target_os, summary.target_arch), []).append(summary)
    return MergedSummary([combine_partitions(groups[key]) for key in sorted(groups)])


# ---------------------------------------------------------------- JSON reading

def _get(document: Any, key: str) -> Any:
    return document.get(key) if isinstance(document, dict) else None


__all__ = [
    "Aggregate", "AsmDiffsSummary", "AssertGroup", "AssertInstance", "CollectionAggregates",
    "CollectionReport", "DiffListStats", "DiffRows", "ExampleDiff", "FORMAT_VERSION", "FULLOPTS", "IMPROVEMENT",
    "JitOptions", "MINOPTS", "MergedSummary", "OVERALL", "REGRESSION", "ROW_NAMES", "ReplayStatus",
    "combine_partitions", "merge_summaries",
]
