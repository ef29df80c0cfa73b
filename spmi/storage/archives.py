"""The one archive extractor: `.zip` and tar with one set of path rules (no absolute
paths, no `..`, no links, nothing outside the target directory).
"""
from __future__ import annotations

import logging
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

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


def extract_zip(archive: Path, target_dir: Path, display_name: Optional[str] = None) -> List[Path]:
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
                    shutil.copyfileobj(source, sink, 1024 * 1024)
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
                                "free some disk space and run again") from None
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


def extract_tar(archive: Path, target_dir: Path) -> List[Path]:
    """Extract regular files and directories only, after checking every entry."""
    try:
        handle = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise SuiteError(f"{archive.name} is not a readable tar archive ({one_line(str(exc))})") from None
    written: List[Path] = []
    with handle:
        members = handle.getmembers()
        _refuse_unsafe_entries(archive.name, ((m.name, unsafe_tar_member_reason(m)) for m in members))
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
