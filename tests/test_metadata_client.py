"""The metadata client against the real emulator kit on loopback.

Every behaviour (retries, deadlines, size cap, required header, tokens) is
provoked with the emulator's fault injection rather than sleeps, and checked
through what the emulator logged, so the tests say what went over the wire.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dranet_cloud.testing import (
    Emulator,
    Faults,
    Request,
    Response,
    TokenIssuer,
    split_path,
    tree_response,
)
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable
from dranet_cloud.toolkit.metadata import (
    Endpoint,
    MetadataClient,
    MetadataError,
    MetadataNotFound,
    MetadataSpoofed,
    MetadataTooLarge,
    MetadataUnavailable,
    RetryPolicy,
    TokenSpec,
    normalize_url,
    resolve_endpoint,
)

FLAVOR = {"Metadata-Flavor": "Google"}
BASE = "/computeMetadata/v1/"
TREE = {
    "instance": {
        "id": "4242",
        "hostname": "vm-1.c.proj.internal",
        "network-interfaces": [
            {"mac": "42:01:0a:80:00:46", "ip": "10.128.0.70"},
            {"mac": "42:01:c0:a8:01:02", "ip": "192.168.1.2"},
        ],
    },
    "project": {"project-id": "proj"},
}
FAST = RetryPolicy(initial_backoff=0.005, max_backoff=0.02)

TTL_HEADER = "X-test-token-ttl-seconds"
TOKEN_HEADER = "X-test-token"
TOKEN_SPEC = TokenSpec("/latest/api/token", TTL_HEADER, TOKEN_HEADER)


def tree_handler(req: Request) -> Response:
    segments = split_path(req.path, BASE)
    if segments is None:
        return Response.not_found(req.path)
    if req.path == BASE + "doc":
        return Response.json({"a": 1, "b": [1, 2]})
    return tree_response(TREE, segments)


def gce_env(url: str) -> dict[str, str]:
    return {"GCE_METADATA_HOST": url.split("://", 1)[1]}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(tree_handler, name="test", env_for=gce_env, headers=FLAVOR) as e:
        yield e


def endpoint_for(emu: Emulator) -> Endpoint:
    # The fallback is a closed loopback port: a fixture that forgot its
    # override can never send a request to the real metadata address.
    return resolve_endpoint(emu.env, "http://127.0.0.1:9", [("GCE_METADATA_HOST", None)])


@pytest.fixture
def client(emu: Emulator) -> Iterator[MetadataClient]:
    with MetadataClient(
        endpoint_for(emu),
        plugin="test",
        headers=FLAVOR,
        required_response_headers=FLAVOR,
        timeout=1.0,
        retry=FAST,
        rng=random.Random(1),
    ) as c:
        yield c


class TokenServer:
    """A token-session emulator (IMDSv2 style) sharing its faults with the issuer."""

    def __init__(self, faults: str = "", listen: str = "127.0.0.1:0") -> None:
        self.faults = Faults.parse(faults)
        self.issuer = TokenIssuer(
            ttl_header=TTL_HEADER, token_header=TOKEN_HEADER, faults=self.faults
        )
        self.emu = Emulator(self.handle, name="tokens", listen=listen, faults=self.faults)
        self.always_401 = False

    def handle(self, req: Request) -> Response:
        if req.path == TOKEN_SPEC.path:
            return self.issuer.issue(req)
        denied = self.issuer.check(req)
        if denied is not None:
            return denied
        if self.always_401:
            return Response(401, "nope\n")
        return Response.text("value-of:" + req.path)

    def puts(self) -> int:
        return len([r for r in self.emu.requests(TOKEN_SPEC.path) if r.method == "PUT"])


@pytest.fixture
def tokens() -> Iterator[TokenServer]:
    server = TokenServer()
    with server.emu:
        yield server


def token_client(server: TokenServer, **kw: object) -> MetadataClient:
    return MetadataClient(
        server.emu.url,
        plugin="tok",
        token=kw.pop("token", TOKEN_SPEC),  # type: ignore[arg-type]
        retry=FAST,
        timeout=kw.pop("timeout", 1.0),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


# --- endpoints --------------------------------------------------------------------


def test_resolve_endpoint_default_when_nothing_set() -> None:
    ep = resolve_endpoint({}, "http://169.254.169.254/", [("GCE_METADATA_HOST", None)])
    assert ep.url == "http://169.254.169.254"
    assert ep.source == "default"
    assert ep.is_default
    assert ep.variables == ("GCE_METADATA_HOST",)


def test_resolve_endpoint_first_set_override_wins_and_is_named() -> None:
    env = {"B_HOST": "127.0.0.1:9000", "A_HOST": "  ", "C_HOST": "127.0.0.1:1"}
    ep = resolve_endpoint(env, "http://169.254.169.254", ["A_HOST", ("B_HOST", None), "C_HOST"])
    assert ep.url == "http://127.0.0.1:9000"  # scheme added, blank A skipped
    assert ep.source == "B_HOST=127.0.0.1:9000"
    assert ep.describe() == "B_HOST=127.0.0.1:9000"


def test_resolve_endpoint_transform_and_unix() -> None:
    ep = resolve_endpoint({"X": "[::1]:8080"}, "http://d", [("X", lambda v: "http://" + v + "/")])
    assert ep.url == "http://[::1]:8080"
    ep = resolve_endpoint({"X": "unix:///run/md.sock"}, "http://d", ["X"])
    assert ep.url == "unix:///run/md.sock"
    assert ep.uds_path == "/run/md.sock"
    assert ep.base_url == "http://localhost"


def test_normalize_url_keeps_https() -> None:
    assert normalize_url("https://md.example/") == "https://md.example"
    assert normalize_url("127.0.0.1:80") == "http://127.0.0.1:80"


# --- plain gets and retries -----------------------------------------------------------


def test_get_text_listing_and_json(client: MetadataClient, emu: Emulator) -> None:
    assert client.get_text(BASE + "instance/id") == "4242"
    assert client.get_text(BASE + "instance/network-interfaces/").splitlines() == ["0/", "1/"]
    assert client.get_json(BASE + "doc") == {"a": 1, "b": [1, 2]}
    got = emu.requests(BASE)
    assert [r.path for r in got] == [
        BASE + "instance/id",
        BASE + "instance/network-interfaces/",
        BASE + "doc",
    ]
    assert all(r.headers["metadata-flavor"] == "Google" for r in got)
    assert client.request_count == 3


def test_params_are_sent(client: MetadataClient, emu: Emulator) -> None:
    client.get(BASE + "instance/id", params={"recursive": "true", "alt": "json"})
    assert emu.log[-1].query == {"recursive": ["true"], "alt": ["json"]}


def test_status_sequence_is_retried_until_success(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("status=503,500,429,200")
    assert client.get_text(BASE + "instance/id", deadline=5) == "4242"
    assert [r.status for r in emu.log] == [503, 500, 429, 200]
    assert client.request_count == 4


def test_no_deadline_means_one_attempt(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("status=503,200")
    with pytest.raises(MetadataUnavailable) as info:
        client.get(BASE + "instance/id")
    assert len(emu.log) == 1
    assert info.value.status == 503
    msg = str(info.value)
    assert msg.startswith("test: GCE_METADATA_HOST=")
    assert "kept answering HTTP 503" in msg
    assert "one attempt" in msg


def test_404_is_not_retried(client: MetadataClient, emu: Emulator) -> None:
    with pytest.raises(MetadataNotFound) as info:
        client.get(BASE + "instance/missing", deadline=5)
    assert len(emu.log) == 1
    assert info.value.status == 404
    assert BASE + "instance/missing" in str(info.value)


def test_other_4xx_is_an_error_without_retry(emu: Emulator) -> None:
    emu.handler = lambda req: Response(403, "forbidden\n", dict(FLAVOR))
    with (
        MetadataClient(emu.url, plugin="test", retry=FAST) as c,
        pytest.raises(MetadataError) as info,
    ):
        c.get("/x", deadline=5)
    assert info.value.status == 403
    assert not isinstance(info.value, MetadataUnavailable)
    assert len(emu.log) == 1


def test_booting_server_is_waited_for(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("unavailable-for=0.2")
    emu.faults.reset_clock()
    assert client.get_text(BASE + "instance/hostname", deadline=10) == "vm-1.c.proj.internal"
    faults = [r.fault for r in emu.log]
    assert faults[0] == "unavailable" and faults[-1] is None
    assert all(r.status == 503 for r in emu.log[:-1])


def test_deadline_expires_with_5xx(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("unavailable-for=600")
    with pytest.raises(MetadataUnavailable) as info:
        client.get(BASE + "instance/id", deadline=0.2)
    assert len(emu.log) >= 2  # it did retry
    assert "kept answering HTTP 503 for 0.2 s" in str(info.value)
    assert isinstance(info.value, ProviderUnavailable)


def test_connection_refused_names_plugin_source_and_fix(emu: Emulator) -> None:
    ep = endpoint_for(emu)
    emu.stop()
    with (
        MetadataClient(ep, plugin="gce", retry=FAST) as c,
        pytest.raises(MetadataUnavailable) as info,
    ):
        c.get(BASE + "instance/id", deadline=0.2)
    assert c.request_count >= 2
    msg = str(info.value)
    assert msg.startswith(
        f"gce: {ep.source} points at a server that did not answer within 0.2 s (connection refused)"
    )
    assert "unset GCE_METADATA_HOST" in msg
    assert info.value.status is None


def test_default_endpoint_message_names_the_override_variable(emu: Emulator) -> None:
    port = emu.host_port.rsplit(":", 1)[1]
    emu.stop()
    ep = resolve_endpoint({}, f"http://127.0.0.1:{port}", [("GCE_METADATA_HOST", None)])
    with MetadataClient(ep, plugin="gce") as c, pytest.raises(MetadataUnavailable) as info:
        c.get("/x")
    msg = str(info.value)
    assert f"the metadata server at http://127.0.0.1:{port} did not answer" in msg
    assert "set GCE_METADATA_HOST" in msg


def test_read_timeout_is_reported(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("delay=0.5")
    with pytest.raises(MetadataUnavailable) as info:
        client.get(BASE + "instance/id", timeout=0.05)
    assert "read timed out" in str(info.value)


def test_dropped_connections_are_retried(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("drop=2")
    assert client.get_text(BASE + "instance/id", deadline=5) == "4242"
    assert [r.fault for r in emu.log] == ["drop", "drop", None]


def test_dropped_connection_without_deadline(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("drop=1")
    with pytest.raises(MetadataUnavailable) as info:
        client.get(BASE + "instance/id")
    assert "connection closed without an answer" in str(info.value)


# --- spoofing, size, malformed ---------------------------------------------------------


def test_missing_required_header_is_spoofed_and_not_retried(
    client: MetadataClient, emu: Emulator
) -> None:
    emu.faults.load("strip-headers=Metadata-Flavor")
    with pytest.raises(MetadataSpoofed) as info:
        client.get(BASE + "instance/id", deadline=5)
    assert len(emu.log) == 1
    assert "Metadata-Flavor: Google" in str(info.value)
    assert "GCE_METADATA_HOST=" in str(info.value)


def test_wrong_header_value_is_spoofed(emu: Emulator) -> None:
    emu.handler = lambda req: Response.text("x", headers={"Metadata-Flavor": "Evil"})
    emu.headers = {}
    with (
        MetadataClient(emu.url, plugin="gce", required_response_headers=FLAVOR) as c,
        pytest.raises(MetadataSpoofed, match="got 'Evil'"),
    ):
        c.get("/x")


def test_retryable_answers_need_no_header(client: MetadataClient, emu: Emulator) -> None:
    # A proxy's 503 during boot carries no Metadata-Flavor; it is retried, and
    # the genuine answer afterwards is accepted.
    emu.headers = {}
    inner = emu.handler
    emu.handler = lambda req: Response(
        (r := inner(req)).status, r.body, {**r.headers, **FLAVOR}, r.content_type
    )
    emu.faults.load("status=503,200")
    assert client.get_text(BASE + "instance/id", deadline=5) == "4242"
    assert [(r.status, r.fault) for r in emu.log] == [(503, "status=503"), (200, None)]


def test_oversize_with_content_length(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("oversize=2000000")
    with pytest.raises(MetadataTooLarge) as info:
        client.get(BASE + "instance/id", deadline=5)
    assert "announced a 2000000-byte body, over the 1048576-byte limit" in str(info.value)
    assert len(emu.log) == 1


def test_oversize_chunked_is_cut_while_streaming(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("oversize=3000000;chunked")
    with pytest.raises(MetadataTooLarge, match="sent a body over the 1048576-byte limit"):
        client.get(BASE + "instance/id")


@pytest.mark.parametrize("chunked", [False, True])
def test_size_cap_boundary(emu: Emulator, chunked: bool) -> None:
    with MetadataClient(emu.url, plugin="t", max_bytes=100) as c:
        emu.faults.load("oversize=100" + (";chunked" if chunked else ""))
        assert len(c.get("/computeMetadata/v1/instance/id").content) == 100
        emu.faults.load("oversize=101" + (";chunked" if chunked else ""))
        with pytest.raises(MetadataTooLarge):
            c.get("/computeMetadata/v1/instance/id")


def test_malformed_json_is_an_error_not_retried(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("malformed")
    with pytest.raises(MetadataError, match="not valid JSON") as info:
        client.get_json(BASE + "doc", deadline=5)
    assert isinstance(info.value, ProviderUnavailable)
    assert len(emu.log) == 1


# --- get_many ---------------------------------------------------------------------------


def test_get_many_returns_values_and_none_for_404(client: MetadataClient, emu: Emulator) -> None:
    paths = [
        BASE + "instance/id",
        BASE + "instance/nope",
        BASE + "instance/network-interfaces/1/mac",
        BASE + "project/project-id",
        BASE + "instance/id",  # duplicate: fetched once
    ]
    got = client.get_many(paths, deadline=5)
    assert got == {
        BASE + "instance/id": "4242",
        BASE + "instance/nope": None,
        BASE + "instance/network-interfaces/1/mac": "42:01:c0:a8:01:02",
        BASE + "project/project-id": "proj",
    }
    assert client.request_count == 4
    assert sorted(r.path for r in emu.log) == sorted(set(paths))


def test_get_many_runs_concurrently(emu: Emulator) -> None:
    # The handler blocks until four requests are inside it at once: only a
    # concurrent client gets past the barrier.
    barrier = threading.Barrier(4, timeout=5)

    def handler(req: Request) -> Response:
        barrier.wait()
        return Response.text(req.path)

    emu.handler = handler
    with MetadataClient(emu.url, plugin="t", timeout=5) as c:
        got = c.get_many([f"/k{i}" for i in range(4)], max_workers=4)
    assert got == {f"/k{i}": f"/k{i}" for i in range(4)}


def test_get_many_raises_other_errors(client: MetadataClient, emu: Emulator) -> None:
    emu.faults.load("strip-headers=Metadata-Flavor")
    with pytest.raises(MetadataSpoofed):
        client.get_many([BASE + "instance/id", BASE + "project/project-id"])


def test_get_many_empty(client: MetadataClient) -> None:
    assert client.get_many([]) == {}
    assert client.request_count == 0


# --- token sessions ---------------------------------------------------------------------


def test_token_is_fetched_once_and_reused(tokens: TokenServer) -> None:
    with token_client(tokens) as c:
        for i in range(4):
            assert c.get_text(f"/latest/meta-data/k{i}") == f"value-of:/latest/meta-data/k{i}"
        assert c.token_count == 1
    assert tokens.puts() == 1
    put = tokens.emu.requests(TOKEN_SPEC.path)[0]
    assert put.headers[TTL_HEADER] == "21600"
    gets = [r for r in tokens.emu.log if r.method == "GET"]
    assert len({r.headers[TOKEN_HEADER] for r in gets}) == 1


def test_token_refreshed_once_on_401(tokens: TokenServer) -> None:
    tokens.faults.load("expire-tokens-every=2")
    with token_client(tokens) as c:
        for i in range(5):
            assert c.get_text(f"/k{i}") == f"value-of:/k{i}"
    assert tokens.puts() == 3
    assert tokens.issuer.rejected == 2
    statuses = [(r.method, r.status) for r in tokens.emu.log]
    assert statuses.count(("GET", 401)) == 2


def test_persistent_401_fails_after_one_refresh(tokens: TokenServer) -> None:
    tokens.always_401 = True
    with token_client(tokens) as c, pytest.raises(MetadataError) as info:
        c.get("/k", deadline=5)
    assert info.value.status == 401
    assert tokens.puts() == 2
    assert len([r for r in tokens.emu.log if r.method == "GET"]) == 2


def test_token_refreshed_before_expiry(tokens: TokenServer) -> None:
    now = [1000.0]
    spec = TokenSpec(TOKEN_SPEC.path, TTL_HEADER, TOKEN_HEADER, ttl_seconds=300)
    with token_client(tokens, token=spec, clock=lambda: now[0]) as c:
        c.get("/a")
        now[0] += 200  # 100 s left: still more than the 60 s margin
        c.get("/b")
        assert c.token_count == 1
        now[0] += 50  # 50 s left: refresh proactively
        c.get("/c")
        assert c.token_count == 2
    assert tokens.issuer.rejected == 0


def test_token_fetch_is_retried_like_a_get(tokens: TokenServer) -> None:
    tokens.faults.load("status=503,503")
    with token_client(tokens) as c:
        assert c.get_text("/k", deadline=5) == "value-of:/k"
    assert [(r.method, r.status) for r in tokens.emu.log] == [
        ("PUT", 503),
        ("PUT", 503),
        ("PUT", 200),
        ("GET", 200),
    ]


def test_token_refused_names_the_token_path(tokens: TokenServer) -> None:
    tokens.emu.handler = lambda req: Response(403, "IMDS tokens disabled\n")
    with token_client(tokens) as c, pytest.raises(MetadataError) as info:
        c.get("/k", deadline=5)
    assert "PUT" in str(info.value) and TOKEN_SPEC.path in str(info.value)
    assert info.value.status == 403


def test_concurrent_gets_share_one_token(tokens: TokenServer) -> None:
    # A generous per-request timeout: on a loaded machine a 1 s timeout can
    # expire and retry the PUT, which is right but not what this test is about.
    with token_client(tokens, timeout=30.0) as c:
        got = c.get_many([f"/k{i}" for i in range(16)], max_workers=8)
    assert all(v == f"value-of:{k}" for k, v in got.items())
    assert tokens.puts() == 1


def test_token_never_logged_or_in_messages(
    tokens: TokenServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens.always_401 = True
    with token_client(tokens) as c, pytest.raises(MetadataError) as info:
        c.get("/k", deadline=1)
    issued = {r.headers[TOKEN_HEADER] for r in tokens.emu.log if TOKEN_HEADER in r.headers}
    assert len(issued) == 2
    for token in issued:
        assert token not in caplog.text
        assert token not in str(info.value)
        assert token not in repr(c)


def test_token_session_over_unix_socket(tmp_path: Path) -> None:
    server = TokenServer(listen=f"unix://{tmp_path}/md.sock")
    with server.emu:
        assert server.emu.url == f"unix://{tmp_path}/md.sock"
        with token_client(server) as c:
            assert c.get_text("/latest/meta-data/instance-id") == (
                "value-of:/latest/meta-data/instance-id"
            )
    assert not (tmp_path / "md.sock").exists()


# --- environment hygiene -------------------------------------------------------------------


def test_proxy_variables_are_ignored(
    client: MetadataClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # If the client honoured these, the socket guard would fail the test.
    monkeypatch.setenv("HTTP_PROXY", "http://192.0.2.1:3128")
    monkeypatch.setenv("http_proxy", "http://192.0.2.1:3128")
    monkeypatch.setenv("ALL_PROXY", "http://192.0.2.1:3128")
    with MetadataClient(client.endpoint, plugin="t", headers=FLAVOR) as fresh:
        assert fresh.get_text(BASE + "instance/id") == "4242"


def test_closed_client_refuses(emu: Emulator) -> None:
    c = MetadataClient(emu.url, plugin="t")
    c.close()
    with pytest.raises(MetadataUnavailable, match="closed"):
        c.get("/x", deadline=1)


def test_transport_can_be_injected_for_unit_tests() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="mocked", headers=FLAVOR)

    with MetadataClient(
        "http://127.0.0.1:9", plugin="t", transport=httpx.MockTransport(answer)
    ) as c:
        assert c.get_text("/a/b", params={"x": "1"}) == "mocked"
    assert str(seen[0].url) == "http://127.0.0.1:9/a/b?x=1"


def test_backoff_grows_and_is_jittered() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=1.0, multiplier=2.0, jitter=0.5)
    rng = random.Random(7)
    delays = [policy.delay(n, rng) for n in range(6)]
    bases = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert all(b * 0.5 <= d <= b for d, b in zip(delays, bases, strict=True))
    assert len(set(delays)) == len(delays)  # jittered, not lock-step
    assert RetryPolicy(jitter=0.0).delay(0, rng) == 0.05


def test_concurrent_gets_survive_tokens_used_up_by_each_other(tokens: TokenServer) -> None:
    # Each token is good for 3 requests while 8 threads share it: a request may
    # be refused with a token another thread fetched moments ago.  That is
    # not the "fresh token refused too" case, so every key must still load.
    tokens.faults.load("expire-tokens-every=3")
    with token_client(tokens) as c:
        got = c.get_many([f"/k{i}" for i in range(64)], max_workers=8, deadline=10)
    assert got == {f"/k{i}": f"value-of:/k{i}" for i in range(64)}
    assert tokens.issuer.rejected > 0


@pytest.mark.parametrize("value", ["ftp://127.0.0.1:21", "unix://relative.sock", "http://"])
def test_unusable_override_is_a_config_error_naming_the_variable(value: str) -> None:
    ep = resolve_endpoint({"MD_HOST": value}, "http://169.254.169.254", ["MD_HOST"])
    with pytest.raises(ConfigError, match=r"^gce: MD_HOST=.* is not a usable metadata URL"):
        MetadataClient(ep, plugin="gce")


def test_deadline_message_keeps_the_status_seen(client: MetadataClient, emu: Emulator) -> None:
    # Every answer is a 503 after a delay longer than what is left of the
    # deadline at the end: the message still reports the 503s.
    emu.faults.load("unavailable-for=600;delay=0.05")
    with pytest.raises(MetadataUnavailable) as info:
        client.get(BASE + "instance/id", deadline=0.3)
    assert info.value.status == 503
    assert "kept answering HTTP 503" in str(info.value)
