"""The bounded-HTTP layer every client shares (dranet_cloud.toolkit.httpdeadline), on real peers.

Each check runs on httpx (the metadata and webhook clients; the Kubernetes
client's own HTTP/1.1 has its checks in test_kube_wire.py): the cap names its
limit, a peer that drips its answer is cut off at the deadline whatever it
drips, and a missing unix socket reads the same for every client.
"""

from __future__ import annotations

import importlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from dranet_cloud.testing.drip import DrippingServer
from dranet_cloud.toolkit.httpdeadline import (
    BodyTooLarge,
    bound,
    describe_transport_error,
    expired,
    read_capped,
    time_left,
    within,
)
from dranet_cloud.toolkit.metadata import MetadataClient, MetadataUnavailable

FLAVOURS = ("httpx",)
LIMIT = 1000


class _Sized(BaseHTTPRequestHandler):
    """``GET /<n>`` answers ``n`` bytes; ``?chunked`` sends them without a Content-Length."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        body = b"x" * int(path.strip("/"))
        self.send_response(200)
        if query == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(body), 256):
                part = body[start : start + 256]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def sized() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _client(flavour: str, **transport: Any) -> tuple[ModuleType, Any]:
    """The library and a client on a :func:`bound` transport; per-read timeouts of 30 s."""
    lib = importlib.import_module(flavour)
    client = lib.Client(
        transport=bound(lib.HTTPTransport(**transport)), trust_env=False, timeout=30.0
    )
    return lib, client


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_cap_is_refused_naming_the_cap(
    sized: str, flavour: str, chunked: bool
) -> None:
    _, client = _client(flavour)
    query = "?chunked" if chunked else ""
    with client:
        with client.stream("GET", f"{sized}/{LIMIT}{query}") as response:
            assert read_capped(response, LIMIT) == b"x" * LIMIT
        with (
            client.stream("GET", f"{sized}/{LIMIT + 1}{query}") as response,
            pytest.raises(BodyTooLarge) as info,
        ):
            read_capped(response, LIMIT)
    assert info.value.limit == LIMIT
    assert f"over the {LIMIT}-byte limit" in str(info.value)
    if chunked:
        assert info.value.declared is None
        assert str(info.value) == f"sent a body over the {LIMIT}-byte limit"
    else:
        assert info.value.declared == LIMIT + 1
        assert str(info.value) == f"announced a {LIMIT + 1}-byte body, over the {LIMIT}-byte limit"


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_dripping_peer_is_cut_off_at_the_deadline(flavour: str, phase: str) -> None:
    lib, client = _client(flavour)
    # One byte every 0.1 s never trips the 30 s per-read timeout; only the
    # end-to-end deadline can end the exchange (the whole drip lasts hours).
    with DrippingServer(phase=phase, interval=0.1) as drip, client:
        start = time.monotonic()
        with (
            within(0.5),
            pytest.raises(lib.TimeoutException) as info,
            client.stream("GET", drip.url) as response,
        ):
            read_capped(response, 1 << 20)
        took = time.monotonic() - start
    assert took < 0.5 + 2.0, f"a 0.5 s deadline held the caller {took:.2f} s"
    assert describe_transport_error(info.value) in ("read timed out", "timed out")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_missing_unix_socket_and_a_refused_port_read_alike(tmp_path: Path, flavour: str) -> None:
    lib, client = _client(flavour, uds=str(tmp_path / "absent.sock"))
    with client, pytest.raises(lib.ConnectError) as missing:
        client.get("http://localhost/")
    assert describe_transport_error(missing.value) == "no such unix socket"

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lib, client = _client(flavour)
    with client, pytest.raises(lib.ConnectError) as refused:
        client.get(f"http://127.0.0.1:{port}/")
    assert describe_transport_error(refused.value) == "connection refused"


def test_the_metadata_client_words_a_missing_socket_like_the_others(tmp_path: Path) -> None:
    with (
        MetadataClient(f"unix://{tmp_path}/absent.sock", plugin="t", timeout=1.0) as client,
        pytest.raises(MetadataUnavailable, match=r"\(no such unix socket\)"),
    ):
        client.get("/x")


def test_a_tls_failure_is_named_from_the_cause_chain() -> None:
    try:
        try:
            raise ssl.SSLCertVerificationError(1, "certificate verify failed")
        except ssl.SSLError as cause:
            raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] verify failed") from cause
    except httpx.ConnectError as exc:
        reason = describe_transport_error(exc)
    assert reason == "TLS handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] verify failed"


def test_a_nested_deadline_never_extends_the_outer_one() -> None:
    assert time_left() is None and not expired()
    with within(10.0) as outer:
        with within(100.0) as inner:
            assert inner == outer
        with within(0.0, until=outer - 5.0) as earlier:
            assert earlier == outer - 5.0
        left = time_left()
        assert left is not None and 9.0 < left <= 10.0
    with within(0.0):
        assert expired()
    assert time_left() is None
