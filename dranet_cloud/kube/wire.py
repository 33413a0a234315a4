"""HTTP/1.1 to the API server on plain sockets: what the Kubernetes client needs, bounded.

Why not httpx (lightkube's ``httpx2``): a node sidecar's CPU per allocation was
mostly its HTTP stack (a GET of one object about 850 us of client CPU, a watch
line about 130 us), while the client's requests are always of one shape (a
JSON body or none, a JSON answer or a chunked stream of lines).  Each bound
lives in one place:

* **Deadline**: every connect, TLS handshake, send and read waits at most the
  time left (:func:`~dranet_cloud.toolkit.httpdeadline.within`, or a stream's
  own end) and the per-operation timeout, computed afresh for each wait, so a
  peer that drips bytes cannot stretch a call.
* **Byte caps**: a head over :data:`MAX_HEAD_BYTES` or :data:`MAX_HEADERS`
  lines (:class:`HeadTooLarge`), a body over the caller's cap (announced or
  sent); a stream hands on at most one read at a time, so its reader's line
  cap holds.
* **Authentication** stays lightkube's: its httpx ``Auth``'s
  ``sync_auth_flow`` sets ``Authorization`` and is offered each answer, so a
  token file re-read or an exec plugin re-run on 401 behave as before.
* **Keep-alive, carefully**: a few idle connections are pooled (LIFO, at most
  :data:`IDLE_EXPIRY` s each); one the server closed while idle reads as
  readable and is dropped.  A reused connection that ends without a byte of
  answer is retried once on a new one for reads only (:data:`REPLAYABLE`): a
  write that may have been committed is reported, and its caller checks.
  A stream has its own connection.

Importing this module imports neither ssl nor httpx.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from dranet_cloud.toolkit.httpdeadline import (
    DEADLINE_PASSED,
    BodyTooLarge,
    describe_transport_error,
    time_left,
)

__all__ = [
    "IDLE_EXPIRY",
    "MAX_HEADERS",
    "MAX_HEAD_BYTES",
    "REPLAYABLE",
    "Answer",
    "Endpoint",
    "HeadTooLarge",
    "StreamAnswer",
    "Wire",
    "WireError",
    "WireTimeout",
]

MAX_HEAD_BYTES = 64 << 10  # status line and headers of one answer
MAX_HEADERS = 128  # header lines of one answer
_HEAD_OVER = f"sent response headers over the {MAX_HEAD_BYTES}-byte limit"
MAX_CHUNK_LINE = 4096  # a chunk-size line (with extensions) or a trailer line
IDLE_EXPIRY = 15.0  # s an idle connection is kept: below the usual server idle timeouts
MAX_IDLE = 20  # idle connections kept per client
MAX_CONNECTIONS = 100  # connections for whole-body requests at once (httpx's default)
RECV_BYTES = 65536
# Retried once after a reused connection ended without an answer: the reads,
# as Go's net/http (client-go's transport) replays them.  A DELETE or PUT is
# idempotent in effect but not in answer (a retried delete that had landed
# reads NotFound, a retried update Conflict), and a POST may be committed
# twice over: those surface, and their callers' own checks decide.
REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS"})
USER_AGENT = "dranet-cloud"
# RFC 3986 pchar and "/": a path made only of these is sent as it is.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_NO_BODY_STATUS = frozenset({204, 304})


class WireTimeout(Exception):
    """The call's deadline, or one operation's timeout, passed."""


class WireError(Exception):
    """No usable HTTP exchange below the status: ``reason`` says why in the shared wording
    (:func:`~dranet_cloud.toolkit.httpdeadline.describe_transport_error`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HeadTooLarge(Exception):
    """The answer's status line and headers exceeded :data:`MAX_HEAD_BYTES` or
    :data:`MAX_HEADERS`; :attr:`detail` follows "<client>: <request> " like
    :class:`~dranet_cloud.toolkit.httpdeadline.BodyTooLarge`'s."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class _NoAnswer(Exception):
    """The connection ended (or was reset) before one byte of an answer; ``cause`` is the
    socket's error, ``None`` for a plain end.  Only a reused connection's is retried."""

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__("connection closed without an answer")
        self.cause = cause


class Endpoint:
    """Where the API server is, from the kubeconfig's server URL, parsed once.

    ``prefix`` is the URL's path (an API server behind a path-routing proxy);
    an IPv6 literal is connected to without its brackets and named with them
    in ``Host``.
    """

    def __init__(self, server: str, tls: ssl.SSLContext | None) -> None:
        split = urlsplit(server.strip())
        scheme = split.scheme.lower()
        if scheme not in ("http", "https") or not split.hostname:
            raise ValueError(
                f"the server URL {server!r} is not http(s)://HOST[:PORT][/PATH]; fix the "
                "cluster's server in the kubeconfig"
            )
        self.scheme = scheme
        self.host = split.hostname  # lower-cased, without IPv6 brackets
        default = 443 if scheme == "https" else 80
        self.port = split.port or default  # ValueError on a bad port, named by the caller
        named = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = named if self.port == default else f"{named}:{self.port}"
        self.prefix = split.path.rstrip("/")
        self.tls = tls if scheme == "https" else None

    def target(self, path: str, params: Mapping[str, str] | None) -> str:
        """The request target: prefix, path (percent-encoded where needed), query."""
        target = self.prefix + quote(path, safe=_PATH_SAFE)
        if params:
            target += "?" + urlencode(params)
        return target

    def __repr__(self) -> str:
        return f"Endpoint({self.scheme}://{self.host_header}{self.prefix})"


class _Request:
    """What an httpx ``Auth`` flow sees of a request: it sets ``headers["Authorization"]``."""

    __slots__ = ("content", "headers", "method", "url")

    def __init__(self, method: str, url: str, headers: dict[str, str], content: bytes) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.content = content

    def read(self) -> bytes:
        return self.content


class Answer:
    """A whole answer: status, headers (lower-case names) and body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def status_code(self) -> int:  # what an auth flow reads
        return self.status

    def read(self) -> bytes:
        return self.body


class _Connection:
    """One socket and the bytes read from it but not used yet."""

    __slots__ = ("buf", "idle_since", "reused", "sock", "until", "waits")

    def __init__(self, sock: socket.socket, until: float | None) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.reused = False
        self.idle_since = 0.0
        # A stream's own end, beside the calling context's deadline.
        self.until = until
        self.waits = -1.0  # the socket's timeout as last set (a system call to change)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _arm(self, timeout: float) -> None:
        """Make the next socket call wait at most ``timeout`` and the deadline's rest.

        A stream's reads mostly wait the whole read timeout (its end is far):
        the socket keeps that setting instead of a system call per read.
        """
        wait = _wait(timeout, self.until)
        if wait != self.waits:
            self.sock.settimeout(wait)
            self.waits = wait

    def send(self, data: bytes, timeout: float) -> None:
        self._arm(timeout)
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise WireTimeout("write timed out") from exc

    def fill(self, timeout: float) -> bool:
        """Read what the peer sent next into the buffer; False at the end of the stream."""
        self._arm(timeout)
        try:
            data = self.sock.recv(RECV_BYTES)
        except TimeoutError as exc:
            raise WireTimeout("read timed out") from exc
        if not data:
            return False
        self.buf += data
        return True

    def must_fill(self, timeout: float) -> None:
        if not self.fill(timeout):
            raise WireError("connection closed mid-answer")

    def line(self, timeout: float, what: str) -> bytes:
        """One CRLF-ended line (a chunk size, a trailer), at most :data:`MAX_CHUNK_LINE`."""
        buf = self.buf
        start = 0
        while True:
            end = buf.find(b"\r\n", start)
            if end >= 0:
                found = bytes(buf[:end])
                del buf[: end + 2]
                return found
            if len(buf) > MAX_CHUNK_LINE:
                raise WireError(f"the API server broke HTTP/1.1: a {what} line too long")
            start = max(0, len(buf) - 1)
            self.must_fill(timeout)

    def head(self, timeout: float) -> tuple[int, dict[str, str], bool]:
        """The next final answer's status, headers and whether HTTP/1.1 keep-alive holds.

        Informational (1xx) answers are skipped.  Raises :class:`_NoAnswer` when
        the connection ends before the first byte.
        """
        first = True
        while True:
            buf = self.buf
            start = 0
            while True:
                end = buf.find(b"\r\n\r\n", start)
                if end >= 0:
                    break
                if len(buf) > MAX_HEAD_BYTES:
                    raise HeadTooLarge(_HEAD_OVER)
                start = max(0, len(buf) - 3)
                # A reset is no _NoAnswer: a server that read the request may have
                # acted on it (the emulator's lost reply); only a plain end, what a
                # server closing an idle connection sends, may be retried.
                if not self.fill(timeout):
                    if first and not buf:
                        raise _NoAnswer(None)
                    raise WireError("connection closed mid-answer")
            first = False
            if end > MAX_HEAD_BYTES:
                raise HeadTooLarge(_HEAD_OVER)
            lines = bytes(buf[:end]).split(b"\r\n")
            del buf[: end + 4]
            if len(lines) > MAX_HEADERS + 1:
                raise HeadTooLarge(f"sent more than {MAX_HEADERS} response header lines")
            version, _, rest = lines[0].partition(b" ")
            code = rest[:3]
            if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
                raise WireError(
                    "the API server broke HTTP/1.1: the status line is "
                    + repr(lines[0][:80].decode("latin-1"))
                )
            status = int(code)
            headers: dict[str, str] = {}
            for raw in lines[1:]:
                name, colon, value = raw.partition(b":")
                if not colon or not name or name != name.strip() or raw[:1] in (b" ", b"\t"):
                    raise WireError("the API server broke HTTP/1.1: a malformed header line")
                key = name.decode("latin-1").lower()
                text = value.strip().decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue, 103 Early Hints: the real answer follows
            keep = version == b"HTTP/1.1" and "close" not in headers.get("connection", "").lower()
            return status, headers, keep

    def exactly(self, size: int, timeout: float) -> bytes:
        buf = self.buf
        while len(buf) < size:
            self.must_fill(timeout)
        data = bytes(buf[:size])
        del buf[:size]
        return data

    def chunk_size(self, timeout: float) -> int:
        line = self.line(timeout, "chunk size")
        digits = line.split(b";", 1)[0].strip()
        if not digits or len(digits) > 16 or digits.strip(b"0123456789abcdefABCDEF"):
            raise WireError("the API server broke HTTP/1.1: a bad chunk size")
        return int(digits, 16)

    def trailers(self, timeout: float) -> None:
        for _ in range(MAX_HEADERS):
            if not self.line(timeout, "trailer"):
                return
        raise HeadTooLarge(f"sent more than {MAX_HEADERS} trailer lines")

    def chunk_end(self, timeout: float) -> None:
        if self.line(timeout, "chunk end"):
            raise WireError("the API server broke HTTP/1.1: a chunk longer than its size")

    def body(
        self, method: str, status: int, headers: Mapping[str, str], limit: int, timeout: float
    ) -> tuple[bytes, bool]:
        """The whole body under ``limit`` and whether the connection can carry another
        request (False when the body ran to the connection's end)."""
        if method == "HEAD" or status in _NO_BODY_STATUS:
            return b"", True
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if coding.lower().rsplit(",", 1)[-1].strip() != "chunked":
                return self.rest(limit, timeout), False
            parts: list[bytes] = []
            size = 0
            while True:
                n = self.chunk_size(timeout)
                if n == 0:
                    self.trailers(timeout)
                    return b"".join(parts), True
                size += n
                if size > limit:
                    raise BodyTooLarge(limit)
                parts.append(self.exactly(n, timeout))
                self.chunk_end(timeout)
        declared = headers.get("content-length")
        if declared is None:
            return self.rest(limit, timeout), False
        if not declared.isdigit():
            raise WireError(f"the API server broke HTTP/1.1: Content-Length {declared[:40]!r}")
        length = int(declared)
        if length > limit:
            raise BodyTooLarge(limit, length)
        return self.exactly(length, timeout), True

    def rest(self, limit: int, timeout: float) -> bytes:
        """Everything up to the connection's end (an answer without a length)."""
        while len(self.buf) <= limit:
            if not self.fill(timeout):
                data = bytes(self.buf)
                self.buf.clear()
                return data
        raise BodyTooLarge(limit)


class StreamAnswer:
    """A successful streamed answer (a watch): its body as it arrives, on its own connection.

    :meth:`iter_bytes` yields the body in pieces of at most one socket read
    (chunked framing removed).  :meth:`shutdown` may be called from any thread:
    the socket is shut down, so a read blocked on it returns at once and the
    stream ends without an error.
    """

    def __init__(
        self,
        conn: _Connection,
        status: int,
        headers: dict[str, str],
        read_timeout: float,
    ) -> None:
        self._conn = conn
        self.status = status
        self.headers = headers
        self._timeout = read_timeout
        self._shut = False

    def iter_bytes(self) -> Iterator[bytes]:
        try:
            yield from self._pieces()
        except (OSError, WireError):
            if not self._shut:
                raise
        except ValueError:
            # A read on a socket the other thread's shutdown already closed.
            if not self._shut:  # pragma: no cover - only after shutdown
                raise

    def _pieces(self) -> Iterator[bytes]:
        conn = self._conn
        buf = conn.buf
        timeout = self._timeout
        chunked = self.headers.get("transfer-encoding", "").lower().endswith("chunked")
        if not chunked:
            declared = self.headers.get("content-length")
            left = int(declared) if declared is not None and declared.isdigit() else -1
            while left != 0:
                if not buf and not conn.fill(timeout):
                    if left > 0 and not self._shut:
                        raise WireError("connection closed mid-answer")
                    return
                piece = bytes(buf) if left < 0 or len(buf) <= left else bytes(buf[:left])
                del buf[: len(piece)]
                if left > 0:
                    left -= len(piece)
                yield piece
            return
        while True:
            size = conn.chunk_size(timeout)
            if size == 0:
                conn.trailers(timeout)
                return
            if len(buf) >= size + 2 and buf[size : size + 2] == b"\r\n":
                # The usual case, one watch event per chunk, all of it read.
                piece = bytes(buf[:size])
                del buf[: size + 2]
                yield piece
                continue
            while size:
                if not buf:
                    conn.must_fill(timeout)
                if len(buf) <= size:
                    piece = bytes(buf)
                    buf.clear()
                else:
                    piece = bytes(buf[:size])
                    del buf[:size]
                size -= len(piece)
                yield piece
            conn.chunk_end(timeout)

    def shutdown(self) -> None:
        """End the stream from any thread (a blocked read returns at once)."""
        self._shut = True
        # socket.socket's own shutdown, also for a TLS socket: SSLSocket's would
        # drop its TLS state under the reading thread.  OSError: already closed,
        # the reader is on its way out.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self._conn.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        self._shut = True
        self._conn.close()


class Wire:
    """The HTTP/1.1 client of one :class:`~dranet_cloud.kube.KubeClient`: a keep-alive pool
    for whole-body requests, a new connection per stream, lightkube's auth on both.

    ``timeout`` bounds each connect, send and read (as httpx's per-operation
    timeout did); the calling context's deadline bounds them all together.
    Thread-safe.
    """

    def __init__(self, endpoint: Endpoint, auth: Any, timeout: float) -> None:
        self.endpoint = endpoint
        self.auth = auth  # an httpx(2) Auth, or None for a client certificate alone
        self.timeout = timeout
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._closed = False

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for conn in idle:
            conn.close()

    # --- requests ----------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        accept: str = "application/json",
        limit: int,
    ) -> Answer:
        """Send one request and read its whole answer (body under ``limit`` bytes)."""
        target = self.endpoint.target(path, params)
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        if body is not None:
            headers["Content-Type"] = "application/json"
        content = body or b""

        def send(request: _Request) -> Answer:
            return self._exchange(method, target, request, limit)

        answer: Answer = self._authorized(method, target, headers, content, send, None)
        return answer

    def _authorized(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        content: bytes,
        send: Callable[[_Request], Any],
        discard: Callable[[Any], None] | None,
    ) -> Any:
        """``send`` the request as the auth flow asks: once, or again after it saw the answer
        (a 401 makes a token file re-read, an exec plugin re-run)."""
        request = _Request(method, target, headers, content)
        if self.auth is None:
            return send(request)
        flow = self.auth.sync_auth_flow(request)
        request = next(flow)
        answer = send(request)
        while True:
            try:
                request = flow.send(answer)
            except StopIteration:
                return answer
            if discard is not None:
                discard(answer)
            answer = send(request)

    def _exchange(self, method: str, target: str, request: _Request, limit: int) -> Answer:
        data = _encode(method, target, self.endpoint.host_header, request)
        if not self._slots.acquire(timeout=_wait(self.timeout)):
            raise WireTimeout("no free connection")
        try:
            conn = self._checkout()
            try:
                return self._once(conn, method, data, limit)
            except _NoAnswer as exc:
                # A reused connection that ended as the request crossed it: the
                # server's idle close, or a server that read the request and went
                # away; which cannot be told, so only a read goes once more.
                if not (conn.reused and method in REPLAYABLE):
                    raise _no_answer(exc) from exc.cause
            try:
                return self._once(self._connect(None), method, data, limit)
            except _NoAnswer as exc:
                raise _no_answer(exc) from exc.cause
        finally:
            self._slots.release()

    def _once(self, conn: _Connection, method: str, data: bytes, limit: int) -> Answer:
        """One request on ``conn``; then the connection goes back to the pool or is closed."""
        with _closed_on_error(conn):
            try:
                conn.send(data, self.timeout)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise _NoAnswer(exc) from exc
            status, headers, keep = conn.head(self.timeout)
            body, whole = conn.body(method, status, headers, limit, self.timeout)
        if keep and whole and not conn.buf:
            self._checkin(conn)
        else:
            conn.close()
        return Answer(status, headers, body)

    def _checkout(self) -> _Connection:
        """An idle connection still open (most recent first), else a new one."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn = self._idle.pop()
            if now - conn.idle_since < IDLE_EXPIRY and _still_open(conn.sock):
                conn.reused = True
                return conn
            conn.close()
        return self._connect(None)

    def _checkin(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    # --- streams -----------------------------------------------------------------------

    def open_stream(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None,
        accept: str,
        read_timeout: float,
        until: float,
        error_limit: int,
    ) -> StreamAnswer | Answer:
        """A GET whose answer streams: a :class:`StreamAnswer` on success, else the whole
        error :class:`Answer` (body under ``error_limit``).  Connects anew; the caller
        closes the stream, and its connection with it."""
        target = self.endpoint.target(path, params)
        headers = {"Accept": accept, "User-Agent": USER_AGENT}

        def send(request: _Request) -> StreamAnswer | Answer:
            data = _encode("GET", target, self.endpoint.host_header, request)
            conn = self._connect(until)
            with _closed_on_error(conn):
                try:
                    conn.send(data, self.timeout)
                    status, answer_headers, _keep = conn.head(read_timeout)
                except _NoAnswer as exc:
                    raise _no_answer(exc) from exc.cause
                if 200 <= status < 300:
                    return StreamAnswer(conn, status, answer_headers, read_timeout)
                body, _whole = conn.body("GET", status, answer_headers, error_limit, read_timeout)
            conn.close()
            return Answer(status, answer_headers, body)

        def discard(answer: Any) -> None:
            if isinstance(answer, StreamAnswer):
                answer.close()

        return self._authorized("GET", target, headers, b"", send, discard)  # type: ignore[no-any-return]

    # --- connecting --------------------------------------------------------------------

    def _connect(self, until: float | None) -> _Connection:
        """A new connection (TLS when the server is https), every step under the deadline."""
        ep = self.endpoint
        try:
            infos = socket.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise _transport(exc) from exc
        error: OSError | None = None
        sock: socket.socket | None = None
        for family, kind, proto, _name, address in infos:
            wait = _wait(self.timeout, until)
            candidate = socket.socket(family, kind, proto)
            try:
                candidate.settimeout(wait)
                candidate.connect(address)
            except TimeoutError as exc:
                candidate.close()
                raise WireTimeout("connect timed out") from exc
            except OSError as exc:
                candidate.close()
                error = exc
                continue
            sock = candidate
            break
        if sock is None:
            assert error is not None  # getaddrinfo answers at least one address or raises
            raise _transport(error) from error
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.tls is not None:
                sock.settimeout(_wait(self.timeout, until))
                sock = ep.tls.wrap_socket(sock, server_hostname=ep.host)
        except TimeoutError as exc:
            sock.close()
            raise WireTimeout("TLS handshake timed out") from exc
        except OSError as exc:
            sock.close()
            raise _transport(exc) from exc
        return _Connection(sock, until)


@contextlib.contextmanager
def _closed_on_error(conn: _Connection) -> Iterator[None]:
    """Close ``conn`` on any failure inside (a half-read connection is never reused);
    a socket error becomes a :class:`WireError` naming it."""
    try:
        yield
    except OSError as exc:
        conn.close()
        raise _transport(exc) from exc
    except BaseException:
        conn.close()
        raise


def _encode(method: str, target: str, host: str, request: _Request) -> bytes:
    """The request's bytes; a header value that would break the framing is refused."""
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"]
    for name, value in request.headers.items():
        if "\n" in value or "\r" in value or "\0" in value:
            raise WireError(
                f"the {name} header holds a line break (a token file or exec plugin "
                "with more than one line?); fix the credentials"
            )
        lines.append(f"{name}: {value}\r\n")
    content = request.content
    if content or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(content)}\r\n")
    lines.append("\r\n")
    try:
        head = "".join(lines).encode("latin-1")
    except UnicodeEncodeError as exc:
        raise WireError(
            "a request header holds characters HTTP cannot carry; fix the credentials"
        ) from exc
    return head + content if content else head


def _wait(timeout: float, until: float | None = None) -> float:
    """The longest the next operation may wait: ``timeout``, cut to the rest of the calling
    context's deadline and of ``until`` (``time.monotonic()``, a stream's own end)."""
    left = time_left()
    if left is not None and left < timeout:
        timeout = left
    if until is not None:
        rest = until - time.monotonic()
        if rest < timeout:
            timeout = rest
    if timeout <= 0:
        raise WireTimeout(DEADLINE_PASSED)
    return timeout


def _still_open(sock: socket.socket) -> bool:
    """Whether an idle connection may carry a request: nothing to read (no FIN, no
    stray bytes) and no TLS record waiting."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    if readable:
        return False
    pending = getattr(sock, "pending", None)
    return not (pending is not None and pending())


def _no_answer(exc: _NoAnswer) -> WireError:
    if exc.cause is None:
        return WireError("connection closed without an answer")
    return WireError(describe_transport_error(exc.cause))


def _transport(exc: OSError) -> WireError:
    if isinstance(exc, socket.gaierror):
        return WireError(f"cannot resolve the API server's host: {exc.strerror or exc}")
    return WireError(describe_transport_error(exc))
