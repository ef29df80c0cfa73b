"""superpmi's details CSV (`-details`, docs/contracts.md §3.2 and §13).

`parse_details` turns the CSV text into a `DetailsTable`; `read_details_csv` does the
same for a file; `stream_details[_csv]` hands the rows on a few thousand at a time.
Columns are found by name, metric columns are discovered from the header, and older
layouts are read tolerantly.

How it reads: `csv.reader` gives the records; `_CHUNK_ROWS` at a time, the wanted
fields are picked (`itemgetter`), turned into columns (`zip`), and each column is
converted at once (`map`, into an `array` when every value is an integer or every value
a float). A value that does not convert is looked for only then, to name its line.

Also here: the direction of each metric (lower/higher is better), shared by asmdiffs,
tpdiff and memdiff.
"""
from __future__ import annotations

import csv
import gc
import os
from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import and_, eq, itemgetter
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

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
#: the metrics whose direction the suite knows (every other one is neutral)
DIRECTED_METRICS = _LOWER_IS_BETTER_METRICS | _HIGHER_IS_BETTER_METRICS


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


_ROW_FIELDS = ("context", "context_size", "method_name", "tier", "base_result", "diff_result", "minopts", "has_diff",
               "base_instructions", "diff_instructions", "line")


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
            index, fields = self._metric_index(), (getattr(self.columns, name) for name in _ROW_FIELDS)
            columns = self.base_columns, self.diff_columns
            self._rows = [DetailsRow(*values, position, *columns, index)  # type: ignore[call-arg]
                          for position, values in enumerate(zip(*fields))]
        return self._rows

    def row(self, position: int) -> DetailsRow:
        """The row at `position`, made on its own (for a few rows of a big table; `rows` makes all)."""
        values = [getattr(self.columns, name)[position] for name in _ROW_FIELDS]
        return DetailsRow(*values, position, self.base_columns, self.diff_columns,  # type: ignore[call-arg]
                          self._metric_index())

    def _metric_index(self) -> Dict[str, int]:
        return {name: index for index, name in enumerate(self.metric_names)}

    def base_column(self, metric: str) -> Sequence[Number]:
        """Base values of a metric, in row order."""
        return self.base_columns[self.metric_names.index(metric)]

    def diff_column(self, metric: str) -> Sequence[Number]:
        return self.diff_columns[self.metric_names.index(metric)]

    def miss_counts(self) -> Tuple[int, int, int]:
        """(rows whose base result is Miss, whose diff result is Miss, where either is)."""
        base, diff = self.columns.base_result, self.columns.diff_result
        base_misses, diff_misses = base.count(MISS), diff.count(MISS)
        both = sum(map(and_, map(eq, base, repeat(MISS)), map(eq, diff, repeat(MISS)))) if self.is_diff_layout \
            else base_misses
        return base_misses, diff_misses, base_misses + diff_misses - both


def concatenate(tables: Sequence[DetailsTable]) -> DetailsTable:
    """The rows of `tables` (parts of one CSV, same columns) one after the other, as one table."""
    if not tables:
        raise ValueError("no tables to concatenate")
    first = tables[0]
    columns = DetailsColumns(*(_joined([getattr(t.columns, name) for t in tables]) for name in _ROW_FIELDS))
    base = [_joined([t.base_columns[i] for t in tables]) for i in range(len(first.metric_names))]
    diff = [base[i] if all(t.diff_columns[i] is t.base_columns[i] for t in tables)
            else _joined([t.diff_columns[i] for t in tables]) for i in range(len(first.metric_names))]
    return DetailsTable(first.source, first.metric_names, columns, first.is_diff_layout, first.synthesized_metrics,
                        first.available_metrics, base, diff)


def _joined(parts: List[Sequence[_T]]) -> Sequence[_T]:
    """The parts one after the other: an array when all are arrays of one kind, else a list."""
    if len(parts) == 1:
        return parts[0]
    kinds = {part.typecode if isinstance(part, array) else "" for part in parts}
    result: Any = array(kinds.pop()) if len(kinds) == 1 and "" not in kinds else []
    for part in parts:
        result.extend(part)
    return result  # type: ignore[no-any-return]


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
_RESULT_TEXTS = {result: result for result in RESULTS}

#: The fixed columns, in the order their values are checked, and how each text converts.
_FIXED: Dict[str, Callable[[str], object]] = {
    _CONTEXT: int, _CONTEXT_SIZE: int, _METHOD: str, _TIER: str, _MINOPTS: _BOOLS.__getitem__,
    _HAS_DIFF: _BOOLS.__getitem__, _RESULT: _RESULT_TEXTS.__getitem__, _INSTRUCTIONS: int,
    _BASE_RESULT: _RESULT_TEXTS.__getitem__, _DIFF_RESULT: _RESULT_TEXTS.__getitem__,
    _BASE_INSTRUCTIONS: int, _DIFF_INSTRUCTIONS: int,
}


@dataclass
class _Plan:
    """What a header says: the layout, and which fields of each record are read into which columns."""

    source: str
    labels: List[str]                      # the header's names (stripped), by field
    is_diff: bool
    available: List[str]                   # every metric, in header order (names as exposed)
    fixed: Dict[str, int]                  # fixed column -> field, in `_FIXED` order
    metrics: List[Tuple[str, int, int]]    # the kept metrics: (name, base field, diff field)

    @property
    def fields(self) -> List[int]:
        """The fields read, ascending."""
        return sorted({*self.fixed.values(), *(f for _, base, diff in self.metrics for f in (base, diff))})


def _plan(header: Sequence[str], source: str, wanted: Optional[Iterable[str]]) -> _Plan:
    labels = [name.strip() for name in header]
    columns: Dict[str, int] = {}
    for index, name in enumerate(labels):
        columns.setdefault(name, index)
    required: Tuple[str, ...]
    if _BASE_RESULT in columns and _DIFF_RESULT in columns:
        is_diff, required = True, (_CONTEXT, _CONTEXT_SIZE, _MINOPTS, _HAS_DIFF)
        metrics = _diff_metrics(labels, columns)
    elif _RESULT in columns:
        is_diff, required = False, (_CONTEXT, _CONTEXT_SIZE, _MINOPTS)
        metrics = [(name, columns[name], columns[name]) for name in dict.fromkeys(labels) if name not in _REPLAY_FIXED]
    else:
        raise DetailsError(f"{source}: header has neither 'Result' nor 'Base result'/'Diff result' columns; "
                           f"is this a superpmi details CSV?")
    missing = [name for name in required if name not in columns]
    if missing:
        raise DetailsError(f"{source}: header lacks the column(s) {', '.join(repr(m) for m in missing)}")
    names = [name for name, _, _ in metrics]
    if CODE_BYTES not in names:  # 2023/2024 files carry code size as `size`/`Size` (§13)
        legacy = next((i for i, name in enumerate(names) if name.lower() == "size"), None)
        if legacy is not None:
            names[legacy] = CODE_BYTES
            metrics[legacy] = (CODE_BYTES, metrics[legacy][1], metrics[legacy][2])
    keep = set(names) if wanted is None else {*wanted, CODE_BYTES, PERFSCORE}
    return _Plan(source, labels, is_diff, names, {name: columns[name] for name in _FIXED if name in columns},
                 [metric for metric in metrics if metric[0] in keep])


def _diff_metrics(labels: Sequence[str], columns: Mapping[str, int]) -> List[Tuple[str, int, int]]:
    """(metric, base field, diff field) of each `Base X` column that has a `Diff X` column."""
    found = []
    for name in dict.fromkeys(labels):
        metric = name[len("Base "):]
        paired = name.startswith("Base ") and "Diff " + metric in columns
        if paired and metric.lower() not in ("result", "instructions"):
            found.append((metric, columns[name], columns["Diff " + metric]))
    return found


# ---------------------------------------------------------------- converting a column

def _first_bad(convert: Callable[[str], object], texts: Sequence[str]) -> Tuple[int, str]:
    """Where the first text `convert` refuses is, and the text (a column did not convert)."""
    for position, text in enumerate(texts):
        try:
            convert(text)
        except (ValueError, KeyError):
            return position, text
    raise AssertionError("every text converts")  # the column's conversion refused one of them


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
    """A metric column: each distinct text converted once (most metrics have a few), the values
    in an `array('q')` when all are integers, `array('d')` when all are floats (8 bytes a value
    either way), else a list (mixed, or beyond 64 bits). A text that is no number: ValueError."""
    if texts.count("0") == len(texts):  # most metrics are 0 for most methods
        return array("q", bytes(8 * len(texts)))
    distinct = set(texts)
    try:
        number_of: Dict[str, Number] = dict(zip(distinct, map(int, distinct)))
    except ValueError:  # not all integers: all floats when each text has a '.' (a float has one at most)
        dotted = "".join(distinct).count(".") == len(distinct)
        number_of = dict(zip(distinct, map(float if dotted else _number, distinct)))  # ValueError: a bad text
    values = list(map(number_of.__getitem__, texts))
    kinds = set(map(type, number_of.values()))
    try:
        return array("q" if kinds == {int} else "d", values) if len(kinds) == 1 else values
    except OverflowError:
        return values


# ---------------------------------------------------------------- one chunk of records into a table

def _chunk_table(plan: _Plan, records: List[Sequence[str]], lines: List[int]) -> DetailsTable:
    """The kept fields of some records (`lines`: where each ends in the file) as a table."""
    texts = dict(zip(plan.fields, zip(*records)))

    def checked(field: int, convert_column: Callable[[Sequence[str]], _T], convert: Callable[[str], object]) -> _T:
        try:
            return convert_column(texts[field])
        except (ValueError, KeyError):
            position, text = _first_bad(convert, texts[field])
            raise DetailsError(f"{plan.source}: line {lines[position]}, column '{plan.labels[field]}': "
                               f"bad value '{text}'") from None

    fixed = {name: checked(index, lambda column, f=_FIXED[name]: list(map(f, column)),  # type: ignore[misc]
                           _FIXED[name]) for name, index in plan.fixed.items()}
    names, base, diff = [], [], []
    for name, base_field, diff_field in plan.metrics:
        names.append(name)
        base.append(checked(base_field, _metric_column, _number))
        same = texts[diff_field] == texts[base_field]  # most metrics are the same on both sides
        diff.append(base[-1] if same else checked(diff_field, _metric_column, _number))
    count = len(lines)
    synthesized = [name for name in (CODE_BYTES, PERFSCORE) if name not in names]  # older layouts (§13)
    for name in synthesized:
        names.append(name)
        base.append(array("q" if name == CODE_BYTES else "d", bytes(8 * count)))
        diff.append(base[-1])

    def column(name: str, default: object) -> Sequence[Any]:
        return fixed[name] if name in fixed else [default] * count

    if plan.is_diff:
        results = column(_BASE_RESULT, ""), column(_DIFF_RESULT, "")
        has_diff = column(_HAS_DIFF, False)
        instructions = column(_BASE_INSTRUCTIONS, 0), column(_DIFF_INSTRUCTIONS, 0)
    else:
        results = (column(_RESULT, ""),) * 2
        has_diff = [False] * count
        instructions = (column(_INSTRUCTIONS, 0),) * 2
    columns = DetailsColumns(column(_CONTEXT, 0), column(_CONTEXT_SIZE, 0), column(_METHOD, ""), column(_TIER, ""),
                             *results, column(_MINOPTS, False), has_diff, *instructions, lines)
    return DetailsTable(plan.source, tuple(names), columns, plan.is_diff, tuple(synthesized), tuple(plan.available),
                        base, diff)


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
    last = [""]  # the last line read (was the file cut off mid-line?)
    reader = csv.reader(_remembering(lines, last), strict=True)
    try:
        header = next(filter(None, reader), None)  # the first record that is not a blank line
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {reader.line_num}: malformed CSV ({exc})") from None
    if header is None:
        raise DetailsError(f"{source}: the file is empty (no header, no rows)", kind="empty")
    plan = _plan(header, source, metrics)
    rows = 0
    collecting = gc.isenabled()
    gc.disable()  # many small acyclic objects: collection passes would only cost time
    try:
        for records, line_numbers in _chunks(reader, last, plan):
            rows += len(line_numbers)
            consumer(_chunk_table(plan, records, line_numbers))
            del records  # its texts go before the next chunk is read
    finally:
        if collecting:
            gc.enable()
    if not rows:
        raise DetailsError(f"{source}: the file has a header but no rows", kind="empty")
    return rows


def _remembering(lines: Iterable[str], last: List[str]) -> Iterator[str]:
    for line in lines:
        last[0] = line
        yield line


def _chunks(reader: Any, last: List[str], plan: _Plan) -> Iterator[Tuple[List[Sequence[str]], List[int]]]:
    """The kept fields of the records after the header, `_CHUNK_ROWS` at a time, with the line
    each ends at. Blank lines are skipped; a short last row without a line end (the writer
    died mid-line) is ignored; any other row of the wrong width is an error.
    """
    fields, width = plan.fields, len(plan.labels)
    pick = None if len(fields) == width else itemgetter(*fields)  # 3 fields at least
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
    if ragged is not None and not (ragged[0] == reader.line_num and not last[0].endswith(("\n", "\r"))):
        raise DetailsError(f"{plan.source}: line {ragged[0]} has {ragged[1]} fields, the header has {width}")
    if records:
        yield records, line_numbers


def is_no_data(error: DetailsError) -> bool:
    """True when the error means "no data" rather than a broken file (§3.2.6)."""
    return error.kind in ("missing", "empty")


__all__ = [
    "BYTES_ALLOCATED", "CODE_BYTES", "DIRECTED_METRICS", "DetailsColumns", "DetailsError", "DetailsRow", "DetailsTable", "ERROR",
    "HIGHER_IS_BETTER", "LOWER_IS_BETTER", "MISS", "NEUTRAL", "PERFSCORE", "RESULTS", "SUCCESS",
    "concatenate", "is_no_data", "is_improvement", "metric_direction", "parse_details", "read_details_csv",
    "stream_details", "stream_details_csv",
]
