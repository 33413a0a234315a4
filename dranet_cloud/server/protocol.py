"""uvicorn's httptools protocol with the bounds a node service needs.

uvicorn bounds neither time nor bytes per connection: a request whose headers
never end, a 20 MB header, or 200,000 pipelined requests whose answers are
never read grow the process until the kernel kills it, and a connection that
never sends a whole request is kept forever.  This protocol (a subclass:
uvicorn's own parser callbacks, ASGI cycle and response writer are kept)
adds, per connection:

* a request timeout: from a connection's first byte (or its accept) the
  request's headers and body must arrive within ``request_timeout``;
* an idle timeout between requests (uvicorn's keep-alive timer);
* bytes bounded like time: the request target (8 KiB, else 414), each header
  line (8 KiB), the number of headers (100) and the whole head (32 KiB), else
  431.  The parser is fed in slices cut at each head's end and each body's
  end, so it never holds more than one head's cap of unparsed head bytes;
* at most :data:`MAX_PIPELINED` requests waiting for their answers: the rest
  of what the client sent stays unparsed (at most one read) and the socket
  is not read until an answer has gone out;
* answers that are not read are not kept: the transport's write buffer pauses
  the connection at :data:`WRITE_HIGH_WATER` bytes, and a connection whose
  buffer stays paused for ``request_timeout`` is closed;

and for the whole server:

* a connection cap: at the cap, a new connection evicts the connection that
  has been idle longest (one without a request in progress), so an attacker's
  idle sockets never lock out DRANET's ``/health``; when every connection is
  busy the new one is closed at once;
* a ceiling on buffered bytes (``buffer_budget``, default
  :data:`BUFFER_BUDGET`): what every connection holds (unparsed input, a head
  being parsed, bodies of requests not yet answered, answers not yet sent) is
  charged to one account; past the ceiling the connection holding the most is
  closed.

A client that hangs up with requests unanswered is logged as one INFO line.
:func:`quiet_accept_errors` rate-limits the event loop's "accept() out of
system resource" reports, which otherwise repeat for every retry.
"""

from __future__ import annotations

import asyncio
import http
import logging
import time
from collections import OrderedDict, deque
from typing import Any

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT, FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from dranet_cloud.toolkit.logsafe import safe

log = logging.getLogger(__name__)

_ACCEPT_LOG_INTERVAL = 10.0

# DRANET's Go client sends a request line of a few dozen bytes and five headers.
MAX_TARGET = 8 << 10
MAX_HEADER_LINE = 8 << 10
MAX_HEADERS = 100
MAX_HEAD = 32 << 10
# Requests parsed and not yet answered on one connection (Go's client never
# pipelines; curl and most others do not either).
MAX_PIPELINED = 4
# Above this many unsent answer bytes a connection stops being answered until
# the client reads (asyncio's pause_writing); a normal answer is under 1 KiB.
WRITE_HIGH_WATER = 16 << 10
# Everything the connections of one server may hold at once.  The sidecar's
# memory limit is 256 MiB; an idle server takes about 55 MiB and 4,000 open
# connections about 30 MiB more.  DRANET's requests are a few KiB each.
BUFFER_BUDGET = 16 << 20
_HEAD_END = b"\r\n\r\n"
_HEAD_TOO_LARGE = f"the request line and headers are over {MAX_HEAD} bytes together"


class _Refused(Exception):
    """Raised inside a parser callback: the request broke a byte limit."""


class _Pending:
    """A request parsed and not answered yet, and the body bytes it brought."""

    __slots__ = ("body", "cycle")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self.cycle = cycle
        self.body = 0


class ConnectionLimits:
    """Shared by every connection of one server: caps, timeouts, LRU order, the byte account."""

    def __init__(
        self,
        *,
        max_connections: int,
        request_timeout: float,
        idle_timeout: float,
        buffer_budget: int = BUFFER_BUDGET,
    ) -> None:
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.buffer_budget = buffer_budget
        self.open: OrderedDict[GuardedHttpToolsProtocol, None] = OrderedDict()
        # Bytes charged by all connections (see GuardedHttpToolsProtocol._account).
        self.buffered = 0
        self.evicted = 0
        self.refused = 0
        self.timed_out = 0
        self.shed = 0
        self.stalled = 0
        self.rejected = 0  # requests refused for a byte limit (400/414/431)
        self._noted: dict[str, tuple[float, int]] = {}

    def note(self, kind: str, message: str, *args: object) -> None:
        """Log ``message`` at INFO, but one line of each ``kind`` per 10 s at most.

        Every one of these a client can cause again and again; the line after
        a quiet spell says how many were left out.
        """
        now = time.monotonic()
        last, left_out = self._noted.get(kind, (-_ACCEPT_LOG_INTERVAL, 0))
        if now - last < _ACCEPT_LOG_INTERVAL:
            self._noted[kind] = (last, left_out + 1)
            return
        self._noted[kind] = (now, 0)
        if left_out:
            message += f" ({left_out} more like it were not logged)"
        log.info(message, *args)

    def shed_largest(self) -> GuardedHttpToolsProtocol | None:
        """Close the connection that holds the most bytes; ``None`` if none holds any."""
        largest = max(self.open, key=lambda c: c._charged, default=None)
        if largest is None or largest._charged == 0:
            return None
        self.shed += 1
        self.note(
            "shed",
            "BYODP server: %d bytes are buffered for %d connections, over the ceiling of "
            "%d; closing the connection holding the most (%d bytes)",
            self.buffered,
            len(self.open),
            self.buffer_budget,
            largest._charged,
        )
        largest._abort("over the server's buffer ceiling")
        return largest


class _Flow(FlowControl):
    """uvicorn's flow control, except that reading resumes only when the connection may read.

    uvicorn resumes reading whenever an answer completes or the application
    asks for body; a connection holding unparsed input or too many
    unanswered requests must stay paused until those are worked off.
    """

    def __init__(self, transport: asyncio.Transport, owner: GuardedHttpToolsProtocol) -> None:
        super().__init__(transport)
        self._owner = owner

    def resume_reading(self) -> None:
        if self._owner._may_read():
            super().resume_reading()


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """One connection; see the module docstring for what it adds."""

    limits: ConnectionLimits  # set on the subclass :func:`protocol_class` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn types its setting as whole seconds; call_later takes any float.
        self.timeout_keep_alive = self.limits.idle_timeout  # type: ignore[assignment]
        self._request_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        # Requests parsed and not yet answered, oldest first.
        self._unanswered: deque[_Pending] = deque()
        self._held = b""  # input not parsed yet (the pipelining bound)
        self._in_head = False
        self._head_bytes = 0  # bytes of the head being parsed, before the current slice
        self._slice = 0  # length of the slice being parsed
        self._body_left: int | None = None  # Content-Length bytes still to come
        self._body_bytes = 0  # body bytes of unanswered requests
        self._charged = 0  # bytes charged to limits.buffered
        self._refusal: tuple[int, str] | None = None
        self._feeding = False
        self._aborted = False

    @property
    def _busy(self) -> bool:
        return bool(self._unanswered)

    # --- the cap --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _Flow(transport, self)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_HIGH_WATER // 4)
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

    def _detach(self) -> None:
        """Leave the server's books: the connection list, the byte account, the timers."""
        limits = self.limits
        limits.open.pop(self, None)
        limits.buffered -= self._charged
        self._charged = 0
        self._held = b""
        self._cancel_request_timer()
        self._cancel_stall_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._detach()
        if self._unanswered:
            # Every unanswered request learns it (uvicorn tells only the newest one),
            # so the one being answered stops instead of writing to a closed socket.
            self._hang_up(exc)
            for pending in self._unanswered:
                pending.cycle.disconnected = True
                pending.cycle.message_event.set()
            self._unanswered.clear()
        super().connection_lost(exc)

    def _hang_up(self, exc: Exception | None) -> None:
        if self._aborted:
            return  # the reason was logged when the server closed it
        self.limits.note(
            "hang-up",
            "BYODP server: a client hung up with %d request(s) unanswered (%s)",
            len(self._unanswered),
            exc or "connection closed",
        )

    def _close(self, why: str) -> None:
        log.debug("BYODP server: closing a connection: %s", why)
        self.limits.open.pop(self, None)
        self._cancel_request_timer()
        if not self.transport.is_closing():
            self.transport.close()

    def _abort(self, why: str) -> None:
        """Close now, dropping whatever is buffered both ways."""
        log.debug("BYODP server: aborting a connection: %s", why)
        self._aborted = True
        self._detach()
        self.transport.abort()

    # --- the request timer -------------------------------------------------------------

    def _arm_request_timer(self) -> None:
        if self._request_timer is None:
            self._request_timer = self.loop.call_later(
                self.limits.request_timeout, self._request_timed_out
            )

    def _cancel_request_timer(self) -> None:
        _cancel(self._request_timer)
        self._request_timer = None

    def _request_timed_out(self) -> None:
        self._request_timer = None
        self.limits.timed_out += 1
        self._close(f"no complete request within {self.limits.request_timeout:g} s")

    # --- answers nobody reads ---------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(
                self.limits.request_timeout, self._write_stalled
            )
        self._account()

    def resume_writing(self) -> None:
        self._cancel_stall_timer()
        super().resume_writing()
        self._account()

    def _cancel_stall_timer(self) -> None:
        _cancel(self._stall_timer)
        self._stall_timer = None

    def _write_stalled(self) -> None:
        self._stall_timer = None
        self.limits.stalled += 1
        self.limits.note(
            "stalled",
            "BYODP server: closing a connection whose answers were not read for %g s "
            "(%d bytes unsent, %d request(s) unanswered)",
            self.limits.request_timeout,
            self.transport.get_write_buffer_size(),
            len(self._unanswered),
        )
        self._abort("answers not read")

    # --- reading: slices, pipelining, byte limits ---------------------------------------

    def _may_read(self) -> bool:
        cycle = self.cycle
        return (
            not self._held
            and len(self._unanswered) < MAX_PIPELINED
            and self._refusal is None
            and not self.transport.is_closing()
            # uvicorn's own bound on a body the application has not taken yet
            and (cycle is None or cycle.response_complete or len(cycle.body) <= HIGH_WATER_LIMIT)
        )

    def data_received(self, data: bytes) -> None:
        limits = self.limits
        if self in limits.open:
            limits.open.move_to_end(self)  # most recently active last
        self._unset_keepalive_if_required()
        # Reading is paused while input is held; a read already under way may still land.
        self._held = self._held + data if self._held else data
        self._feed()
        if not self._busy and self.timeout_keep_alive_task is None:
            # Bytes that do not (yet) make a request: the request clock runs.
            self._arm_request_timer()
        self._account()

    def _feed(self) -> None:
        """Parse held input, one slice at a time, until it is gone or must wait."""
        if self._feeding or self.parser is None:
            return
        data, self._held = self._held, b""
        view = memoryview(data)
        size = len(data)
        pos = 0
        self._feeding = True
        try:
            while pos < size:
                if len(self._unanswered) >= MAX_PIPELINED or self._refusal is not None:
                    break
                end = self._cut(data, pos, size)
                self._slice = end - pos
                try:
                    self.parser.feed_data(view[pos:end])
                except httptools.HttpParserUpgrade:
                    pos = size  # no upgrades here: the rest of the stream is not HTTP
                    break
                except httptools.HttpParserError as exc:
                    refusal = self._refusal or (400, f"invalid HTTP request ({safe(exc, 200)})")
                    self._refuse(*refusal)
                    return
                if self._in_head:
                    self._head_bytes += self._slice
                    if self._head_bytes > MAX_HEAD:
                        self._refuse(431, _HEAD_TOO_LARGE)
                        return
                pos = end
        finally:
            self._feeding = False
        if self._refusal is not None:
            return
        if pos < size:
            self._held = data[pos:]
            self.flow.pause_reading()
        elif self._may_read():
            self.flow.resume_reading()

    def _cut(self, data: bytes, pos: int, size: int) -> int:
        """Where the next slice ends: a body's end, a head's end, or the head cap."""
        if not self._in_head and self._body_left:
            return min(size, pos + self._body_left)
        room = MAX_HEAD + 1 - (self._head_bytes if self._in_head else 0)
        found = data.find(_HEAD_END, pos, size)
        end = size if found < 0 else found + len(_HEAD_END)
        return min(end, pos + max(room, 1))

    def _refuse_in_parser(self, status: int, why: str) -> None:
        self._refusal = (status, why)
        raise _Refused(why)

    def _refuse(self, status: int, why: str) -> None:
        """Answer ``status`` (when no earlier answer is still due) and close."""
        self._refusal = (status, why)
        self._held = b""
        self.limits.rejected += 1
        self.limits.note("refused", "BYODP server: refusing a request with %d: %s", status, why)
        self.flow.pause_reading()
        if self._unanswered:
            return  # written once the earlier answers are out (on_response_complete)
        self._write_refusal()

    def _write_refusal(self) -> None:
        assert self._refusal is not None
        status, why = self._refusal
        body = (why + "\n").encode("utf-8", "replace")
        head = (
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
            "content-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        if not self.transport.is_closing():
            self.transport.write(head.encode("ascii") + body)
            self.transport.close()

    # --- parser callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0
        self._body_left = None
        self._arm_request_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_TARGET:
            self._refuse_in_parser(
                414, f"the request target is over {MAX_TARGET} bytes; BYODP paths are short"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > MAX_HEADER_LINE:
            self._refuse_in_parser(431, f"a header line is over {MAX_HEADER_LINE} bytes")
        if len(self.headers) >= MAX_HEADERS:
            self._refuse_in_parser(431, f"the request has more than {MAX_HEADERS} headers")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._head_bytes + self._slice > MAX_HEAD:
            self._refuse_in_parser(431, _HEAD_TOO_LARGE)
        for name, value in self.headers:
            if name == b"content-length":
                self._body_left = int(value) if value.isdigit() else None
            elif name == b"transfer-encoding":
                self._body_left = None
                break
        super().on_headers_complete()
        self._unanswered.append(_Pending(self.cycle))

    def on_body(self, body: bytes) -> None:
        if self._body_left is not None:
            self._body_left -= len(body)
        if self._unanswered and self._unanswered[-1].cycle is self.cycle:
            self._body_bytes += len(body)
            self._unanswered[-1].body += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._cancel_request_timer()
        self._body_left = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        if self._unanswered:
            self._body_bytes -= self._unanswered.popleft().body
        super().on_response_complete()  # starts the next pipelined one, or the idle timer
        if self._refusal is not None and not self._unanswered:
            self._write_refusal()
        elif self._held and not self.transport.is_closing():
            self.loop.call_soon(self._continue)
        self._account()

    def _continue(self) -> None:
        """Parse input held back while too many answers were due."""
        if self.transport.is_closing() or not self._held:
            return
        self._unset_keepalive_if_required()
        self._feed()
        self._account()

    # --- the server's byte account ----------------------------------------------------

    def _account(self) -> None:
        """Charge what this connection holds now; past the ceiling, shed the largest."""
        held = len(self._held) + self._body_bytes
        if self._in_head:
            held += self._head_bytes
        if self.transport is not None:
            held += self.transport.get_write_buffer_size()
        limits = self.limits
        delta = held - self._charged
        if delta == 0:
            return
        self._charged = held
        limits.buffered += delta
        if delta > 0:
            while limits.buffered > limits.buffer_budget:
                shed = limits.shed_largest()
                if shed is None or shed is self:
                    break


def _cancel(timer: asyncio.TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()


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
