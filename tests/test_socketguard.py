"""The socket guard blocks non-loopback connections before anything is sent."""

from __future__ import annotations

import errno
import socket
from typing import Any

import pytest

from dranet_cloud.testing import Emulator, NonLoopbackConnection, Response, SocketGuard
from dranet_cloud.testing.socketguard import is_loopback_address
from dranet_cloud.toolkit.metadata import MetadataClient, MetadataUnavailable


def test_guard_raises_before_the_real_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    # Put a spy where the real connect would be, then a fresh guard on top:
    # the spy must never see the metadata address.
    reached: list[Any] = []

    def spy(sock: socket.socket, address: Any) -> None:
        reached.append(address)
        raise AssertionError("the real connect was reached")

    monkeypatch.setattr(socket.socket, "connect", spy)
    monkeypatch.setattr(socket.socket, "connect_ex", spy)
    guard = SocketGuard()
    with guard:
        for family, address in (
            (socket.AF_INET, ("169.254.169.254", 80)),
            (socket.AF_INET, ("100.100.100.200", 80)),
            (socket.AF_INET6, ("fd00:ec2::254", 80, 0, 0)),
        ):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                with pytest.raises(NonLoopbackConnection) as info:
                    s.connect(address)
                assert info.value.errno == errno.EACCES
                with pytest.raises(NonLoopbackConnection):
                    s.connect_ex(address)
                with pytest.raises(OSError):
                    s.getpeername()  # still unconnected
    assert reached == []
    assert guard.violations == [
        "connect 169.254.169.254:80",
        "connect 169.254.169.254:80",
        "connect 100.100.100.200:80",
        "connect 100.100.100.200:80",
        "connect [fd00:ec2::254]:80",
        "connect [fd00:ec2::254]:80",
    ]


def test_session_guard_is_installed_and_catches_a_metadata_client(
    socket_guard: SocketGuard,
) -> None:
    assert socket_guard.installed
    with (
        MetadataClient("http://169.254.169.254", plugin="aws") as c,
        pytest.raises(MetadataUnavailable) as info,
    ):
        c.get("/latest/meta-data/", deadline=0.1)
    assert "socket guard" in str(info.value)
    seen = socket_guard.reset()  # consumed here, so this test passes
    assert seen and set(seen) == {"connect 169.254.169.254:80"}


def test_udp_sendto_is_blocked(socket_guard: SocketGuard) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        with pytest.raises(NonLoopbackConnection):
            s.sendto(b"x", ("8.8.8.8", 53))
        with pytest.raises(NonLoopbackConnection):
            s.sendto(b"x", 0, ("8.8.8.8", 53))
    assert socket_guard.reset() == ["sendto 8.8.8.8:53", "sendto 8.8.8.8:53"]


def test_loopback_and_unix_are_allowed(tmp_path: Any) -> None:
    with Emulator(lambda r: Response.text("ok"), name="g") as emu:
        host, port = emu.host_port.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(path)
        server.listen()
        client.connect(path)


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        (b"127.0.0.1", True),
        ("169.254.169.254", False),
        ("fd00:ec2::254", False),
        ("::ffff:10.0.0.1", False),
        ("metadata.google.internal", False),
        ("0.0.0.0", False),
        (None, False),
    ],
)
def test_is_loopback_address(host: Any, ok: bool) -> None:
    assert is_loopback_address(host) is ok


def test_uninstall_restores_the_originals() -> None:
    before = socket.socket.connect
    guard = SocketGuard().install()
    assert socket.socket.connect is not before
    guard.install()  # idempotent
    guard.uninstall()
    assert socket.socket.connect is before
