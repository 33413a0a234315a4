"""The Kubernetes client's own HTTP/1.1 (dranet_cloud.kube.wire) against hand-written peers.

Each server here is a few lines on a loopback socket doing one thing a real
API server, proxy or network can do: close a pooled connection while it is
idle, close one as a request crosses it, drip a stream, send a head that
never ends, refuse a token that a rotation then replaces, serve TLS under a
path prefix, listen on IPv6.  The emulator tests (test_kube_client.py and
the others) cover the API's own answers; these cover the transport.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from dranet_cloud.kube import IPADDRESSES, KubeClient, KubeError, ParentRef
from dranet_cloud.kube.wire import MAX_HEAD_BYTES

CLAIM = ParentRef.resource_claim("ns", "c")
NODE: Mapping[str, object] = {
    "kind": "Node",
    "apiVersion": "v1",
    "metadata": {"name": "n1", "uid": "u-n1"},
}
GUARD = 10.0  # seconds: only a hang reaches it


def answer(body: Mapping[str, object] | bytes, status: int = 200, extra: str = "") -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reason = {200: "OK", 201: "Created", 401: "Unauthorized"}.get(status, "X")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data


def read_request(conn: socket.socket, buf: bytearray) -> bytes | None:
    """One request's head and body from ``conn`` (``None`` at the end of the connection)."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buf) < end + length:
        buf += conn.recv(65536)
    request = bytes(buf[: end + length])
    del buf[: end + length]
    return request


class Peer:
    """A TCP server on loopback; ``serve(conn, number)`` handles each connection on a thread."""

    def __init__(
        self,
        serve: Callable[[socket.socket, int], None],
        *,
        family: socket.AddressFamily = socket.AF_INET,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.serve = serve
        self.tls = tls
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._run, args=(conn, number), daemon=True).start()

    def _run(self, conn: socket.socket, number: int) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            with conn:
                self.serve(conn, number)
        except OSError:
            pass

    def record(self, request: bytes) -> None:
        with self.lock:
            self.requests.append(request)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    made: list[Peer] = []
    yield made
    for peer in made:
        peer.close()


def kubeconfig(
    tmp_path: Path, server: str, *, user: dict[str, str] | None = None, ca: Path | None = None
) -> str:
    cluster: dict[str, str] = {"server": server}
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user or {"token": "t0ken"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_pooled_connection_closed_while_idle_is_replaced(
    tmp_path: Path, peers: list[Peer]
) -> None:
    """The server answers one request per connection, keep-alive, then closes it idle."""

    def serve(conn: socket.socket, number: int) -> None:
        buf = bytearray()
        request = read_request(conn, buf)
        if request is not None:
            peer.record(request)
            conn.sendall(answer(NODE))
        # Then close while idle: FIN, the client's pooled copy reads as closed.

    peer = Peer(serve)
    peers.append(peer)
    with KubeClient(kubeconfig(tmp_path, f"http://127.0.0.1:{peer.port}")) as client:
        for _ in range(3):
            assert client.get_node("n1")["metadata"]["uid"] == "u-n1"
            time.sleep(0.05)  # the close reaches the client before the next request
        create = client.create_ip_address  # a POST after an idle close goes out once too
        with pytest.raises(KubeError, match="not the expected object"):
            create("10.0.0.1", CLAIM)  # (the answer is a Node, not an IPAddress)
    assert peer.connections == 4
    assert [r.split(b" ", 1)[0] for r in peer.requests] == [b"GET"] * 3 + [b"POST"]


def test_a_close_crossing_a_request_retries_reads_only(tmp_path: Path, peers: list[Peer]) -> None:
    """The first connection answers once, then reads the next request and closes unanswered:
    a GET goes once more on a new connection; a POST (it may have landed) is an error."""

    def serve(conn: socket.socket, number: int) -> None:
        buf = bytearray()
        first = read_request(conn, buf)
        if first is None:
            return
        peer.record(first)
        conn.sendall(answer(NODE))
        second = read_request(conn, buf)
        if second is not None:
            peer.record(second)
            if number == 1 or b"POST" in second.split(b" ", 1)[0]:
                return  # closed, unanswered
            conn.sendall(answer(NODE))

    peer = Peer(serve)
    peers.append(peer)
    with KubeClient(kubeconfig(tmp_path, f"http://127.0.0.1:{peer.port}")) as client:
        client.get_node("n1")
        assert client.get_node("n1")["metadata"]["name"] == "n1"  # retried on connection 2
        assert peer.connections == 2
        with pytest.raises(KubeError, match="closed without an answer") as lost:
            client.create_ip_address("10.0.0.1", CLAIM)
        assert lost.value.transient and "may have been committed" in str(lost.value)
    posts = [r for r in peer.requests if r.startswith(b"POST")]
    assert len(posts) == 1  # never sent twice
    assert peer.connections == 2


def test_a_head_that_never_ends_is_refused_at_its_cap(tmp_path: Path, peers: list[Peer]) -> None:
    def serve(conn: socket.socket, number: int) -> None:
        read_request(conn, bytearray())
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        for _ in range(MAX_HEAD_BYTES // len(filler) + 2):
            conn.sendall(filler)
        time.sleep(GUARD)

    peer = Peer(serve)
    peers.append(peer)
    with (
        KubeClient(kubeconfig(tmp_path, f"http://127.0.0.1:{peer.port}"), timeout=GUARD) as c,
        pytest.raises(KubeError, match=f"headers over the {MAX_HEAD_BYTES}-byte limit"),
    ):
        c.get_node("n1")


def test_a_watch_that_drips_ends_by_its_deadline(tmp_path: Path, peers: list[Peer]) -> None:
    """A line every 0.05 s never trips the read timeout; the stream's deadline ends it."""

    def serve(conn: socket.socket, number: int) -> None:
        read_request(conn, bytearray())
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        line = b'{"type":"BOOKMARK","object":{}}\n'
        for _ in range(int(GUARD / 0.05)):
            conn.sendall(b"%x\r\n%s\r\n" % (len(line), line))
            time.sleep(0.05)

    peer = Peer(serve)
    peers.append(peer)
    lines = 0
    started = time.monotonic()
    with (
        KubeClient(kubeconfig(tmp_path, f"http://127.0.0.1:{peer.port}")) as client,
        pytest.raises(KubeError, match=r"did not finish within 0\.5 s"),
        client.open_stream(
            IPADDRESSES.path(),
            params={"watch": "true"},
            read_timeout=5.0,
            max_line_bytes=1024,
            deadline=0.5,
            what="watch ipaddresses",
        ) as stream,
    ):
        for _ in stream.lines():
            lines += 1
    assert lines >= 2  # it did stream before the end
    assert time.monotonic() - started < GUARD  # a guard against hanging, not a timing


def test_a_stream_aborted_from_another_thread_ends_without_an_error(
    tmp_path: Path, peers: list[Peer]
) -> None:
    def serve(conn: socket.socket, number: int) -> None:
        read_request(conn, bytearray())
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}\n\r\n")
        time.sleep(GUARD)  # then silence: the reader waits in recv

    peer = Peer(serve)
    peers.append(peer)
    got: list[bytes] = []
    with (
        KubeClient(kubeconfig(tmp_path, f"http://127.0.0.1:{peer.port}")) as client,
        client.open_stream(
            IPADDRESSES.path(),
            params={"watch": "true"},
            read_timeout=GUARD * 3,
            max_line_bytes=1024,
            deadline=GUARD * 3,
            what="watch ipaddresses",
        ) as stream,
    ):
        timer = threading.Timer(0.2, stream.abort)
        timer.start()
        got.extend(stream.lines())  # returns once aborted, no exception
        timer.join()
    assert got == [b"{}"] and stream.aborted


def test_a_refused_token_is_read_again_from_its_file(tmp_path: Path, peers: list[Peer]) -> None:
    """A rotated service-account token: 401 with the old one, the file re-read, then 200."""
    token_file = tmp_path / "token"
    token_file.write_text("old\n")

    def serve(conn: socket.socket, number: int) -> None:
        buf = bytearray()
        while (request := read_request(conn, buf)) is not None:
            peer.record(request)
            if b"Authorization: Bearer new\r\n" in request:
                conn.sendall(answer(NODE))
            else:
                status: Mapping[str, object] = {
                    "kind": "Status",
                    "code": 401,
                    "reason": "Unauthorized",
                }
                conn.sendall(answer(status, 401))

    peer = Peer(serve)
    peers.append(peer)
    path = kubeconfig(
        tmp_path, f"http://127.0.0.1:{peer.port}", user={"tokenFile": str(token_file)}
    )
    with KubeClient(path) as client:
        with pytest.raises(KubeError, match=r"401 Unauthorized.*token was refused") as refused:
            client.get_node("n1")
        assert refused.value.status == 401
        token_file.write_text("new\n")  # the kubelet rotated it
        assert client.get_node("n1")["metadata"]["uid"] == "u-n1"
    tokens = [r.split(b"Authorization: ", 1)[1].split(b"\r\n", 1)[0] for r in peer.requests]
    # The first call: old, re-read (still old), answered 401; the second: old, re-read, new.
    assert tokens == [b"Bearer old", b"Bearer old", b"Bearer old", b"Bearer new"]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_with_the_kubeconfig_ca_and_a_path_prefix(
    tmp_path: Path, peers: list[Peer], certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)

    def serve(conn: socket.socket, number: int) -> None:
        buf = bytearray()
        while (request := read_request(conn, buf)) is not None:
            peer.record(request)
            conn.sendall(answer(NODE))

    peer = Peer(serve, tls=server_tls)
    peers.append(peer)
    url = f"https://127.0.0.1:{peer.port}/k8s/"
    with KubeClient(kubeconfig(tmp_path, url, ca=cert)) as client:
        assert client.get_node("n1")["metadata"]["uid"] == "u-n1"
        assert client.get_node("n1")["metadata"]["uid"] == "u-n1"
    assert peer.connections == 1  # kept alive
    first = peer.requests[0].split(b"\r\n")
    assert first[0] == b"GET /k8s/api/v1/nodes/n1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{peer.port}".encode() in first
    # Without the CA the certificate is refused, in the shared wording.
    with (
        KubeClient(kubeconfig(tmp_path, url)) as untrusting,
        pytest.raises(KubeError, match=r"failed: TLS handshake failed: .*certificate verify"),
    ):
        untrusting.get_node("n1")


def test_an_ipv6_literal_server(tmp_path: Path, peers: list[Peer]) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no ::1 on this machine")

    def serve(conn: socket.socket, number: int) -> None:
        request = read_request(conn, bytearray())
        if request is not None:
            peer.record(request)
            conn.sendall(answer(NODE))

    peer = Peer(serve, family=socket.AF_INET6)
    peers.append(peer)
    with KubeClient(kubeconfig(tmp_path, f"http://[::1]:{peer.port}")) as client:
        assert client.get_node("n1")["metadata"]["uid"] == "u-n1"
    assert f"Host: [::1]:{peer.port}".encode() in peer.requests[0]
