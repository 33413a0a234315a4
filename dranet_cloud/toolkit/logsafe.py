"""Strings from peers, devices and claims made safe for one log line.

A device name, a claim UID or a webhook's error message is chosen by someone
else: a newline in it forges a log line, an escape sequence reaches the
operator's terminal, and a 400 KB name becomes an 800 KB line.  Every such
value goes through :func:`safe` before it is logged (or echoed in an error
message that will be logged): control and other non-printable characters are
written as Python escapes and the result is capped.
"""

from __future__ import annotations

import logging
import re
import threading

DEFAULT_LIMIT = 200

# Printable ASCII but the backslash passes through unchanged (the common case,
# checked by one regular-expression search in C).
_NEEDS_ESCAPE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch.isprintable() and ch not in "\u2028\u2029":
        return ch
    code = ord(ch)
    if code < 0x100:
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\x{code:02x}")
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe(value: object, limit: int = DEFAULT_LIMIT) -> str:
    """``value`` as one printable line of at most about ``limit`` characters.

    The cap applies before escaping (so the work is bounded too) and says how
    much was cut: ``abc...(+412345 chars)``.  An empty string reads ``""``.
    """
    text = value if isinstance(value, str) else str(value)
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    if _NEEDS_ESCAPE.search(text):
        text = "".join(_escape(c) for c in text)
    if cut > 0:
        text += f"...(+{cut} chars)"
    return text or '""'


class WarnOnce:
    """Log a warning once per key (a bounded memory), not on every call or reload.

    A conflict between identifiers, or a bad entry in a metadata document,
    repeats on every request or snapshot reload; the operator needs it once.
    """

    def __init__(self, logger: logging.Logger, limit: int = 1024) -> None:
        self._log = logger
        self._seen: dict[tuple[str, ...], None] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def warn(self, key: tuple[str, ...], message: str, *args: object) -> None:
        with self._lock:
            if key in self._seen:
                return
            if len(self._seen) >= self._limit:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = None
        self._log.warning(message, *args)
