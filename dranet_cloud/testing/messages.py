"""What an emulator's handler is given and returns, and what the request log keeps.

A plugin's emulator is one function, :data:`Handler` (``Request -> Response``);
these types are all it needs to know of HTTP.  The server that parses and
writes the wire lives in :mod:`.emulator`; tests read :class:`LoggedRequest`
entries from :attr:`Emulator.log <dranet_cloud.testing.emulator.Emulator.log>`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["Handler", "Headers", "LoggedRequest", "Request", "Response", "StreamAborted"]


def http_chunk(data: bytes) -> bytes:
    """``data`` framed as one HTTP/1.1 chunk (size in hex, CRLF, data, CRLF)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


class StreamAborted(Exception):
    """Raised by a :attr:`Response.stream` to reset the connection mid-stream.

    The client sees the stream break without its final chunk, as when a
    connection through a load balancer is cut; a stream that simply returns
    ends cleanly instead.
    """


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

    ``stream``: the body comes from this iterator instead of ``body``, sent
    chunked, each piece as soon as it is produced (a Kubernetes watch).  The
    server closes the iterator when the client goes away; the iterator raises
    :class:`StreamAborted` to reset the connection instead of ending cleanly.
    """

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/plain"
    abort: bool = False
    stream: Iterator[bytes] | None = None

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
