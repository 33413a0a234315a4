"""uvicorn's httptools protocol with the bounds a node service needs.

uvicorn closes a kept-alive connection after ``timeout_keep_alive``, but a
connection that never sends a request, or sends its headers one byte a
minute, is kept forever; enough of them exhaust the file descriptors and
``/health`` stops answering.  This protocol adds:

* a request timeout: from a connection's first byte (or its accept) the
  request's headers and body must arrive within ``request_timeout``;
* an idle timeout between requests (uvicorn's keep-alive timer);
* a connection cap: at the cap, a new connection evicts the connection that
  has been idle longest (one without a request in progress), so an attacker's
  idle sockets never lock out DRANET's ``/health``; when every connection is
  busy the new one is closed at once.

:func:`quiet_accept_errors` rate-limits the event loop's "accept() out of
system resource" reports, which otherwise repeat for every retry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

_ACCEPT_LOG_INTERVAL = 10.0


class ConnectionLimits:
    """Shared by every connection of one server: the cap, timeouts and the LRU order."""

    def __init__(
        self, *, max_connections: int, request_timeout: float, idle_timeout: float
    ) -> None:
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.open: OrderedDict[GuardedHttpToolsProtocol, None] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """One connection; see the module docstring for what it adds."""

    limits: ConnectionLimits  # set on the subclass :func:`protocol_class` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn types its setting as whole seconds; call_later takes any float.
        self.timeout_keep_alive = self.limits.idle_timeout  # type: ignore[assignment]
        self._request_timer: asyncio.TimerHandle | None = None
        self._busy = False

    # --- the cap --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limits = self.limits
        if len(limits.open) >= limits.max_connections and not self._evict_idle():
            limits.refused += 1
            if limits.refused == 1 or limits.refused % 1000 == 0:
                log.warning(
                    "BYODP server: %d connections are open and all are busy (--max-connections "
                    "%d); closing new connections (%d so far)",
                    len(limits.open),
                    limits.max_connections,
                    limits.refused,
                )
            transport.close()
            return
        limits.open[self] = None
        self._arm_request_timer()

    def _evict_idle(self) -> bool:
        for conn in self.limits.open:
            if not conn._busy:
                self.limits.evicted += 1
                conn._close("evicted for a new connection at the connection cap")
                return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.limits.open.pop(self, None)
        self._cancel_request_timer()
        super().connection_lost(exc)

    def _close(self, why: str) -> None:
        log.debug("BYODP server: closing a connection: %s", why)
        self.limits.open.pop(self, None)
        self._cancel_request_timer()
        if not self.transport.is_closing():
            self.transport.close()

    # --- the request timer -------------------------------------------------------------

    def _arm_request_timer(self) -> None:
        if self._request_timer is None:
            self._request_timer = self.loop.call_later(
                self.limits.request_timeout, self._request_timed_out
            )

    def _cancel_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        self.limits.timed_out += 1
        self._close(f"no complete request within {self.limits.request_timeout:g} s")

    def data_received(self, data: bytes) -> None:
        limits = self.limits
        if self in limits.open:
            limits.open.move_to_end(self)  # most recently active last
        super().data_received(data)
        if not self._busy and self.timeout_keep_alive_task is None:
            # Bytes that do not (yet) make a request: the request clock runs.
            self._arm_request_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_request_timer()

    def on_message_complete(self) -> None:
        self._cancel_request_timer()
        if self.cycle is not None and not self.cycle.response_complete:
            self._busy = True
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._busy = False
        super().on_response_complete()  # arms the idle (keep-alive) timer


def protocol_class(limits: ConnectionLimits) -> type[GuardedHttpToolsProtocol]:
    """A protocol class bound to one server's limits (uvicorn instantiates it)."""
    return type("BoundGuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log accept failures (EMFILE, ENFILE, ENOBUFS) at most once per 10 s, with a count."""
    previous = loop.get_exception_handler()
    state = {"last": 0.0, "suppressed": 0}

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if "accept" not in message:
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - state["last"] < _ACCEPT_LOG_INTERVAL:
            state["suppressed"] += 1
            return
        exc = context.get("exception")
        log.error(
            "BYODP server: cannot accept connections (%s); %d more such errors suppressed. "
            "Raise the open-file limit (ulimit -n) or lower --max-connections",
            exc or message,
            state["suppressed"],
        )
        state["last"], state["suppressed"] = now, 0

    loop.set_exception_handler(handler)
