"""Reading JSON documents that come from elsewhere (a work item, a download): pure checks.

`parse_json` turns bytes into JSON values or one `SchemaError` line (too big, not
UTF-8, not JSON, nested too deeply to read). `build(cls, data)` makes a dataclass record from
its `asdict` form, checking every field against its type hint (`int`, `float`, `str`,
`bool`, `Optional[...]`, `List[...]` and `Sequence[...]` (read as a list), `Dict[str, ...]`,
`Union[int, float]` (a number kept as read), `Any`, nested records); unknown keys are ignored, missing ones take
their defaults. Every number is checked for range once, here: an integer or a number must be finite and at most
`MAX_MAGNITUDE` (2**63, a 64-bit count) either way. A mismatch names the place, e.g.
`collections[2].aggregates.minopts.base_successes: expected an integer, not a string`.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import json
import math
import typing
from typing import Any, Dict, Type, TypeVar

from spmi.base.errors import SuiteError

T = TypeVar("T")

#: the largest magnitude of a number read from a document (integers and floats alike)
MAX_MAGNITUDE = 2 ** 63
#: an integer literal longer than this is refused while parsing (Python versions differ beyond ~4,300 digits)
MAX_INTEGER_DIGITS = 1000


class SchemaError(SuiteError):
    """A document does not have the expected shape (one line: where, what)."""


_KIND_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "an integer",
               float: "a number", type(None): "null"}


def kind_name(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


# ---------------------------------------------------------------- bytes to JSON values

def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-')):,} digits is not a number this suite reads")
    return int(text)


def parse_json(data: bytes, max_bytes: int) -> Any:
    """JSON values from UTF-8 bytes; SchemaError (without the source) when they are not that."""
    if len(data) > max_bytes:
        raise SchemaError(f"{len(data):,} bytes is more than the {max_bytes:,} bytes allowed")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except RecursionError:
        raise SchemaError("nested too deeply to read") from None
    except ValueError as exc:
        raise SchemaError(f"not valid JSON ({exc})") from None


# ---------------------------------------------------------------- JSON values to records

def is_version(value: Any, expected: int) -> bool:
    """A document's `version` is exactly the integer `expected` (`true` and `1.0` are not 1)."""
    return type(value) is int and value == expected


def build(cls: Type[T], data: Any, where: str = "") -> T:
    """A `cls` record from `data`, every field checked against its type hint."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where + ': ' if where else ''}expected an object, not {kind_name(data)}")
    hints = typing.get_type_hints(cls)
    values: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        place = f"{where}.{f.name}" if where else f.name
        if f.name in data:
            values[f.name] = check(hints[f.name], data[f.name], place)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            raise SchemaError(f"{place}: missing")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:  # the record's own checks (__post_init__)
        raise SchemaError(f"{where + ': ' if where else ''}{exc}") from None


def check(hint: Any, value: Any, where: str) -> Any:
    """`value` as type `hint` (nested records built), or SchemaError."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, where)
    if origin is typing.Union:
        if set(typing.get_args(hint)) == {int, float}:
            return _check_number(value, where)
        return _check_union(typing.get_args(hint), value, where)
    if origin in (list, typing.List, collections.abc.Sequence):  # a JSON array reads as a list
        (item,) = typing.get_args(hint) or (Any,)
        _expect(isinstance(value, list), "a list", value, where)
        return [check(item, element, f"{where}[{index}]") for index, element in enumerate(value)]
    if origin in (dict, typing.Dict):
        key_hint, item = typing.get_args(hint) or (str, Any)
        _expect(isinstance(value, dict), "an object", value, where)
        return {key: check(item, element, f"{where}.{key}") for key, element in value.items()}
    return _check_scalar(hint, value, where)


def _check_union(options: typing.Tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in options:
        return None
    real = [o for o in options if o is not type(None)]
    if len(real) != 1:
        raise TypeError(f"{where}: unsupported union {options}")
    return check(real[0], value, where)


def _check_scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is bool:
        _expect(isinstance(value, bool), "true/false", value, where)
    elif hint is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), "an integer", value, where)
        return _in_range(value, where)
    elif hint is float:
        return float(_check_number(value, where))
    elif hint is str:
        _expect(isinstance(value, str), "a string", value, where)
    else:
        raise TypeError(f"{where}: unsupported type hint {hint!r}")
    return value


def _check_number(value: Any, where: str) -> Any:
    """An integer or float of finite, bounded magnitude, kept as read."""
    _expect(isinstance(value, (int, float)) and not isinstance(value, bool), "a finite number", value, where)
    return _in_range(value, where)


def _in_range(value: Any, where: str) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{where}: expected a finite number, not {value}")
    if abs(value) > MAX_MAGNITUDE:
        raise SchemaError(f"{where}: expected a number of at most {MAX_MAGNITUDE:,} in magnitude, not "
                          f"{_magnitude_text(value)}")
    return value


def _magnitude_text(value: Any) -> str:
    """A huge number said briefly: `a 401-digit integer`, `1e+300`."""
    if isinstance(value, int):
        return f"a {len(str(abs(value)))}-digit integer"
    return f"{value:g}"


def _expect(ok: bool, wanted: str, value: Any, where: str) -> None:
    if not ok:
        raise SchemaError(f"{where}: expected {wanted}, not {kind_name(value)}")
