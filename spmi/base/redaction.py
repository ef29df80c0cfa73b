"""Secret redaction: no account key, SAS signature, connection string or token is
ever printed or logged. `logs` installs the filter on the suite's logger.
"""
from __future__ import annotations

import logging
import re
import threading
import urllib.parse
from typing import TYPE_CHECKING, Optional, Set

if TYPE_CHECKING:  # imported where used: commands that never touch storage start faster
    pass


log = logging.getLogger("superpmi")
_secrets_lock = threading.Lock()
_registered_secrets: Set[str] = set()
_SECRET_PATTERNS = [
    ("accountkey", re.compile(r"(AccountKey\s*=\s*)[^;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sharedaccesssignature", re.compile(r"(SharedAccessSignature\s*=\s*)[^;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sig=", re.compile(r"(\bsig=)[^&;\s'\"]+", re.IGNORECASE), r"\1***"),
    ("sharedkey", re.compile(r"(SharedKey(?:Lite)?\s+[^:\s]+:)[^\s'\",]+", re.IGNORECASE), r"\1***"),
    ("bearer", re.compile(r"(Bearer\s+)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE), r"\1***"),
]


def register_secret(value: Optional[str]) -> None:
    """Remember a secret so `redact` removes it wherever it appears."""
    if value and len(value) >= 4:
        with _secrets_lock:
            _registered_secrets.add(value)
            _registered_secrets.add(urllib.parse.quote(value, safe=""))


def redact(text: str) -> str:
    """`text` with keys, SAS signatures, connection-string secrets and tokens replaced by `***`."""
    with _secrets_lock:
        secrets = sorted(_registered_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    # In ASCII text a case-insensitive match needs its word in the lower-cased text; skipping
    # the patterns whose word is absent keeps long tool output cheap to log.
    lowered = text.lower() if text.isascii() else None
    for word, pattern, replacement in _SECRET_PATTERNS:
        if lowered is None or word in lowered:
            text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites every record (message, arguments and traceback) through `redact`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not hide the record
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install_log_redaction(logger: logging.Logger) -> None:
    """Add the redacting filter to `logger` once (done on import for the suite's logger)."""
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())


# The suite logs through one logger; whoever imports this module (the logging set-up and every
# storage module do) gets its records redacted, whatever else was imported first.
install_log_redaction(log)
