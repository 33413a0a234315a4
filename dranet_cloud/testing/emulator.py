"""A small threaded HTTP/1.1 server that cloud plugins build their metadata
emulators on.

Plugins supply a :data:`~.messages.Handler` (``Request -> Response``); the kit
supplies the server (loopback TCP or a unix socket, never anything else,
:mod:`.listen`), keep-alive, a request log tests assert on, and fault
injection driven by a spec string (:mod:`.faults`).  The rest of the kit sits
beside it: :mod:`.messages` (requests, responses, the log entries),
:mod:`.metadata_tree` (serving a nested-JSON tree) and :mod:`.tokens`
(IMDSv2-style token sessions); :mod:`dranet_cloud.testing` re-exports the
public names of all of them.

Refusing non-loopback addresses is deliberate: an emulator answers anything
with fake credentials-shaped data and must never be reachable from a network.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from dranet_cloud.testing.faults import Faults
from dranet_cloud.testing.listen import UNIX_SCHEME, parse_listen
from dranet_cloud.testing.messages import (
    Handler,
    Headers,
    LoggedRequest,
    Request,
    Response,
    StreamAborted,
    http_chunk,
)
from dranet_cloud.toolkit.logsafe import safe

__all__ = ["MAX_BODY_BYTES", "MAX_HEADERS", "MAX_LINE_BYTES", "Emulator"]

log = logging.getLogger(__name__)

# The request's limits: a longer request line is 414 (http.server's own
# check), a longer header line or more header lines 431, a larger body 413.
MAX_LINE_BYTES = 65536
MAX_HEADERS = 100
MAX_BODY_BYTES = 64 << 20
_VERSION = re.compile(r"HTTP/(\d{1,10})\.(\d{1,10})")


class _BadRequest(Exception):
    """A request the emulator cannot read to its end; answered, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ServerMixin  # type: ignore[assignment]
    # Idle keep-alive connections are closed after this long.
    timeout = 30.0
    serial = 0  # this connection's number, for the request log
    raw_requestline = b""  # set by http.server before parse_request
    request_headers: Headers

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):  # most runs: skip formatting every request
            log.debug("%s emulator: %s", self.server.emulator.name, safe(format % args, limit=300))

    def parse_request(self) -> bool:
        """Read the request line and headers into ``command``, ``path``, ``request_headers``.

        http.server parses headers with :mod:`email.parser`, which was the
        largest part of a small request's CPU; this reads ``Name: value``
        lines itself with the same limits (:data:`MAX_LINE_BYTES`,
        :data:`MAX_HEADERS`: 431) and the same HTTP/1.1 rules (keep-alive
        unless ``Connection: close`` or HTTP/1.0 without ``keep-alive``,
        ``Expect: 100-continue``, 505 for HTTP/2+).  HTTP/0.9 (no version)
        is a 400: no client of an emulator speaks it.
        """
        self.command = ""
        self.request_version = "HTTP/1.0"  # an error answer has a status line
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) != 3:
            self.send_error(400, "Bad request syntax", "expected METHOD TARGET HTTP/1.x")
            return False
        method, target, version = words
        m = _VERSION.fullmatch(version)
        if m is None:
            self.send_error(400, "Bad request version", "expected HTTP/1.0 or HTTP/1.1")
            return False
        number = (int(m.group(1)), int(m.group(2)))
        if number >= (2, 0):
            self.send_error(505, "Invalid HTTP version", "this server speaks HTTP/1.x")
            return False
        self.command, self.request_version = method, version
        self.path = "/" + target.lstrip("/") if target.startswith("//") else target
        pairs: list[tuple[str, str]] = []
        lines = 0
        while True:
            raw = self.rfile.readline(MAX_LINE_BYTES + 1)
            if raw in (b"\r\n", b"\n", b""):
                break
            if len(raw) > MAX_LINE_BYTES:
                self.send_error(
                    431, "Line too long", f"a header line is over {MAX_LINE_BYTES} bytes"
                )
                return False
            lines += 1
            if lines > MAX_HEADERS:
                self.send_error(431, "Too many headers", f"more than {MAX_HEADERS} header lines")
                return False
            line = raw.decode("iso-8859-1").rstrip("\r\n")
            if line[0] in " \t" and pairs:  # an obsolete folded line: the value goes on
                name, value = pairs[-1]
                pairs[-1] = (name, f"{value} {line.strip()}")
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                self.send_error(400, "Bad header line", "expected Name: value")
                return False
            pairs.append((name, value.strip()))
        self.request_headers = headers = Headers(pairs)
        tokens = {t.strip() for t in headers.get("Connection", "").lower().split(",")}
        self.close_connection = "close" in tokens or (
            number < (1, 1) and "keep-alive" not in tokens
        )
        if number >= (1, 1) and headers.get("Expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def address_string(self) -> str:
        addr = self.client_address
        return str(addr[0]) if isinstance(addr, tuple) and addr else "unix"

    def setup(self) -> None:
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.serial = self.server.emulator._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.emulator._track(self.connection, False)

    def _read_body(self) -> bytes:
        """The body (chunked or ``Content-Length``), at most :data:`MAX_BODY_BYTES`."""
        headers = self.request_headers
        if "chunked" in headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
                try:
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    raise _BadRequest(400, "a chunk size is not hexadecimal") from None
                total += size
                if total > MAX_BODY_BYTES:
                    raise _BadRequest(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
                if size == 0:
                    for _ in range(MAX_HEADERS + 1):  # trailer lines, ignored
                        if not self.rfile.readline(MAX_LINE_BYTES + 1).strip():
                            break
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(MAX_LINE_BYTES + 1)
        length_text = headers.get("Content-Length")
        if length_text is None:
            return b""
        try:
            length = int(length_text)
        except ValueError:
            raise _BadRequest(400, "Content-Length is not a number") from None
        if length < 0:
            raise _BadRequest(400, "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            raise _BadRequest(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        emu = self.server.emulator
        split = urlsplit(self.path)
        try:
            body = self._read_body()
        except _BadRequest as exc:
            self.close_connection = True  # the rest of the body is not read
            self._write(Response(exc.status, f"{exc}\n"), head=False, chunked=False)
            return
        request = Request(
            method=self.command,
            path=unquote(split.path) or "/",
            query=parse_qs(split.query, keep_blank_values=True),
            headers=self.request_headers,
            body=body,
        )
        decision = emu.faults.decide(request)
        if decision.delay:
            time.sleep(decision.delay)
        if decision.drop:
            emu._record(request, None, decision.label, self.serial)
            self.close_connection = True
            return
        if decision.status is not None:
            response = Response(decision.status, f"injected fault: HTTP {decision.status}\n")
        else:
            try:
                response = emu.handler(request)
            except Exception:
                log.exception("%s emulator: handler failed for %s", emu.name, request.path)
                response = Response(500, "emulator handler raised; see the log\n")
            if response.abort:
                emu._record(request, response.status, "lost-reply", self.serial)
                self._abort()
                return
            if response.stream is not None:
                emu._record(request, response.status, decision.label, self.serial)
                self._write_stream(response, response.stream)
                return
        if emu.headers:
            # The handler's own headers win; never mutate its (maybe shared) object.
            own = {k.lower() for k in response.headers}
            extra = {k: v for k, v in emu.headers.items() if k.lower() not in own}
            response = Response(
                response.status,
                response.body,
                {**extra, **response.headers},
                response.content_type,
            )
        response, shaped = emu.faults.shape(request.path, response)
        label = ",".join(x for x in (decision.label, shaped) if x) or None
        emu._record(request, response.status, label, self.serial)
        self._write(response, head=request.method == "HEAD", chunked=emu.faults.chunked)

    def _write_stream(self, response: Response, stream: Iterator[bytes]) -> None:
        """Send a streaming answer chunked, each piece as it comes (a watch).

        A stream with ``attach_socket(sock)`` may send on the socket itself
        between pieces (it answers ``True`` when its pieces come as whole
        chunks).  The kit's shaping faults do not apply to it; a client that goes away
        (a failed write) closes the iterator, so its ``finally`` runs now.
        """
        headers = {"Content-Type": response.content_type, **response.headers}
        head_text = f"{self.protocol_version} {response.status} {_reason(response.status)}\r\n"
        head_text += "".join(
            f"{name}: {value}\r\n"
            for name, value in headers.items()
            if name.lower() not in ("content-length", "transfer-encoding", "connection")
        )
        head_text += "Transfer-Encoding: chunked\r\n\r\n"
        attach = getattr(stream, "attach_socket", None)
        framed = bool(attach(self.connection)) if callable(attach) else False
        try:
            self.wfile.write(head_text.encode("latin-1"))
            for piece in stream:
                if piece and framed:
                    self.wfile.write(piece)
                elif piece:
                    self.wfile.write(http_chunk(piece))
            self.wfile.write(b"0\r\n\r\n")
        except StreamAborted:
            self._abort()
        except OSError as exc:
            log.debug("%s emulator: stream client went away: %s", self.server.emulator.name, exc)
            self.close_connection = True
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        self.log_request(response.status)

    def _abort(self) -> None:
        """Reset the connection (no FIN-then-maybe-answer): the client sees it at once."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _write(self, response: Response, *, head: bool, chunked: bool) -> None:
        body = response.body_bytes
        reason = _reason(response.status)
        headers: list[tuple[str, str]] = []
        if not any(k.lower() == "content-type" for k in response.headers):
            headers.append(("Content-Type", response.content_type))
        for name, value in response.headers.items():
            if name.lower() in ("content-length", "transfer-encoding", "connection"):
                continue
            headers.append((name, value))
        if chunked and not head:
            headers.append(("Transfer-Encoding", "chunked"))
        else:
            headers.append(("Content-Length", str(len(body))))
        if self.close_connection:
            headers.append(("Connection", "close"))
        head_text = f"{self.protocol_version} {response.status} {reason}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in headers
        )
        payload = [head_text.encode("latin-1"), b"\r\n"]
        if head:
            pass
        elif chunked:
            step = 16384
            for i in range(0, len(body), step):
                payload.append(http_chunk(body[i : i + step]))
            payload.append(b"0\r\n\r\n")
        else:
            payload.append(body)
        # One write: separate small writes would meet Nagle and delayed ACKs.
        self.wfile.write(b"".join(payload))
        self.log_request(response.status, len(body))

    do_GET = _handle
    do_PUT = _handle
    do_POST = _handle
    do_DELETE = _handle
    do_PATCH = _handle
    do_HEAD = _handle


class _ServerMixin:
    emulator: Emulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up early (a size cap, a timeout) are normal here.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("%s emulator: client went away: %s", self.emulator.name, exc)
            return
        log.error("%s emulator: error serving a request", self.emulator.name, exc_info=True)


class _TCPServer(_ServerMixin, socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops the SYNs of many clients that
    # connect at once (each then waits a 1 s retransmit, or is reset when the
    # accept queue overflows): a thousand simulated nodes start at once.
    request_queue_size = 1024

    def server_bind(self) -> None:
        # HTTPServer.server_bind would resolve the host name (DNS); skip that.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _TCP6Server(_TCPServer):
    address_family = socket.AF_INET6


class _UnixServer(_ServerMixin, socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = 1024


class Emulator:
    """A running (or ready-to-run) metadata emulator.

    ``headers`` are added to every answer, fault answers included (GCE's
    ``Metadata-Flavor: Google``); ``strip-headers`` removes them again.
    ``env_for(url)`` returns the variables that point the plugin at this
    emulator; :attr:`env` calls it with the live URL.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        name: str,
        listen: str = "127.0.0.1:0",
        faults: Faults | str | None = None,
        env_for: Callable[[str], dict[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.handler = handler
        self.name = name
        self.listen = listen
        self._family, self._host, self._port = parse_listen(listen)  # validate early
        self.faults = faults if isinstance(faults, Faults) else Faults.parse(faults)
        self.env_for = env_for
        self.headers = dict(headers or {})
        self.log: list[LoggedRequest] = []
        self._log_lock = threading.Lock()
        self._server: _TCPServer | _UnixServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._serial = 0
        self._url: str | None = None
        # Run by every stop(): idempotent clean-ups of whoever built the emulator.
        self.on_stop: list[Callable[[], None]] = []

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> Emulator:
        """Bind and serve in a background thread; returns ``self``."""
        if self._server is not None:
            return self
        server: _TCPServer | _UnixServer
        if self._family == socket.AF_UNIX:
            path = self._host
            _remove_stale_socket(path)
            server = _UnixServer(path, _RequestHandler)
            self._url = UNIX_SCHEME + path
        else:
            cls = _TCP6Server if self._family == socket.AF_INET6 else _TCPServer
            server = cls((self._host, self._port), _RequestHandler)
            port = server.server_address[1]
            host = f"[{self._host}]" if self._family == socket.AF_INET6 else self._host
            self._url = f"http://{host}:{port}"
        server.emulator = self
        self._server = server
        self.faults.reset_clock()
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.5},
            name=f"{self.name}-emulator",
            daemon=True,
        )
        self._thread.start()
        log.info("%s emulator listening on %s", self.name, self._url)
        return self

    def stop(self) -> None:
        """Stop serving, close idle keep-alive connections, remove the socket file."""
        server, self._server = self._server, None
        try:
            if server is not None:
                self._shutdown(server)
        finally:
            for callback in list(self.on_stop):
                callback()

    def _shutdown(self, server: _TCPServer | _UnixServer) -> None:
        # shutdown() waits for the serve loop to notice; poke it awake with a
        # connection instead of waiting for the next poll.
        stopper = threading.Thread(target=server.shutdown, daemon=True)
        stopper.start()
        while stopper.is_alive():
            self._poke(server)
            stopper.join(0.01)
        with self._log_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._family == socket.AF_UNIX:
            _remove_stale_socket(self._host)

    def _poke(self, server: _TCPServer | _UnixServer) -> None:
        try:
            with socket.socket(server.address_family, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                s.connect(server.server_address)
        except OSError:
            pass

    def serve_forever(self) -> None:
        """Serve until SIGTERM or SIGINT (call from the main thread), then stop."""
        self.start()
        done = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            done.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            while not done.wait(0.5):
                pass
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            self.stop()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Emulator({self.name!r}, {self._url or self.listen!r})"

    # --- what tests use ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, ``http://[::1]:PORT`` or ``unix:///path``."""
        if self._url is None:
            raise RuntimeError(f"{self.name} emulator: url is known only after start()")
        return self._url

    @property
    def host_port(self) -> str:
        """``127.0.0.1:PORT`` (for variables that take host[:port], like GCE's)."""
        url = self.url
        if url.startswith(UNIX_SCHEME):
            raise RuntimeError(f"{self.name} emulator listens on a unix socket, not a port")
        return url.split("://", 1)[1]

    @property
    def env(self) -> dict[str, str]:
        return dict(self.env_for(self.url)) if self.env_for is not None else {}

    def requests(self, path_prefix: str = "") -> list[LoggedRequest]:
        """Logged requests whose path starts with ``path_prefix``."""
        with self._log_lock:
            return [r for r in self.log if r.path.startswith(path_prefix)]

    @property
    def request_count(self) -> int:
        with self._log_lock:
            return len(self.log)

    def clear_log(self) -> None:
        with self._log_lock:
            self.log.clear()

    # --- internals ------------------------------------------------------------------------

    def _record(
        self, request: Request, status: int | None, fault: str | None, connection: int
    ) -> None:
        entry = LoggedRequest(
            request.method,
            request.path,
            request.query,
            request.headers,
            request.body,
            status,
            fault,
            time.monotonic(),
            connection,
        )
        with self._log_lock:
            self.log.append(entry)

    def _track(self, conn: socket.socket, add: bool) -> int:
        with self._log_lock:
            if add:
                self._conns.add(conn)
                self._serial += 1
            else:
                self._conns.discard(conn)
            return self._serial


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _remove_stale_socket(path: str) -> None:
    """Remove a leftover socket file (never a regular file)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
