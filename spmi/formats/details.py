"""superpmi's details CSV (`-details`, docs/contracts.md §3.2 and §13).

`parse_details` turns the CSV text into a `DetailsTable`; `read_details_csv`
does the same for a file; `stream_details[_csv]` hands the rows on a few
thousand at a time. Columns are found by name, metric columns are discovered
from the header, and older layouts are read tolerantly.

How it reads: `csv.reader` gives the records; a few thousand at a time, the
wanted fields are picked (`itemgetter`), turned into columns (`zip`), and each
column is converted at once (`map` into an `array`), a per-value loop only for
the rare column that is neither all integers nor all dotted numbers.

Also here: the direction of each metric (lower/higher is better), shared by
asmdiffs, tpdiff and memdiff.
"""
from __future__ import annotations

import csv
import gc
import os
import sys
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import (
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from spmi.base.errors import SuiteError

Number = Union[int, float]
_T = TypeVar("_T")

CODE_BYTES = "ActualCodeBytes"
PERFSCORE = "PerfScore"
BYTES_ALLOCATED = "BytesAllocated"

SUCCESS = "Success"
ERROR = "Error"
MISS = "Miss"
RESULTS = (SUCCESS, ERROR, MISS)

# ---------------------------------------------------------------- metric directions (§3.2.5)

LOWER_IS_BETTER = "lower"
HIGHER_IS_BETTER = "higher"
NEUTRAL = "neutral"

_LOWER_IS_BETTER_METRICS = frozenset({
    "ActualCodeBytes", "AllocatedHotCodeBytes", "AllocatedColdCodeBytes", "ReadOnlyDataBytes",
    "GCInfoBytes", "PerfScore", "BytesAllocated",
})
_HIGHER_IS_BETTER_METRICS = frozenset({"RedundantBranchesEliminated", "JumpThreadingsPerformed"})


def metric_direction(name: str) -> str:
    """`LOWER_IS_BETTER`, `HIGHER_IS_BETTER` or `NEUTRAL` for a JIT metric."""
    if name in _LOWER_IS_BETTER_METRICS:
        return LOWER_IS_BETTER
    if name in _HIGHER_IS_BETTER_METRICS:
        return HIGHER_IS_BETTER
    return NEUTRAL


def is_improvement(name: str, base: Number, diff: Number) -> Optional[bool]:
    """True/False when `diff` is better/worse than `base`; None when equal or neutral."""
    direction = metric_direction(name)
    if direction == NEUTRAL or base == diff:
        return None
    return (diff < base) == (direction == LOWER_IS_BETTER)


# ---------------------------------------------------------------- records

class DetailsError(SuiteError):
    """The details CSV is missing, has no rows, or cannot be read.

    `kind` is "missing", "empty" (no file content or header only) or
    "malformed"; callers treat the first two as "no data" (§3.2.6).
    """

    def __init__(self, message: str, kind: str = "malformed") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(repr=False, eq=False)
class DetailsRow:
    """One compile attempt. In the replay layout the single result is both sides.

    Metric values live column-wise in the table (`base_columns[metric][position]`,
    shared by all rows); read them with `base(name)` / `diff(name)`.
    """

    __slots__ = ("context", "context_size", "method_name", "tier", "base_result", "diff_result", "minopts",
                 "has_diff", "base_instructions", "diff_instructions", "line", "position", "base_columns",
                 "diff_columns", "metric_index")
    context: int
    context_size: int
    method_name: str
    tier: str
    base_result: str
    diff_result: str
    minopts: bool
    has_diff: bool
    base_instructions: int
    diff_instructions: int
    line: int                                   # line in the file, for messages
    position: int                               # index into the value columns
    base_columns: Sequence[Sequence[Number]]
    diff_columns: Sequence[Sequence[Number]]
    metric_index: Mapping[str, int]

    def base(self, metric: str) -> Number:
        return self.base_columns[self.metric_index[metric]][self.position]

    def diff(self, metric: str) -> Number:
        return self.diff_columns[self.metric_index[metric]][self.position]

    @property
    def both_succeeded(self) -> bool:
        return self.base_result == SUCCESS and self.diff_result == SUCCESS

    def __repr__(self) -> str:
        return (f"DetailsRow(context={self.context}, method_name={self.method_name!r}, tier={self.tier!r}, "
                f"results={self.base_result}/{self.diff_result}, minopts={self.minopts}, "
                f"has_diff={self.has_diff}, line={self.line})")


@dataclass(eq=False)
class DetailsColumns:
    """The per-row fields of a table, column-wise: one sequence per field, all in file order."""

    context: Sequence[int]
    context_size: Sequence[int]
    method_name: Sequence[str]
    tier: Sequence[str]
    base_result: Sequence[str]
    diff_result: Sequence[str]
    minopts: Sequence[bool]
    has_diff: Sequence[bool]
    base_instructions: Sequence[int]
    diff_instructions: Sequence[int]
    line: Sequence[int]                         # line in the file, for messages


@dataclass(eq=False)
class DetailsTable:
    """All rows of one CSV, in file order (neither sorted nor unique by context).

    The values are stored column-wise (`columns`, `base_columns`, `diff_columns`); `rows`
    gives one `DetailsRow` per line, made on first use.
    """

    source: str
    metric_names: Tuple[str, ...]
    columns: DetailsColumns = field(repr=False)
    is_diff_layout: bool
    synthesized_metrics: Tuple[str, ...] = ()  # absent in the file, filled with 0
    available_metrics: Tuple[str, ...] = ()    # every metric the header has (kept or not)

    base_columns: List[Sequence[Number]] = field(default_factory=list, repr=False)
    diff_columns: List[Sequence[Number]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._rows: Optional[List[DetailsRow]] = None

    @property
    def row_count(self) -> int:
        return len(self.columns.context)

    @property
    def rows(self) -> List[DetailsRow]:
        """One `DetailsRow` per line; the same list every time (callers may sort it)."""
        if self._rows is None:
            self._rows = self._make_rows()
        return self._rows

    def _make_rows(self) -> List[DetailsRow]:
        c = self.columns
        index = {name: position for position, name in enumerate(self.metric_names)}
        base_columns, diff_columns = self.base_columns, self.diff_columns
        # zip of more than five columns is typed as a tuple of unknown length
        return [DetailsRow(*values, position, base_columns, diff_columns, index)  # type: ignore[call-arg]
                for position, values in enumerate(zip(
                    c.context, c.context_size, c.method_name, c.tier, c.base_result, c.diff_result, c.minopts,
                    c.has_diff, c.base_instructions, c.diff_instructions, c.line))]

    def row(self, position: int) -> DetailsRow:
        """The row at `position`, made on its own (for a few rows of a big table; `rows` makes all)."""
        c = self.columns
        index = {name: i for i, name in enumerate(self.metric_names)}
        return DetailsRow(c.context[position], c.context_size[position], c.method_name[position], c.tier[position],
                          c.base_result[position], c.diff_result[position], c.minopts[position],
                          c.has_diff[position], c.base_instructions[position], c.diff_instructions[position],
                          c.line[position], position, self.base_columns, self.diff_columns, index)

    def has_metric(self, name: str) -> bool:
        return name in self.metric_names

    def base_column(self, metric: str) -> Sequence[Number]:
        """Base values of a metric, in row order."""
        return self.base_columns[self.metric_names.index(metric)]

    def diff_column(self, metric: str) -> Sequence[Number]:
        return self.diff_columns[self.metric_names.index(metric)]

    def only_metrics(self, names: Iterable[str]) -> "DetailsTable":
        """The same rows with only the metric columns `names` (those it has), sharing their values."""
        wanted = set(names)
        keep = [index for index, name in enumerate(self.metric_names) if name in wanted]
        return DetailsTable(self.source, [self.metric_names[i] for i in keep], self.columns,  # type: ignore[arg-type]
                            self.is_diff_layout, tuple(n for n in self.synthesized_metrics if n in wanted),
                            self.available_metrics, [self.base_columns[i] for i in keep],
                            [self.diff_columns[i] for i in keep])

    def subset(self, positions: Sequence[int]) -> "DetailsTable":
        """A table of the rows at `positions` (in that order), with copies of their values
        (it keeps nothing of this table alive)."""
        pick = itemgetter(*positions) if positions else None

        def take(column: Sequence[_T]) -> Sequence[_T]:
            if pick is None:
                values: List[_T] = []
            else:
                values = [pick(column)] if len(positions) == 1 else list(pick(column))  # type: ignore[arg-type]
            return _compact(values, column)

        c = self.columns
        columns = DetailsColumns(*(take(getattr(c, f)) for f in _ROW_FIELDS))
        base = [take(column) for column in self.base_columns]
        diff = [base[index] if column is self.base_columns[index] else take(column)
                for index, column in enumerate(self.diff_columns)]
        return DetailsTable(self.source, self.metric_names, columns, self.is_diff_layout, self.synthesized_metrics,
                            self.available_metrics, base, diff)

    def miss_counts(self) -> Tuple[int, int, int]:
        """(rows whose base result is Miss, whose diff result is Miss, where either is)."""
        base, diff = self.columns.base_result, self.columns.diff_result
        base_misses, diff_misses = base.count(MISS), diff.count(MISS)
        both = sum(map(_both_missed, base, diff)) if self.is_diff_layout else base_misses
        return base_misses, diff_misses, base_misses + diff_misses - both


_ROW_FIELDS = ("context", "context_size", "method_name", "tier", "base_result", "diff_result", "minopts", "has_diff",
               "base_instructions", "diff_instructions", "line")


def _compact(values: List[_T], like: Sequence[_T]) -> Sequence[_T]:
    """`values` (taken from the column `like`) stored compactly: numbers in an `array` when
    they fit one (8 bytes a value instead of an object each), texts shared."""
    if not values:
        return values
    first = values[0]
    if isinstance(first, str):
        return list(map(sys.intern, values))  # type: ignore[arg-type]
    if isinstance(first, bool):
        return values
    typecode = like.typecode if isinstance(like, array) else "q"
    try:
        return array(typecode, values)  # type: ignore[return-value,arg-type]
    except (TypeError, OverflowError):
        return values


def _joined(parts: Iterable[Sequence[_T]]) -> Sequence[_T]:
    """The parts one after the other, as compact as the parts are."""
    result: Optional[Sequence[_T]] = None
    for part in parts:
        if result is None:
            result = array(part.typecode) if isinstance(part, array) else []  # type: ignore[assignment]
        if isinstance(result, array) and not (isinstance(part, array) and part.typecode == result.typecode):
            result = list(result)
        result.extend(part)  # type: ignore[union-attr]
    return result if result is not None else []


def concatenate(tables: Sequence[DetailsTable]) -> DetailsTable:
    """The rows of `tables` (parts of one CSV, same columns) one after the other, as one table."""
    if not tables:
        raise ValueError("no tables to concatenate")
    first = tables[0]
    columns = DetailsColumns(*(_joined(getattr(table.columns, f) for table in tables) for f in _ROW_FIELDS))

    def joined(side: str, index: int) -> Sequence[Number]:
        return _joined(getattr(table, side)[index] for table in tables)

    base = [joined("base_columns", index) for index in range(len(first.metric_names))]
    diff = [base[index] if all(t.diff_columns[index] is t.base_columns[index] for t in tables)
            else joined("diff_columns", index) for index in range(len(first.metric_names))]
    return DetailsTable(first.source, first.metric_names, columns, first.is_diff_layout, first.synthesized_metrics,
                        first.available_metrics, base, diff)


def _both_missed(base: str, diff: str) -> bool:
    return base == MISS and diff == MISS


# ---------------------------------------------------------------- layout

_CONTEXT = "Context"
_CONTEXT_SIZE = "Context size"
_METHOD = "Method full name"
_TIER = "Tier name"
_MINOPTS = "MinOpts"
_HAS_DIFF = "Has diff"
_RESULT = "Result"
_INSTRUCTIONS = "Instructions"
_BASE_RESULT = "Base result"
_DIFF_RESULT = "Diff result"
_BASE_INSTRUCTIONS = "Base instructions"
_DIFF_INSTRUCTIONS = "Diff instructions"

_REPLAY_FIXED = frozenset({_CONTEXT, _CONTEXT_SIZE, _METHOD, _TIER, _RESULT, _MINOPTS, _INSTRUCTIONS})
_BOOLS = {"True": True, "False": False, "true": True, "false": False, "TRUE": True, "FALSE": False}
_LEGACY_SIZE = "size"


@dataclass
class _Layout:
    """Where a header keeps the fixed and the metric columns."""

    is_diff: bool
    columns: Dict[str, int]
    metrics: List[str]                 # names as exposed
    base_metric_cols: List[int]
    diff_metric_cols: List[int]


def _discover_layout(header: Sequence[str], source: str) -> _Layout:
    columns: Dict[str, int] = {}
    for index, name in enumerate(header):
        columns.setdefault(name.strip(), index)
    if _BASE_RESULT in columns and _DIFF_RESULT in columns:
        metrics, base_cols, diff_cols = _diff_metrics(header, columns)
        required: Tuple[str, ...] = (_CONTEXT, _CONTEXT_SIZE, _MINOPTS, _HAS_DIFF)
        layout = _Layout(True, columns, metrics, base_cols, diff_cols)
    elif _RESULT in columns:
        metrics = list(dict.fromkeys(name.strip() for name in header if name.strip() not in _REPLAY_FIXED))
        cols = [columns[name] for name in metrics]
        required = (_CONTEXT, _CONTEXT_SIZE, _MINOPTS)
        layout = _Layout(False, columns, metrics, cols, cols)
    else:
        raise DetailsError(f"{source}: header has neither 'Result' nor 'Base result'/'Diff result' columns; "
                           f"is this a superpmi details CSV?")
    missing = [name for name in required if name not in columns]
    if missing:
        raise DetailsError(f"{source}: header lacks the column(s) {', '.join(repr(m) for m in missing)}")
    _apply_legacy_size_name(layout)
    return layout


def _diff_metrics(header: Sequence[str], columns: Mapping[str, int]) -> Tuple[List[str], List[int], List[int]]:
    metrics: List[str] = []
    base_cols: List[int] = []
    diff_cols: List[int] = []
    for name in header:
        name = name.strip()
        if not name.startswith("Base "):
            continue
        metric = name[len("Base "):]
        if metric.lower() in ("result", "instructions") or metric in metrics:
            continue
        diff_name = "Diff " + metric
        if diff_name in columns:
            metrics.append(metric)
            base_cols.append(columns[name])
            diff_cols.append(columns[diff_name])
    return metrics, base_cols, diff_cols


def _apply_legacy_size_name(layout: _Layout) -> None:
    """2023/2024 files carry code size as `size`/`Size` (§13)."""
    if CODE_BYTES in layout.metrics:
        return
    for index, name in enumerate(layout.metrics):
        if name.lower() == _LEGACY_SIZE:
            layout.metrics[index] = CODE_BYTES
            return


# ---------------------------------------------------------------- converting a column

class _BadValue(Exception):
    """A text that does not convert, at `position` in its column."""

    def __init__(self, position: int, text: str) -> None:
        super().__init__(text)
        self.position = position
        self.text = text


def _converted(convert: Callable[[str], _T], texts: Sequence[str]) -> List[_T]:
    """`convert` of every text; `_BadValue` names the first text it refuses."""
    try:
        return list(map(convert, texts))
    except (ValueError, KeyError):
        for position, text in enumerate(texts):
            try:
                convert(text)
            except (ValueError, KeyError):
                raise _BadValue(position, text) from None
        raise


def _number(text: str) -> Number:
    """A metric's text: float when it has a '.', else int (§3.2.6); empty is 0; `inf`, `nan`, `1e5` are floats."""
    if not text:
        return 0
    if "." in text:
        return float(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def _metric_column(texts: Sequence[str]) -> Sequence[Number]:
    """A metric column: `array('q')` when every text is an int, `array('d')` when every text is
    dotted (8 bytes a value either way), else a list of `_number`s (mixed, or beyond 64 bits)."""
    if texts.count("0") == len(texts):  # most metrics are 0 for most methods
        return array("q", bytes(8 * len(texts)))
    distinct = set(texts)
    try:  # a column of a few distinct texts (most metrics) converts each of them once
        ints = map({text: int(text) for text in distinct}.__getitem__, texts) if len(distinct) * 2 <= len(texts) \
            else map(int, texts)
        return array("q", list(ints))
    except (ValueError, OverflowError):
        pass
    if "".join(texts).count(".") == len(texts):  # a '.' in each (a float has at most one)
        try:
            return array("d", list(map(float, texts)))
        except ValueError:
            pass
    return _converted(_number, texts)


_RESULT_TEXTS = {result: result for result in RESULTS}

#: The fixed columns, in the order their values are checked, and how each text converts.
_FIXED: Dict[str, Callable[[str], object]] = {
    _CONTEXT: int, _CONTEXT_SIZE: int, _METHOD: str, _TIER: str, _MINOPTS: _BOOLS.__getitem__,
    _HAS_DIFF: _BOOLS.__getitem__, _RESULT: _RESULT_TEXTS.__getitem__, _INSTRUCTIONS: int,
    _BASE_RESULT: _RESULT_TEXTS.__getitem__, _DIFF_RESULT: _RESULT_TEXTS.__getitem__,
    _BASE_INSTRUCTIONS: int, _DIFF_INSTRUCTIONS: int,
}


# ---------------------------------------------------------------- which fields, into which columns

@dataclass
class _Plan:
    """What is read of each record: the fixed columns and the kept metrics' base and diff fields."""

    source: str
    layout: _Layout
    labels: List[str]                      # the header's names (stripped), by field
    fixed: Dict[str, int]                  # fixed column -> field, in `_FIXED` order
    metrics: List[Tuple[str, int, int]]    # (metric, base field, diff field), in header order
    fields: List[int]                      # the kept fields, ascending

    @property
    def width(self) -> int:
        return len(self.labels)

    def picker(self) -> Optional[Callable[[List[str]], Sequence[str]]]:
        """What takes the kept fields out of a record; None when all of them are kept."""
        return None if len(self.fields) == self.width else itemgetter(*self.fields)  # 3 fields at least


def _plan(header: Sequence[str], source: str, metrics: Optional[Iterable[str]]) -> _Plan:
    layout = _discover_layout(header, source)
    wanted = set(layout.metrics) if metrics is None else set(metrics) | {CODE_BYTES, PERFSCORE}
    fixed = {name: layout.columns[name] for name in _FIXED if name in layout.columns}
    kept = [(name, base, diff) for name, base, diff in zip(layout.metrics, layout.base_metric_cols,
                                                           layout.diff_metric_cols) if name in wanted]
    fields = sorted({*fixed.values(), *(f for _, base, diff in kept for f in (base, diff))})
    return _Plan(source, layout, [name.strip() for name in header], fixed, kept, fields)


def _chunk_table(plan: _Plan, records: List[Sequence[str]], lines: List[int]) -> DetailsTable:
    """The kept fields of some records (`lines`: where each ends in the file) as a table."""
    texts = dict(zip(plan.fields, zip(*records)))

    def checked(field: int, convert: Callable[[Sequence[str]], _T]) -> _T:
        try:
            return convert(texts[field])
        except _BadValue as bad:
            raise DetailsError(f"{plan.source}: line {lines[bad.position]}, column '{plan.labels[field]}': "
                               f"bad value '{bad.text}'") from None

    fixed = {name: checked(index, lambda column, f=_FIXED[name]: _converted(f, column))  # type: ignore[misc]
             for name, index in plan.fixed.items()}
    names: List[str] = []
    base: List[Sequence[Number]] = []
    diff: List[Sequence[Number]] = []
    for name, base_field, diff_field in plan.metrics:
        names.append(name)
        base.append(checked(base_field, _metric_column))
        same = texts[diff_field] == texts[base_field]  # most metrics are the same on both sides
        diff.append(base[-1] if same else checked(diff_field, _metric_column))
    return _table(plan, fixed, names, base, diff, lines)


def _table(plan: _Plan, fixed: Mapping[str, Sequence], names: List[str],  # type: ignore[type-arg]
           base: List[Sequence[Number]], diff: List[Sequence[Number]], lines: List[int]) -> DetailsTable:
    count = len(lines)
    synthesized: List[str] = []
    for name, zero in ((CODE_BYTES, array("q", [0])), (PERFSCORE, array("d", [0.0]))):
        if name not in names:  # older layouts (§13)
            names.append(name)
            base.append(zero * count)
            diff.append(base[-1])
            synthesized.append(name)

    def column(name: str, default: object) -> Sequence:  # type: ignore[type-arg]
        return fixed[name] if name in fixed else [default] * count

    if plan.layout.is_diff:
        base_results, diff_results = column(_BASE_RESULT, ""), column(_DIFF_RESULT, "")
        has_diff = column(_HAS_DIFF, False)
        base_instr, diff_instr = column(_BASE_INSTRUCTIONS, 0), column(_DIFF_INSTRUCTIONS, 0)
    else:
        base_results = diff_results = column(_RESULT, "")
        has_diff = [False] * count
        base_instr = diff_instr = column(_INSTRUCTIONS, 0)
    columns = DetailsColumns(column(_CONTEXT, 0), column(_CONTEXT_SIZE, 0), column(_METHOD, ""), column(_TIER, ""),
                             base_results, diff_results, column(_MINOPTS, False), has_diff, base_instr, diff_instr,
                             lines)
    return DetailsTable(plan.source, tuple(names), columns, plan.layout.is_diff, tuple(synthesized),
                        tuple(plan.layout.metrics), base, diff)


# ---------------------------------------------------------------- reading

TextOrLines = Union[str, Iterable[str]]
_CHUNK_ROWS = 4096  # records converted (and handed on) at a time


def parse_details(text_or_lines: TextOrLines, source: str = "<details CSV>",
                  metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Parse details CSV text (or its lines) into a table; `source` names it in errors.

    `metrics` limits which metric columns are kept (None: all of them); only kept
    columns are converted, which is what makes big files fast.
    `ActualCodeBytes` and `PerfScore` are always present (0 when absent, §13).
    """
    parts: List[DetailsTable] = []
    stream_details(text_or_lines, parts.append, source, metrics)
    return concatenate(parts)


def read_details_csv(path: Union[str, "os.PathLike[str]"], metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Read a details CSV file; a missing, empty or malformed file raises `DetailsError`."""
    parts: List[DetailsTable] = []
    stream_details_csv(path, parts.append, metrics)
    return concatenate(parts)


def stream_details_csv(path: Union[str, "os.PathLike[str]"], consumer: Callable[[DetailsTable], None],
                       metrics: Optional[Iterable[str]] = None) -> int:
    """Read a details CSV once, handing its rows to `consumer` as consecutive tables of at
    most a few thousand rows each (file order, line numbers as in the file); returns the
    number of rows. Only one such table is held at a time, so memory does not grow with
    the file. Errors as `read_details_csv` (a malformed line may come after some tables
    were handed on); values are exactly those `read_details_csv` gives.
    """
    source = os.fspath(path)
    try:
        with open(path, "r", encoding="utf-8", errors="replace", newline="") as handle:
            return _stream(handle, source, metrics, consumer)
    except FileNotFoundError:
        raise DetailsError(f"{source}: details CSV not found (did superpmi run?)", kind="missing") from None
    except IsADirectoryError:
        raise DetailsError(f"{source}: is a directory, not a details CSV", kind="missing") from None
    except OSError as exc:
        raise DetailsError(f"{source}: cannot read the details CSV: {exc.strerror}", kind="missing") from None


def stream_details(text_or_lines: TextOrLines, consumer: Callable[[DetailsTable], None],
                   source: str = "<details CSV>", metrics: Optional[Iterable[str]] = None) -> int:
    """`stream_details_csv` for CSV text (or its lines)."""
    lines = text_or_lines.splitlines(keepends=True) if isinstance(text_or_lines, str) else text_or_lines
    return _stream(lines, source, metrics, consumer)


def _stream(lines: Iterable[str], source: str, metrics: Optional[Iterable[str]],
            consumer: Callable[[DetailsTable], None]) -> int:
    tracker = _LineTracker(lines)
    reader = csv.reader(tracker, strict=True)
    try:
        header = next(filter(None, reader), None)  # the first record that is not a blank line
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {reader.line_num}: malformed CSV ({exc})") from None
    if header is None:
        raise DetailsError(f"{source}: the file is empty (no header, no rows)", kind="empty")
    plan = _plan(header, source, metrics)
    rows = 0
    with _gc_paused():  # many small acyclic objects: collection passes would only cost time
        for records, line_numbers in _chunks(reader, tracker, plan):
            rows += len(line_numbers)
            consumer(_chunk_table(plan, records, line_numbers))
    if not rows:
        raise DetailsError(f"{source}: the file has a header but no rows", kind="empty")
    return rows


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _CsvReader(Protocol):
    """What `csv.reader` returns, as far as this module uses it."""

    line_num: int

    def __iter__(self) -> Iterator[List[str]]: ...

    def __next__(self) -> List[str]: ...


class _LineTracker:
    """Passes lines to the csv reader and remembers the last one (truncation check)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.last = ""

    def __iter__(self) -> "_LineTracker":
        return self

    def __next__(self) -> str:
        self.last = next(self._lines)
        return self.last


def _chunks(reader: "_CsvReader", lines: _LineTracker, plan: _Plan) -> Iterator[Tuple[List[Sequence[str]], List[int]]]:
    """The kept fields of the records after the header, `_CHUNK_ROWS` at a time, with the line
    each ends at. Blank lines are skipped; a short last row without a line end (the writer
    died mid-line) is ignored; any other row of the wrong width is an error.
    """
    pick, width = plan.picker(), plan.width
    records: List[Sequence[str]] = []
    line_numbers: List[int] = []
    ragged: Optional[Tuple[int, int]] = None
    try:
        for record in reader:
            if not record:
                continue
            if ragged is not None:
                break
            if len(record) != width:
                ragged = (reader.line_num, len(record))
                continue
            records.append(record if pick is None else pick(record))
            line_numbers.append(reader.line_num)
            if len(records) == _CHUNK_ROWS:
                yield records, line_numbers
                records, line_numbers = [], []
    except csv.Error as exc:
        raise DetailsError(f"{plan.source}: line {reader.line_num}: malformed CSV ({exc})") from None
    if ragged is not None:
        truncated_tail = ragged[0] == reader.line_num and not lines.last.endswith(("\n", "\r"))
        if not truncated_tail:
            raise DetailsError(f"{plan.source}: line {ragged[0]} has {ragged[1]} fields, the header has {width}")
    if records:
        yield records, line_numbers


def is_no_data(error: DetailsError) -> bool:
    """True when the error means "no data" rather than a broken file (§3.2.6)."""
    return error.kind in ("missing", "empty")


__all__ = [
    "BYTES_ALLOCATED", "CODE_BYTES", "DetailsColumns", "DetailsError", "DetailsRow", "DetailsTable", "ERROR",
    "HIGHER_IS_BETTER", "LOWER_IS_BETTER", "MISS", "NEUTRAL", "PERFSCORE", "RESULTS", "SUCCESS",
    "concatenate", "is_no_data", "is_improvement", "metric_direction", "parse_details", "read_details_csv",
    "stream_details", "stream_details_csv",
]
