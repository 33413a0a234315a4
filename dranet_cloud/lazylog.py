"""A logger that imports :mod:`logging` only when a line is logged.

``dranet-cloud detect`` runs at every node start, and on a bare-metal node
(no evidence, the common answer) it logs nothing; importing :mod:`logging`
(with traceback, linecache, string, threading) was a large share of that
process's cost.  Modules on the detection path (the core's detection and
plugin loading, the plugins' ``local_evidence``) log through
:class:`LazyLogger`, and the CLI may :func:`defer` configuring the handlers
until the first line: the first :class:`LazyLogger` call applies the pending
configuration, so every line still goes out in the configured format.
Code that imports :mod:`logging` itself must run after :func:`apply_pending`
(the CLI calls it before anything beyond local evidence runs, and as soon as
a plugin has imported :mod:`logging`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

_pending: Callable[[], None] | None = None


def defer(configure: Callable[[], None]) -> None:
    """Run ``configure`` (set up the handlers) before the first line is logged."""
    global _pending
    _pending = configure


def apply_pending() -> None:
    """Configure logging now if it was deferred (idempotent)."""
    global _pending
    configure, _pending = _pending, None
    if configure is not None:
        configure()


def apply_if_imported() -> None:
    """Configure now if anything (a plugin, typically) has imported :mod:`logging`.

    Such code logs through the standard loggers, which would otherwise emit
    before the handlers are set up.
    """
    if "logging" in sys.modules:
        apply_pending()


class LazyLogger:
    """The named :class:`logging.Logger`, imported and configured on first use."""

    __slots__ = ("_logger", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: logging.Logger | None = None

    def _get(self) -> logging.Logger:
        if self._logger is None:
            apply_pending()
            import logging

            self._logger = logging.getLogger(self.name)
        return self._logger

    def debug(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().debug(msg, *args, **kwargs)

    def info(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().info(msg, *args, **kwargs)

    def warning(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().warning(msg, *args, **kwargs)

    def error(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().error(msg, *args, **kwargs)

    def exception(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().exception(msg, *args, **kwargs)

    def log(self, level: int, msg: str, *args: object, **kwargs: Any) -> None:
        self._get().log(level, msg, *args, **kwargs)
