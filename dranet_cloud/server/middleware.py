"""ASGI middleware in front of the BYODP endpoints: body cap, text checks, access log.

It is plain ASGI rather than a Starlette ``BaseHTTPMiddleware`` because it must
see the raw body before the router parses it: to refuse an oversized body while it is
still arriving (413, whatever ``Content-Length`` claims), to refuse strings
that cannot be stored or echoed (unpaired UTF-16 surrogates), and to pick the
claim UID out of a ``ProfileRequest`` for the access log even when the body is
then rejected as invalid.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ACCESS_LOGGER = "dranet_cloud.server.access"
# Paths whose body is a ProfileRequest carrying a claim UID worth logging.
CLAIM_PATHS = frozenset({"/GetProfileConfig", "/ReleaseProfileConfig"})
_MAX_LOGGED_CLAIM = 80

log = logging.getLogger(ACCESS_LOGGER)


class BodyTooLarge(Exception):
    """The request body passed the configured cap while it was being read."""


def printable(text: str) -> str:
    """``text`` safe for one log line: no control characters, bounded length."""
    clean = "".join(c if c.isprintable() and c != " " else "?" for c in text)
    if len(clean) > _MAX_LOGGED_CLAIM:
        clean = clean[:_MAX_LOGGED_CLAIM] + "..."
    return clean or '""'


def access_fields(
    method: str, path: str, status: int, seconds: float, claim: str | None
) -> dict[str, Any]:
    """The access line's context as JSON log fields (``--log-format json``).

    Every access line has ``path``, ``status`` and ``duration_ms``; ``claim``
    only when the request carried one.  The path is cut short like the claim:
    it is whatever the peer sent.
    """
    found: dict[str, Any] = {
        "method": printable(method),
        "path": printable(path),
        "status": status,
        "duration_ms": round(seconds * 1000.0, 3),
    }
    if claim is not None:
        found["claim"] = printable(claim)
    return found


def claim_uid_of(doc: Any) -> str | None:
    """The claim UID of a parsed ProfileRequest of either generation, for the log.

    gen1 sends ``claim_uid``; gen2 sends the ResourceClaim (``claim.metadata.uid``).
    """
    if isinstance(doc, dict):
        uid = doc.get("claim_uid")
        if isinstance(uid, str) and uid:
            return uid
        claim = doc.get("claim")
        meta = claim.get("metadata") if isinstance(claim, dict) else None
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if isinstance(uid, str):
            return uid
    return None


def has_unpaired_surrogate(doc: Any) -> bool:
    """True when a JSON string held ``\\ud800``-style escapes that are not valid Unicode.

    Python's JSON decoder accepts them, but they cannot be encoded as UTF-8, so
    they would fail later (SQLite, the response encoder) as a 500 instead of a 400.
    """
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, TypeError, RecursionError):
        return False  # not ours to judge; the router's validation reports it
    return False


async def read_capped_body(scope: Scope, receive: Receive, cap: int) -> bytes | None:
    """The whole request body, or ``None`` as soon as it is known to pass ``cap`` bytes.

    A declared ``Content-Length`` over the cap is refused before any byte is
    read; a body without one (chunked) is counted while it arrives.  A client
    that goes away leaves what arrived so far.
    """
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                if int(value) > cap:
                    return None
            except ValueError:
                pass
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send_text(send: Send, status: int, message: str) -> None:
    """A plain-text error the way Go's ``http.Error`` writes one."""
    body = (message + "\n").encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"x-content-type-options", b"nosniff"),
                (b"content-length", str(len(body)).encode("ascii")),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class WebhookMiddleware:
    """Caps request bodies, rejects undecodable strings and logs one line per request.

    The log line reads ``POST /GetProfileConfig 200 1.84ms claim=<uid>`` (``claim=-``
    when the request carries none) on the ``dranet_cloud.server.access`` logger
    at INFO.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, access_log: bool = True) -> None:
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.access_log = access_log

    def _too_large(self) -> str:
        return (
            f"request body exceeds this server's limit of {self.max_body_bytes} bytes; "
            "BYODP bodies are small JSON documents (raise --max-body-bytes if yours "
            "are legitimately larger)"
        )

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        body = await read_capped_body(scope, receive, self.max_body_bytes)
        if body is None:
            raise BodyTooLarge
        return body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = str(scope.get("method", "?"))
        path = str(scope.get("path", "?"))
        status = 0
        claim: str | None = None
        logged = False

        def log_line() -> None:
            nonlocal logged
            if logged or not self.access_log:
                return
            logged = True
            elapsed = time.perf_counter() - started
            who = "-" if claim is None else printable(claim)
            log.info(
                "%s %s %d %.2fms claim=%s",
                method,
                path,
                status,
                elapsed * 1000.0,
                who,
                extra=access_fields(method, path, status, elapsed, claim),
            )

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                # Logged before the last byte leaves: once a client has its
                # answer, the line for it exists.
                log_line()
            await send(message)

        try:
            try:
                body = await self._read_body(scope, receive)
            except BodyTooLarge:
                await _send_text(send_and_record, 413, self._too_large())
                return
            doc: Any = None
            if body:
                try:
                    doc = json.loads(body)
                except (ValueError, RecursionError):
                    doc = None  # the router answers 400 naming the position
            if path in CLAIM_PATHS:
                claim = claim_uid_of(doc)
            if doc is not None and has_unpaired_surrogate(doc):
                await _send_text(
                    send_and_record,
                    400,
                    f"invalid request body for {path}: a JSON string holds an unpaired UTF-16 "
                    "surrogate escape (such as \\ud800), which is not valid Unicode",
                )
                return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send_and_record)
        finally:
            log_line()  # a response that never completed (error, client gone)
