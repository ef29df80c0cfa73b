"""History records in storage: `superpmi/history/<type>/<os>/<arch>/<time>_<hash>.json` (docs/history.md).

Writing needs a credential (the same rules as `upload`); reading is anonymous. Every name a
listing returns is untrusted: only names of exactly the record shape are read, anything
else is skipped; a record whose content disagrees with its name is skipped too. Skips are
one line each for the first few, then one line with their count. Reading is bounded:
at most `READ_FACTOR` × `-last` records, `READ_WORKERS` at a time, each within the record
timeout and all within one deadline (docs/contracts.md §12.22).
A local folder with the same layout is a store too (`folder_store`; no credential).
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

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


#: skip lines shown one by one; beyond them one line gives the count
SHOWN_SKIPS = 10
#: `-last N` reads at most this many times N listed records (unreadable ones count too)
READ_FACTOR = 5
#: records read at once (each a small request, docs/contracts.md §12.21)
READ_WORKERS = 8
#: seconds one record may take to arrive, retries included (`-record_timeout`)
DEFAULT_RECORD_TIMEOUT = 30.0
#: the whole read of one history has this many record timeouts
DEADLINE_FACTOR = 4


@dataclass
class Skips:
    """Skipped names or records: the first `SHOWN_SKIPS` lines kept, every one counted."""

    what: str
    shown: List[str] = field(default_factory=list)
    count: int = 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.shown) < SHOWN_SKIPS:
            self.shown.append(line)

    def count_lines(self) -> List[str]:
        """The line counting the skips not shown (none when every one is)."""
        more = self.count - len(self.shown)
        return [f"skipped {more:,} more {self.what} ({self.count:,} in all)"] if more > 0 else []

    def lines(self) -> List[str]:
        return self.shown + self.count_lines()


@dataclass
class Listing:
    """Records found (newest first) and the lines that say what was skipped or not read: `problems`
    all of them, `counts` those that count skips or say what was left unread (also in `problems`)."""

    records: List[HistoryRecord] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    counts: List[str] = field(default_factory=list)

    def notes(self, first: int = 4) -> List[str]:
        """For a page: the first few lines of single skips, then every counting line."""
        return [line for line in self.problems if line not in self.counts][:first] + self.counts


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


def _read_record_bytes(account_url: str, name: str, session: object, time_limit: float,
                       watched: blobs.OpenResponses) -> bytes:
    """One record's bytes, at most `MAX_RECORD_BYTES`: from the folder store, or from storage within
    `time_limit` seconds (its open response in `watched`, so an interrupt can shut it down)."""
    if folder_store.is_folder_location(account_url):
        return folder_store.read_capped(account_url, CONTAINER, name, MAX_RECORD_BYTES)
    return blobs.read_small_blob(blobs.blob_url(CONTAINER, name, account_url), MAX_RECORD_BYTES, session,
                                 time_limit=time_limit, watched=watched)


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
    """Record names under the prefix (newest first), and the lines for names of another shape
    (the first few, then their count)."""
    found, skips = _listed_records(account_url, summary_type, target_os, target_arch)
    return found, skips.lines()


def _listed_records(account_url: str, summary_type: Optional[str], target_os: Optional[str],
                    target_arch: Optional[str]) -> Tuple[List[RecordName], Skips]:
    names = _list_names(account_url, history_prefix(summary_type, target_os, target_arch))
    found: List[RecordName] = []
    skips = Skips("names that are not history record names")
    for name in names:
        parsed = parse_record_name(name)
        if parsed is None:
            skips.add(f"skipped '{shown_text(name)}': not a history record name")
            continue
        if (target_os and parsed.target_os != target_os) or (target_arch and parsed.target_arch != target_arch):
            continue
        found.append(parsed)
    found.sort(key=lambda n: (n.time, n.name), reverse=True)
    return found, skips


@dataclass(frozen=True)
class ReadLimits:
    """How long reading records may take: each record, and the whole history read."""

    record_timeout: float = DEFAULT_RECORD_TIMEOUT

    @property
    def deadline(self) -> float:
        return DEADLINE_FACTOR * self.record_timeout


@dataclass
class Batch:
    """What reading some listed records gave: the records (in listing order), a line per skip, and how
    many were not read at all (the deadline had passed)."""

    records: List[HistoryRecord] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    not_read: int = 0


def _read_one(account_url: str, entry: RecordName, session, time_limit: float,  # type: ignore[no-untyped-def]
              late: str, watched: blobs.OpenResponses) -> Tuple[Optional[HistoryRecord], str]:
    """The named record, schema-checked and checked against its name; else the line saying why not
    (`late`: how a record that took too long is described)."""
    shown = shown_text(entry.name)
    try:
        data = _read_record_bytes(account_url, entry.name, session, time_limit, watched)
        record = record_from_bytes(data, shown)
    except blobs.BlobTimeout:
        return None, f"skipped {shown}: it did not arrive {late}"
    except (RecordError, blobs.StorageError, folder_store.FolderReadError) as exc:
        return None, f"skipped {shown_text(str(exc))}"
    if (record.summary_type, record.target_os, record.target_arch, record.time) != (
            entry.summary_type, entry.target_os, entry.target_arch, entry.time):
        return None, f"skipped {shown}: its content names another run than its blob name"
    return record, ""


def read_records(account_url: str, names: Sequence[RecordName], limits: ReadLimits = ReadLimits(),
                 give_up_at: Optional[float] = None) -> Batch:
    """The named records, read `READ_WORKERS` at a time, each within the record timeout and all
    before `give_up_at` (monotonic time)."""
    from concurrent.futures import ThreadPoolExecutor
    session = blobs.new_session(pool_size=READ_WORKERS)
    watched = blobs.OpenResponses()

    def read(entry: RecordName) -> Optional[Tuple[Optional[HistoryRecord], str]]:
        left = limits.record_timeout if give_up_at is None else give_up_at - time.monotonic()
        if left <= 0:
            return None
        if left >= limits.record_timeout:
            return _read_one(account_url, entry, session, limits.record_timeout,
                             f"within {limits.record_timeout:g} s", watched)
        return _read_one(account_url, entry, session, left,
                         f"before the deadline of the history read ({limits.deadline:g} s)", watched)

    pool = ThreadPoolExecutor(max_workers=READ_WORKERS, thread_name_prefix="history-read")
    try:
        results = list(pool.map(read, names))
    except BaseException:  # Ctrl-C, SIGTERM: the reads in progress end at once, the others never start
        watched.shut_down_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    batch = Batch(not_read=sum(1 for result in results if result is None))
    for result in results:
        if result is not None:
            record, line = result
            if record is not None:
                batch.records.append(record)
            else:
                batch.skipped.append(line)
    return batch


def load_history(account_url: str, summary_type: str, target_os: str, target_arch: str,
                 last: int, limits: ReadLimits = ReadLimits()) -> Listing:
    """The newest `last` readable records of one type and target, reading at most `READ_FACTOR` × `last`
    of the listed ones within one deadline; the lines say what was skipped and what was not read."""
    names, bad_names = _listed_records(account_url, summary_type, target_os, target_arch)
    give_up_at = time.monotonic() + limits.deadline  # the listing has its own limits (§12.21)
    readable = names[:READ_FACTOR * last]
    skips = Skips("unreadable records")
    found: List[HistoryRecord] = []
    read = 0
    while read < len(readable) and len(found) < last and time.monotonic() < give_up_at:
        names_now = readable[read:read + last - len(found)]
        batch = read_records(account_url, names_now, limits, give_up_at)
        read += len(names_now) - batch.not_read
        found.extend(batch.records)
        for line in batch.skipped:
            skips.add(line)
        if batch.not_read:
            break
    unread = _unread_lines(len(names), read, len(found) >= last, limits, time.monotonic() >= give_up_at)
    return Listing(records=found[:last], problems=bad_names.lines() + skips.lines() + unread,
                   counts=bad_names.count_lines() + skips.count_lines() + unread)


def _unread_lines(listed: int, read: int, enough: bool, limits: ReadLimits, late: bool) -> List[str]:
    """One line when listed records were left unread because of a limit (none when enough were found)."""
    unread = listed - read
    if enough or unread <= 0:
        return []
    if late:
        return [f"stopped reading history after {limits.deadline:g} s (its deadline); {unread:,} listed "
                f"record{'s' if unread != 1 else ''} not read"]
    return [f"read {read:,} of {listed:,} listed records (at most {READ_FACTOR} × -last); the {unread:,} older "
            "ones were not read"]


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
