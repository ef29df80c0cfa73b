"""Azure DevOps logging commands and the GitHub step summary (docs/contracts.md §12.17, §12.18).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Mapping, Optional, Union

from spmi.base.untrusted import LINE_BREAKS, break_azdo_prefixes, neutralize_commands

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]
_OTHER_LINE_BREAK_RE = re.compile("[" + LINE_BREAKS.replace("\n", "").replace("\r", "") + "]")


def azdo_escape_data(value: str) -> str:
    """Logging-command message/value text must be one line (docs/contracts.md §12.17) and
    carry no command of its own (§12.20): CR/LF escaped, every other line break a space."""
    escaped = break_azdo_prefixes(value).replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")
    return _OTHER_LINE_BREAK_RE.sub(" ", escaped)


def azdo_escape_property(value: str) -> str:
    return azdo_escape_data(value).replace(";", "%3B").replace("]", "%5D")


def azdo_set_variable(name: str, value: str, is_output: bool = False, is_secret: bool = False) -> str:
    props = f"variable={azdo_escape_property(name)}"
    if is_output:
        props += ";isOutput=true"
    if is_secret:
        props += ";issecret=true"
    return f"##vso[task.setvariable {props}]{azdo_escape_data(value)}"


def azdo_upload_summary(path: Path) -> str:
    return f"##vso[task.uploadsummary]{azdo_escape_data(str(path.resolve()))}"


def azdo_log_issue(kind: str, message: str, source_path: Optional[str] = None,
                   line_number: Optional[int] = None) -> str:
    if kind not in ("error", "warning"):
        raise ValueError(f"AzDO issue type must be error or warning, not {kind}")
    props = f"type={kind}"
    if source_path:
        props += f";sourcepath={azdo_escape_property(source_path)}"
        if line_number is not None:
            props += f";linenumber={line_number}"
    return f"##vso[task.logissue {props}]{azdo_escape_data(message)}"


def azdo_group(title: str) -> str:
    """`##[group]<title>` with the title on one line and without a command of its own."""
    return "##[group]" + neutralize_commands(title).replace("\n", " ")


AZDO_END_GROUP = "##[endgroup]"


def running_under_azdo(environ: Optional[Mapping[str, str]] = None) -> bool:
    environ = os.environ if environ is None else environ
    return bool(environ.get("TF_BUILD"))


def running_under_github(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Inside a GitHub Actions step (GitHub sets `GITHUB_ACTIONS=true` in every one)."""
    environ = os.environ if environ is None else environ
    return environ.get("GITHUB_ACTIONS") == "true"


GITHUB_STEP_SUMMARY_LIMIT = 1024 * 1024
GITHUB_COMMENT_LIMIT = 65536


def append_github_step_summary(markdown: str, environ: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """Append to `$GITHUB_STEP_SUMMARY` when set; returns the file written."""
    environ = os.environ if environ is None else environ
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown)
        if not markdown.endswith("\n"):
            handle.write("\n")
    return path
