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


class Terminated(KeyboardInterrupt):
    """The suite was asked to stop by a signal other than Ctrl-C (e.g. SIGTERM); handled like Ctrl-C."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(f"signal {signal_number}")
        self.signal_number = signal_number

    @property
    def exit_code(self) -> int:
        """128 + the signal: 143 for SIGTERM (docs/contracts.md §12.20)."""
        return 128 + self.signal_number

    @property
    def signal_name(self) -> str:
        import signal
        try:
            return signal.Signals(self.signal_number).name
        except ValueError:
            return f"signal {self.signal_number}"
