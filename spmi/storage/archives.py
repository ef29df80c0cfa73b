"""The one archive extractor: `.zip` and tar with one set of path rules (no absolute
paths, no `..`, no links, nothing outside the target directory, no two entries for one
file, no entry that is a file and a folder) and one size rule (`SizeLimits`:
docs/contracts.md §12.21), all checked before anything is written.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from spmi.base.errors import SuiteError
from spmi.base.fsutil import confined_path, relative_name_path, unsafe_name_reason
from spmi.base.untrusted import one_line

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    import zipfile
from spmi.storage.blobs import TEMP_DIR_PREFIX, DownloadError

log = logging.getLogger("superpmi")


class UnsafeArchive(DownloadError):
    """An archive (zip or tar) holds an entry that may not be extracted."""


class NotAZip(DownloadError):
    """A `.zip` download that is not a readable zip archive."""


@dataclass(frozen=True)
class SizeLimits:
    """What an archive may unpack to (docs/contracts.md §12.21): at most `max_total_bytes` in
    all, and no entry larger than `ratio_floor_bytes` that unpacks to more than `max_ratio`
    times its packed size (deflate reaches about 1000:1 on zeros; collections pack 3-10:1)."""

    max_total_bytes: int = 64 * 1024 ** 3
    max_ratio: float = 100.0
    ratio_floor_bytes: int = 16 * 1024 * 1024


DEFAULT_SIZE_LIMITS = SizeLimits()


def _refuse_oversized(shown: str, entries: Sequence[Tuple[str, int, int]], limits: SizeLimits) -> None:
    """`entries`: (name, unpacked size, packed size); a tar archive is one entry, all its files
    against the archive's size. Refused before anything is written."""
    total = sum(size for _, size, _ in entries)
    if total > limits.max_total_bytes:
        raise UnsafeArchive(f"{shown} would unpack to {total:,} bytes, more than the limit of "
                            f"{limits.max_total_bytes:,}; refusing to extract it")
    for name, size, packed in entries:
        if size > limits.ratio_floor_bytes and size > limits.max_ratio * max(packed, 1):
            raise UnsafeArchive(f"{shown}: entry {one_line(repr(name))} unpacks {packed:,} bytes to {size:,} "
                                f"(more than {limits.max_ratio:g} times; an archive bomb?); refusing to extract it")


def _refuse_clashing_entries(shown: str, entries: Iterable[Tuple[str, bool]]) -> None:
    """Two entries for one file, or a file that is also another entry's folder (compared
    without case, as Windows and macOS do), are refused before anything is written."""
    files: Dict[str, str] = {}
    folders: Dict[str, str] = {}
    for name, is_dir in entries:
        parts = relative_name_path(name).parts
        if not parts:
            continue
        key = "/".join(parts).lower()
        for depth in range(1, len(parts) if not is_dir else len(parts) + 1):
            folder = "/".join(parts[:depth]).lower()
            if folder in files:
                raise UnsafeArchive(f"{shown}: entry {one_line(repr(files[folder]))} is a file and also the "
                                    f"folder of {one_line(repr(name))}; refusing to extract it")
            folders.setdefault(folder, name)
        if is_dir:
            continue
        if key in files:
            raise UnsafeArchive(f"{shown}: entry {one_line(repr(name))} appears twice (or twice up to case); "
                                "refusing to extract it")
        if key in folders:
            raise UnsafeArchive(f"{shown}: entry {one_line(repr(name))} is a file and also the folder of "
                                f"{one_line(repr(folders[key]))}; refusing to extract it")
        files[key] = name


_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def write_failure_hint(exc: OSError) -> str:
    """What to do about a failed write: free space for a full disk, else the permissions."""
    if exc.errno in _NO_SPACE_ERRNOS:
        return "free some disk space and run again"
    return "check the folder and its permissions and run again"


def unsafe_zip_entry_reason(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a zip entry may not be extracted (None when it is safe)."""
    reason = unsafe_name_reason(info.filename)
    if reason:
        return reason
    mode = (info.external_attr >> 16) & 0xFFFF
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "a special file"
    return None


def _refuse_unsafe_entries(shown: str, reasons: Iterable[Tuple[str, Optional[str]]]) -> None:
    """Refuse the whole archive at its first unsafe entry, before anything is written."""
    for name, reason in reasons:
        if reason:
            raise UnsafeArchive(f"{shown}: entry '{name}' has {reason}; refusing to extract it")


def _confined_entry(target_dir: Path, relative: Path, shown: str) -> Path:
    try:
        return confined_path(target_dir, relative.as_posix(), f"{shown} entry")
    except SuiteError as exc:
        raise UnsafeArchive(f"{exc}; refusing to extract it") from None


class ExtractionStopped(Exception):
    """`extract_zip` was asked to stop (its `stop` event was set); nothing was left behind."""


def _copy(source: IO[bytes], sink: IO[bytes], stop: Optional[threading.Event]) -> None:
    """Copy in 1 MiB blocks, looking at `stop` between blocks."""
    while True:
        if stop is not None and stop.is_set():
            raise ExtractionStopped()
        block = source.read(1024 * 1024)
        if not block:
            return
        sink.write(block)


def extract_zip(archive: Path, target_dir: Path, display_name: Optional[str] = None,
                limits: SizeLimits = DEFAULT_SIZE_LIMITS, stop: Optional[threading.Event] = None) -> List[Path]:
    """Extract into a scratch directory beside the targets, then rename each file into place.

    Entries that are absolute, contain `..` or are links are rejected before anything is
    written; on failure (e.g. a full disk) nothing partial is left behind.
    """
    import zipfile
    shown = display_name or archive.name
    target_dir.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise NotAZip(f"{shown} is not a valid zip file ({one_line(str(exc))})") from None
    with zf:
        entries = zf.infolist()
        _refuse_unsafe_entries(shown, ((info.filename, unsafe_zip_entry_reason(info)) for info in entries))
        _refuse_clashing_entries(shown, ((info.filename, info.is_dir()) for info in entries))
        _refuse_oversized(shown, [(i.filename, i.file_size, i.compress_size) for i in entries if not i.is_dir()],
                          limits)
        scratch = Path(tempfile.mkdtemp(prefix=TEMP_DIR_PREFIX + "-extract-", dir=str(target_dir)))
        try:
            staged: List[Tuple[Path, Path]] = []
            for info in entries:
                relative = relative_name_path(info.filename)
                if info.is_dir() or not relative.parts:
                    continue
                staging = scratch / relative
                staging.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, staging.open("wb") as sink:
                    _copy(source, sink, stop)
                staged.append((staging, _confined_entry(target_dir, relative, shown)))
            results = []
            for staging, final in staged:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging, final)
                results.append(final)
            return results
        except zipfile.BadZipFile as exc:
            raise NotAZip(f"{shown} is damaged ({one_line(str(exc))})") from None
        except OSError as exc:
            raise DownloadError(f"extracting {shown} into {target_dir} failed: {exc.strerror or exc}; "
                                f"{write_failure_hint(exc)}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def extract_archive(archive: Path, target_dir: Path) -> List[Path]:
    """Extract a `.zip` or a tar archive (any compression) under `target_dir`, one set of path rules."""
    if archive.name.lower().endswith(".zip"):
        return extract_zip(archive, target_dir)
    return extract_tar(archive, target_dir)


def unsafe_tar_member_reason(member: tarfile.TarInfo) -> Optional[str]:
    """Why a tar entry may not be extracted (None when it is safe): the storage path rules, no links."""
    reason = unsafe_name_reason(member.name)
    if reason:
        return reason
    if member.issym() or member.islnk():
        return "a link"
    if not (member.isfile() or member.isdir()):
        return "a special file"
    return None


_DAMAGED_TAR_ERRORS: Tuple[Type[BaseException], ...] = (tarfile.TarError, EOFError, zlib.error)


def extract_tar(archive: Path, target_dir: Path, limits: SizeLimits = DEFAULT_SIZE_LIMITS) -> List[Path]:
    """Extract regular files and directories only, after checking every entry.

    A damaged or truncated archive is one line; what was written of it stays (it is the
    user's folder, not the suite's)."""
    try:
        handle = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise SuiteError(f"{archive.name} is not a readable tar archive ({one_line(str(exc))})") from None
    with handle:
        try:
            return _extract_tar_members(handle, archive, target_dir, limits)
        except _DAMAGED_TAR_ERRORS as exc:
            raise SuiteError(f"{archive.name} is damaged or truncated ({one_line(str(exc) or type(exc).__name__)}); "
                             "get a complete copy of the archive") from None
        except OSError as exc:
            if exc.filename is None:
                raise SuiteError(f"reading {archive.name} failed: {exc.strerror or exc}") from None
            raise SuiteError(f"extracting {archive.name} into {target_dir} failed: {exc.strerror or exc} "
                             f"({exc.filename}); {write_failure_hint(exc)}") from None


def _extract_tar_members(handle: tarfile.TarFile, archive: Path, target_dir: Path, limits: SizeLimits) -> List[Path]:
    written: List[Path] = []
    members = handle.getmembers()
    _refuse_unsafe_entries(archive.name, ((m.name, unsafe_tar_member_reason(m)) for m in members))
    _refuse_clashing_entries(archive.name, ((m.name, m.isdir()) for m in members))
    total = sum(m.size for m in members if m.isfile())
    _refuse_oversized(archive.name, [("(all entries)", total, archive.stat().st_size)], limits)
    target_dir.mkdir(parents=True, exist_ok=True)
    for member in members:
        relative = relative_name_path(member.name)
        if not relative.parts:
            continue
        destination = confined_path(target_dir, relative.as_posix(), f"{archive.name} entry")
        if member.isdir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        source = handle.extractfile(member)
        if source is None:
            continue
        with source, destination.open("wb") as sink:
            shutil.copyfileobj(source, sink, 1024 * 1024)
        mode = member.mode & 0o777 & ~(stat.S_IWGRP | stat.S_IWOTH)
        os.chmod(destination, mode | stat.S_IRUSR | stat.S_IWUSR)
        written.append(destination)
    return written
