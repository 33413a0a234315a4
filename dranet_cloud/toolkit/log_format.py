"""Log lines an operator can read and a log pipeline can parse.

``--log-format text`` (the default) writes ``2026-12-03T09:21:44.123Z LEVEL
logger: message``; ``--log-format json`` writes one JSON object a line with
``ts`` (RFC 3339, UTC), ``level``, ``logger``, ``msg`` and, for an exception,
``exc``.  Every line of both carries a timestamp, because a crash-looping
pod's log is read long after the fact and next to DRANET's own lines.

A JSON line also carries, as fields of their own, the context its caller
passed with ``extra=`` (see :data:`FIELDS`: the request's ``path``, ``status``
and ``duration_ms``, the ``claim``, ``device`` and ``plugin`` concerned), so a
log pipeline filters on them instead of parsing the message.  The text format
keeps them in the message only, where they already are.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

# Context a log call may attach with ``extra={...}``; the JSON format writes
# each one that is set as a field of its own, in this order.
FIELDS = ("method", "path", "status", "duration_ms", "claim", "device", "plugin")


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    """``<RFC 3339 UTC> LEVEL logger: message`` (plus the traceback, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record; newlines inside messages stay escaped."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in FIELDS:
            value = record.__dict__.get(field)
            if value is not None:
                doc[field] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False, default=str)


def fields(**context: object) -> dict[str, object]:
    """``extra=`` for a log call: the context that is known (``None`` values are left out)."""
    return {k: v for k, v in context.items() if v is not None}


def error_line(message: str, log_format: str) -> str:
    """A fatal error as the log's reader expects it: ``error: ...`` or one JSON object.

    Under ``--log-format json`` a pipeline parses every stderr line; the line
    saying why the sidecar exited is the one that must not be dropped.
    """
    if log_format != "json":
        return f"error: {message}"
    record = logging.LogRecord(
        "dranet_cloud.cli", logging.ERROR, __file__, 0, "%s", (message,), None
    )
    return JsonFormatter().format(record)


def configure(level: int, log_format: str = "text") -> None:
    """Send the process's logs to stderr in ``log_format`` at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def configure_cli(verbose: int, log_format: str = "text") -> None:
    """The CLI's logging: ``-v`` info, ``-vv`` debug, else warnings only."""
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    configure(level, log_format)
    # httpx logs every request at INFO; only -vv should show that.
    logging.getLogger("httpx").setLevel(level if verbose >= 2 else logging.WARNING)
