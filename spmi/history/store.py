"""History records in storage: `superpmi/history/<type>/<os>/<arch>/<time>_<hash>.json` (docs/history.md).

Writing needs a credential (the same rules as `upload`); reading is anonymous. Every name a
listing returns is untrusted: only names of exactly the record shape are read, anything
else is skipped with one line; a record whose content disagrees with its name is skipped too.
A local folder with the same layout is a store too (`folder_store`; no credential).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from spmi.base import fsutil, untrusted
from spmi.history import folder_store
from spmi.history.records import (
    HISTORY_PREFIX,
    MAX_RECORD_BYTES,
    SUMMARY_TYPES,
    HistoryRecord,
    RecordError,
    record_from_bytes,
)
from spmi.storage import blobs, uploads

CONTAINER = "superpmi"
_RECORD_NAME_RE = re.compile(
    r"^history/(?P<type>" + "|".join(SUMMARY_TYPES) + r")/(?P<os>[a-z0-9_]{1,32})/(?P<arch>[a-z0-9_]{1,32})/"
    r"(?P<time>\d{8}T\d{6}Z)_(?P<hash>[0-9a-f]{7,40}|unknown)\.json$")


@dataclass(frozen=True)
class RecordName:
    """What a record's blob name says."""

    name: str
    summary_type: str
    target_os: str
    target_arch: str
    time: str
    diff_hash: str


@dataclass
class Listing:
    """Records found (newest first) and one line per skipped name or record."""

    records: List[HistoryRecord] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)


def shown_text(text: str) -> str:
    """Untrusted text as one console line with no pipeline command in it."""
    return untrusted.neutralize_commands(untrusted.one_line(text))


def resolve_location(flag: Optional[str] = None) -> str:
    """`-storage_url`, else $SUPERPMI_STORAGE_URL, else the public account; a folder path or `file://`
    URL as the folder store's `file://` location."""
    text = flag or os.environ.get(blobs.STORAGE_URL_ENV, "")
    if text and folder_store.is_folder_text(text):
        return folder_store.folder_location(text)
    return blobs.resolve_account_url(flag)


def _list_names(account_url: str, prefix: str) -> List[str]:
    if folder_store.is_folder_location(account_url):
        return folder_store.list_names(account_url, CONTAINER, prefix)
    return blobs.list_blobs(CONTAINER, prefix, account_url)


def _read_record_bytes(account_url: str, name: str, session: object) -> bytes:
    if folder_store.is_folder_location(account_url):
        return folder_store.read_capped(account_url, CONTAINER, name, MAX_RECORD_BYTES)
    return blobs.read_small_blob(blobs.blob_url(CONTAINER, name, account_url), MAX_RECORD_BYTES, session)


def parse_record_name(name: str) -> Optional[RecordName]:
    match = _RECORD_NAME_RE.match(name)
    if match is None:
        return None
    return RecordName(name, match["type"], match["os"], match["arch"], match["time"], match["hash"])


def history_prefix(summary_type: Optional[str], target_os: Optional[str], target_arch: Optional[str]) -> str:
    """The listing prefix for what is asked; parts after the first unknown one are left out."""
    prefix = HISTORY_PREFIX
    for part in (summary_type, target_os, target_arch):
        if not part:
            break
        prefix += f"{part}/"
    return prefix


def list_record_names(account_url: str, summary_type: Optional[str] = None, target_os: Optional[str] = None,
                      target_arch: Optional[str] = None) -> Tuple[List[RecordName], List[str]]:
    """Record names under the prefix (newest first), and a line for each name of another shape."""
    names = _list_names(account_url, history_prefix(summary_type, target_os, target_arch))
    found: List[RecordName] = []
    problems: List[str] = []
    for name in names:
        parsed = parse_record_name(name)
        if parsed is None:
            problems.append(f"skipped '{shown_text(name)}': not a history record name")
            continue
        if (target_os and parsed.target_os != target_os) or (target_arch and parsed.target_arch != target_arch):
            continue
        found.append(parsed)
    found.sort(key=lambda n: (n.time, n.name), reverse=True)
    return found, problems


def read_records(account_url: str, names: List[RecordName]) -> Listing:
    """Each named record, schema-checked and checked against its name."""
    listing = Listing()
    session = blobs.new_session()
    for entry in names:
        shown = shown_text(entry.name)
        try:
            data = _read_record_bytes(account_url, entry.name, session)
            record = record_from_bytes(data, shown)
        except (RecordError, blobs.StorageError, folder_store.FolderReadError) as exc:
            listing.problems.append(f"skipped {shown_text(str(exc))}")
            continue
        if (record.summary_type, record.target_os, record.target_arch, record.time) != (
                entry.summary_type, entry.target_os, entry.target_arch, entry.time):
            listing.problems.append(f"skipped {shown}: its content names another run than its blob name")
            continue
        listing.records.append(record)
    return listing


def load_history(account_url: str, summary_type: str, target_os: str, target_arch: str,
                 last: int) -> Listing:
    """The newest `last` readable records of one type and target (plus one line per skip)."""
    names, problems = list_record_names(account_url, summary_type, target_os, target_arch)
    listing = Listing(problems=list(problems))
    for entry_start in range(0, len(names), last):
        batch = read_records(account_url, names[entry_start:entry_start + last])
        listing.records.extend(batch.records)
        listing.problems.extend(batch.problems)
        if len(listing.records) >= last:
            break
    listing.records = listing.records[:last]
    return listing


def upload_record(record: HistoryRecord, credentials: uploads.StorageCredentials,
                  account_url: Optional[str], scratch: Path) -> str:
    """Write `record` to a temporary file under `scratch`, upload it; the blob's URL (a folder store:
    the file written there, no credential needed)."""
    if account_url and folder_store.is_folder_location(account_url):
        return folder_store.write(account_url, CONTAINER, record.blob_name(), record.to_json_bytes())
    path = scratch / "record.json"
    fsutil.atomic_write_bytes(path, record.to_json_bytes())
    writer = uploads.StorageWriter(credentials, account_url)
    return writer.upload_file(CONTAINER, record.blob_name(), path)
