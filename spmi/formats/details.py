"""superpmi's details CSV (`-details`, docs/contracts.md §3.2 and §13).

`parse_details` turns the CSV text into a `DetailsTable`; `read_details_csv`
does the same for a file. Columns are found by name, metric columns are
discovered from the header, and older layouts are read tolerantly. Parsing is
column-wise (one C-level conversion per column) so that 50,000 rows of 70
metrics read in a fraction of a second.

Also here: the direction of each metric (lower/higher is better), shared by
asmdiffs, tpdiff and memdiff.
"""
from __future__ import annotations

import csv
import gc
import io
import os
import sys
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, compress, islice, repeat
from operator import itemgetter, ne, not_
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
    TextIO,
    Tuple,
    TypeVar,
    Union,
)

from spmi.base.errors import SuiteError


class _CsvReader(Protocol):
    """What `csv.reader` returns, as far as this module uses it."""

    line_num: int

    def __iter__(self) -> Iterator[List[str]]: ...

    def __next__(self) -> List[str]: ...


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


# ---------------------------------------------------------------- conversions

class _BadValue(Exception):
    def __init__(self, position: int, text: str) -> None:
        super().__init__(text)
        self.position = position
        self.text = text


def _to_number(text: str) -> Number:
    if "." in text:
        return float(text)
    try:
        return int(text)
    except ValueError:
        return float(text)  # tolerate `inf`, `nan`, `1e5`


def _slow_numbers(values: Sequence[str]) -> List[Number]:
    result: List[Number] = []
    for position, text in enumerate(values):
        try:
            result.append(_to_number(text) if text else 0)
        except ValueError:
            raise _BadValue(position, text) from None
    return result


def _convert_ints(values: Sequence[str]) -> List[int]:
    if values.count("0") == len(values):
        return [0] * len(values)
    try:
        return list(map(int, values))
    except ValueError:
        for position, text in enumerate(values):
            try:
                int(text)
            except ValueError:
                raise _BadValue(position, text) from None
        raise


def _convert_bools(values: Sequence[str]) -> List[bool]:
    try:
        return list(map(_BOOLS.__getitem__, values))
    except KeyError:
        for position, text in enumerate(values):
            if text not in _BOOLS:
                raise _BadValue(position, text) from None
        raise


def _check_results(values: Sequence[str]) -> Sequence[str]:
    if set(values).issubset(RESULTS):
        return values
    for position, text in enumerate(values):
        if text not in RESULTS:
            raise _BadValue(position, text)
    return values


def _fast_ints(texts: Sequence[str]) -> Iterable[int]:
    """int() of every text; columns of a few distinct values (most metrics) go through a dict."""
    distinct = set(texts)
    if len(distinct) * 4 <= len(texts):
        values = {text: int(text) for text in distinct}
        return map(values.__getitem__, texts)
    return map(int, texts)


def _all_dotted(texts: Sequence[str]) -> bool:
    """Every text has a '.' (assuming none has two: a float has at most one, and the
    texts are converted with float() right after)."""
    return "".join(texts).count(".") == len(texts)


#: A converted chunk of a metric column: (storage kind, values). Kind "q" (ints) and "d"
#: (floats) are `array` type codes; "" is a plain list (mixed, or too large for 64 bits).
_Chunk = Tuple[str, Sequence[Number]]


def _convert_metric_chunk(kind: str, empty: bool, texts: Sequence[str]) -> _Chunk:
    """Texts of a metric column → values, for a column stored as `kind` so far.

    A column starts as ints; it becomes floats when its first chunk is all dotted
    numbers, and a plain list as soon as a chunk does not fit its kind.
    """
    if kind == "q":
        if texts.count("0") == len(texts):  # most metrics are 0 for most methods
            return "q", array("q", bytes(8 * len(texts)))
        try:
            return "q", array("q", list(_fast_ints(texts)))  # a new array: all or nothing
        except (ValueError, OverflowError):
            pass
        if empty and _all_dotted(texts):
            kind = "d"
    if kind == "d" and _all_dotted(texts):
        try:
            return "d", array("d", map(float, texts))
        except ValueError:
            pass
    return "", _slow_numbers(texts)


def _patched_chunk(chunk: _Chunk, base_texts: Sequence[str], diff_texts: Sequence[str]) -> Optional[_Chunk]:
    """What `diff_texts` convert to, from `chunk` (what `base_texts` converted to in a column in
    the same state): the same values where the texts are equal, so that only the texts that
    differ are converted. None when many differ or one does not fit the chunk's kind."""
    if diff_texts == base_texts:
        return chunk  # most metrics are the same on both sides
    kind, values = chunk
    if not kind:
        return None
    changed = list(compress(range(len(diff_texts)), map(ne, base_texts, diff_texts)))
    if len(changed) * 4 > len(diff_texts):
        return None
    patched = array(kind, values)
    convert = int if kind == "q" else float
    try:
        for position in changed:
            text = diff_texts[position]
            if kind == "d" and "." not in text:
                return None
            patched[position] = convert(text)
    except (ValueError, OverflowError):
        return None
    return kind, patched


class _MetricColumn:
    """Values of one metric column: `array('q')` for ints, `array('d')` for floats
    (8 bytes a value), a plain list for the rare mixed or huge column."""

    def __init__(self) -> None:
        self.values: Union["array[int]", "array[float]", List[Number]] = array("q")
        self.total = 0  # values ever added (`take` empties `values`, not the history)

    @property
    def state(self) -> Tuple[str, bool]:
        """What converting the next chunk depends on: the storage kind and whether nothing was added yet."""
        values = self.values
        return (values.typecode if isinstance(values, array) else ""), self.total == 0

    def take(self) -> Union["array[int]", "array[float]", List[Number]]:
        """The values added since the last `take`; the column keeps its kind."""
        values = self.values
        self.values = array(values.typecode) if isinstance(values, array) else []
        return values

    def extend(self, texts: Sequence[str]) -> _Chunk:
        chunk = _convert_metric_chunk(*self.state, texts)
        self.append(chunk)
        return chunk

    def append(self, chunk: _Chunk) -> None:
        kind, values = chunk
        if not kind and isinstance(self.values, array):
            self.values = list(self.values)
        elif kind == "d" and self.values.typecode == "q":  # type: ignore[union-attr]
            self.values = array("d")  # only while still empty
        self.values.extend(values)  # type: ignore[arg-type]
        self.total += len(values)


# ---------------------------------------------------------------- parsing

TextOrLines = Union[str, Iterable[str]]
_CHUNK_ROWS = 4096       # lines (or, through the csv module, rows) converted at a time
_BLOCK_CHARS = 1 << 20   # characters read from a file at a time
#: Stands for a quoted field while a block of lines is split at commas (never in a real CSV).
_MARK = "\x00"


def parse_details(text_or_lines: TextOrLines, source: str = "<details CSV>",
                  metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Parse details CSV text (or its lines) into a table; `source` names it in errors.

    `metrics` limits which metric columns are kept (None: all of them); only kept
    columns are converted, which is what makes big files fast.
    `ActualCodeBytes` and `PerfScore` are always present (0 when absent, §13).
    """
    lines = iter(text_or_lines.splitlines(keepends=True) if isinstance(text_or_lines, str) else text_or_lines)
    return _parse(lines, _LineBlocks(lines), source, metrics)


def read_details_csv(path: Union[str, "os.PathLike[str]"], metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Read a details CSV file; a missing, empty or malformed file raises `DetailsError`."""
    return _open_details(path, lambda handle, source: _parse(handle, _FileBlocks(handle), source, metrics))


def stream_details_csv(path: Union[str, "os.PathLike[str]"], consumer: Callable[[DetailsTable], None],
                       metrics: Optional[Iterable[str]] = None) -> int:
    """Read a details CSV once, handing its rows to `consumer` as consecutive tables of at
    most a few thousand rows each (file order, line numbers as in the file); returns the
    number of rows. Only one such table is held at a time, so memory does not grow with
    the file. Errors as `read_details_csv` (a malformed line may come after some tables
    were handed on); values are exactly those `read_details_csv` gives.
    """
    return _open_details(path, lambda handle, source: _stream(handle, _FileBlocks(handle), source, metrics,
                                                              consumer))


def stream_details(text_or_lines: TextOrLines, consumer: Callable[[DetailsTable], None],
                   source: str = "<details CSV>", metrics: Optional[Iterable[str]] = None) -> int:
    """`stream_details_csv` for CSV text (or its lines)."""
    lines = iter(text_or_lines.splitlines(keepends=True) if isinstance(text_or_lines, str) else text_or_lines)
    return _stream(lines, _LineBlocks(lines), source, metrics, consumer)


def _open_details(path: Union[str, "os.PathLike[str]"], parse: Callable[[TextIO, str], _T]) -> _T:
    source = os.fspath(path)
    try:
        with open(path, "r", encoding="utf-8", errors="replace", newline="") as handle:
            return parse(handle, source)
    except FileNotFoundError:
        raise DetailsError(f"{source}: details CSV not found (did superpmi run?)", kind="missing") from None
    except IsADirectoryError:
        raise DetailsError(f"{source}: is a directory, not a details CSV", kind="missing") from None
    except OSError as exc:
        raise DetailsError(f"{source}: cannot read the details CSV: {exc.strerror}", kind="missing") from None


def _builder_for(lines: Iterator[str], source: str, metrics: Optional[Iterable[str]]) -> Tuple["_TableBuilder", int]:
    """The builder for the header read from `lines`, and the line the header ends at."""
    header, header_end = _read_header(lines, source)
    layout = _discover_layout(header, source)
    return _TableBuilder(header, layout, _wanted_metrics(layout, metrics), source), header_end


def _parse(lines: Iterator[str], blocks: "_Blocks", source: str, metrics: Optional[Iterable[str]]) -> DetailsTable:
    """The header from `lines`, then the rows from `blocks` (the rest of the same input)."""
    builder, header_end = _builder_for(lines, source, metrics)
    with _gc_paused():  # many small acyclic objects: collection passes would only cost time
        _read_rows(blocks, header_end, builder)
        if builder.count == 0:
            raise DetailsError(f"{source}: the file has a header but no rows", kind="empty")
        return builder.finish()


def _stream(lines: Iterator[str], blocks: "_Blocks", source: str, metrics: Optional[Iterable[str]],
            consumer: Callable[[DetailsTable], None]) -> int:
    builder, header_end = _builder_for(lines, source, metrics)
    builder.consumer = consumer
    _read_rows(blocks, header_end, builder)
    if builder.total == 0:
        raise DetailsError(f"{source}: the file has a header but no rows", kind="empty")
    return builder.total


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def _read_header(lines: Iterator[str], source: str) -> Tuple[List[str], int]:
    """The first non-blank record and the number of lines it took (the csv reader
    takes lines from `lines` only as it needs them)."""
    reader = csv.reader(lines, strict=True)
    try:
        for record in reader:
            if record:
                return record, reader.line_num
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {reader.line_num}: malformed CSV ({exc})") from None
    raise DetailsError(f"{source}: the file is empty (no header, no rows)", kind="empty")


def _wanted_metrics(layout: _Layout, metrics: Optional[Iterable[str]]) -> List[str]:
    if metrics is None:
        return list(layout.metrics)
    requested = set(metrics) | {CODE_BYTES, PERFSCORE}
    return [name for name in layout.metrics if name in requested]


# ---------------------------------------------------------------- blocks of lines

class _LineBlocks:
    """Lines, `_CHUNK_ROWS` at a time, as one text; None for a block in which a line does
    not end with its only "\n" (the csv module must then see the lines as they are)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self._pending: List[str] = []

    def __iter__(self) -> Iterator[Optional[str]]:
        while True:
            self._pending = list(islice(self._lines, _CHUNK_ROWS))
            if not self._pending:
                return
            text = "".join(self._pending)
            whole_lines = text.count("\n") == len(self._pending) and \
                all(map(str.endswith, self._pending, repeat("\n")))
            yield text if whole_lines else None

    def rest(self) -> Iterator[str]:
        """The lines of the last block and all lines after it."""
        return chain(self._pending, self._lines)


class _FileBlocks:
    """The rest of a file opened with newline="", `_CHUNK_ROWS` lines (cut after "\n") at a
    time, read `_BLOCK_CHARS` at a time (the last block may lack its line end)."""

    def __init__(self, handle: TextIO) -> None:
        self._handle = handle
        self._block = ""
        self._carry = ""

    def __iter__(self) -> Iterator[Optional[str]]:
        while True:
            cut = _end_of_lines(self._carry, _CHUNK_ROWS)
            if cut < 0:
                piece = self._handle.read(_BLOCK_CHARS)
                if piece:
                    self._carry += piece
                    continue
                cut = len(self._carry)
                if not cut:
                    return
            self._block, self._carry = self._carry[:cut], self._carry[cut:]
            yield self._block

    def rest(self) -> Iterator[str]:
        """The lines of the last block and all lines after it, as reading the file gives them."""
        return iter(io.StringIO(self._block + self._carry + self._handle.read(), newline=""))


def _end_of_lines(text: str, count: int) -> int:
    """The index just after the `count`-th "\n" in `text`; -1 when it has fewer."""
    surplus = text.count("\n") - count
    if surplus < 0:
        return -1
    if surplus < count:  # fewer line ends to step over from the end than from the start
        position = len(text)
        for _ in range(surplus + 1):
            position = text.rfind("\n", 0, position)
        return position + 1
    position = -1
    for _ in range(count):
        position = text.find("\n", position + 1)
    return position + 1


_Blocks = Union[_LineBlocks, _FileBlocks]


def _read_rows(blocks: _Blocks, line_number: int, builder: "_TableBuilder") -> None:
    """The rows after the header (which ends at line `line_number`), a block at a time.

    Plain blocks are split at commas directly; from the first block that is not plain on,
    the csv module reads the rest.
    """
    for block in blocks:
        split = _split_plain_block(block, builder.width, builder.indices) if block is not None else None
        if split is None:
            _read_csv_rows(blocks.rest(), line_number, builder)
            return
        columns, rows = split
        builder.add(columns, range(line_number + 1, line_number + 1 + rows))
        line_number += rows


def _split_plain_block(text: str, width: int, indices: Sequence[int]) -> Optional[Tuple[List[Sequence[str]], int]]:
    """(the fields at `indices` column by column, the number of lines) of a block of whole
    lines; None unless the block is plain.

    Plain: every line ends with "\n" or "\r\n" and has `width` fields; no field holds a line
    end, NUL, or more characters than the csv module's limit; quoted fields fill the same
    columns on every line. For such lines, splitting at commas (and quotes) gives exactly
    the fields the csv module reads.
    """
    if not text.endswith("\n") or _MARK in text:
        return None
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    rows = text.count("\n")
    parts = text.split('"')
    if len(parts) % 2 == 0:
        return None
    _join_doubled_quotes(parts)
    quoted = parts[1::2]
    if quoted:
        text = _MARK.join(parts[0::2])
        if text.count("\n") != rows:
            return None  # a quoted field holds a line end
    lines = text[:-1].split("\n")
    limit = csv.field_size_limit()
    if max(map(len, lines)) > limit or (quoted and max(map(len, quoted)) > limit):
        return None
    if set(map(str.count, lines, repeat(","))) != {width - 1}:
        return None
    marked = [column for column, cell in enumerate(lines[0].split(",")) if cell == _MARK] if quoted else []
    columns = _split_columns(lines, width, [*indices, *marked])
    if quoted:
        if not marked or len(quoted) != rows * len(marked) or \
                any(columns[column].count(_MARK) != rows for column in marked):
            return None  # e.g. `"a""b"`, `"a"b` or quotes elsewhere: for the csv module
        for position, column in enumerate(marked):  # each cell there was one quoted field
            columns[column] = quoted[position::len(marked)]
    return [columns[index] for index in indices], rows


def _join_doubled_quotes(parts: List[str]) -> None:
    """Pieces of `text.split('"')` → unquoted (even) and quoted (odd) pieces, in place.

    An empty even piece between two quoted pieces is a doubled quote inside a field
    (`"a""b"`): the two quoted pieces become one with a quote between them.
    """
    if not parts[2:-1:2].count(""):
        return
    for index in reversed(list(compress(range(2, len(parts) - 1, 2), map(not_, parts[2:-1:2])))):
        parts[index - 1] += '"' + parts[index + 1]
        del parts[index:index + 2]


def _split_columns(lines: List[str], width: int, wanted: Iterable[int]) -> Dict[int, Sequence[str]]:
    """Column → cells, for the `wanted` columns of lines that all have `width` comma-separated
    fields (splitting all lines at once is faster than splitting each only as far as needed)."""
    cells = ",".join(lines).split(",")
    return {column: cells[column::width] for column in wanted}


def _read_csv_rows(lines: Iterable[str], line_number: int, builder: "_TableBuilder") -> None:
    """The remaining rows through the csv module; `line_number` lines came before `lines`."""
    tracker = _LineTracker(lines)
    reader = csv.reader(tracker, strict=True)
    for records, line_numbers in _read_chunks(reader, builder.getter, builder.width, tracker, builder.source,
                                              line_number):
        builder.add(list(zip(*records)), line_numbers)


def _read_chunks(reader: "_CsvReader", getter: Callable[[List[str]], Tuple[str, ...]], width: int,
                 lines: _LineTracker, source: str,
                 offset: int) -> Iterator[Tuple[List[Tuple[str, ...]], List[int]]]:
    """Kept fields of the rows, a few thousand at a time; line numbers count from `offset`.

    A short last row without a line end (the writer died mid-line) is ignored.
    """
    records: List[Tuple[str, ...]] = []
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
            records.append(getter(record))
            line_numbers.append(offset + reader.line_num)
            if len(records) == _CHUNK_ROWS:
                yield records, line_numbers
                records, line_numbers = [], []
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {offset + reader.line_num}: malformed CSV ({exc})") from None
    if ragged is not None:
        truncated_tail = ragged[0] == reader.line_num and not lines.last.endswith(("\n", "\r"))
        if not truncated_tail:
            raise DetailsError(f"{source}: line {offset + ragged[0]} has {ragged[1]} fields, the header has {width}")
    if records:
        yield records, line_numbers


_FIXED_COLUMNS = (_CONTEXT, _CONTEXT_SIZE, _METHOD, _TIER, _MINOPTS, _HAS_DIFF, _RESULT, _INSTRUCTIONS,
                  _BASE_RESULT, _DIFF_RESULT, _BASE_INSTRUCTIONS, _DIFF_INSTRUCTIONS)


class _TableBuilder:
    """Collects converted columns chunk by chunk, then makes the table."""

    def __init__(self, header: Sequence[str], layout: _Layout, wanted: List[str], source: str) -> None:
        self.header = [name.strip() for name in header]
        self.width = len(header)
        self.layout = layout
        self.wanted = wanted
        self.source = source
        self.count = 0
        self.metric_cols = [self._metric_cols(name) for name in wanted]
        self.indices: List[int] = []  # the kept columns, in the order `add` gets them
        self.slot: Dict[int, int] = {}
        for column in [layout.columns[name] for name in _FIXED_COLUMNS if name in layout.columns] + \
                [col for cols in self.metric_cols for col in cols]:
            if column not in self.slot:
                self.slot[column] = len(self.indices)
                self.indices.append(column)
        self.getter = itemgetter(*self.indices)  # at least Context, Context size and MinOpts
        self.fixed: Dict[str, List[object]] = {name: [] for name in _FIXED_COLUMNS if name in layout.columns}
        self.line_numbers: List[int] = []
        self.total = 0  # rows ever added
        self.consumer: Optional[Callable[[DetailsTable], None]] = None  # set: hand on each chunk as a table
        self.base = [_MetricColumn() for _ in wanted]
        self.diff = [_MetricColumn() for _ in wanted] if layout.is_diff else self.base
        self.same_texts = [True] * len(wanted)  # base and diff texts equal so far (per metric)

    def _metric_cols(self, name: str) -> Tuple[int, int]:
        position = self.layout.metrics.index(name)
        return self.layout.base_metric_cols[position], self.layout.diff_metric_cols[position]

    def add(self, columns: Sequence[Sequence[str]], line_numbers: Sequence[int]) -> None:
        """One chunk of rows: `columns[i]` holds the texts of column `indices[i]`."""
        for name, values in self.fixed.items():
            texts = columns[self.slot[self.layout.columns[name]]]
            values.extend(self._checked(name, line_numbers, _FIXED_CONVERTERS[name], texts))
        for position in range(len(self.wanted)):
            self._add_metric(position, columns, line_numbers)
        self.line_numbers.extend(line_numbers)
        self.count += len(line_numbers)
        self.total += len(line_numbers)
        if self.consumer is not None:
            self.consumer(self.take())

    def take(self) -> DetailsTable:
        """The rows added since the last `take` as a table; the builder starts over empty
        (keeping what the conversion of later chunks depends on)."""
        table = self._table([column.take() for column in self.base],
                            [column.take() for column in self.diff] if self.layout.is_diff else None)
        self.fixed = {name: [] for name in self.fixed}
        self.line_numbers = []
        self.count = 0
        self.same_texts = [True] * len(self.wanted)
        return table

    def _add_metric(self, position: int, columns: Sequence[Sequence[str]], line_numbers: Sequence[int]) -> None:
        base_col, diff_col = self.metric_cols[position]
        base, diff = self.base[position], self.diff[position]
        state = base.state
        base_texts = columns[self.slot[base_col]]
        chunk = self._checked(self.header[base_col], line_numbers, base.extend, base_texts)
        if not self.layout.is_diff:
            return
        diff_texts = columns[self.slot[diff_col]]
        patched = _patched_chunk(chunk, base_texts, diff_texts) if diff.state == state else None
        if patched is not chunk:
            self.same_texts[position] = False
        if patched is not None:
            diff.append(patched)
        else:
            self._checked(self.header[diff_col], line_numbers, diff.extend, diff_texts)

    def _checked(self, label: str, line_numbers: Sequence[int], convert: Callable[[Sequence[str]], _T],
                 texts: Sequence[str]) -> _T:
        try:
            return convert(texts)
        except _BadValue as bad:
            raise DetailsError(f"{self.source}: line {line_numbers[bad.position]}, column '{label}': "
                               f"bad value '{bad.text}'") from None

    def finish(self) -> DetailsTable:
        return self._table([column_.values for column_ in self.base],
                           [column_.values for column_ in self.diff] if self.layout.is_diff else None)

    def _table(self, base_values: List[Sequence[Number]], diff_values: Optional[List[Sequence[Number]]]) -> DetailsTable:
        metric_names = list(self.wanted)
        base_columns = base_values
        diff_columns = base_columns
        if diff_values is not None:  # a diff column read from the same texts as its base column is that column
            diff_columns = [base if same else diff
                            for base, diff, same in zip(base_values, diff_values, self.same_texts)]
        synthesized: List[str] = []
        for name, zeros in ((CODE_BYTES, array("q", [0])), (PERFSCORE, array("d", [0.0]))):
            if name not in metric_names:
                metric_names.append(name)
                base_columns.append(zeros * self.count)
                if self.layout.is_diff:
                    diff_columns.append(base_columns[-1])
                synthesized.append(name)
        return DetailsTable(self.source, tuple(metric_names), self._row_columns(), self.layout.is_diff,
                            tuple(synthesized), tuple(self.layout.metrics), base_columns, diff_columns)

    def _row_columns(self) -> DetailsColumns:
        fixed, count = self.fixed, self.count

        def column(name: str, default: object) -> Sequence:  # type: ignore[type-arg]
            return fixed[name] if name in fixed else (default,) * count

        if self.layout.is_diff:
            base_results, diff_results = column(_BASE_RESULT, ""), column(_DIFF_RESULT, "")
            has_diff = column(_HAS_DIFF, False)
            base_instr, diff_instr = column(_BASE_INSTRUCTIONS, 0), column(_DIFF_INSTRUCTIONS, 0)
        else:
            base_results = diff_results = column(_RESULT, "")
            has_diff = (False,) * count
            base_instr = diff_instr = column(_INSTRUCTIONS, 0)
        return DetailsColumns(column(_CONTEXT, 0), column(_CONTEXT_SIZE, 0), column(_METHOD, ""),
                              column(_TIER, ""), base_results, diff_results, column(_MINOPTS, False), has_diff,
                              base_instr, diff_instr, self.line_numbers)


def _text(values: Sequence[str]) -> Sequence[str]:
    return values


_FIXED_CONVERTERS: Dict[str, Callable[[Sequence[str]], Sequence]] = {  # type: ignore[type-arg]
    _CONTEXT: _convert_ints, _CONTEXT_SIZE: _convert_ints, _METHOD: _text, _TIER: _text,
    _MINOPTS: _convert_bools, _HAS_DIFF: _convert_bools, _RESULT: _check_results,
    _INSTRUCTIONS: _convert_ints, _BASE_RESULT: _check_results, _DIFF_RESULT: _check_results,
    _BASE_INSTRUCTIONS: _convert_ints, _DIFF_INSTRUCTIONS: _convert_ints,
}


def is_no_data(error: DetailsError) -> bool:
    """True when the error means "no data" rather than a broken file (§3.2.6)."""
    return error.kind in ("missing", "empty")


__all__ = [
    "BYTES_ALLOCATED", "CODE_BYTES", "DetailsColumns", "DetailsError", "DetailsRow", "DetailsTable", "ERROR",
    "HIGHER_IS_BETTER", "LOWER_IS_BETTER", "MISS", "NEUTRAL", "PERFSCORE", "RESULTS", "SUCCESS",
    "concatenate", "is_no_data", "is_improvement", "metric_direction", "parse_details", "read_details_csv", "stream_details",
    "stream_details_csv",
]
