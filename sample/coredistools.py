"""The sample disassembler library (coredistools) that ``superpmi -a`` loads (docs/contracts.md §2.8.6).

A sample coredistools file is data, marked like the other sample libraries::

    \\x7fSPMI-SAMPLE-COREDISTOOLS\\n
    <one line of JSON: {"exports": [...]}>\\n

A file that cannot be read fails LoadLibrary; any other file without the marker, or whose
exports lack one the near-differ needs, fails GetProcAddress (as a shared library without
those symbols would).
"""
from __future__ import annotations

import os

from .plain import read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import List, Sequence

    from .plain import PathLike

COREDISTOOLS_MAGIC = b"\x7fSPMI-SAMPLE-COREDISTOOLS\n"
#: what the near-differ looks up, in its order
DIFFER_EXPORTS = ("NewDiffer", "FinishDiff", "NearDiffCodeBlocks", "DumpDiffBlocks")
#: what a real library exports (the differ's and the disassembler's entry points)
ALL_EXPORTS = DIFFER_EXPORTS + ("InitBufferedDisasm", "NewDisasm", "FinishDisasm", "DisasmInstruction",
                                "DumpCodeBlock", "DumpInstruction")
ERROR_MOD_NOT_FOUND = 0x7E
ERROR_PROC_NOT_FOUND = 0x7F


def coredistools_file_name(os_name: str) -> str:
    """``coredistools.dll`` (Windows), ``libcoredistools.so`` (Linux), ``libcoredistools.dylib`` (macOS)."""
    if os_name == "windows":
        return "coredistools.dll"
    return "libcoredistools" + (".dylib" if os_name == "osx" else ".so")


def encode_coredistools(exports: Sequence[str] = ALL_EXPORTS) -> bytes:
    import json

    return COREDISTOOLS_MAGIC + json.dumps({"exports": list(exports)}).encode("ascii") + b"\n"


def write_coredistools(path: PathLike, exports: Sequence[str] = ALL_EXPORTS) -> Path:
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_coredistools(exports))
    return path


def exports_of(data: bytes) -> List[str]:
    """The entry points a file offers (none unless it carries the marker and a readable list)."""
    if not data.startswith(COREDISTOOLS_MAGIC):
        return []
    line = data[len(COREDISTOOLS_MAGIC):].split(b"\n", 1)[0]
    import json

    try:
        exports = json.loads(line.decode("utf-8")).get("exports", [])
    except (ValueError, AttributeError):
        return []
    return [name for name in exports if isinstance(name, str)] if isinstance(exports, list) else []


class CoreDisToolsLoadError(Exception):
    """coredistools could not be loaded (superpmi -a exits -1); the message is the ERROR text."""


def load_coredistools(directory: PathLike, os_name: str) -> List[str]:
    """Load ``<directory>/<lib>`` as the near-differ does before the first context; its exports."""
    name = coredistools_file_name(os_name)
    try:
        data = read_bytes(os.path.join(directory, name))
    except OSError:
        raise CoreDisToolsLoadError("LoadLibrary(%s) failed (0x%08x)" % (name, ERROR_MOD_NOT_FOUND)) from None
    exports = exports_of(data)
    for symbol in DIFFER_EXPORTS:
        if symbol not in exports:
            raise CoreDisToolsLoadError("GetProcAddress '%s' failed (0x%08x)" % (symbol, ERROR_PROC_NOT_FOUND))
    return exports
