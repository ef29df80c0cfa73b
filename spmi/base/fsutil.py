"""File-system helpers: unique names, atomic writes (temporary name, then rename),
scratch directories, and a cross-process lock around a directory.
"""
from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Union

from spmi.base import platforms
from spmi.base.errors import SuiteError

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]


# ---------------------------------------------------------------- untrusted names (docs/contracts.md §12.20)

#: Windows device names (COM and LPT also with the superscript digits ¹ ² ³, which Windows reads as 1 2 3)
_DEVICE_NAME_RE = re.compile("^(con|prn|aux|nul|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3]|conin\\$|conout\\$)$",
                             re.IGNORECASE)
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def unsafe_name_reason(name: str, single_segment: bool = False) -> Optional[str]:
    """Why a name from outside the suite may not become part of a path (None when it may).

    `name` is already percent-decoded. Refused: empty names, NUL, absolute paths, drive
    letters, `..`, device names, and (for a single segment) any separator."""
    if not name:
        return "an empty name"
    if "\0" in name:
        return "a NUL character"
    normalized = name.replace("\\", "/")
    if normalized.startswith("/") or _DRIVE_RE.match(normalized):
        return "an absolute path"
    parts = normalized.split("/")
    if any(part == ".." for part in parts):
        return "a '..' component"
    if single_segment and len(parts) > 1:
        return "a path separator"
    if any(is_device_name(part) for part in parts if part):
        return "a device name"
    if single_segment and name in (".", ""):
        return "no file name"
    return None


def is_device_name(segment: str) -> bool:
    """Whether Windows opens a device for this path segment, as it reads one: what comes before the first
    `.` (the extension does not matter: `nul.tar.gz`), without trailing spaces or a colon (`con .so`,
    `COM1:`), is a device name."""
    return bool(_DEVICE_NAME_RE.match(segment.split(".", 1)[0].rstrip(" :")))


def relative_name_path(name: str) -> Path:
    """`name` (either separator) as a relative path without empty or `.` components."""
    return Path(*[p for p in name.replace("\\", "/").split("/") if p not in ("", ".")])


def _is_inside(root: Path, candidate: Path) -> bool:
    try:
        return os.path.commonpath([str(root), str(candidate)]) == str(root)
    except ValueError:  # different drives
        return False


def confined_path(root: Path, untrusted_name: str, what: str = "name", single_segment: bool = False) -> Path:
    """`root / untrusted_name`, only if it stays inside `root` (docs/contracts.md §12.20).

    The one confinement rule for every name that comes from outside the suite (URL segments,
    blob names, archive entries, collection names): refused with a one-line SuiteError
    naming the input, before anything is written."""
    reason = unsafe_name_reason(untrusted_name, single_segment)
    if reason is None:
        relative = relative_name_path(untrusted_name)
        if not relative.parts:
            reason = "no file name"
        else:
            base = Path(os.path.realpath(root))
            candidate = Path(os.path.realpath(base / relative))
            if _is_inside(base, candidate) and candidate != base:
                return Path(root) / relative
            reason = "a path that leaves its folder"
    raise SuiteError(f"refusing {what} {untrusted_name!r}: it has {reason} and would be written outside {root}")


def not_a_regular_file_inside(root: Path, path: Path) -> Optional[str]:
    """Why `path` is not a regular file inside `root` (None when it is): a symbolic link
    anywhere on its way below `root`, something other than a regular file (a folder, a FIFO,
    a device), or a resolved path outside `root`. Nothing is followed or opened."""
    try:
        relative = Path(path).relative_to(root)
    except ValueError:
        return f"not inside {root}"
    if not relative.parts:
        return "not a regular file"
    current = Path(root)
    mode = 0
    try:
        for index, part in enumerate(relative.parts):
            current = current / part
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                return "a symbolic link" if index == len(relative.parts) - 1 else f"below a symbolic link ({current})"
        if not stat.S_ISREG(mode):
            return "not a regular file"
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    if not _is_inside(Path(os.path.realpath(root)), Path(os.path.realpath(path))):
        return "a path that leaves its folder"
    return None


class UnsuitableFile(ValueError):
    """A file given to be read that is not one to read: not a regular file, or too large."""


# O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
_KIND_NAMES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_small_regular_file(path: PathLike, limit: int) -> bytes:
    """The bytes of the regular file at `path` (a symbolic link followed), at most `limit` of them.

    Never blocks on a FIFO and never reads more than `limit` + 1 bytes (a device such as /dev/zero
    has no end): anything else raises UnsuitableFile saying what it is. OSError when it cannot be
    opened or read."""
    fd = os.open(os.fspath(path), _READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KIND_NAMES if test(mode)), "not a regular file")
            raise UnsuitableFile(f"{kind}, not a regular file")
        pieces: List[bytes] = []
        size = 0
        while size <= limit:
            piece = os.read(fd, min(1 << 16, limit + 1 - size))
            if not piece:
                break
            pieces.append(piece)
            size += len(piece)
    finally:
        os.close(fd)
    if size > limit:
        raise UnsuitableFile(f"larger than {limit:,} bytes")
    return b"".join(pieces)


def _first_free_path(path: Path, numbered: Callable[[int], str]) -> Path:
    """`path` if nothing is there, else the first of `numbered(1)`, `numbered(2)`, ... that is free."""
    candidate = path
    index = 0
    while candidate.exists():
        index += 1
        candidate = path.with_name(numbered(index))
    return candidate


def unique_file_path(path: Path) -> Path:
    """Unique name for a file to be created: `base.ext`, `base.1.ext`, ..."""
    return _first_free_path(path, lambda index: f"{path.stem}.{index}{path.suffix}")


def unique_dir_path(path: Path) -> Path:
    """Unique name for a directory to be created: `x`, `x.1`, `x.2`, ..."""
    return _first_free_path(path, lambda index: f"{path.name}.{index}")


def atomic_write_bytes(path: Path, data: bytes, make_parents: bool = True) -> None:
    """Write to a temporary name next to `path`, then rename over it (the one atomic writer);
    the file gets the permissions a plain `open(path, "w")` would give it (0o666 minus the umask).

    Missing parent folders are created unless `make_parents` is False."""
    atomic_write_pieces(path, [data], make_parents)


@contextmanager
def _renamed_into_place(target: Path) -> Iterator[str]:
    """A temporary file beside `target` to fill; renamed over `target` when the block ends,
    removed when it fails (an OSError that names no file then names `target`)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:
            raise with_file_name(exc, target) from exc
        raise


def atomic_write_pieces(path: Path, pieces: Iterable[bytes], make_parents: bool = True) -> None:
    """`atomic_write_bytes` for content produced piece by piece (a large page streamed as it is
    rendered): nothing appears at `path` until every piece is written."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    with _renamed_into_place(path) as tmp:
        with open(tmp, "wb") as handle:
            for piece in pieces:
                handle.write(piece)
        os.chmod(tmp, platforms.default_file_mode())  # mkstemp makes it 0600


def atomic_copy(source: Path, target: Path) -> None:
    """Copy `source` (content and mode) to a temporary name beside `target`, then rename over it."""
    import shutil
    with _renamed_into_place(target) as tmp:
        shutil.copy2(source, tmp)


def with_file_name(exc: OSError, path: PathLike) -> OSError:
    """`exc` naming `path` when it names no file (a failed write(), e.g. ENOSPC, names none)."""
    if exc.filename is not None:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))


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


INCOMPLETE_MARKER = "INCOMPLETE.txt"


@contextmanager
def marked_incomplete_until_done(directory: Path, what: str) -> Iterator[None]:
    """`directory/INCOMPLETE.txt` exists while `what` is being written and stays when the
    writing is interrupted or fails, so a half-written folder is never mistaken for a whole one."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / INCOMPLETE_MARKER
    atomic_write_text(marker, f"{what} in this folder were not all written (the run was interrupted or "
                              "failed while writing them); run again for a complete set.\n")
    try:
        yield
    except BaseException:
        log.warning("Warning: %s is incomplete (%s); marked with %s", directory, what, INCOMPLETE_MARKER)
        raise
    marker.unlink()


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
