"""The sample ``mcs`` (method-context shell): the verbs the suite uses."""
from __future__ import annotations

import os
import sys

from .context import OS_NUMBERS, PayloadError, decode_context, dedup_key, strip_compile_result
from .jitfile import DEFAULT_GUID
from .mchfile import (
    FramingError,
    TocEntry,
    encode_record,
    encode_toc,
    record_bytes,
    record_payload,
    scan_complete_records,
    scan_records,
    write_bytes_atomically,
)
from .names import TIER_JIT_FLAGS, method_shape
from .plain import path_order, path_text, read_bytes
from .superpmi_args import UsageError, parse_compile_list

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional

    from .plain import PathLike

USAGE = """MCS is a utility for examining and manipulating SuperPMI method context files.
(sample toolchain stand-in)

 mcs -printJITEEVersion
 mcs -toc <file.mch>
 mcs -merge <out.mch> <pattern> [-recursive] [-dedup] [-thin]
 mcs -strip <range|file.mcl> <in.mch> <out.mch>
 mcs -concat <file1> <file2>
 mcs -dumpMap <file>
"""


class McsError(Exception):
    """A failure that ends mcs with exit -1 after printing the message."""


def usage(message: Optional[str] = None) -> int:
    if message:
        sys.stderr.write("ERROR: %s\n" % message)
    sys.stdout.write(USAGE)
    return -1


def read_records(path: PathLike, allow_truncated_tail: bool = False):
    """Yield (number, record bytes, payload) for every record of a file.

    With ``allow_truncated_tail`` a truncated last record (left by a process killed while
    writing a ``.mc`` file) is skipped with a WARNING instead of failing."""
    path = path_text(path)
    try:
        data = read_bytes(path)
    except OSError:
        raise McsError("Unable to open '%s'" % path) from None
    try:
        if allow_truncated_tail:
            refs, truncated_at = scan_complete_records(data)
        else:
            refs, truncated_at = list(scan_records(data)), None
        for ref in refs:
            yield ref.number, record_bytes(data, ref), record_payload(data, ref)
    except FramingError as error:
        raise McsError("Method %d of '%s' is of low integrity (%s)." % (error.number, path, error.detail)) from None
    if truncated_at is not None:
        sys.stderr.write("WARNING: '%s' ends with a truncated method context (%d bytes after method %d); "
                         "skipped.\n" % (path, len(data) - truncated_at, len(refs)))


def verb_print_version(args: List[str], settings: Dict[str, str]) -> int:
    guid = settings.get("guid", DEFAULT_GUID)
    sys.stdout.write(guid + "\n")
    return 0


def verb_toc(args: List[str], settings: Dict[str, str]) -> int:
    if len(args) != 1:
        return usage("-toc needs exactly one file")
    path = path_text(args[0])
    entries: List[TocEntry] = []
    offset = 0
    for number, record, payload in read_records(path):
        try:
            context = decode_context(payload)
        except PayloadError:
            raise McsError("Method %d is of low integrity." % number) from None
        entries.append(TocEntry(offset, number, context.method_hash))
        offset += len(record)
    write_bytes_atomically(path + ".mct", encode_toc(entries))
    sys.stdout.write("Loaded %d, added %d to Table of Contents\n" % (len(entries), len(entries)))
    return 0


def matching_files(pattern: str, recursive: bool, exclude: PathLike) -> List[str]:
    """The files ``pattern`` (``<folder>/<mask>``) names, spelled and sorted as pathlib spells and sorts them."""
    import fnmatch

    directory, _, mask = pattern.replace("\\", "/").rpartition("/")
    root = path_text(directory or ".")
    found: List[str] = []
    if not os.path.isdir(root):
        return found
    if recursive:
        for current, _, files in os.walk(root):
            found.extend(path_text(os.path.join(current, name)) for name in files if fnmatch.fnmatch(name, mask))
    else:
        for name in os.listdir(root):
            path = path_text(os.path.join(root, name))
            if os.path.isfile(path) and fnmatch.fnmatch(name, mask):
                found.append(path)
    excluded = os.path.normcase(os.path.realpath(path_text(exclude)))
    return sorted((p for p in found if os.path.normcase(os.path.realpath(p)) != excluded), key=path_order)


def verb_merge(args: List[str], settings: Dict[str, str]) -> int:
    positional = [a for a in args if not a.startswith("-")]
    flags = {a.lower() for a in args if a.startswith("-")}
    unknown = flags - {"-recursive", "-dedup", "-thin"}
    if len(positional) != 2 or unknown:
        return usage("-merge needs <out.mch> <pattern> [-recursive] [-dedup] [-thin]")
    output, pattern = path_text(positional[0]), positional[1]
    files = matching_files(pattern, "-recursive" in flags, output)
    if not files:
        raise McsError("No files matched '%s'" % pattern)
    seen = set()
    parts: List[bytes] = []
    loaded = 0
    for path in files:
        for number, record, payload in read_records(path, allow_truncated_tail=True):
            loaded += 1
            try:
                if "-dedup" in flags:
                    key = dedup_key(payload)
                    if key in seen:
                        continue
                    seen.add(key)
                if "-thin" in flags:
                    record = encode_record(strip_compile_result(payload))
            except ValueError:
                raise McsError("Method %d of '%s' is of low integrity." % (number, path)) from None
            parts.append(record)
    write_bytes_atomically(output, b"".join(parts))
    sys.stdout.write("Merged %d files: loaded %d, saved %d\n" % (len(files), loaded, len(parts)))
    return 0


def verb_strip(args: List[str], settings: Dict[str, str]) -> int:
    if len(args) != 3:
        return usage("-strip needs <list> <in.mch> <out.mch>")
    try:
        dropped = set(parse_compile_list(args[0]))
    except UsageError as error:
        raise McsError(error.message or "bad context list '%s'" % args[0]) from None
    kept: List[bytes] = []
    loaded = 0
    for number, record, _ in read_records(args[1]):
        loaded += 1
        if number not in dropped:
            kept.append(record)
    write_bytes_atomically(args[2], b"".join(kept))
    sys.stdout.write("Loaded %d, Saved %d\n" % (loaded, len(kept)))
    return 0


def verb_concat(args: List[str], settings: Dict[str, str]) -> int:
    if len(args) != 2:
        return usage("-concat needs <file1> <file2>")
    try:
        data = read_bytes(args[1])
        with open(args[0], "ab") as stream:
            stream.write(data)
    except OSError as error:
        raise McsError("Unable to concatenate '%s' to '%s': %s" % (args[1], args[0], error.strerror)) from None
    return 0


def dump_map_row(number: int, name: str, tier: str, target_os: str) -> str:
    """``%d,<class>:<method>,"<signature>", <flags>, %d`` (docs/contracts.md §5): the flag names joined by
    ``, ``, the os a number; nothing is quoted but the signature, so the name keeps its commas."""
    shape = method_shape(name)
    flags = ", ".join(TIER_JIT_FLAGS.get(tier, ()))
    return '%d,%s,"%s", %s, %d' % (number, shape.map_name(), shape.signature(), flags, OS_NUMBERS.get(target_os, 1))


def verb_dump_map(args: List[str], settings: Dict[str, str]) -> int:
    if len(args) != 1:
        return usage("-dumpMap needs one file")
    lines = ["index,method name,full signature,jit flags,os"]
    for number, _, payload in read_records(args[0]):
        try:
            context = decode_context(payload)
        except PayloadError:
            raise McsError("Method %d is of low integrity." % number) from None
        lines.append(dump_map_row(number, context.name, context.tier, context.target_os))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


VERBS: Dict[str, Callable[[List[str], Dict[str, str]], int]] = {
    "-printjiteeversion": verb_print_version,
    "-toc": verb_toc,
    "-merge": verb_merge,
    "-strip": verb_strip,
    "-concat": verb_concat,
    "-dumpmap": verb_dump_map,
}


def main(argv: Optional[List[str]] = None, settings: Optional[Dict[str, str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    settings = dict(settings or {})
    if len(argv) < 2:
        return usage()
    verb = VERBS.get(argv[1].lower())
    if verb is None:
        return usage("Unknown verb '%s'" % argv[1])
    try:
        return verb(argv[2:], settings)
    except McsError as error:
        sys.stderr.write("ERROR: %s\n" % error)
        return -1
    except (OSError, ValueError) as error:
        sys.stderr.write("ERROR: %s\n" % error)
        return -1


if __name__ == "__main__":
    sys.exit(main())
