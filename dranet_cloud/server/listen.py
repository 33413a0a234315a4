"""Listening sockets for ``dranet-cloud serve``: a unix socket or HOST:PORT.

The server binds its own sockets (uvicorn then serves on them) so that it can
give the unix socket its mode before anyone can connect, learn the real port
of ``127.0.0.1:0`` for the ready line, and remove exactly the socket it
created on shutdown.  A socket file left behind by a killed server is
replaced; one that still answers belongs to a live server and is refused.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from dataclasses import dataclass

from dranet_cloud.toolkit.errors import ConfigError

DEFAULT_SOCKET_MODE = 0o660
DEFAULT_BACKLOG = 1024
ACCEPTED_FORMS = "unix:///path/to.sock, HOST:PORT, [IPv6]:PORT or http://HOST:PORT"


@dataclass(frozen=True)
class ListenAddress:
    """Where to listen: ``uds`` for a unix socket, else ``host`` and ``port``."""

    uds: str | None = None
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, text: str, *, flag: str = "--listen") -> ListenAddress:
        raw = text.strip()
        if raw.startswith("unix://"):
            path = raw[len("unix://") :]
            if not path.startswith("/"):
                raise ConfigError(
                    f"{flag} {text!r}: a unix socket needs an absolute path, "
                    "written unix:///run/dranet/webhook.sock (three slashes)"
                )
            return cls(uds=path)
        raw = raw.removeprefix("http://")
        host, sep, port_text = raw.rpartition(":")
        if not sep or not port_text.isdigit() or not host:
            raise ConfigError(f"{flag} {text!r}: expected {ACCEPTED_FORMS}")
        port = int(port_text)
        if port > 65535:
            raise ConfigError(f"{flag} {text!r}: port {port} is out of range (0-65535)")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return cls(host=host, port=port)


@dataclass
class BoundSocket:
    """A listening socket and what to undo when the server stops."""

    sock: socket.socket
    url: str
    path: str | None = None
    inode: int | None = None

    def cleanup(self) -> None:
        """Close the socket and remove its file if it is still the one we created."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.path is None:
            return
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == self.inode:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


def _clear_stale_socket(path: str) -> None:
    """Remove a socket file nobody answers on; refuse anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(
            f"--listen unix://{path}: the path exists and is not a socket; "
            "refusing to replace it (choose another path or remove the file)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # left behind by a server that was killed
        return
    except OSError as exc:
        raise ConfigError(
            f"--listen unix://{path}: a socket exists there and could not be checked ({exc}); "
            "remove it if no server uses it"
        ) from exc
    finally:
        probe.close()
    raise ConfigError(
        f"--listen unix://{path}: another server is already listening on this socket; "
        "stop it first or choose another path"
    )


def bind_unix(path: str, mode: int = DEFAULT_SOCKET_MODE) -> BoundSocket:
    """A listening unix socket at ``path`` with permission bits ``mode``."""
    parent = os.path.dirname(path) or "/"
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--listen unix://{path}: cannot create {parent}: {exc}") from exc
    _clear_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        # Before listen(): nobody can connect while the mode is still the umask's.
        os.chmod(path, mode)
        sock.listen(DEFAULT_BACKLOG)
        inode = os.lstat(path).st_ino
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--listen unix://{path}: cannot listen: {exc}") from exc
    return BoundSocket(sock=sock, url=f"unix://{path}", path=path, inode=inode)


def bind_tcp(host: str, port: int, *, flag: str = "--listen") -> BoundSocket:
    """A listening TCP socket; port 0 picks a free port, reported in ``url``."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise ConfigError(f"{flag} {host}:{port}: cannot resolve {host!r}: {exc}") from exc
    family, socktype, proto, _canon, addr = infos[0]
    sock = socket.socket(family, socktype, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(DEFAULT_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{flag} {host}:{port}: cannot listen: {exc}") from exc
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if family == socket.AF_INET6 else bound_host
    return BoundSocket(sock=sock, url=f"http://{shown}:{bound_port}")


def bind(address: ListenAddress, *, socket_mode: int = DEFAULT_SOCKET_MODE) -> BoundSocket:
    if address.uds is not None:
        return bind_unix(address.uds, socket_mode)
    return bind_tcp(address.host, address.port)
