"""superpmi's details CSV (`-details`, CONTRACTS §3.2 and §13).

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
import os
from contextlib import contextmanager
from array import array
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from jitutil import SuiteError

Number = Union[int, float]

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


@dataclass
class DetailsTable:
    """All rows of one CSV, in file order (neither sorted nor unique by context)."""

    source: str
    metric_names: Tuple[str, ...]
    rows: List[DetailsRow] = field(repr=False)
    is_diff_layout: bool
    synthesized_metrics: Tuple[str, ...] = ()  # absent in the file, filled with 0
    available_metrics: Tuple[str, ...] = ()    # every metric the header has (kept or not)

    base_columns: List[Sequence[Number]] = field(default_factory=list, repr=False)
    diff_columns: List[Sequence[Number]] = field(default_factory=list, repr=False)

    def has_metric(self, name: str) -> bool:
        return name in self.metric_names

    def base_column(self, metric: str) -> Sequence[Number]:
        """Base values of a metric, in row order."""
        return self.base_columns[self.metric_names.index(metric)]

    def diff_column(self, metric: str) -> Sequence[Number]:
        return self.diff_columns[self.metric_names.index(metric)]


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
        required = (_CONTEXT, _CONTEXT_SIZE, _MINOPTS, _HAS_DIFF)
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
        return [_BOOLS[text] for text in values]
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


class _MetricColumn:
    """Values of one metric column: `array('q')` for ints, `array('d')` for floats
    (8 bytes a value), a plain list for the rare mixed or huge column."""

    def __init__(self) -> None:
        self.values: Union["array[int]", "array[float]", List[Number]] = array("q")

    def extend(self, texts: Tuple[str, ...]) -> None:
        if isinstance(self.values, array) and self.values.typecode == "q":
            if texts.count("0") == len(texts):  # most metrics are 0 for most methods
                self.values.frombytes(bytes(self.values.itemsize * len(texts)))
                return
            try:
                self.values.extend(list(_fast_ints(texts)))  # all or nothing
                return
            except (ValueError, OverflowError):
                pass
            if len(self.values) == 0 and all("." in text for text in texts):
                self.values = array("d")
        if isinstance(self.values, array) and self.values.typecode == "d":
            if all("." in text for text in texts):
                try:
                    self.values.extend(list(map(float, texts)))
                    return
                except ValueError:
                    pass
        numbers = _slow_numbers(texts)
        if isinstance(self.values, array):
            self.values = list(self.values)
        self.values.extend(numbers)


# ---------------------------------------------------------------- parsing

TextOrLines = Union[str, Iterable[str]]
_CHUNK_ROWS = 4096


def parse_details(text_or_lines: TextOrLines, source: str = "<details CSV>",
                  metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Parse details CSV text (or its lines) into a table; `source` names it in errors.

    `metrics` limits which metric columns are kept (None: all of them); only kept
    columns are converted, which is what makes big files fast.
    `ActualCodeBytes` and `PerfScore` are always present (0 when absent, §13).
    """
    lines = _LineTracker(text_or_lines.splitlines(keepends=True) if isinstance(text_or_lines, str)
                         else text_or_lines)
    reader = csv.reader(lines, strict=True)
    header = _read_header(reader, source)
    layout = _discover_layout(header, source)
    builder = _TableBuilder(header, layout, _wanted_metrics(layout, metrics), source)
    with _gc_paused():  # many small acyclic objects: collection passes would only cost time
        for records, line_numbers in _read_chunks(reader, builder.getter, len(header), lines, source):
            builder.add(records, line_numbers)
        if builder.count == 0:
            raise DetailsError(f"{source}: the file has a header but no rows", kind="empty")
        return builder.finish()


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_details_csv(path: Union[str, "os.PathLike[str]"], metrics: Optional[Iterable[str]] = None) -> DetailsTable:
    """Read a details CSV file; a missing, empty or malformed file raises `DetailsError`."""
    source = os.fspath(path)
    try:
        with open(path, "r", encoding="utf-8", errors="replace", newline="") as handle:
            return parse_details(handle, source, metrics)
    except FileNotFoundError:
        raise DetailsError(f"{source}: details CSV not found (did superpmi run?)", kind="missing") from None
    except IsADirectoryError:
        raise DetailsError(f"{source}: is a directory, not a details CSV", kind="missing") from None
    except OSError as exc:
        raise DetailsError(f"{source}: cannot read the details CSV: {exc.strerror}", kind="missing") from None


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


def _read_header(reader: "csv._reader", source: str) -> List[str]:
    try:
        for record in reader:
            if record:
                return record
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {reader.line_num}: malformed CSV ({exc})") from None
    raise DetailsError(f"{source}: the file is empty (no header, no rows)", kind="empty")


def _wanted_metrics(layout: _Layout, metrics: Optional[Iterable[str]]) -> List[str]:
    if metrics is None:
        return list(layout.metrics)
    requested = set(metrics) | {CODE_BYTES, PERFSCORE}
    return [name for name in layout.metrics if name in requested]


def _read_chunks(reader: "csv._reader", getter: Callable[[List[str]], Tuple[str, ...]], width: int,
                 lines: _LineTracker, source: str) -> Iterator[Tuple[List[Tuple[str, ...]], List[int]]]:
    """Kept fields of the rows, a few thousand at a time.

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
            line_numbers.append(reader.line_num)
            if len(records) == _CHUNK_ROWS:
                yield records, line_numbers
                records, line_numbers = [], []
    except csv.Error as exc:
        raise DetailsError(f"{source}: line {reader.line_num}: malformed CSV ({exc})") from None
    if ragged is not None:
        truncated_tail = ragged[0] == reader.line_num and not lines.last.endswith(("\n", "\r"))
        if not truncated_tail:
            raise DetailsError(f"{source}: line {ragged[0]} has {ragged[1]} fields, the header has {width}")
    if records:
        yield records, line_numbers


_FIXED_COLUMNS = (_CONTEXT, _CONTEXT_SIZE, _METHOD, _TIER, _MINOPTS, _HAS_DIFF, _RESULT, _INSTRUCTIONS,
                  _BASE_RESULT, _DIFF_RESULT, _BASE_INSTRUCTIONS, _DIFF_INSTRUCTIONS)


class _TableBuilder:
    """Collects converted columns chunk by chunk, then makes the rows."""

    def __init__(self, header: Sequence[str], layout: _Layout, wanted: List[str], source: str) -> None:
        self.header = [name.strip() for name in header]
        self.layout = layout
        self.wanted = wanted
        self.source = source
        self.count = 0
        indices: List[int] = []
        self.slot: Dict[int, int] = {}
        for column in [layout.columns[name] for name in _FIXED_COLUMNS if name in layout.columns] + \
                [col for name in wanted for col in self._metric_cols(name)]:
            if column not in self.slot:
                self.slot[column] = len(indices)
                indices.append(column)
        self.getter = itemgetter(*indices)  # at least Context, Context size and MinOpts
        self.fixed: Dict[str, List[object]] = {name: [] for name in _FIXED_COLUMNS if name in layout.columns}
        self.line_numbers: List[int] = []
        self.base = [_MetricColumn() for _ in wanted]
        self.diff = [_MetricColumn() for _ in wanted] if layout.is_diff else self.base

    def _metric_cols(self, name: str) -> Tuple[int, int]:
        position = self.layout.metrics.index(name)
        return self.layout.base_metric_cols[position], self.layout.diff_metric_cols[position]

    def add(self, records: List[Tuple[str, ...]], line_numbers: List[int]) -> None:
        columns = list(zip(*records))
        for name, values in self.fixed.items():
            texts = columns[self.slot[self.layout.columns[name]]]
            values.extend(self._checked(name, line_numbers, _FIXED_CONVERTERS[name], texts))
        for position, name in enumerate(self.wanted):
            base_col, diff_col = self._metric_cols(name)
            self._checked(self.header[base_col], line_numbers, self.base[position].extend,
                          columns[self.slot[base_col]])
            if self.layout.is_diff:
                self._checked(self.header[diff_col], line_numbers, self.diff[position].extend,
                              columns[self.slot[diff_col]])
        self.line_numbers.extend(line_numbers)
        self.count += len(records)

    def _checked(self, label: str, line_numbers: List[int], convert: Callable[[Sequence[str]], object],
                 texts: Sequence[str]):  # type: ignore[no-untyped-def]
        try:
            return convert(texts)
        except _BadValue as bad:
            raise DetailsError(f"{self.source}: line {line_numbers[bad.position]}, column '{label}': "
                               f"bad value '{bad.text}'") from None

    def finish(self) -> DetailsTable:
        count = self.count
        fixed = self.fixed

        def column(name: str, default: object) -> Sequence:  # type: ignore[type-arg]
            return fixed[name] if name in fixed else (default,) * count

        metric_names = list(self.wanted)
        base_columns = [column_.values for column_ in self.base]
        diff_columns = [column_.values for column_ in self.diff] if self.layout.is_diff else base_columns
        synthesized: List[str] = []
        for name, zeros in ((CODE_BYTES, array("q", [0])), (PERFSCORE, array("d", [0.0]))):
            if name not in metric_names:
                metric_names.append(name)
                base_columns.append(zeros * count)
                if self.layout.is_diff:
                    diff_columns.append(base_columns[-1])
                synthesized.append(name)
        if self.layout.is_diff:
            base_results, diff_results = column(_BASE_RESULT, ""), column(_DIFF_RESULT, "")
            has_diff = column(_HAS_DIFF, False)
            base_instr, diff_instr = column(_BASE_INSTRUCTIONS, 0), column(_DIFF_INSTRUCTIONS, 0)
        else:
            base_results = diff_results = column(_RESULT, "")
            has_diff = (False,) * count
            base_instr = diff_instr = column(_INSTRUCTIONS, 0)
        index = {name: position for position, name in enumerate(metric_names)}
        rows = [DetailsRow(c, s, m, t, br, dr, mo, hd, bi, di, ln, pos, base_columns, diff_columns, index)
                for pos, (c, s, m, t, br, dr, mo, hd, bi, di, ln) in enumerate(zip(
                    column(_CONTEXT, 0), column(_CONTEXT_SIZE, 0), column(_METHOD, ""), column(_TIER, ""),
                    base_results, diff_results, column(_MINOPTS, False), has_diff, base_instr, diff_instr,
                    self.line_numbers))]
        return DetailsTable(self.source, tuple(metric_names), rows, self.layout.is_diff, tuple(synthesized),
                            tuple(self.layout.metrics), base_columns, diff_columns)


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
    "BYTES_ALLOCATED", "CODE_BYTES", "DetailsError", "DetailsRow", "DetailsTable", "ERROR",
    "HIGHER_IS_BETTER", "LOWER_IS_BETTER", "MISS", "NEUTRAL", "PERFSCORE", "RESULTS", "SUCCESS",
    "is_no_data", "is_improvement", "metric_direction", "parse_details", "read_details_csv",
]
