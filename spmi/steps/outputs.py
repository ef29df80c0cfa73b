"""Where a command's summary files go: `<prefix>_summary[.N].md`, the short form and the JSON;
and the verdict lines every diff command ends its console output with.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from spmi.base.untrusted import console_line

if TYPE_CHECKING:  # PIN is for tpdiff only: imported where used
    pass


log = logging.getLogger("superpmi")


def summary_paths(directory: Path, prefix: str, as_json: bool) -> Tuple[Path, Optional[Path]]:
    """`<prefix>_summary[.N].md` + `<prefix>_short_summary[.N].md` (same N, both new), or `.json`."""
    index = 0
    while True:
        suffix = "" if index == 0 else f".{index}"
        if as_json:
            path = directory / f"{prefix}_summary{suffix}.json"
            if not path.exists():
                return path, None
        else:
            long_path = directory / f"{prefix}_summary{suffix}.md"
            short_path = directory / f"{prefix}_short_summary{suffix}.md"
            if not long_path.exists() and not short_path.exists():
                return long_path, short_path
        index += 1


def log_verdicts(lines: Sequence[str], printed: bool = False) -> None:
    """The end of a diff command's console output: one verdict line per target, as its summaries
    open with (`asm_markdown.verdict_line` / `metric_markdown.verdict_line`, plain form); logged, or
    `printed` by a command that prints instead of logging (`summarize`)."""
    if not lines:
        return
    if printed:
        for line in lines:
            print(console_line(line))
        return
    log.info("")
    for line in lines:
        log.info("%s", line)
