"""Method-context files: record framing, tables of contents and ``.mcl`` lists.

Record framing: ``m`` ``c``, uint32 little-endian payload length L, L payload
bytes, ``4`` ``2``.  A ``.mch`` is a plain concatenation of records.
The payload is a sequence of packets (1-byte id, uint32 size, data, 0x42).
"""
from __future__ import annotations

import os
import struct

from .plain import FrozenRecord, path_suffix, path_text, read_bytes, with_suffix, write_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

    from .plain import PathLike

RECORD_MAGIC = b"mc"
RECORD_TRAILER = b"42"
RECORD_OVERHEAD = 8
PACKET_TERMINATOR = 0x42
TOC_MAGIC = b"INDX"
TOC_ENTRY = struct.Struct("<qi33s3x")
_U32 = struct.Struct("<I")
_PACKET_HEAD = struct.Struct("<BI")


class FramingError(Exception):
    """A record does not have valid framing; ``number`` is the 1-based context."""

    def __init__(self, number: int, detail: str) -> None:
        super().__init__(detail)
        self.number = number
        self.detail = detail


class RecordRef(FrozenRecord):
    """Where one record lives in a file."""

    __slots__ = ("number", "offset", "length")
    number: int
    offset: int
    length: int

    def __init__(self, number: int, offset: int, length: int) -> None:
        self._init(number, offset, length)

    @property
    def end(self) -> int:
        return self.offset + self.length + RECORD_OVERHEAD


class TocEntry(FrozenRecord):
    """One entry of a table of contents: where context ``number`` starts and its method hash."""

    __slots__ = ("offset", "number", "method_hash")
    offset: int
    number: int
    method_hash: str

    def __init__(self, offset: int, number: int, method_hash: str) -> None:
        self._init(offset, number, method_hash)


# ---------------------------------------------------------------- records

def encode_record(payload: bytes, trailer: bytes = RECORD_TRAILER) -> bytes:
    return RECORD_MAGIC + _U32.pack(len(payload)) + payload + trailer


def scan_records(data: bytes, start: int = 0, first_number: int = 1) -> Iterator[RecordRef]:
    """Walk the framing of ``data``; raises FramingError at a record that cannot be framed."""
    offset = start
    number = first_number
    size = len(data)
    while offset < size:
        if data[offset:offset + 2] != RECORD_MAGIC:
            raise FramingError(number, "record does not start with 'mc'")
        if offset + 6 > size:
            raise FramingError(number, "truncated record header")
        (length,) = _U32.unpack_from(data, offset + 2)
        if offset + length + RECORD_OVERHEAD > size:
            raise FramingError(number, "truncated record")
        yield RecordRef(number, offset, length)
        offset += length + RECORD_OVERHEAD
        number += 1


def is_truncated_record(tail: bytes) -> bool:
    """Whether ``tail`` (the bytes after the last complete record) is the start of a record
    cut short, as a process killed while writing leaves it."""
    if len(tail) < 2:
        return RECORD_MAGIC.startswith(tail)
    if tail[:2] != RECORD_MAGIC:
        return False
    if len(tail) < 6:
        return True
    (length,) = _U32.unpack_from(tail, 2)
    return length + RECORD_OVERHEAD > len(tail)


def scan_complete_records(data: bytes) -> Tuple[List[RecordRef], Optional[int]]:
    """The records of ``data`` and the offset of a truncated last record (None when the data
    ends cleanly). Any other framing problem raises FramingError."""
    refs: List[RecordRef] = []
    try:
        for ref in scan_records(data):
            refs.append(ref)
    except FramingError:
        offset = refs[-1].end if refs else 0
        if is_truncated_record(data[offset:]):
            return refs, offset
        raise
    return refs, None


def record_at(data: bytes, offset: int, number: int) -> RecordRef:
    """Frame the single record starting at ``offset``."""
    if data[offset:offset + 2] != RECORD_MAGIC or offset + 6 > len(data):
        raise FramingError(number, "record does not start with 'mc'")
    (length,) = _U32.unpack_from(data, offset + 2)
    if offset + length + RECORD_OVERHEAD > len(data):
        raise FramingError(number, "truncated record")
    return RecordRef(number, offset, length)


def record_payload(data: bytes, ref: RecordRef) -> bytes:
    """Payload of a framed record; checks the trailer (raises FramingError)."""
    trailer_at = ref.offset + 6 + ref.length
    if data[trailer_at:trailer_at + 2] != RECORD_TRAILER:
        raise FramingError(ref.number, "record trailer is not '42'")
    return bytes(data[ref.offset + 6:trailer_at])


def record_bytes(data: bytes, ref: RecordRef) -> bytes:
    return bytes(data[ref.offset:ref.end])


# ---------------------------------------------------------------- packets

def encode_packets(packets: Iterable[Tuple[int, bytes]]) -> bytes:
    parts: List[bytes] = []
    for packet_id, body in packets:
        parts.append(_PACKET_HEAD.pack(packet_id, len(body)))
        parts.append(body)
        parts.append(b"\x42")
    return b"".join(parts)


def decode_packets(payload: bytes) -> List[Tuple[int, bytes]]:
    """Split a payload into packets; raises ValueError when malformed."""
    packets: List[Tuple[int, bytes]] = []
    offset = 0
    size = len(payload)
    while offset < size:
        if offset + 5 > size:
            raise ValueError("truncated packet header")
        packet_id, length = _PACKET_HEAD.unpack_from(payload, offset)
        end = offset + 5 + length
        if end + 1 > size:
            raise ValueError("truncated packet")
        if payload[end] != PACKET_TERMINATOR:
            raise ValueError("packet terminator missing")
        packets.append((packet_id, payload[offset + 5:end]))
        offset = end + 1
    return packets


# ---------------------------------------------------------------- TOC

def toc_paths(mch_path: PathLike) -> List[str]:
    """TOC files tried for ``x.mch``: ``x.mch.mct`` then ``x.mct``."""
    path = path_text(mch_path)
    candidates = [path + ".mct"]
    if path_suffix(path).lower() in (".mch", ".mc"):
        candidates.append(with_suffix(path, ".mct"))
    return candidates


def toc_candidates(mch_path: PathLike) -> List[Path]:
    """:func:`toc_paths` as paths."""
    from pathlib import Path

    return [Path(candidate) for candidate in toc_paths(mch_path)]


def mch_paths_for_toc(mct_path: PathLike) -> List[str]:
    """Collections tried for an input given as ``x.mct``."""
    path = path_text(mct_path)
    stem = with_suffix(path, "")
    candidates = [path + ".mch", with_suffix(path, ".mch")]
    if path_suffix(stem).lower() == ".mch":
        candidates.append(stem)
    unique: List[str] = []
    for candidate in candidates:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def mch_for_toc_input(mct_path: PathLike) -> List[Path]:
    """:func:`mch_paths_for_toc` as paths."""
    from pathlib import Path

    return [Path(candidate) for candidate in mch_paths_for_toc(mct_path)]


def encode_toc(entries: Sequence[TocEntry]) -> bytes:
    parts = [TOC_MAGIC, _U32.pack(len(entries))]
    for entry in entries:
        parts.append(TOC_ENTRY.pack(entry.offset, entry.number, entry.method_hash.encode("ascii")[:32] + b"\0"))
    parts.append(TOC_MAGIC)
    return b"".join(parts)


def decode_toc(data: bytes) -> List[TocEntry]:
    if len(data) < 12 or data[:4] != TOC_MAGIC or data[-4:] != TOC_MAGIC:
        raise ValueError("not a table of contents")
    (count,) = _U32.unpack_from(data, 4)
    if len(data) != 12 + count * TOC_ENTRY.size:
        raise ValueError("table of contents has the wrong size")
    entries = []
    for index in range(count):
        offset, number, raw_hash = TOC_ENTRY.unpack_from(data, 8 + index * TOC_ENTRY.size)
        entries.append(TocEntry(offset, number, raw_hash.split(b"\0", 1)[0].decode("ascii")))
    return entries


def find_toc(mch_path: PathLike) -> Optional[List[TocEntry]]:
    """The readable TOC paired with ``mch_path``, or None."""
    for candidate in toc_paths(mch_path):
        if os.path.isfile(candidate):
            try:
                return decode_toc(read_bytes(candidate))
            except (OSError, ValueError):
                return None
    return None


# ---------------------------------------------------------------- .mcl

def format_mcl(numbers: Iterable[int]) -> bytes:
    return "".join("%d\r\n" % n for n in numbers).encode("ascii")


def parse_mcl_text(text: str) -> List[int]:
    """Numbers of an ``.mcl`` text (LF or CRLF, blank lines and spaces ignored)."""
    return [int(token) for token in text.split()]


def write_bytes_atomically(path: PathLike, data: bytes) -> None:
    target = path_text(path)
    temp = target + ".tmp%d" % os.getpid()
    write_bytes(temp, data)
    os.replace(temp, target)
