"""The sample shim collector: a "JIT library" that forwards to the real JIT and records contexts.

A shim file is data the sample runtime (``corerun``) loads in place of a JIT::

    \\x7fSPMI-SAMPLE-SHIM\\n
    <one line of JSON: {"kind": "superpmi-shim-collector"}>\\n

Configuration (plain environment variables, as the real shim reads them):
``SuperPMIShimPath`` = the real JIT (required, else the shim fails to load);
``SuperPMIShimLogPath`` = an existing directory for the ``.mc`` files.

Each process that compiles at least one method writes one ``.mc`` file with a
unique random name (created exclusively), one record per compilation, framed
exactly as ``.mch`` records. A record is written only after its compilation, so
a process that dies while writing leaves a truncated last record.
"""
from __future__ import annotations

import binascii
import os

from .context import MethodContext, encode_context
from .mchfile import encode_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Optional

    from .plain import PathLike

SHIM_MAGIC = b"\x7fSPMI-SAMPLE-SHIM\n"
SHIM_PATH_ENV = "SuperPMIShimPath"
SHIM_LOG_PATH_ENV = "SuperPMIShimLogPath"


def shim_file_name(os_name: str) -> str:
    """``superpmi-shim-collector.dll`` (Windows), ``libsuperpmi-shim-collector.so|.dylib``."""
    if os_name == "windows":
        return "superpmi-shim-collector.dll"
    return "libsuperpmi-shim-collector" + (".dylib" if os_name == "osx" else ".so")


def encode_shim() -> bytes:
    import json

    return SHIM_MAGIC + json.dumps({"kind": "superpmi-shim-collector"}).encode("ascii") + b"\n"


def write_shim(path: PathLike) -> Path:
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_shim())
    return path


def is_shim(data: bytes) -> bool:
    return data.startswith(SHIM_MAGIC)


def compile_result_bytes(context: MethodContext) -> bytes:
    """A recorded compile result (deterministic; ``mcs -thin`` drops it)."""
    import hashlib

    seed = hashlib.sha256(("%s|%s|%d" % (context.name, context.tier, context.il_size)).encode("utf-8")).digest()
    return (seed * 3)[:16 + min(context.il_size, 80)]


class McWriter:
    """One process's ``.mc`` file, created on the first record."""

    def __init__(self, log_dir: PathLike) -> None:
        self.log_dir = log_dir
        self.path: Optional[str] = None
        self._stream: Optional[IO[bytes]] = None
        self.records = 0

    def _open(self) -> IO[bytes]:
        if self._stream is None:
            while True:
                name = binascii.hexlify(os.urandom(8)).decode("ascii") + ".mc"
                candidate = os.path.join(self.log_dir, name)
                try:
                    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                                 0o644)
                except FileExistsError:
                    continue
                self.path = candidate
                self._stream = os.fdopen(fd, "wb")
                break
        return self._stream

    def write(self, context: MethodContext) -> None:
        stream = self._open()
        stream.write(encode_record(encode_context(context)))
        stream.flush()
        self.records += 1

    def write_truncated(self, context: MethodContext) -> None:
        """Write the first part of a record only (the process dies right after)."""
        record = encode_record(encode_context(context))
        stream = self._open()
        stream.write(record[:max(7, len(record) // 2)])
        stream.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
