"""Compact columns for tables of many rows (asmdiffs' diff list, docs/architecture.md).

`Numbers` keeps integers or floats in an `array` (8 bytes a value instead of an object
each); `Texts` keeps texts packed one after the other as UTF-8 (about one byte a
character, no object per text); `Labels` keeps values of a few distinct kinds (a tier
name, a result, a flag) as one small code each. All compare equal to a list of the same
values, so a column made by a run and the same column read back from JSON (a list) are
equal.

Sums of a column add left to right (`in_order_sum`): `sum()` compensates floats since
Python 3.12, so a total made of running sums over parts, and the same total over the
whole column, would differ in the last bits from one interpreter to the next.
"""
from __future__ import annotations

from array import array
from functools import reduce
from itertools import accumulate, compress, islice
from operator import add, eq
from typing import Dict, Iterable, Iterator, List, Sequence, TypeVar, Union, overload

_T = TypeVar("_T")
_BATCH = 4096  # values encoded at a time


class Numbers(array):  # type: ignore[type-arg]
    """An `array` of 'q' (integers) or 'd' (floats) that is also equal to a list of the same numbers."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return len(self) == len(other) and all(map(eq, self, other))
        return array.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


def numbers(typecode: str, values: Iterable[Union[int, float]]) -> Numbers:
    """`values` as `Numbers` ('q' takes integers, 'd' floats)."""
    column = Numbers(typecode)
    column.extend(values)  # type: ignore[arg-type]
    return column


class Texts(Sequence[str]):
    """Texts stored as one UTF-8 buffer and the offset where each ends (any `str`, lone
    surrogates included, reads back unchanged)."""

    __slots__ = ("_data", "_ends")

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._data = bytearray()
        self._ends = array("q")
        self.extend(texts)

    def extend(self, texts: Iterable[str]) -> None:
        remaining = iter(texts)
        while True:
            encoded = [text.encode("utf-8", "surrogatepass") for text in islice(remaining, _BATCH)]
            if not encoded:
                return
            self._ends.extend(islice(accumulate(map(len, encoded), initial=len(self._data)), 1, None))
            self._data += b"".join(encoded)

    def append(self, text: str) -> None:
        self.extend((text,))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> "Texts": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[str, "Texts"]:
        if isinstance(index, slice):
            return Texts(map(self.__getitem__, range(*index.indices(len(self)))))
        end = self._ends[index]  # IndexError as a list's
        position = index + len(self) if index < 0 else index
        start = self._ends[position - 1] if position else 0
        return self._data[start:end].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        data, start = self._data, 0
        for end in self._ends:
            yield data[start:end].decode("utf-8", "surrogatepass")
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Texts):
            return self._ends == other._ends and self._data == other._data
        if isinstance(other, list):
            return len(self) == len(other) and all(map(eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Texts({list(self)!r})"


class Labels(Sequence[_T]):
    """Values of a few distinct kinds, each stored once, and one code a row (a byte while
    there are at most 256 distinct values)."""

    __slots__ = ("values", "_codes", "_code_of")

    def __init__(self, items: Iterable[_T] = ()) -> None:
        self.values: List[_T] = []  # the distinct values, in order of first appearance
        self._codes = array("B")
        self._code_of: Dict[_T, int] = {}
        self.extend(items)

    def extend(self, items: Iterable[_T]) -> None:
        items = list(items)
        for item in dict.fromkeys(items):
            if item not in self._code_of:
                self._code_of[item] = len(self.values)
                self.values.append(item)
        if len(self.values) > 256 and self._codes.typecode == "B":
            self._codes = array("L", self._codes)
        self._codes.extend(map(self._code_of.__getitem__, items))

    def append(self, item: _T) -> None:
        self.extend((item,))

    def __len__(self) -> int:
        return len(self._codes)

    @overload
    def __getitem__(self, index: int) -> _T: ...

    @overload
    def __getitem__(self, index: slice) -> "Labels[_T]": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[_T, "Labels[_T]"]:
        if isinstance(index, slice):
            return Labels(map(self.__getitem__, range(*index.indices(len(self)))))
        return self.values[self._codes[index]]

    def __iter__(self) -> Iterator[_T]:
        return map(self.values.__getitem__, self._codes)

    def count(self, value: object) -> int:
        code = self._code_of.get(value)  # type: ignore[arg-type]
        return 0 if code is None else self._codes.count(code)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, Labels)):
            return len(self) == len(other) and all(map(eq, self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Labels({list(self)!r})"


def taken(column: Sequence[_T], positions: Sequence[int]) -> Sequence[_T]:
    """The values of `column` at `positions`, in a column of the same kind (a list stays a list)."""
    values = map(column.__getitem__, positions)
    if isinstance(column, Texts):
        return Texts(values)  # type: ignore[arg-type,return-value]
    if isinstance(column, Labels):
        return Labels(values)
    if isinstance(column, array):
        return numbers(column.typecode, values)  # type: ignore[arg-type,return-value]
    return list(values)


def as_list(column: Sequence[_T]) -> List[_T]:
    """The column as a plain list (for JSON)."""
    return column if isinstance(column, list) else list(column)


Number = Union[int, float]


def in_order_sum(values: Iterable[Number], start: Number = 0) -> Number:
    """start + v1 + v2 + ..., left to right, as a `+=` loop adds on every Python version (`sum`
    compensates floats since 3.12): a running total over parts equals the total over the whole."""
    return reduce(add, values, start)


def masked_sum(column: Sequence[Number], mask: bytes, start: Number = 0) -> Number:
    """start + the values of `column` where `mask` is set, left to right; integers in a 'q' array
    are added by `sum` at C speed (exact in any order)."""
    values = compress(column, mask)
    if isinstance(column, array) and column.typecode == "q" and isinstance(start, int):
        return sum(values, start)
    return in_order_sum(values, start)


__all__ = ["Labels", "Number", "Numbers", "Texts", "as_list", "in_order_sum", "masked_sum", "numbers", "taken"]
