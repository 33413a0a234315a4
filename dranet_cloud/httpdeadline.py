"""End-to-end deadlines for ``httpx``: connect, headers and the whole body.

httpx's timeouts apply to each socket operation, so a peer that drips one
byte every half second never trips them and holds the caller for as long as
it likes.  This module bounds the whole exchange instead: a transport built
by :func:`deadline_transport` clamps every connect, read and write of the
calling thread's request to the time left before the deadline set with
:func:`within`, and fails the operation with a timeout once it has passed.
A request therefore ends at its deadline whatever the peer does (plus the
granularity of one socket call, which the clamp keeps at zero).

The deadline lives in a :class:`contextvars.ContextVar`, so concurrent calls
in other threads (each with their own deadline) do not disturb each other.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import time
import typing
from collections.abc import Iterable, Iterator

import httpcore
import httpx

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "dranet_cloud_http_deadline", default=None
)

SocketOption: typing.TypeAlias = (
    "tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]"
)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[float]:
    """Every request this thread sends inside the block ends ``seconds`` from now.

    A nested block never extends an outer deadline.  Yields the absolute
    deadline (``time.monotonic()`` clock).
    """
    until = time.monotonic() + max(0.0, seconds)
    outer = _DEADLINE.get()
    if outer is not None:
        until = min(until, outer)
    token = _DEADLINE.set(until)
    try:
        yield until
    finally:
        _DEADLINE.reset(token)


def expired() -> bool:
    """True when the current deadline has passed (a body loop checks between chunks)."""
    until = _DEADLINE.get()
    return until is not None and time.monotonic() >= until


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    until = _DEADLINE.get()
    if until is None:
        return timeout
    left = until - time.monotonic()
    if left <= 0:
        raise error("the end-to-end deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's blocking backend with every socket call clamped to the deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, _clamp(timeout, httpcore.ConnectTimeout), socket_options
        )
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def deadline_transport(**kwargs: typing.Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` (same arguments) that honours :func:`within`."""
    transport = httpx.HTTPTransport(**kwargs)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError(  # pragma: no cover - only with an incompatible httpx
            "this httpx version hides its connection pool; dranet-cloud cannot bound "
            "request deadlines (install httpx 0.27 or newer)"
        )
    pool._network_backend = DeadlineBackend()
    return transport
