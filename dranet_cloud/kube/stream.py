"""One open streaming answer of the API server (a watch): its lines, each capped.

Why a cap of its own: a reader that keeps a line for as long as the peer
sends bytes without a newline lets one broken or hostile stream fill the
memory.  :class:`LineStream` refuses a line longer than its cap with
:class:`LineTooLong` (the caller drops the stream and starts a new one).

Why :meth:`LineStream.abort`: a watch is mostly waiting in a socket read,
and closing a socket from another thread does not wake a ``recv`` blocked on
it on Linux.  ``shutdown()`` does: the read returns at once (end of stream),
so an informer's ``stop()`` ends in bounded time whatever the server does.
The body comes from a :class:`ByteSource` (the client's
:class:`~dranet_cloud.kube.wire.StreamAnswer`), which does the shutting down.

Importing this module imports neither httpx2 nor lightkube.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol

__all__ = ["ByteSource", "LineStream", "LineTooLong"]


class ByteSource(Protocol):
    """A streamed body: its bytes in pieces as they arrive, and a way to end it."""

    def iter_bytes(self) -> Iterator[bytes]:
        """The body's pieces; ends (without an error) once :meth:`shutdown` was called."""
        ...

    def shutdown(self) -> None:
        """Make a read blocked in :meth:`iter_bytes` return at once; any thread may call it."""
        ...


class LineTooLong(Exception):
    """A streamed line exceeded the byte cap; ``head`` is its first bytes (for the log).

    Not a :class:`~dranet_cloud.kube.KubeError`: the API did answer, and the
    caller's remedy (drop this stream, resume from the last version) differs.
    """

    def __init__(self, message: str, head: bytes) -> None:
        super().__init__(message)
        self.head = head


class LineStream:
    """The lines of one streamed answer.

    Iterate :meth:`lines` on one thread; :meth:`abort` may be called from
    any other thread and makes a blocked read return.
    """

    def __init__(self, source: ByteSource, max_line_bytes: int, what: str) -> None:
        self._source = source
        self._cap = max_line_bytes
        self._what = what
        self._aborted = threading.Event()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def lines(self) -> Iterator[bytes]:
        """Each non-empty line of the body without its newline; raises :class:`LineTooLong`."""
        buf = bytearray()
        cap = self._cap
        for chunk in self._source.iter_bytes():
            if self._aborted.is_set():
                return
            if not buf and chunk.find(b"\n") == len(chunk) - 1:
                # The usual piece: one whole line (a watch event per chunk).
                if len(chunk) - 1 > cap:
                    self._too_long(chunk[:512])
                line = chunk[:-1]
                if line and not line.isspace():
                    yield line
                continue
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    break
                piece = chunk[start:end]
                start = end + 1
                if len(buf) + len(piece) > self._cap:
                    self._too_long(bytes(buf[:256]) + piece[:256])
                if buf:
                    buf += piece
                    line = bytes(buf)
                    buf.clear()
                else:
                    line = piece
                if line.strip():
                    yield line
            rest = chunk[start:]
            if len(buf) + len(rest) > self._cap:
                self._too_long(bytes(buf[:256]) + rest[:256])
            buf += rest
        if buf.strip() and not self._aborted.is_set():
            yield bytes(buf)

    def _too_long(self, head: bytes) -> None:
        raise LineTooLong(
            f"kubernetes: {self._what} streamed a line over the {self._cap}-byte limit; "
            "dropping the stream (an object that large is not one this program reads)",
            head,
        )

    def abort(self) -> None:
        """End the stream from any thread: the source's socket is shut down, so a blocked
        read returns and :meth:`lines` ends."""
        self._aborted.set()
        self._source.shutdown()
