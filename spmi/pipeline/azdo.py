"""The AzDO variables the setup step sets for the Helix job (docs/contracts.md §12.15, §12.17).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Mapping, Sequence, Tuple

from spmi.base import cioutput

log = logging.getLogger("superpmi")


def helix_source_prefix(environ: Mapping[str, str]) -> str:
    reason = environ.get("BUILD_REASON", "")
    return "pr" if reason == "PullRequest" else "ci"


def default_creator(environ: Mapping[str, str]) -> str:
    return environ.get("BUILD_REQUESTEDFOR") or environ.get("USER") or environ.get("USERNAME") or "superpmi"


def pipeline_variables(payload: Path, host_arch: str, creator: str, source_prefix: str) -> List[Tuple[str, str]]:
    return [("CorrelationPayloadDirectory", str(payload)), ("Architecture", host_arch),
            ("Creator", creator), ("HelixSourcePrefix", source_prefix)]


def print_variables(variables: Sequence[Tuple[str, str]]) -> None:
    for name, value in variables:
        print(f"{name} -> {value}")
        print(cioutput.azdo_set_variable(name, value), flush=True)
