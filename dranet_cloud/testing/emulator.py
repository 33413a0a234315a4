"""A small threaded HTTP/1.1 server that cloud plugins build their metadata
emulators on.

Plugins supply a :data:`Handler` (``Request -> Response``); the kit supplies
the server (loopback TCP or a unix socket, never anything else), keep-alive,
a request log tests assert on, and fault injection driven by a spec string so
the same faults can be asked for from tests, from ``dranet-cloud emulate
--faults`` and from the conformance suite::

    status=503,503,200;delay=0.2;drop=2;unavailable-for=3;
    strip-headers=Metadata-Flavor;oversize=2000000;malformed;html;chunked;
    expire-tokens-every=2;path=/latest/

Refusing non-loopback addresses is deliberate: an emulator answers anything
with fake credentials-shaped data and must never be reachable from a network.
"""

from __future__ import annotations

import contextlib
import enum
import ipaddress
import json
import logging
import math
import os
import secrets
import signal
import socket
import socketserver
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType, TracebackType
from typing import Any, TypeAlias
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = [
    "MISSING",
    "Emulator",
    "Faults",
    "Handler",
    "Headers",
    "LoggedRequest",
    "Request",
    "Response",
    "TokenIssuer",
    "parse_listen",
    "render_leaf",
    "render_listing",
    "split_path",
    "tree_lookup",
    "tree_response",
]

log = logging.getLogger(__name__)

UNIX_SCHEME = "unix://"


# --- requests and responses -------------------------------------------------------


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only header mapping (repeated headers joined by ``, ``)."""

    def __init__(self, items: Mapping[str, str] | Sequence[tuple[str, str]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._data: dict[str, tuple[str, str]] = {}
        for name, value in pairs:
            key = name.lower()
            if key in self._data:  # keep the first spelling, join the values
                first, previous = self._data[key]
                self._data[key] = (first, f"{previous}, {value}")
            else:
                self._data[key] = (name, value)

    def __getitem__(self, name: str) -> str:
        return self._data[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._data

    def __iter__(self) -> Iterator[str]:
        return (orig for orig, _ in self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


@dataclass(frozen=True)
class Request:
    """What a handler sees: the path is percent-decoded and without the query."""

    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""

    def arg(self, name: str, default: str | None = None) -> str | None:
        """First value of query parameter ``name``."""
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body or b"null")


@dataclass
class Response:
    """What a handler returns; ``body`` may be text (sent as UTF-8).

    ``abort``: the handler did its work (committed a write) but the client
    never learns: the connection is closed without an HTTP answer, as when a
    reply is lost on the network.  The log records the status with the fault
    ``"lost-reply"``.
    """

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/plain"
    abort: bool = False

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        return cls(status, json.dumps(obj), dict(headers or {}), "application/json")

    @classmethod
    def text(
        cls, text: str, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        return cls(status, text, dict(headers or {}), "text/plain")

    @classmethod
    def not_found(cls, what: str = "") -> Response:
        return cls(404, f"not found: {what}\n" if what else "not found\n")

    @property
    def body_bytes(self) -> bytes:
        return self.body.encode() if isinstance(self.body, str) else self.body


Handler: TypeAlias = Callable[[Request], Response]


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the emulator saw it, and what it did with it.

    ``fault`` names the injected fault (``"drop"``, ``"status=503"``,
    ``"unavailable"``, ``"oversize"``...) or is ``None``; ``status`` is
    ``None`` for a dropped connection.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Headers
    body: bytes
    status: int | None
    fault: str | None
    at: float  # time.monotonic()
    connection: int = 0  # serial number of the TCP/unix connection (keep-alive reuse)


# --- faults -----------------------------------------------------------------------------


@dataclass
class _Decision:
    delay: float = 0.0
    drop: bool = False
    status: int | None = None
    label: str | None = None


# What a captive portal (hotel Wi-Fi, a corporate proxy's login) answers to any GET.
CAPTIVE_PORTAL_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>"
    b'<body><form action="/login">Accept the terms to continue</form></body></html>\n'
)


class Faults:
    """Fault injection state, parsed from a spec string and safe across threads.

    Keys (separated by ``;``):

    * ``status=503,503,200``: the next requests get these statuses in order
      (a 2xx lets the real handler answer); afterwards, normal service;
    * ``unavailable-for=S``: 503 for every request during the first ``S``
      seconds after the emulator started (a booting metadata server);
    * ``delay=S``: sleep ``S`` seconds before answering each request;
    * ``drop=N``: close the next ``N`` connections without answering;
    * ``strip-headers=A,B``: remove these headers from every answer;
    * ``oversize=N``: replace every successful body with ``N`` bytes;
    * ``malformed``: truncate and corrupt every successful body;
    * ``html``: answer every successful request with a captive portal's
      login page (``Content-Type: text/html``), as a hotel or corporate
      network in front of a misconfigured node does;
    * ``chunked``: send bodies chunked, without ``Content-Length``;
    * ``expire-tokens-every=N``: a session token stops working after ``N``
      uses (see :class:`TokenIssuer`);
    * ``path=/prefix``: apply the request faults above only to paths that
      start with the prefix (token requests included if they match).

    An unknown key or a bad value raises ``ValueError`` naming it.
    """

    KEYS = (
        "status",
        "unavailable-for",
        "delay",
        "drop",
        "strip-headers",
        "oversize",
        "malformed",
        "html",
        "chunked",
        "expire-tokens-every",
        "path",
    )

    def __init__(
        self,
        *,
        statuses: Sequence[int] = (),
        unavailable_for: float = 0.0,
        delay: float = 0.0,
        drop: int = 0,
        strip_headers: Sequence[str] = (),
        oversize: int | None = None,
        malformed: bool = False,
        html: bool = False,
        chunked: bool = False,
        expire_tokens_every: int = 0,
        path: str = "",
    ) -> None:
        self._lock = threading.Lock()
        self.statuses: list[int] = list(statuses)
        self.unavailable_for = unavailable_for
        self.delay = delay
        self.drop = drop
        self.strip_headers: list[str] = list(strip_headers)
        self.oversize = oversize
        self.malformed = malformed
        self.html = html
        self.chunked = chunked
        self.expire_tokens_every = expire_tokens_every
        self.path = path
        self.started_at = time.monotonic()

    # --- parsing -----------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: str | None) -> Faults:
        """Build from a spec string (``None`` or ``""``: no faults)."""
        faults = cls()
        faults.load(spec)
        return faults

    def load(self, spec: str | None) -> None:
        """Replace every setting in place (emulators and token issuers sharing
        this object see the change at once); the clock is not reset."""
        fresh = _parse_spec(spec or "")
        with self._lock:
            self.statuses = fresh["statuses"]
            self.unavailable_for = fresh["unavailable_for"]
            self.delay = fresh["delay"]
            self.drop = fresh["drop"]
            self.strip_headers = fresh["strip_headers"]
            self.oversize = fresh["oversize"]
            self.malformed = fresh["malformed"]
            self.html = fresh["html"]
            self.chunked = fresh["chunked"]
            self.expire_tokens_every = fresh["expire_tokens_every"]
            self.path = fresh["path"]

    def clear(self) -> None:
        """No faults from now on."""
        self.load(None)

    def reset_clock(self) -> None:
        """Restart the ``unavailable-for`` window (the emulator calls it on start)."""
        self.started_at = time.monotonic()

    def spec(self) -> str:
        """The current settings as a spec string (``parse(spec())`` round-trips)."""
        parts: list[str] = []
        if self.statuses:
            parts.append("status=" + ",".join(str(s) for s in self.statuses))
        if self.unavailable_for:
            parts.append(f"unavailable-for={self.unavailable_for:g}")
        if self.delay:
            parts.append(f"delay={self.delay:g}")
        if self.drop:
            parts.append(f"drop={self.drop}")
        if self.strip_headers:
            parts.append("strip-headers=" + ",".join(self.strip_headers))
        if self.oversize is not None:
            parts.append(f"oversize={self.oversize}")
        if self.malformed:
            parts.append("malformed")
        if self.html:
            parts.append("html")
        if self.chunked:
            parts.append("chunked")
        if self.expire_tokens_every:
            parts.append(f"expire-tokens-every={self.expire_tokens_every}")
        if self.path:
            parts.append(f"path={self.path}")
        return ";".join(parts)

    def __repr__(self) -> str:
        return f"Faults.parse({self.spec()!r})"

    def __bool__(self) -> bool:
        return bool(self.spec())

    # --- decisions ---------------------------------------------------------------------

    def applies_to(self, path: str) -> bool:
        return not self.path or path.startswith(self.path)

    def decide(self, request: Request) -> _Decision:
        """What to do with one incoming request (consumes sequence items)."""
        if not self.applies_to(request.path):
            return _Decision()
        with self._lock:
            decision = _Decision(delay=self.delay)
            if self.drop > 0:
                self.drop -= 1
                decision.drop = True
                decision.label = "drop"
                return decision
            if self.unavailable_for and time.monotonic() - self.started_at < self.unavailable_for:
                decision.status = 503
                decision.label = "unavailable"
                return decision
            if self.statuses:
                status = self.statuses.pop(0)
                if not 200 <= status < 300:
                    decision.status = status
                    decision.label = f"status={status}"
            return decision

    def shape(self, path: str, response: Response) -> tuple[Response, str | None]:
        """Apply body and header faults to an answer; returns it and a label."""
        if not self.applies_to(path):
            return response, None
        labels: list[str] = []
        headers = dict(response.headers)
        body = response.body_bytes
        content_type = response.content_type
        if self.strip_headers:
            drop = {h.lower() for h in self.strip_headers}
            headers = {k: v for k, v in headers.items() if k.lower() not in drop}
            labels.append("strip-headers")
        if 200 <= response.status < 300:
            if self.oversize is not None:
                body = (b"x" * 64 + b"\n") * (self.oversize // 65) + b"x" * (self.oversize % 65)
                labels.append("oversize")
            if self.malformed:
                body = body[: len(body) // 2] + b'\xff\x00{"truncated'
                labels.append("malformed")
            if self.html:
                body, content_type = CAPTIVE_PORTAL_PAGE, "text/html; charset=utf-8"
                labels.append("html")
        shaped = Response(response.status, body, headers, content_type)
        return shaped, ",".join(labels) or None


def spec_items(spec: str) -> Iterator[tuple[str, str, str, bool]]:
    """The items of a fault spec (``key=value`` joined by ``;``; empty ones skipped):
    ``(item, key lower-cased, value, whether it had "=")``, stripped of blanks.
    """
    for raw in spec.split(";"):
        item = raw.strip()
        if item:
            key, sep, value = item.partition("=")
            yield item, key.strip().lower(), value.strip(), bool(sep)


def _parse_spec(spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "statuses": [],
        "unavailable_for": 0.0,
        "delay": 0.0,
        "drop": 0,
        "strip_headers": [],
        "oversize": None,
        "malformed": False,
        "html": False,
        "chunked": False,
        "expire_tokens_every": 0,
        "path": "",
    }
    for item, key, value, sep in spec_items(spec):
        try:
            if key == "status":
                out["statuses"] = [int(v) for v in value.split(",") if v.strip()]
                if any(not 100 <= s <= 599 for s in out["statuses"]):
                    raise ValueError("statuses must be 100-599")
            elif key == "unavailable-for":
                out["unavailable_for"] = _non_negative(float(value))
            elif key == "delay":
                out["delay"] = _non_negative(float(value))
            elif key == "drop":
                out["drop"] = int(_non_negative(int(value)))
            elif key == "strip-headers":
                out["strip_headers"] = [h.strip() for h in value.split(",") if h.strip()]
                if not out["strip_headers"]:
                    raise ValueError("name the headers, e.g. strip-headers=Metadata-Flavor")
            elif key == "oversize":
                out["oversize"] = int(_non_negative(int(value)))
            elif key in ("malformed", "html", "chunked"):
                if sep and value.lower() not in ("1", "true", "yes", "0", "false", "no"):
                    raise ValueError("expected no value or true/false")
                out[key] = not sep or value.lower() in ("1", "true", "yes")
            elif key == "expire-tokens-every":
                out["expire_tokens_every"] = int(_non_negative(int(value)))
            elif key == "path":
                out["path"] = value
            else:
                raise ValueError(f"unknown fault; known: {', '.join(Faults.KEYS)}")
        except ValueError as exc:
            raise ValueError(f"fault spec {spec!r}: bad item {item!r}: {exc}") from exc
    return out


def _non_negative(value: float) -> float:
    # nan would crash every answer in time.sleep, inf would hang it.
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    if value < 0:
        raise ValueError("must not be negative")
    return value


# --- metadata trees ------------------------------------------------------------------


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing.MISSING
"""What :func:`tree_lookup` returns for a path that does not exist."""


def split_path(path: str, prefix: str = "") -> list[str] | None:
    """Segments of ``path`` below ``prefix`` (``None`` when outside it).

    Empty segments (doubled or trailing slashes) are dropped.
    """
    if prefix:
        if not path.startswith(prefix) and path + "/" != prefix:
            return None
        path = path[len(prefix) :]
    return [s for s in path.split("/") if s]


def _is_dir(node: Any) -> bool:
    if isinstance(node, dict):
        return True
    return isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node)


def tree_lookup(tree: Any, segments: Sequence[str]) -> Any:
    """Walk a nested-JSON tree: dict keys by name, list items by index.

    Returns the node, or :data:`MISSING`.
    """
    node = tree
    for seg in segments:
        if seg == "":
            continue
        if isinstance(node, dict):
            if seg not in node:
                return MISSING
            node = node[seg]
        elif isinstance(node, list) and _is_dir(node):
            if not seg.isdigit() or int(seg) >= len(node):
                return MISSING
            node = node[int(seg)]
        else:
            return MISSING
    return node


def render_listing(node: Any, dir_suffix: str = "/") -> str:
    """A directory listing, one name a line; sub-directories end in ``dir_suffix``.

    Dicts list their keys in insertion order, lists of objects their indexes.
    """
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = [(str(i), v) for i, v in enumerate(node)]
    else:
        raise TypeError(f"render_listing needs a dict or list, not {type(node).__name__}")
    return "\n".join(name + (dir_suffix if _is_dir(child) else "") for name, child in items)


def render_leaf(node: Any) -> str:
    """A scalar as metadata servers print it; a list of scalars one per line."""
    if isinstance(node, bool):
        return "true" if node else "false"
    if node is None:
        return ""
    if isinstance(node, list):
        return "\n".join(render_leaf(v) for v in node)
    return str(node)


def tree_response(
    tree: Any, segments: Sequence[str], *, dir_suffix: str = "/", json_leaves: bool = False
) -> Response:
    """Serve ``segments`` of ``tree``: 404, a listing, or a leaf as text.

    ``json_leaves`` serves dict/list leaves as JSON instead (for trees whose
    leaves are documents, like AWS's instance identity document).
    """
    node = tree_lookup(tree, segments)
    if node is MISSING:
        return Response.not_found("/".join(segments))
    if _is_dir(node) and not json_leaves:
        return Response.text(render_listing(node, dir_suffix))
    if isinstance(node, (dict, list)) and json_leaves:
        return Response.json(node)
    return Response.text(render_leaf(node))


# --- tokens -----------------------------------------------------------------------------


@dataclass
class _IssuedToken:
    expires_at: float
    uses: int = 0


class TokenIssuer:
    """Token sessions in the IMDSv2 style: ``PUT`` issues, ``check`` verifies.

    ``issue`` wants a TTL header between 1 and ``max_ttl`` (else 400) and
    answers the token with the granted TTL echoed.  ``check`` returns
    ``None`` when the request may proceed, else a 401 ``Response``.  With
    ``required=False`` a request without a token passes (IMDSv1 allowed),
    but a wrong or expired token is still refused.  ``faults`` (shared with
    the emulator) provides ``expire-tokens-every``.
    """

    def __init__(
        self,
        *,
        ttl_header: str,
        token_header: str,
        max_ttl: int = 21600,
        required: bool = True,
        faults: Faults | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.ttl_header = ttl_header
        self.token_header = token_header
        self.max_ttl = max_ttl
        self.required = required
        self.faults = faults
        self.issued = 0
        self.rejected = 0
        self._lock = threading.Lock()
        self._tokens: dict[str, _IssuedToken] = {}

    def issue(self, request: Request) -> Response:
        if request.method != "PUT":
            return Response(405, "token requests must use PUT\n", {"Allow": "PUT"})
        raw = request.headers.get(self.ttl_header)
        if raw is None:
            return Response(400, f"missing {self.ttl_header}\n")
        try:
            ttl = int(raw.strip())
        except ValueError:
            return Response(400, f"{self.ttl_header} must be an integer\n")
        if not 1 <= ttl <= self.max_ttl:
            return Response(400, f"{self.ttl_header} must be 1-{self.max_ttl}\n")
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._tokens[token] = _IssuedToken(self.clock() + ttl)
            self.issued += 1
        return Response(200, token, {self.ttl_header: str(ttl)})

    def check(self, request: Request) -> Response | None:
        token = request.headers.get(self.token_header)
        with self._lock:
            if token is None:
                if not self.required:
                    return None
                self.rejected += 1
                return Response(401, f"missing {self.token_header}\n")
            entry = self._tokens.get(token)
            now = self.clock()
            every = self.faults.expire_tokens_every if self.faults is not None else 0
            if entry is not None and every and entry.uses >= every:
                del self._tokens[token]
                entry = None
            if entry is None or entry.expires_at <= now:
                self._tokens.pop(token, None)
                self.rejected += 1
                return Response(401, "token expired or unknown\n")
            entry.uses += 1
            return None

    def expire_all(self) -> None:
        """Invalidate every issued token (a metadata server restart)."""
        with self._lock:
            self._tokens.clear()

    @property
    def active(self) -> int:
        with self._lock:
            now = self.clock()
            return sum(1 for t in self._tokens.values() if t.expires_at > now)


# --- listen addresses -------------------------------------------------------------


def parse_listen(listen: str) -> tuple[socket.AddressFamily, str, int]:
    """``127.0.0.1:0``, ``[::1]:0``, ``localhost:0`` or ``unix:///path``.

    Returns ``(family, host_or_path, port)``.  Anything that is not loopback
    raises ``ValueError``: emulators must never be reachable from a network.
    """
    listen = listen.strip()
    if listen.startswith(UNIX_SCHEME):
        path = listen[len(UNIX_SCHEME) :]
        if not path.startswith("/"):
            raise ValueError(f"listen {listen!r}: a unix socket needs an absolute path")
        return socket.AF_UNIX, path, 0
    if "://" in listen:
        raise ValueError(f"listen {listen!r}: expected HOST:PORT or unix:///path")
    if listen.startswith("["):
        host, sep, port_s = listen[1:].partition("]:")
        if not sep:
            raise ValueError(f"listen {listen!r}: expected [IPv6]:PORT")
    else:
        host, sep, port_s = listen.rpartition(":")
        if not sep:
            host, port_s = listen, "0"
    if host in ("", "localhost"):
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
        port = int(port_s)
    except ValueError as exc:
        raise ValueError(f"listen {listen!r}: expected a loopback IP and a port ({exc})") from exc
    if not addr.is_loopback:
        raise ValueError(
            f"listen {listen!r}: emulators bind loopback only (127.0.0.1, ::1) "
            "or a unix socket, never a network address"
        )
    if not 0 <= port <= 65535:
        raise ValueError(f"listen {listen!r}: port out of range")
    family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    return family, str(addr), port


# --- the server --------------------------------------------------------------------------


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ServerMixin  # type: ignore[assignment]
    # Idle keep-alive connections are closed after this long.
    timeout = 30.0
    serial = 0  # this connection's number, for the request log

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s emulator: " + format, self.server.emulator.name, *args)

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
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length)) if int(length) > 0 else b""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        return b""

    def _handle(self) -> None:
        emu = self.server.emulator
        split = urlsplit(self.path)
        request = Request(
            method=self.command,
            path=unquote(split.path) or "/",
            query=parse_qs(split.query, keep_blank_values=True),
            headers=Headers(list(self.headers.items())),
            body=self._read_body(),
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

    def _abort(self) -> None:
        """Reset the connection (no FIN-then-maybe-answer): the client sees it at once."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _write(self, response: Response, *, head: bool, chunked: bool) -> None:
        body = response.body_bytes
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = "Unknown"
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
                piece = body[i : i + step]
                payload.append(b"%x\r\n%s\r\n" % (len(piece), piece))
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
    # connect at once (each then waits a 1 s retransmit): benchmarks connect
    # a hundred at a time.
    request_queue_size = 256

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
    request_queue_size = 256


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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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


def _remove_stale_socket(path: str) -> None:
    """Remove a leftover socket file (never a regular file)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
