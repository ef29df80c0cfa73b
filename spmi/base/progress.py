"""Progress bars (tqdm): only on a terminal, and never with --no_progress.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional, Union

from spmi.base import untrusted

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]


def progress_enabled(no_progress: bool, stream: object = None) -> bool:
    """Progress bars only for a terminal, and never with --no_progress."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return not no_progress and bool(isatty and isatty())


def progress_bar(total: Optional[float], desc: str, unit: str = "B", enabled: bool = True):  # type: ignore[no-untyped-def]
    from tqdm import tqdm
    scale = unit == "B"
    return tqdm(total=total, desc=untrusted.console_line(desc), unit=unit, unit_scale=scale, unit_divisor=1024 if scale else 1000,
                disable=not enabled, leave=False)
