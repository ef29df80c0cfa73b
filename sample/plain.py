"""Plain records and path spelling for the code the sample tools run at every start.

The stand-ins start thousands of times in a test run, and importing ``dataclasses``
(it imports ``inspect``) or ``pathlib`` costs more CPU than most of their runs.  So
their classes derive from :class:`Record` or :class:`FrozenRecord` (``__slots__``,
equality, repr and hash as ``@dataclass`` made them) and they spell paths the way
``pathlib`` does with :func:`path_text` and its helpers.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Tuple, Union

    PathLike = Union[str, "os.PathLike[str]"]


class Record:
    """A class whose fields are its ``__slots__``, in ``__init__`` order; equal to a record of the
    same class with equal fields, shown as ``Name(field=value, ...)``, not hashable (it defines
    ``__eq__`` only).

    ``_derived`` names slots computed from the fields: left out of equality and repr."""

    __slots__ = ()
    _derived: Tuple[str, ...] = ()
    #: the slots that are fields (set for each subclass)
    _fields: Tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        slots: Tuple[str, ...] = cls.__slots__
        cls._fields = tuple(name for name in slots if name not in cls._derived)

    def _init(self, *values: Any) -> None:
        """Set the fields, in ``__slots__`` order (what ``__init__`` calls with its parameters)."""
        if len(values) != len(self._fields):
            raise TypeError("%s takes %d fields, not %d" % (self.__class__.__name__, len(self._fields), len(values)))
        for name, value in zip(self._fields, values):
            object.__setattr__(self, name, value)

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % (name, getattr(self, name)) for name in self._fields)
        return "%s(%s)" % (self.__class__.__qualname__, shown)

    def as_dict(self) -> Dict[str, Any]:
        """Field name -> value (what ``dataclasses.asdict`` gives for flat records)."""
        return {name: getattr(self, name) for name in self._fields}

    def replace(self, **changes: Any) -> Any:
        """A new record of the same class with `changes` (what ``dataclasses.replace`` gives)."""
        return self.__class__(**{**self.as_dict(), **changes})


class FrozenRecord(Record):
    """A record whose fields are set once, by ``__init__`` calling :meth:`Record._init`; hashable.
    A subclass also annotates its fields in the class body (for type checkers)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("cannot assign to field '%s'" % name)

    def __delattr__(self, name: str) -> None:
        raise AttributeError("cannot delete field '%s'" % name)

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> Tuple[Any, ...]:
        return self.__class__, self._values()


# ---------------------------------------------------------------- paths

def path_text(path: PathLike) -> str:
    """``str(pathlib.Path(path))``: without empty and ``.`` parts or a trailing separator
    (on Windows pathlib spells it)."""
    text = os.fspath(path)
    if os.name == "nt":
        from pathlib import PureWindowsPath

        return str(PureWindowsPath(text))
    root = ""
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
    return root + "/".join(part for part in text.split("/") if part not in ("", ".")) or "."


def path_suffix(path: str) -> str:
    """``pathlib.Path(path).suffix`` of a path spelled by :func:`path_text` (none for ``.name`` or ``name.``)."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def with_suffix(path: str, suffix: str) -> str:
    """``pathlib.Path(path).with_suffix(suffix)`` of a path spelled by :func:`path_text`."""
    return path[:len(path) - len(path_suffix(path))] + suffix


def path_order(path: str) -> List[str]:
    """The sort key pathlib orders a path spelled by :func:`path_text` by: its parts, case-folded
    where the file system ignores case."""
    return os.path.normcase(path).split(os.sep)


def parent_dir(path: PathLike) -> str:
    """``pathlib.Path(path).resolve().parent``: the folder of the file ``path`` names, symbolic links resolved."""
    return os.path.dirname(os.path.realpath(path))


def read_bytes(path: PathLike) -> bytes:
    """``pathlib.Path(path).read_bytes()``."""
    with open(path_text(path), "rb") as stream:
        return stream.read()


def read_text(path: PathLike, encoding: str, errors: str = "strict") -> str:
    """``pathlib.Path(path).read_text(encoding, errors)``."""
    with open(path_text(path), encoding=encoding, errors=errors) as stream:
        return stream.read()


def write_bytes(path: PathLike, data: bytes) -> None:
    """``pathlib.Path(path).write_bytes(data)``."""
    with open(path_text(path), "wb") as stream:
        stream.write(data)
