"""The emulator kit: server, request log, fault injection, trees, tokens."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dranet_cloud.testing import (
    MISSING,
    Emulator,
    Faults,
    Headers,
    Request,
    Response,
    TokenIssuer,
    parse_listen,
    render_leaf,
    render_listing,
    split_path,
    tree_lookup,
    tree_response,
)

TREE: dict[str, Any] = {
    "instance": {
        "id": 7,
        "preemptible": False,
        "tags": ["a", "b"],
        "network-interfaces": [{"mac": "m0"}, {"mac": "m1"}],
        "attributes": {},
    },
    "project": {"numeric-project-id": 123},
}


def echo(req: Request) -> Response:
    return Response.json(
        {
            "method": req.method,
            "path": req.path,
            "query": req.query,
            "body": req.body.decode(),
            "x": req.headers.get("X-Thing"),
        },
        headers={"X-Handler": "yes"},
    )


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(echo, name="kit", headers={"Metadata-Flavor": "Google"}) as e:
        yield e


@pytest.fixture
def http(emu: Emulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emu.url, trust_env=False, timeout=5) as c:
        yield c


# --- listen addresses -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("127.0.0.1:0", (socket.AF_INET, "127.0.0.1", 0)),
        ("127.0.0.5:8080", (socket.AF_INET, "127.0.0.5", 8080)),
        ("localhost:0", (socket.AF_INET, "127.0.0.1", 0)),
        (":0", (socket.AF_INET, "127.0.0.1", 0)),
        ("[::1]:0", (socket.AF_INET6, "::1", 0)),
        ("unix:///run/x.sock", (socket.AF_UNIX, "/run/x.sock", 0)),
    ],
)
def test_parse_listen_accepts_loopback(listen: str, expected: tuple[object, ...]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize(
    "listen",
    [
        "0.0.0.0:0",
        "[::]:0",
        "10.0.0.1:80",
        "169.254.169.254:80",
        "example.com:80",
        "http://127.0.0.1:0",
        "unix://relative.sock",
        "127.0.0.1:70000",
    ],
)
def test_parse_listen_refuses_everything_else(listen: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(listen)


def test_emulator_refuses_a_network_address_before_binding() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        Emulator(echo, name="x", listen="0.0.0.0:0")


# --- serving and the log -------------------------------------------------------------


def test_url_env_and_request_log(http: httpx.Client, emu: Emulator) -> None:
    assert emu.url.startswith("http://127.0.0.1:")
    r = http.post(
        "/a%20b/c", params={"q": ["1", "2"], "e": ""}, content=b"hello", headers={"X-Thing": "t"}
    )
    assert r.status_code == 200
    assert r.headers["Metadata-Flavor"] == "Google"
    assert r.headers["X-Handler"] == "yes"
    assert r.json() == {
        "method": "POST",
        "path": "/a b/c",
        "query": {"q": ["1", "2"], "e": [""]},
        "body": "hello",
        "x": "t",
    }
    http.get("/other")
    assert [r.path for r in emu.requests("/a")] == ["/a b/c"]
    entry = emu.log[0]
    assert entry.body == b"hello"
    assert entry.headers["x-thing"] == "t"  # case-insensitive
    assert entry.status == 200 and entry.fault is None
    assert emu.request_count == 2
    emu.clear_log()
    assert emu.log == []


def test_env_for_receives_the_live_url() -> None:
    with Emulator(echo, name="x", env_for=lambda url: {"MD": url}) as e:
        assert e.env == {"MD": e.url}
        assert e.host_port == e.url.removeprefix("http://")


def test_url_before_start_is_an_error() -> None:
    e = Emulator(echo, name="x")
    with pytest.raises(RuntimeError, match="after start"):
        _ = e.url
    assert e.env == {}


def test_keep_alive_reuses_one_connection(http: httpx.Client, emu: Emulator) -> None:
    for _ in range(3):
        http.get("/k")
    assert len({r.connection for r in emu.log}) == 1
    with httpx.Client(base_url=emu.url, trust_env=False, headers={"Connection": "close"}) as c:
        c.get("/k")
        c.get("/k")
    assert len({r.connection for r in emu.log}) == 3


def test_head_has_no_body(http: httpx.Client) -> None:
    r = http.head("/h")
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["Content-Length"]) > 0


def test_handler_exception_becomes_500_and_server_survives(emu: Emulator) -> None:
    calls = []

    def flaky(req: Request) -> Response:
        calls.append(req.path)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return Response.text("ok")

    emu.handler = flaky
    with httpx.Client(base_url=emu.url, trust_env=False) as c:
        assert c.get("/1").status_code == 500
        assert c.get("/2").text == "ok"


def test_ipv6_loopback() -> None:
    try:
        e = Emulator(echo, name="v6", listen="[::1]:0").start()
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with e, httpx.Client(trust_env=False) as c:
        assert e.url.startswith("http://[::1]:")
        assert c.get(e.url + "/six").json()["path"] == "/six"


def test_unix_socket_serves_and_cleans_up(tmp_path: Path) -> None:
    sock = tmp_path / "emu.sock"
    # A stale socket from a crashed run is replaced.
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()
    with Emulator(echo, name="u", listen=f"unix://{sock}") as e:
        assert e.url == f"unix://{sock}"
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://localhost") as c:
            assert c.get("/via-unix").json()["path"] == "/via-unix"
        with pytest.raises(RuntimeError, match="unix socket"):
            _ = e.host_port
    assert not sock.exists()


def test_unix_socket_never_removes_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-socket"
    path.write_text("keep me")
    with pytest.raises(OSError):
        Emulator(echo, name="u", listen=f"unix://{path}").start()
    assert path.read_text() == "keep me"


def test_stop_closes_idle_keep_alive_connections(emu: Emulator) -> None:
    host, port = emu.host_port.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    emu.stop()
    assert s.recv(65536) == b""  # closed by the server, not left hanging
    s.close()


def test_serve_forever_stops_on_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "sf.sock"
    code = textwrap.dedent(
        f"""
        import json, sys
        from dranet_cloud.testing import Emulator, Response
        e = Emulator(lambda r: Response.text("up"), name="sf", listen="unix://{sock}")
        e.start()
        print(json.dumps({{"url": e.url}}), flush=True)
        e.serve_forever()
        print("stopped", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["url"] == f"unix://{sock}"
        with httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost"
        ) as c:
            assert c.get("/").text == "up"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert out.strip() == "stopped"
    assert not sock.exists()


# --- faults ----------------------------------------------------------------------------------


def test_faults_parse_and_round_trip() -> None:
    spec = (
        "status=503,503,200;delay=0.2;drop=2;unavailable-for=3;"
        "strip-headers=Metadata-Flavor;oversize=2000000;malformed;"
        "expire-tokens-every=2"
    )
    f = Faults.parse(spec)
    assert f.statuses == [503, 503, 200]
    assert f.delay == 0.2 and f.drop == 2 and f.unavailable_for == 3
    assert f.strip_headers == ["Metadata-Flavor"]
    assert f.oversize == 2000000 and f.malformed and not f.chunked
    assert f.expire_tokens_every == 2
    again = Faults.parse(f.spec())
    assert again.spec() == f.spec()
    assert not Faults.parse(None) and not Faults.parse("")
    assert Faults.parse(" chunked ; path=/latest/ ").spec() == "chunked;path=/latest/"


@pytest.mark.parametrize(
    "spec",
    [
        "bogus=1",
        "status=abc",
        "status=42",
        "delay=-1",
        "delay=nan",
        "delay=inf",
        "unavailable-for=nan",
        "drop=x",
        "malformed=maybe",
        "strip-headers",
        "strip-headers=",
    ],
)
def test_faults_parse_rejects_bad_items(spec: str) -> None:
    with pytest.raises(ValueError, match="fault spec"):
        Faults.parse(spec)


def test_status_sequence_then_normal(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("status=503,429,200,500")
    got = [http.get("/s").status_code for _ in range(5)]
    assert got == [503, 429, 200, 500, 200]
    assert [r.fault for r in emu.log] == ["status=503", "status=429", None, "status=500", None]
    # Fault answers carry the emulator's own headers (a GCE 503 has Metadata-Flavor).
    emu.faults.load("status=503")
    assert http.get("/s").headers["Metadata-Flavor"] == "Google"


def test_drop_closes_without_an_answer(emu: Emulator) -> None:
    emu.faults.load("drop=1")
    host, port = emu.host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(1024) == b""
    assert emu.log[0].status is None and emu.log[0].fault == "drop"
    with httpx.Client(base_url=emu.url, trust_env=False) as c:
        assert c.get("/d").status_code == 200


def test_unavailable_for_and_clock_reset(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("unavailable-for=600")
    assert http.get("/u").status_code == 503
    assert emu.log[-1].fault == "unavailable"
    emu.faults.load("unavailable-for=0")
    assert http.get("/u").status_code == 200


def test_delay_makes_a_short_timeout_fire(emu: Emulator) -> None:
    emu.faults.load("delay=0.5")
    with (
        httpx.Client(base_url=emu.url, trust_env=False, timeout=0.05) as c,
        pytest.raises(httpx.ReadTimeout),
    ):
        c.get("/slow")


def test_strip_headers(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("strip-headers=metadata-flavor,X-Handler")
    r = http.get("/h")
    assert "Metadata-Flavor" not in r.headers and "X-Handler" not in r.headers
    assert r.status_code == 200


def test_oversize_and_malformed_bodies(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("oversize=200000")
    r = http.get("/big")
    assert len(r.content) == 200000 and r.headers["Content-Length"] == "200000"
    emu.faults.load("malformed")
    r = http.get("/bad")
    with pytest.raises(ValueError):
        json.loads(r.content)
    emu.faults.load("oversize=10;status=404")
    assert http.get("/nf").content != b"x" * 10  # only successful bodies are replaced


def test_chunked_bodies(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("chunked;oversize=40000")
    r = http.get("/c")
    assert "Content-Length" not in r.headers
    assert r.headers["Transfer-Encoding"] == "chunked"
    assert len(r.content) == 40000
    r2 = http.get("/c2")  # the connection stays usable after a chunked answer
    assert r2.status_code == 200
    assert emu.log[0].connection == emu.log[1].connection


def test_path_scopes_faults(http: httpx.Client, emu: Emulator) -> None:
    emu.faults.load("status=503,503;path=/latest/")
    assert http.get("/other").status_code == 200
    assert http.get("/latest/x").status_code == 503
    assert http.get("/latest/y").status_code == 503
    assert http.get("/latest/z").status_code == 200


def test_faults_are_thread_safe(emu: Emulator) -> None:
    emu.faults.load("status=" + ",".join(["503"] * 40))
    codes: list[int] = []
    lock = threading.Lock()

    def hit() -> None:
        with httpx.Client(base_url=emu.url, trust_env=False) as c:
            for _ in range(10):
                code = c.get("/t").status_code
                with lock:
                    codes.append(code)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes.count(503) == 40 and codes.count(200) == 40


def test_faults_can_be_given_as_a_string() -> None:
    with Emulator(echo, name="x", faults="status=418") as e, httpx.Client(trust_env=False) as c:
        assert c.get(e.url + "/").status_code == 418


# --- trees --------------------------------------------------------------------------------


def test_tree_lookup() -> None:
    assert tree_lookup(TREE, ["instance", "id"]) == 7
    assert tree_lookup(TREE, ["instance", "network-interfaces", "1", "mac"]) == "m1"
    assert tree_lookup(TREE, ["instance", "", "id"]) == 7
    assert tree_lookup(TREE, []) is TREE
    assert tree_lookup(TREE, ["instance", "nope"]) is MISSING
    assert tree_lookup(TREE, ["instance", "network-interfaces", "2"]) is MISSING
    assert tree_lookup(TREE, ["instance", "network-interfaces", "x"]) is MISSING
    assert tree_lookup(TREE, ["instance", "id", "deeper"]) is MISSING
    assert tree_lookup(TREE, ["instance", "tags", "0"]) is MISSING  # scalar list is a leaf


def test_render_listing_and_leaves() -> None:
    assert render_listing(TREE["instance"]) == (
        "id\npreemptible\ntags\nnetwork-interfaces/\nattributes/"
    )
    assert render_listing(TREE["instance"]["network-interfaces"]) == "0/\n1/"
    assert render_listing({"a": {}, "b": 1}, dir_suffix="") == "a\nb"
    with pytest.raises(TypeError):
        render_listing("leaf")
    assert render_leaf(False) == "false"
    assert render_leaf(["10.0.0.1", "10.0.0.2"]) == "10.0.0.1\n10.0.0.2"
    assert render_leaf(None) == ""
    assert render_leaf(8244) == "8244"


def test_split_path_and_tree_response() -> None:
    assert split_path("/latest/meta-data/a//b/", "/latest/meta-data/") == ["a", "b"]
    assert split_path("/latest/meta-data", "/latest/meta-data/") == []
    assert split_path("/other", "/latest/") is None
    assert tree_response(TREE, ["instance", "id"]).body == "7"
    listing = tree_response(TREE, ["instance", "network-interfaces"])
    assert listing.body == "0/\n1/"
    assert tree_response(TREE, ["nope"]).status == 404
    doc = tree_response(TREE, ["project"], json_leaves=True)
    assert doc.content_type == "application/json"
    assert json.loads(doc.body) == {"numeric-project-id": 123}


def test_headers_mapping() -> None:
    h = Headers([("X-A", "1"), ("x-a", "2"), ("B", "3")])
    assert h["x-A"] == "1, 2"
    assert "b" in h and "c" not in h
    assert len(h) == 2 and sorted(h) == ["B", "X-A"]


# --- tokens ----------------------------------------------------------------------------


TTL = "X-t-ttl-seconds"
TOK = "X-t-token"


def put(ttl: str | None) -> Request:
    headers = Headers({TTL: ttl} if ttl is not None else {})
    return Request("PUT", "/latest/api/token", {}, headers, b"")


def get(token: str | None) -> Request:
    return Request("GET", "/latest/meta-data/", {}, Headers({TOK: token} if token else {}), b"")


def test_token_issue_validates_ttl() -> None:
    issuer = TokenIssuer(ttl_header=TTL, token_header=TOK, max_ttl=100)
    assert issuer.issue(put(None)).status == 400
    assert issuer.issue(put("abc")).status == 400
    assert issuer.issue(put("0")).status == 400
    assert issuer.issue(put("101")).status == 400
    assert issuer.issue(Request("GET", "/latest/api/token", {}, Headers({TTL: "5"}))).status == 405
    ok = issuer.issue(put("100"))
    assert ok.status == 200 and ok.headers[TTL] == "100"
    assert len(ok.body) >= 32
    assert issuer.issued == 1


def test_token_check_required_and_optional() -> None:
    strict = TokenIssuer(ttl_header=TTL, token_header=TOK)
    token = str(strict.issue(put("60")).body)
    assert strict.check(get(token)) is None
    assert strict.check(get(None)).status == 401  # type: ignore[union-attr]
    assert strict.check(get("forged")).status == 401  # type: ignore[union-attr]
    assert strict.rejected == 2
    lax = TokenIssuer(ttl_header=TTL, token_header=TOK, required=False)
    assert lax.check(get(None)) is None
    assert lax.check(get("forged")) is not None


def test_token_ttl_expiry_and_expire_all() -> None:
    now = [0.0]
    issuer = TokenIssuer(ttl_header=TTL, token_header=TOK, clock=lambda: now[0])
    token = str(issuer.issue(put("10")).body)
    now[0] = 9.9
    assert issuer.check(get(token)) is None
    assert issuer.active == 1
    now[0] = 10.0
    assert issuer.check(get(token)) is not None
    assert issuer.active == 0
    token = str(issuer.issue(put("10")).body)
    issuer.expire_all()
    assert issuer.check(get(token)) is not None


def test_token_expire_every_fault() -> None:
    faults = Faults.parse("expire-tokens-every=2")
    issuer = TokenIssuer(ttl_header=TTL, token_header=TOK, faults=faults)
    token = str(issuer.issue(put("60")).body)
    assert [issuer.check(get(token)) is None for _ in range(3)] == [True, True, False]
    faults.clear()
    token = str(issuer.issue(put("60")).body)
    assert all(issuer.check(get(token)) is None for _ in range(10))


def test_emulator_headers_do_not_override_or_mutate_the_handlers(emu: Emulator) -> None:
    shared = Response.text("cached", headers={"metadata-flavor": "Custom"})
    emu.handler = lambda req: shared
    with httpx.Client(base_url=emu.url, trust_env=False) as c:
        r = c.get("/x")
    assert r.headers.get_list("Metadata-Flavor") == ["Custom"]
    assert shared.headers == {"metadata-flavor": "Custom"}


# --- reading requests (the kit's own parser, with http.server's limits) -----------------


def _exchange(emu: Emulator, raw: bytes) -> bytes:
    """Send ``raw`` on a new connection; everything the server answers until it closes."""
    host, port = emu.host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_two_requests_on_one_connection_with_bodies_and_folded_headers(emu: Emulator) -> None:
    answer = _exchange(
        emu,
        b"POST /one HTTP/1.1\r\nHost: x\r\nX-Thing: a\r\n  b\r\nContent-Length: 5\r\n\r\nhello"
        b"PUT /two?q=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n"
        b"GET //three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 3
    first, second, third = (r.body for r in emu.log)
    assert (first, second, third) == (b"hello", b"abcde", b"")
    assert [r.path for r in emu.log] == ["/one", "/two", "/three"]
    assert emu.log[0].headers["x-thing"] == "a b"  # an obsolete fold continues the value
    assert emu.log[1].query == {"q": ["1"]}
    assert len({r.connection for r in emu.log}) == 1


def test_http_1_0_closes_unless_it_asks_for_keep_alive(emu: Emulator) -> None:
    closed = _exchange(emu, b"GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n")
    assert closed.count(b"HTTP/1.1 200") == 1 and b"Connection: close" in closed
    kept = _exchange(
        emu, b"GET /c HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /d HTTP/1.0\r\n\r\n"
    )
    assert kept.count(b"HTTP/1.1 200") == 2
    assert [r.path for r in emu.log] == ["/a", "/c", "/d"]


def test_expect_100_continue_is_answered_before_the_body(emu: Emulator) -> None:
    answer = _exchange(
        emu,
        b"PUT /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\nok",
    )
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n")
    assert b"HTTP/1.1 200 OK" in answer and emu.log[0].body == b"ok"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /x HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", b"431"),
        (b"GET /x HTTP/1.1\r\nX-Long: " + b"a" * 70000 + b"\r\n\r\n", b"431"),
        (b"GET /x HTTP/1.1\r\nno colon here\r\n\r\n", b"400"),
        (b"GET /x HTTP/1.1\r\n folded first: x\r\n\r\n", b"400"),
        (b"GET /x\r\n\r\n", b"400"),  # HTTP/0.9
        (b"GET /x HTTP/one\r\n\r\n", b"400"),
        (b"GET /x HTTP/2.0\r\n\r\n", b"505"),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", b"414"),
        (b"PUT /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n", b"400"),
        (b"PUT /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"400"),
        (b"PUT /x HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n", b"413"),
        (b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"400"),
        (b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n", b"413"),
    ],
)
def test_a_request_over_the_limits_or_malformed_is_refused_and_closed(
    emu: Emulator, raw: bytes, status: bytes
) -> None:
    answer = _exchange(emu, raw + b"GET /after HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 " + status + b" "), answer[:200]
    assert answer.count(b"HTTP/1.1 ") == 1  # the connection closed: /after never ran
    assert b"connection: close" in answer.lower()
    assert emu.log == []  # the handler never saw it
