"""Where an emulator may listen: loopback TCP or a unix socket, never a network.

An emulator answers anything with fake credentials-shaped data, so an
address that a network could reach is refused before anything is bound.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["UNIX_SCHEME", "parse_listen"]

UNIX_SCHEME = "unix://"


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
