"""The suite's error kinds: `SuiteError` is an error the user can act on (one line, exit 1).
"""
from __future__ import annotations

import logging
import os
from typing import Union

log = logging.getLogger("superpmi")
PathLike = Union[str, "os.PathLike[str]"]


class SuiteError(Exception):
    """An error the user can act on; printed as one line, exit code 1."""


class ToolTimeout(SuiteError):
    """A child process ran longer than allowed and was killed."""
