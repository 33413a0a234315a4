"""A loopback HTTP peer that answers one byte at a time, forever (tests of deadlines).

A client whose timeouts apply per socket read never gives up on it: every
read returns a byte before the read timeout.  Only an end-to-end deadline
(connect + headers + whole body) ends the exchange.
"""

from __future__ import annotations

import socket
import threading
import time

HEADERS_THEN_BODY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
)


class DrippingServer:
    """Accepts on 127.0.0.1 and drips ``prefix`` then spaces, one byte every ``interval`` s.

    ``phase="headers"`` drips the status line and headers themselves;
    ``phase="body"`` sends the headers at once and drips the body.
    """

    def __init__(self, *, phase: str = "headers", interval: float = 0.2) -> None:
        self.interval = interval
        self.phase = phase
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> DrippingServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._drip, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(1.0)
                conn.recv(65536)  # the request (small, one segment on loopback)
                if self.phase == "body":
                    conn.sendall(HEADERS_THEN_BODY)
                    data = b" " * 100000
                else:
                    data = HEADERS_THEN_BODY
                for i in range(len(data)):
                    if self._stop.wait(self.interval):
                        return
                    conn.sendall(data[i : i + 1])
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> DrippingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def elapsed_since(start: float) -> float:
    """Seconds since ``start`` (``time.monotonic()``)."""
    return time.monotonic() - start
