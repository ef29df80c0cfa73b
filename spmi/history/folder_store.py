"""A local folder as the history store (docs/history.md): `-storage_url` a folder path or a `file://` URL.

The layout is the storage account's: a record `history/<type>/<os>/<arch>/<time>_<hash>.json`
of the `superpmi` container is the file `<folder>/superpmi/history/<type>/<os>/<arch>/<time>_<hash>.json`.
What is read back gets the checks a blob gets: a listing holds at most `MAX_LISTED` names (more is
one error), every name found is untrusted and judged by the caller (`store.parse_record_name`), every
path is built through `fsutil.confined_path`, a record must be a regular file inside the folder (no
symbolic link on its way) and is refused unread when larger than the caller's cap. Writing needs no
credential and is temp-then-rename.
"""
from __future__ import annotations

import os
import urllib.parse
from pathlib import Path, PurePath
from typing import List

from spmi.base import fsutil, platforms
from spmi.base.errors import SuiteError

#: a listing of more names than this is refused (a real history holds a few thousand records)
MAX_LISTED = 100_000
_SCHEME = "file:"


class FolderReadError(SuiteError):
    """One file of a folder store could not be read as a record; one line naming it."""


def is_folder_location(location: str) -> bool:
    """Whether a resolved store location is a folder (`file://` URL) rather than a storage account."""
    return location[:len(_SCHEME)].lower() == _SCHEME


def is_folder_text(text: str) -> bool:
    """Whether `-storage_url` (or $SUPERPMI_STORAGE_URL) names a folder: a `file:` URL or no http(s) URL."""
    return is_folder_location(text) or not platforms.is_url(text.strip())


def folder_location(text: str) -> str:
    """`-storage_url` naming a folder as the store's location: the absolute folder's `file://` URL."""
    path = folder_path(text) if is_folder_location(text) else Path(text.strip())
    return Path(os.path.abspath(path)).as_uri()


def folder_path(location: str) -> Path:
    """The folder of a `file:` location; only local `file:` URLs (no host but `localhost`)."""
    parts = urllib.parse.urlsplit(location)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise SuiteError(f"-storage_url '{location}' is not a local folder's file:// URL; "
                         "give e.g. file:///tmp/history or a folder path")
    from urllib.request import url2pathname  # brings http.client, ssl and email: only where a folder is used
    return Path(url2pathname(parts.path))


def list_names(location: str, container: str, prefix: str) -> List[str]:
    """The names of the files below `container/prefix` (names with `/`, unsorted); none when absent.
    Symbolic links to folders are not followed; links to files are listed (reading refuses them)."""
    root = folder_path(location) / container
    start = fsutil.confined_path(root, prefix, "history prefix") if prefix.strip("/") else root
    names: List[str] = []
    for folder, subfolders, files in os.walk(start, followlinks=False):
        subfolders.sort()
        for file_name in sorted(files):
            names.append(PurePath(os.path.relpath(os.path.join(folder, file_name), root)).as_posix())
            if len(names) > MAX_LISTED:
                raise SuiteError(f"the history folder {root} holds more than {MAX_LISTED:,} files below "
                                 f"{prefix}; check -storage_url")
    return names


def read_capped(location: str, container: str, name: str, max_bytes: int) -> bytes:
    """The file `name` of `container`, at most `max_bytes` long; FolderReadError naming it otherwise."""
    root = folder_path(location) / container
    reason = fsutil.unsafe_name_reason(name) or fsutil.not_a_regular_file_inside(
        root, root / fsutil.relative_name_path(name))
    if reason is not None:
        raise FolderReadError(f"{name}: {reason}")
    path = fsutil.confined_path(root, name, "record name")
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            data = stream.read(max_bytes + 1) if size <= max_bytes else b""
    except OSError as exc:
        raise FolderReadError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if size > max_bytes or len(data) > max_bytes:
        raise FolderReadError(f"{name}: larger than the {max_bytes:,} bytes allowed; not read")
    return data


def write(location: str, container: str, name: str, data: bytes) -> str:
    """Write `data` as `name` of `container` (temp-then-rename); the file's path."""
    path = fsutil.confined_path(folder_path(location) / container, name, "record name")
    fsutil.atomic_write_bytes(path, data)
    return str(path)
