"""Make any connection to a non-loopback address fail loudly, before it is sent.

Cloud metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200)
are real endpoints in production code; a test that forgot to point a plugin
at its emulator would otherwise talk to whatever answers there.  The guard
patches ``socket.socket.connect``/``connect_ex``/``sendto`` so the check runs
before the kernel sees anything, and records every blocked attempt so a
pytest session can fail even when the code under test swallowed the error.

Unix sockets are always allowed; for INET/INET6 only loopback addresses
(127.0.0.0/8, ::1, and ::ffff:127.x) are.  Host names are refused unless they
are ``localhost``: resolving a name is itself network traffic.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any

__all__ = ["NonLoopbackConnection", "SocketGuard", "is_loopback_address"]


class NonLoopbackConnection(OSError):
    """A test tried to reach a non-loopback address (nothing was sent).

    An ``OSError`` (``EACCES``) so network code treats it as a failed connect
    rather than crashing in an unexpected way; the guard's ``violations`` list
    keeps the evidence for the test run.
    """


def is_loopback_address(host: Any) -> bool:
    """Whether an INET/INET6 ``host`` (as given to ``connect``) is loopback."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


class SocketGuard:
    """Install with :meth:`install` (or as a context manager); idempotent.

    ``violations`` lists ``"connect 169.254.169.254:80"`` style strings for
    every blocked attempt since install (or since :meth:`reset`).
    """

    def __init__(self) -> None:
        self.violations: list[str] = []
        self._lock = threading.Lock()
        self._originals: dict[str, Any] = {}

    @property
    def installed(self) -> bool:
        return bool(self._originals)

    def check(self, family: int, address: Any, what: str) -> None:
        """Raise ``NonLoopbackConnection`` unless ``address`` is allowed."""
        if family not in (socket.AF_INET, socket.AF_INET6):
            return
        host = address[0] if isinstance(address, tuple) and address else address
        if is_loopback_address(host):
            return
        port = address[1] if isinstance(address, tuple) and len(address) > 1 else "?"
        shown = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        with self._lock:
            self.violations.append(f"{what} {shown}")
        raise NonLoopbackConnection(
            13,
            f"socket guard: {what} to {shown} blocked: tests may only use loopback "
            "(127.0.0.1, ::1) or unix sockets; point the plugin at its emulator",
        )

    def install(self) -> SocketGuard:
        if self.installed:
            return self
        guard = self
        orig_connect = socket.socket.connect
        orig_connect_ex = socket.socket.connect_ex
        orig_sendto = socket.socket.sendto

        def connect(sock: socket.socket, address: Any) -> None:
            guard.check(sock.family, address, "connect")
            orig_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            guard.check(sock.family, address, "connect")
            return orig_connect_ex(sock, address)

        def sendto(sock: socket.socket, data: Any, *args: Any) -> int:
            address = args[-1]
            guard.check(sock.family, address, "sendto")
            return orig_sendto(sock, data, *args)

        self._originals = {
            "connect": orig_connect,
            "connect_ex": orig_connect_ex,
            "sendto": orig_sendto,
        }
        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        socket.socket.sendto = sendto  # type: ignore[assignment]
        return self

    def uninstall(self) -> None:
        for name, original in self._originals.items():
            setattr(socket.socket, name, original)
        self._originals = {}

    def reset(self) -> list[str]:
        """Return and clear the recorded violations."""
        with self._lock:
            seen, self.violations = self.violations, []
        return seen

    def __enter__(self) -> SocketGuard:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()
