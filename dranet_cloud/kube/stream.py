"""One open streaming answer of the API server (a watch): its lines, each capped.

Why not httpx's ``iter_lines``: it keeps a line for as long as the peer
sends bytes without a newline, so one broken or hostile stream could fill the
memory.  :class:`LineStream` refuses a line longer than its cap with
:class:`LineTooLong` (the caller drops the stream and starts a new one).

Why :meth:`LineStream.abort`: a watch is mostly waiting in a socket read,
and closing a socket from another thread does not wake a ``recv`` blocked on
it on Linux.  ``shutdown()`` does: the read returns at once (end of stream),
so an informer's ``stop()`` ends in bounded time whatever the server does.

Importing this module imports neither httpx2 nor lightkube.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["LineStream", "LineTooLong"]


class LineTooLong(Exception):
    """A streamed line exceeded the byte cap; ``head`` is its first bytes (for the log).

    Not a :class:`~dranet_cloud.kube.KubeError`: the API did answer, and the
    caller's remedy (drop this stream, resume from the last version) differs.
    """

    def __init__(self, message: str, head: bytes) -> None:
        super().__init__(message)
        self.head = head


class LineStream:
    """The lines of one streamed answer (``httpx2.Response`` opened with ``stream``).

    Iterate :meth:`lines` on one thread; :meth:`abort` may be called from
    any other thread and makes a blocked read return.
    """

    def __init__(self, response: Any, max_line_bytes: int, what: str) -> None:
        self._response = response
        self._cap = max_line_bytes
        self._what = what
        self._aborted = threading.Event()

    @property
    def aborted(self) -> bool:
        return self._aborted.is_set()

    def lines(self) -> Iterator[bytes]:
        """Each non-empty line of the body without its newline; raises :class:`LineTooLong`."""
        buf = bytearray()
        for chunk in self._response.iter_bytes():
            if self._aborted.is_set():
                return
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
        """End the stream from any thread: shut the socket down so a blocked read returns."""
        self._aborted.set()
        stream = self._response.extensions.get("network_stream")
        sock = None
        if stream is not None:
            try:
                sock = stream.get_extra_info("socket")
            except Exception:  # pragma: no cover - a transport without the extra
                sock = None
        if sock is not None:
            # OSError: already closed, the reader is on its way out.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return
        # No socket to shut down: closing the response is the next best thing.
        try:  # pragma: no cover - every transport here has a socket
            self._response.close()
        except Exception as exc:  # pragma: no cover
            log.debug("kubernetes: closing %s: %s", self._what, exc)
