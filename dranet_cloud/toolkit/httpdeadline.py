"""Bounded HTTP, shared by every client: an end-to-end deadline, a capped body read
and one wording for transport errors.

The metadata client (:mod:`dranet_cloud.toolkit.metadata`), the BYODP webhook client
and the Kubernetes client (:mod:`dranet_cloud.kube.wire`) all send requests
to peers they cannot trust to be quick or small; each bound lives here once:

* **Deadline.**  httpx's timeouts apply to each socket operation, so a peer
  that drips one byte every half second never trips them and holds the caller
  for as long as it likes.  :func:`bound` makes a transport clamp every
  connect, read and write of the calling thread's request to the time left
  before the deadline set with :func:`within`, and fail the operation with
  the library's own timeout once it has passed; :func:`read_capped` checks
  the deadline between body chunks too.  A request therefore ends at its
  deadline whatever the peer does.  The deadline lives in a
  :class:`contextvars.ContextVar`, so concurrent calls in other threads (each
  with their own deadline) do not disturb each other.
* **Capped body.**  :func:`read_capped` refuses an answer that announces, or
  streams, more than a byte limit, with :class:`BodyTooLarge` naming the limit.
* **Transport-error wording.**  :func:`describe_transport_error` says why a
  connection failed in the same words for every client ("connection refused",
  "no such unix socket", "read timed out"...).

The Kubernetes client speaks HTTP/1.1 itself (:mod:`dranet_cloud.kube.wire`)
and takes the deadline (:func:`within`, :func:`time_left`) and the wording
from here; :func:`bound` and :func:`read_capped` are for httpx.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import ssl
import sys
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

DEADLINE_PASSED = "the end-to-end deadline passed"

# --- deadline -----------------------------------------------------------------------


@contextlib.contextmanager
def within(seconds: float, *, until: float | None = None) -> Iterator[float]:
    """Every request this thread sends inside the block ends ``seconds`` from now.

    ``until`` (``time.monotonic()`` clock), when given, is the end instead:
    a call made of several blocks (the pages of a list) keeps one deadline.
    A nested block never extends an outer deadline.  Yields the absolute
    deadline.
    """
    end = time.monotonic() + max(0.0, seconds) if until is None else until
    outer = _DEADLINE.get()
    if outer is not None:
        end = min(end, outer)
    token = _DEADLINE.set(end)
    try:
        yield end
    finally:
        _DEADLINE.reset(token)


def expired() -> bool:
    """True when the current deadline has passed (a body loop checks between chunks)."""
    until = _DEADLINE.get()
    return until is not None and time.monotonic() >= until


def time_left() -> float | None:
    """Seconds before the current deadline (negative once passed), ``None`` without one."""
    until = _DEADLINE.get()
    return None if until is None else until - time.monotonic()


def _clamp(timeout: float | None, error: type[Exception]) -> float | None:
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise error(DEADLINE_PASSED)
    return left if timeout is None else min(timeout, left)


class _Timeouts(typing.NamedTuple):
    """httpcore's connect/read/write timeout classes."""

    connect: type[Exception]
    read: type[Exception]
    write: type[Exception]


class _DeadlineStream:
    """A network stream whose every operation ends by the deadline."""

    def __init__(self, inner: typing.Any, errors: _Timeouts) -> None:
        self._inner = inner
        self._errors = errors

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._inner.read(max_bytes, _clamp(timeout, self._errors.read))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout, self._errors.write))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _DeadlineStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _clamp(timeout, self._errors.connect)
        )
        return _DeadlineStream(inner, self._errors)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend:
    """An httpcore sync backend with every socket call clamped to the deadline."""

    def __init__(self, inner: typing.Any) -> None:
        self._inner = inner
        self._errors = _Timeouts(
            httpcore.ConnectTimeout, httpcore.ReadTimeout, httpcore.WriteTimeout
        )

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> _DeadlineStream:
        timeout = _clamp(timeout, self._errors.connect)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._errors)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> _DeadlineStream:
        timeout = _clamp(timeout, self._errors.connect)
        stream = self._inner.connect_unix_socket(path, timeout, socket_options)
        return _DeadlineStream(stream, self._errors)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_T = typing.TypeVar("_T")


def bound(transport: _T) -> _T:
    """Make an ``httpx`` ``HTTPTransport`` honour :func:`within`."""
    pool: typing.Any = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None or not hasattr(backend, "connect_tcp"):
        raise RuntimeError(  # pragma: no cover - only with an incompatible httpx
            "this httpx version hides its connection pool; dranet-cloud cannot bound "
            "request deadlines (install httpx 0.27 or newer)"
        )
    if not isinstance(backend, DeadlineBackend):
        pool._network_backend = DeadlineBackend(backend)
    return transport


def deadline_transport(**kwargs: typing.Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` (same arguments) that honours :func:`within`."""
    return bound(httpx.HTTPTransport(**kwargs))


# --- capped body --------------------------------------------------------------------


class BodyTooLarge(Exception):
    """An answer announced (``declared``, from Content-Length) or sent more than ``limit`` bytes.

    Each client wraps it in its own public error; :attr:`detail` is the shared
    wording (it names the limit), to follow "<client>: <request> ".
    """

    def __init__(self, limit: int, declared: int | None = None) -> None:
        self.limit = limit
        self.declared = declared
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        if self.declared is not None:
            return f"announced a {self.declared}-byte body, over the {self.limit}-byte limit"
        return f"sent a body over the {self.limit}-byte limit"


def read_capped(response: typing.Any, limit: int) -> bytes:
    """The whole (decoded) body of an ``httpx`` streamed ``response``, at most ``limit`` bytes.

    Raises :class:`BodyTooLarge` as soon as the Content-Length or the bytes
    read so far exceed ``limit`` (nothing more is read), and httpx's
    ``ReadTimeout`` once the :func:`within` deadline has passed between
    chunks.
    """
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, int(declared))
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        if expired():
            raise httpx.ReadTimeout(DEADLINE_PASSED, request=response.request)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


# --- transport-error wording ----------------------------------------------------------

# httpx's exception class names, most specific first.
_BY_CLASS = (
    ("ConnectTimeout", "connect timed out"),
    ("ReadTimeout", "read timed out"),
    ("TimeoutException", "timed out"),
    ("RemoteProtocolError", "connection closed without an answer"),
)


def describe_transport_error(exc: BaseException) -> str:
    """A short reason a request failed below HTTP: ``connection refused``, ``no such unix socket``.

    Reads httpx's class names and the chain of causes, down to the ``OSError``
    the socket raised (the Kubernetes client's own errors are that ``OSError``).
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    for name, reason in _BY_CLASS:
        if name in names:
            return reason
    text = str(exc) or type(exc).__name__
    # No TLS error exists unless ssl was imported (this module does not import it).
    ssl_error = getattr(sys.modules.get("ssl"), "SSLError", ())
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, FileNotFoundError):
            return "no such unix socket"
        if isinstance(cause, ConnectionResetError):
            return "connection reset"
        if isinstance(cause, ssl_error):
            return f"TLS handshake failed: {text}"
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause.strerror or os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    lowered = text.lower()
    if "refused" in lowered:
        return "connection refused"
    if "no such file" in lowered:
        return "no such unix socket"
    if "certificate" in lowered or "ssl" in lowered or "tls" in lowered:
        return f"TLS handshake failed: {text}"
    return text
