"""The BYODP server in-process: a real uvicorn server on a unix socket in a thread.

These tests build the :class:`ProviderHost` themselves (fake cloud and profile
plugins, the built-in local-ipam) so that every status code path can be
reached; ``test_server_cli.py`` runs the real ``dranet-cloud serve`` process.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.node.reclaim import ClaimsFile
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.server.app import create_app, describe_validation_errors
from dranet_cloud.server.collector import CollectorSettings, PeriodicCollector
from dranet_cloud.server.listen import ListenAddress, bind_unix
from dranet_cloud.server.middleware import ACCESS_LOGGER
from dranet_cloud.server.runner import ServeOptions, WebhookServer
from dranet_cloud.toolkit.errors import ConfigError, ProfileDenied, ProviderUnavailable
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.models import NetworkConfig

from .fakeplugins import FakeCloud, FakeProfile, dmi_root, fake_emulator
from .waiting import wait_until

MAC1 = "42:01:0a:00:00:02"
REPO = Path(__file__).resolve().parents[1]
JSON = {"Content-Type": "application/json"}


class MoodyProfile:
    """A profile plugin whose answer depends on the profile name."""

    @hookimpl
    def profile_config(self, claim_uid: str, config: NetworkConfig) -> NetworkConfig | None:
        if config.profile == "flaky":
            raise ProviderUnavailable(f"moody: backend for claim {claim_uid} timed out")
        if config.profile == "teapot":
            raise ProfileDenied("moody: not a teapot", status=418)
        if config.profile == "broken":
            raise KeyError("bug in moody")
        return None

    @hookimpl
    def release_profile_config(self, claim_uid: str) -> bool:
        if claim_uid == "explode":
            raise RuntimeError("moody: backend gone")
        return True


def local_ipam_host(
    tmp_path: Path, *specs: str, profile: str = "", extra: tuple[tuple[str, object], ...] = ()
) -> ProviderHost:
    reg = PluginRegistry(load_entry_points=False)
    reg.register(
        LocalIpamPlugin(LocalIpamConfig.parse(list(specs or ("10.20.0.0/24",)))), PLUGIN_NAME
    )
    for name, plugin in extra:
        reg.register(plugin, name)
    db = tmp_path / "ipam.db"
    host = ProviderHost(
        cloud_provider_hint="none",
        profile_provider=profile or "none",
        host_root=str(tmp_path),
        registry=reg,
        ipam_factory=lambda: SqliteStore(db),
        profile_routes={"local-ipam": PLUGIN_NAME},
        env={},
    )
    host.start()
    return host


def client_for(server: WebhookServer) -> httpx.Client:
    assert server.bound is not None and server.bound.path is not None
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=server.bound.path),
        base_url="http://localhost",
        timeout=30,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[WebhookServer, httpx.Client]]:
    host = local_ipam_host(
        tmp_path,
        "10.20.0.0/24",
        "fd00:20::/64",
        profile="moody",
        extra=(("moody", MoodyProfile()),),
    )
    opts = ServeOptions(listen=f"unix://{tmp_path}/hook.sock", max_body_bytes=4096)
    with WebhookServer(host, opts) as server, client_for(server) as client:
        yield server, client


def profile_body(claim: str, profile: str = "local-ipam", **iface: object) -> dict[str, object]:
    return {
        "device": {"name": "eth1"},
        "claim_uid": claim,
        "config": {"profile": profile, "interface": iface},
    }


# --- the protocol --------------------------------------------------------------


def test_health_reports_only_the_roles_the_host_has(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    r = client.get("/health")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"cloudProvider": False, "profileProvider": True}


def test_profile_config_is_idempotent_and_go_shaped(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    first = client.post("/GetProfileConfig", json=profile_body("c1"))
    again = client.post("/GetProfileConfig", json=profile_body("c1"))
    other = client.post("/GetProfileConfig", json=profile_body("c2"))
    assert first.status_code == again.status_code == other.status_code == 200
    doc = first.json()
    assert list(doc) == ["interface"] and list(doc["interface"]) == ["addresses"]
    v4, v6 = doc["interface"]["addresses"]
    assert v4.startswith("10.20.0.") and v4.endswith("/32")
    assert v6.startswith("fd00:20::") and v6.endswith("/128")
    assert again.json() == doc
    assert set(other.json()["interface"]["addresses"]).isdisjoint(doc["interface"]["addresses"])


def test_none_from_the_plugin_is_an_empty_interface(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    r = client.post("/GetProfileConfig", json=profile_body("c1", profile="calm"))
    assert r.status_code == 200 and r.json() == {"interface": {}}


def test_static_address_conflict_is_409_with_the_holder_named(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    ok = client.post("/GetProfileConfig", json=profile_body("a", addresses=["10.20.0.77/24"]))
    assert ok.status_code == 200
    clash = client.post("/GetProfileConfig", json=profile_body("b", addresses=["10.20.0.77/24"]))
    assert clash.status_code == 409
    assert clash.headers["content-type"].startswith("text/plain")
    assert "10.20.0.77" in clash.text and "/a" in clash.text


def test_release_frees_and_is_idempotent(
    tmp_path: Path, served: tuple[WebhookServer, httpx.Client]
) -> None:
    _, client = served
    assert client.post("/GetProfileConfig", json=profile_body("c1")).status_code == 200
    with SqliteStore(tmp_path / "ipam.db") as store:
        assert [a.owner.claim_uid for a in store.list()] == ["c1", "c1"]
    for _ in range(2):
        r = client.post("/ReleaseProfileConfig", json=profile_body("c1"))
        assert r.status_code == 200 and r.content == b""
    with SqliteStore(tmp_path / "ipam.db") as store:
        assert store.list() == []


def test_release_with_a_null_config_asks_every_profile_provider(
    tmp_path: Path, served: tuple[WebhookServer, httpx.Client]
) -> None:
    _, client = served
    assert client.post("/GetProfileConfig", json=profile_body("c1")).status_code == 200
    # Go marshals a nil *NetworkConfig as null: the profile is unknown, so the
    # host asks every profile provider, and local-ipam releases by owner.
    body = {"device": {"name": "eth1"}, "claim_uid": "c1", "config": None}
    assert client.post("/ReleaseProfileConfig", json=body).status_code == 200
    with SqliteStore(tmp_path / "ipam.db") as store:
        assert store.list() == []


def test_release_with_a_config_we_reject_still_releases(
    tmp_path: Path, served: tuple[WebhookServer, httpx.Client]
) -> None:
    _, client = served
    assert client.post("/GetProfileConfig", json=profile_body("c1")).status_code == 200
    body = profile_body("c1", addresses=["not-an-address"])
    assert client.post("/ReleaseProfileConfig", json=body).status_code == 200
    with SqliteStore(tmp_path / "ipam.db") as store:
        assert store.list() == []
    bad = client.post("/ReleaseProfileConfig", json={"device": "eth1", "claim_uid": "c1"})
    assert bad.status_code == 400 and "device" in bad.text


def test_denials_and_failures_map_to_byodp_status_codes(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    cases = {"flaky": 500, "teapot": 418, "broken": 500}
    for profile, status in cases.items():
        r = client.post("/GetProfileConfig", json=profile_body("c1", profile=profile))
        assert r.status_code == status, (profile, r.text)
        assert r.headers["content-type"].startswith("text/plain")
    flaky = client.post("/GetProfileConfig", json=profile_body("c1", profile="flaky"))
    assert "backend for claim c1 timed out" in flaky.text
    broken = client.post("/GetProfileConfig", json=profile_body("c1", profile="broken"))
    assert "KeyError" in broken.text
    empty_claim = client.post("/GetProfileConfig", json=profile_body(""))
    assert empty_claim.status_code == 400 and "the request has neither" in empty_claim.text
    # DRANET's rules are applied to the context before anything is allocated.
    for fields, rule in (
        ({"addresses": ["10.0.0.1"]}, "addresses-cidr"),
        ({"dhcp": True, "addresses": ["10.0.0.1/24"]}, "dhcp-and-addresses"),
        ({"arpIgnore": 7}, "arp-ignore"),
    ):
        bad = client.post("/GetProfileConfig", json=profile_body("c1", **fields))
        assert bad.status_code == 400 and f"[{rule}]" in bad.text, bad.text


def test_a_claim_dranet_would_reject_is_denied_while_parsing(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    """The checks run before any job is made: no thread, no store, no plugin."""
    server, client = served
    for fields in ({"addresses": ["10.0.0.1"]}, {"arpIgnore": 7}):
        for profile in ("local-ipam", "moody"):
            bad = client.post("/GetProfileConfig", json=profile_body("c9", profile, **fields))
            assert bad.status_code == 400, bad.text
    assert server.app._pool is None and server.app._lane is None
    assert client.post("/GetProfileConfig", json=profile_body("c9")).status_code == 200
    assert server.app._lane is not None  # the same claim, valid, is served as usual


def test_release_failure_is_500_and_empty_claim_is_400(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    r = client.post("/ReleaseProfileConfig", json=profile_body("explode", profile="moody"))
    assert r.status_code == 500 and "could not release" in r.text
    r = client.post("/ReleaseProfileConfig", json=profile_body(""))
    assert r.status_code == 400 and "claim_uid" in r.text


def test_missing_cloud_role_is_a_clear_400(served: tuple[WebhookServer, httpx.Client]) -> None:
    _, client = served
    for path in ("/GetDeviceAttributes", "/GetDeviceConfig"):
        r = client.post(path, json={"name": "eth1"})
        assert r.status_code == 400
        assert "no cloud provider role" in r.text and "cloudProvider=false" in r.text


def test_missing_profile_role_is_a_clear_400(tmp_path: Path) -> None:
    reg = PluginRegistry(load_entry_points=False)
    host = ProviderHost(
        cloud_provider_hint="none",
        profile_provider="none",
        host_root=str(tmp_path),
        registry=reg,
        env={},
    )
    host.start()
    opts = ServeOptions(listen=f"unix://{tmp_path}/hook.sock")
    with WebhookServer(host, opts) as server, client_for(server) as client:
        assert client.get("/health").json() == {"cloudProvider": False, "profileProvider": False}
        for path in ("/GetProfileConfig", "/ReleaseProfileConfig"):
            r = client.post(path, json=profile_body("c1"))
            assert r.status_code == 400 and "no profile provider role" in r.text


def test_cloud_role_answers_attributes_and_config(tmp_path: Path) -> None:
    reg = PluginRegistry(load_entry_points=False)
    reg.register(FakeCloud(), "fakecloud")
    reg.register(FakeProfile(), "fakeprofile")
    with fake_emulator({MAC1: 8244}) as emu:
        host = ProviderHost(
            cloud_provider_hint="fakecloud",
            profile_provider="fakeprofile",
            host_root=str(dmi_root(tmp_path, "FakeCloud")),
            registry=reg,
            env=emu.env,
            ipam=MemoryStore(),
        )
        host.start()
        opts = ServeOptions(listen=f"unix://{tmp_path}/hook.sock")
        with WebhookServer(host, opts) as server, client_for(server) as client:
            assert client.get("/health").json() == {"cloudProvider": True, "profileProvider": True}
            dev = {"mac_address": MAC1, "name": "eth1"}
            attrs = client.post("/GetDeviceAttributes", json=dev)
            assert attrs.status_code == 200
            # The host drops the fake's two invalid attributes; the wire form is Go's.
            assert attrs.json() == {"fake.dra.net/mtu": {"int": 8244}}
            config = client.post("/GetDeviceConfig", json=dev)
            assert config.json() == {
                "interface": {"mtu": 8244},
                "routes": [{"destination": "10.0.0.0/24", "scope": 253, "table": 100}],
            }
            unknown = client.post("/GetDeviceConfig", json={"name": "eth9"})
            assert unknown.status_code == 200 and unknown.json() == {"interface": {}}
            # A name no interface can have (schemathesis sent this one) is simply no NIC here.
            for path in ("/GetDeviceConfig", "/GetDeviceAttributes"):
                odd = client.post(path, json={"name": "\n\x00eth1", "pci_address": "--x"})
                assert odd.status_code == 200, odd.text
            denied = client.post("/GetProfileConfig", json=profile_body("c", profile="forbidden"))
            assert denied.status_code == 409 and "not allowed" in denied.text


# --- malformed requests ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"device": {"name": 5}, "claim_uid": "c"}, "device.name"),
        ({"device": {"name": "eth1"}}, "the request has neither"),
        ({"claim_uid": "c"}, "device: Field required"),
        (profile_body("c", mtu="9000"), "config.interface.mtu"),
        ({"device": {"name": "eth1"}, "claim_uid": "c", "claim": {"metadata": {}}}, "uid"),
        (profile_body("c", mtu=10**30), "config.interface.mtu"),
        ([1, 2], "(body)"),
    ],
)
def test_invalid_bodies_are_400_naming_the_field(
    served: tuple[WebhookServer, httpx.Client], body: object, named: str
) -> None:
    _, client = served
    r = client.post("/GetProfileConfig", json=body)
    assert r.status_code == 400, r.text
    assert r.text.startswith("invalid request body for /GetProfileConfig: ")
    assert named in r.text


def test_malformed_json_and_missing_body_are_400(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    r = client.post("/GetDeviceConfig", content=b'{"name": ', headers=JSON)
    assert r.status_code == 400 and "malformed JSON at byte 9" in r.text
    r = client.post("/GetProfileConfig")
    assert r.status_code == 400 and "body is missing" in r.text
    r = client.post(
        "/GetProfileConfig", content=b'{"device":{"name":"\\ud800"},"claim_uid":"c"}', headers=JSON
    )
    assert r.status_code == 400 and "surrogate" in r.text


def test_oversized_bodies_are_413_declared_or_streamed(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    big = json.dumps({"device": {"name": "x" * 5000}, "claim_uid": "c"}).encode()
    r = client.post("/GetProfileConfig", content=big, headers=JSON)
    assert r.status_code == 413 and "4096 bytes" in r.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    r = client.post("/GetProfileConfig", content=chunks(), headers=JSON)
    assert r.status_code == 413
    # A body just under the cap is still served.
    padded = profile_body("c-under-cap")
    padded["config"]["ethtool"] = {"features": {"x" * 3000: True}}  # type: ignore[index]
    ok = client.post("/GetProfileConfig", json=padded)
    assert ok.status_code == 200


def test_openapi_document_has_the_four_endpoints_and_no_422(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) == {
        "/health",
        "/GetDeviceAttributes",
        "/GetDeviceConfig",
        "/GetProfileConfig",
        "/ReleaseProfileConfig",
    }
    for item in doc["paths"].values():
        for op in item.values():
            assert "422" not in op["responses"]
    assert {"404", "409", "400", "413", "500"} <= set(
        doc["paths"]["/GetProfileConfig"]["post"]["responses"]
    )


def test_unknown_paths_and_methods_are_plain_text(
    served: tuple[WebhookServer, httpx.Client],
) -> None:
    _, client = served
    r = client.get("/nope")
    assert r.status_code == 404 and r.text == "GET /nope: Not Found\n"
    r = client.get("/GetProfileConfig")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.headers["content-type"].startswith("text/plain")


# --- operations -------------------------------------------------------------------


def test_access_log_has_method_path_status_latency_and_claim(
    served: tuple[WebhookServer, httpx.Client], caplog: pytest.LogCaptureFixture
) -> None:
    _, client = served
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    client.post("/GetProfileConfig", json=profile_body("claim-42"))
    client.post("/GetProfileConfig", json={"device": {"name": 1}, "claim_uid": "bad\nclaim"})
    client.get("/health")
    lines = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(lines) == 3
    method, path, status, latency, claim = lines[0].split(" ")
    assert (method, path, status, claim) == ("POST", "/GetProfileConfig", "200", "claim=claim-42")
    assert latency.endswith("ms") and float(latency[:-2]) >= 0
    # Rejected requests are logged too, with the claim sanitised to one line.
    assert lines[1].split(" ")[2:5:2] == ["400", "claim=bad?claim"]
    assert lines[2].startswith("GET /health 200 ") and lines[2].endswith("claim=-")


def test_graceful_stop_lets_an_in_flight_request_finish(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow:
        @hookimpl
        def profile_config(self) -> NetworkConfig | None:
            entered.set()
            release.wait(30)
            return NetworkConfig.model_validate({"interface": {"mtu": 1234}})

        @hookimpl
        def release_profile_config(self) -> bool:
            return True

    host = local_ipam_host(tmp_path, profile="slow", extra=(("slow", Slow()),))
    server = WebhookServer(host, ServeOptions(listen=f"unix://{tmp_path}/hook.sock")).start()
    sock_path = tmp_path / "hook.sock"
    answers: list[httpx.Response] = []
    with client_for(server) as client:
        caller = threading.Thread(
            target=lambda: answers.append(
                client.post("/GetProfileConfig", json=profile_body("c1", profile="slow"))
            )
        )
        caller.start()
        assert entered.wait(30)
        stopper = threading.Thread(target=server.stop)
        stopper.start()

        # The listening socket closes first: new connections are refused...
        def refused() -> bool:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(sock_path))
                except (ConnectionRefusedError, FileNotFoundError):
                    return True
            return False

        wait_until(refused, "the listening socket to close")
        release.set()  # ...while the request already inside completes normally.
        caller.join(30)
        stopper.join(30)
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json() == {"interface": {"mtu": 1234}}
    assert not sock_path.exists()


# --- building blocks ---------------------------------------------------------------


def test_ipam_store_is_opened_once_under_concurrency(tmp_path: Path) -> None:
    opened: list[MemoryStore] = []
    gate = threading.Barrier(16)

    def factory() -> MemoryStore:
        time.sleep(0.01)  # widen the race window an unlocked open would lose
        store = MemoryStore()
        opened.append(store)
        return store

    host = ProviderHost(
        cloud_provider_hint="none",
        profile_provider="none",
        host_root=str(tmp_path),
        registry=PluginRegistry(load_entry_points=False),
        ipam_factory=factory,
        env={},
    )
    seen: list[object] = []

    def touch() -> None:
        gate.wait()
        seen.append(host.context.ipam)

    threads = [threading.Thread(target=touch) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and all(s is opened[0] for s in seen)


def test_create_app_requires_a_started_host(tmp_path: Path) -> None:
    host = ProviderHost(
        cloud_provider_hint="none",
        host_root=str(tmp_path),
        registry=PluginRegistry(load_entry_points=False),
        env={},
    )
    with pytest.raises(RuntimeError, match="start"):
        create_app(host)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unix:///run/dranet/webhook.sock", ListenAddress(uds="/run/dranet/webhook.sock")),
        ("127.0.0.1:0", ListenAddress(host="127.0.0.1", port=0)),
        ("[::1]:8080", ListenAddress(host="::1", port=8080)),
        ("http://localhost:9000", ListenAddress(host="localhost", port=9000)),
    ],
)
def test_listen_forms(text: str, expected: ListenAddress) -> None:
    assert ListenAddress.parse(text) == expected


@pytest.mark.parametrize(
    "text", ["unix://relative.sock", "8080", "host:port", ":80", "127.0.0.1:70000"]
)
def test_bad_listen_forms_name_the_accepted_ones(text: str) -> None:
    with pytest.raises(ConfigError, match="--listen"):
        ListenAddress.parse(text)


def test_stale_socket_is_replaced_and_a_live_one_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "run" / "hook.sock")
    first = bind_unix(path, 0o640)
    assert oct(os.stat(path).st_mode & 0o777) == "0o640"
    with pytest.raises(ConfigError, match="already listening"):
        bind_unix(path)
    first.sock.close()  # as after SIGKILL: the file stays, nobody answers
    assert os.path.exists(path)
    second = bind_unix(path)
    assert oct(os.stat(path).st_mode & 0o777) == "0o660"
    second.cleanup()
    assert not os.path.exists(path)
    regular = tmp_path / "file"
    regular.write_text("keep me")
    with pytest.raises(ConfigError, match="not a socket"):
        bind_unix(str(regular))
    assert regular.read_text() == "keep me"


def test_collector_frees_only_stale_claims_and_skips_unusable_files(tmp_path: Path) -> None:
    store = MemoryStore()
    rng = [ip_range_from_cidr("10.30.0.0/24")]
    for claim in ("live", "gone"):
        store.allocate(Owner("local-ipam", "eth1", claim), rng)
    live_file = tmp_path / "live"
    collector = PeriodicCollector(
        lambda: store,
        CollectorSettings(60, source=ClaimsFile(str(live_file)), grace=timedelta(0)),
    )
    assert collector.collect_once() is None  # missing file: nothing is freed
    for unusable in (
        "",  # a failed `kubectl ... > live`
        "live\n",  # no completeness marker: maybe cut short
        '{"kind": "ResourceClaimList", "items": [{"metadata": {"uid": "live"}}',  # truncated
    ):
        live_file.write_text(unusable)
        assert collector.collect_once() is None
        assert len(store.list()) == 2
    assert collector.failed_runs == 4
    live_file.write_text("# claims\nlive\n# complete\n")
    result = collector.collect_once()
    assert result is not None and [a.owner.claim_uid for a in result.freed] == ["gone"]
    assert [a.owner.claim_uid for a in store.list()] == ["live"]
    with pytest.raises(ConfigError, match="refusing"):
        PeriodicCollector(lambda: store, CollectorSettings(1))


def test_validation_messages_name_fields() -> None:
    errors = [
        {
            "loc": ("body", "config", "interface", "mtu"),
            "msg": "Input should be >= 0",
            "type": "greater_than_equal",
        }
    ] * 7
    text = describe_validation_errors("/GetProfileConfig", errors)
    assert text.count("config.interface.mtu: Input should be >= 0") == 5
    assert text.endswith("and 2 more")


def test_detect_runs_without_the_server_extra(tmp_path: Path) -> None:
    """``detect`` needs nothing of the optional ``server`` extra."""
    code = (
        "import sys, io, contextlib\n"
        "for name in ('fastapi', 'uvicorn', 'starlette', 'httptools', 'prometheus_client'):\n"
        "    sys.modules[name] = None  # as if the extra were not installed\n"
        "from dranet_cloud.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['detect', '--cloud-provider-hint', 'none',\n"
        f"               '--host-root', {str(tmp_path)!r}])\n"
        "print(rc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    assert out.strip() == "0"
