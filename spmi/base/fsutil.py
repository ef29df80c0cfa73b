"""File-system helpers: unique names, atomic writes (temporary name, then rename),
scratch directories, and a cross-process lock around a directory.
"""
from __future__ import annotations

import logging
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Union

from spmi.base import platforms

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]


def unique_file_path(path: Path) -> Path:
    """Unique name for a file to be created: `base.ext`, `base.1.ext`, ..."""
    if not path.exists():
        return path
    index = 1
    while True:
        candidate = path.with_name(f"{path.stem}.{index}{path.suffix}")
        if not candidate.exists():
            return candidate
        index += 1


def unique_dir_path(path: Path) -> Path:
    """Unique name for a directory to be created: `x`, `x.1`, `x.2`, ..."""
    if not path.exists():
        return path
    index = 1
    while True:
        candidate = path.with_name(f"{path.name}.{index}")
        if not candidate.exists():
            return candidate
        index += 1


def atomic_write_bytes(path: Path, data: bytes, make_parents: bool = True) -> None:
    """Write to a temporary name next to `path`, then rename over it (the one atomic writer).

    Missing parent folders are created unless `make_parents` is False."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str, make_parents: bool = True) -> None:
    """UTF-8 text, written as `atomic_write_bytes` writes (line ends as given)."""
    atomic_write_bytes(path, text.encode("utf-8"), make_parents)


@contextmanager
def temporary_directory(prefix: str = "spmi-", keep: bool = False) -> Iterator[Path]:
    """A scratch directory removed afterwards (also on Ctrl-C), unless `keep`."""
    import shutil
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            log.info("Keeping temporary directory %s", path)
        else:
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock (`<directory>.lock` beside it) shared by all processes."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock_path = directory.parent / (directory.name + ".lock")
    with open(lock_path, "a+b") as handle:
        log.debug("Waiting for lock %s", lock_path)
        platforms.lock_file(handle)
        try:
            yield
        finally:
            platforms.unlock_file(handle)
