"""The plugin's hooks against the example webhook as a real peer (TCP and unix socket)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_webhook import plugin
from dranet_cloud_webhook.client import pool_size
from dranet_cloud_webhook.emulator import build_emulator
from dranet_cloud_webhook.example_server import Behaviour, ExampleWebhook, TlsServerFiles
from dranet_cloud_webhook.health import HealthBadStatus, HealthInvalid, HealthNotJson
from dranet_cloud_webhook.snapshot import WebhookInstance

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import (
    ConfigError,
    DranetCloudError,
    ProfileDenied,
    ProviderUnavailable,
)
from dranet_cloud.wire.claims import ClaimReference, PodReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

ETH1 = DeviceIdentifiers(name="eth1", mac_address="0c:42:a1:00:00:11", pci_address="0000:41:00.0")
ETH2 = DeviceIdentifiers(name="eth2", mac_address="0c:42:a1:00:00:12")
IPVLAN = NetworkConfig.model_validate({"profile": "ipam", "interface": {"type": "IPVLAN"}})


def static(*addresses: str) -> NetworkConfig:
    return NetworkConfig.model_validate(
        {"profile": "ipam", "interface": {"type": "IPVLAN", "addresses": list(addresses)}}
    )


def start(ctx: ProviderContext) -> WebhookInstance:
    inst = plugin.instance_properties(ctx, deadline=5.0)
    assert isinstance(inst, WebhookInstance)
    return inst


def test_every_call_round_trips(serve: Any, context_for: Any, transport: str) -> None:
    server = serve(transport, hyphen_attr=True)
    ctx = context_for(server.url)
    assert plugin.local_evidence(ctx) == f"configured: webhook URL {server.url}"
    confirmed = plugin.confirm_environment(ctx, 1.0)
    assert confirmed is not None and "cloudProvider=true, profileProvider=true" in confirmed
    inst = start(ctx)
    assert inst.url == server.url and inst.serving_roles() == {"cloud", "profile"}

    attrs = plugin.device_attributes(ctx, inst, ETH1)
    assert attrs is not None
    assert attrs["example.com/rack"].string == "rack-7"
    assert attrs["example.com/nicName"].string == "eth1"
    assert attrs["example.com/linkSpeedGbps"].int_ == 200
    # Names are the host's business: the plugin passes the hyphenated one on.
    assert "dra.net/webhook-attr" in attrs

    config = plugin.device_config(ctx, inst, ETH1)
    assert config is not None and config.interface.mtu == 8896

    first = plugin.profile_config(ctx, inst, ETH1, "claim-a", IPVLAN)
    assert first is not None
    assert first.interface.addresses == ["10.99.0.2/32", "fd00:99::2/128"]
    again = plugin.profile_config(ctx, inst, ETH1, "claim-a", IPVLAN)
    assert again == first, "a kubelet retry must get the same answer"
    other = plugin.profile_config(ctx, inst, ETH2, "claim-b", IPVLAN)
    assert other is not None and not set(other.interface.addresses or []) & set(
        first.interface.addresses or []
    )

    assert plugin.release_profile_config(ctx, inst, ETH1, "claim-a", first) is True
    assert plugin.release_profile_config(ctx, inst, ETH1, "claim-a", first) is True
    assert ("mac:0c:42:a1:00:00:11", "claim-a") not in server.webhook.allocations()
    assert ("mac:0c:42:a1:00:00:12", "claim-b") in server.webhook.allocations()


def test_request_bodies_are_dranets_json(serve: Any, context_for: Any, transport: str) -> None:
    server = serve(transport)
    ctx = context_for(server.url)
    inst = start(ctx)
    plugin.device_attributes(ctx, inst, ETH1)
    plugin.device_config(ctx, inst, ETH2)
    claim = ClaimReference("uid-1", "team-a", "nic", (PodReference("trainer-0", "pod-1"),))
    plugin.profile_config(ctx, inst, ETH1, "uid-1", IPVLAN, claim)
    plugin.release_profile_config(ctx, inst, ETH1, "uid-1", None)
    eth1 = {"mac_address": "0c:42:a1:00:00:11", "pci_address": "0000:41:00.0", "name": "eth1"}
    assert server.webhook.requests == [
        ("/GetDeviceAttributes", eth1),
        ("/GetDeviceConfig", {"mac_address": "0c:42:a1:00:00:12", "name": "eth2"}),
        (
            "/GetProfileConfig",
            {
                "device": eth1,
                "claim_uid": "uid-1",
                "claim": {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"uid": "uid-1", "namespace": "team-a", "name": "nic"},
                    "status": {
                        "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "pod-1"}]
                    },
                },
                "config": {"profile": "ipam", "interface": {"type": "IPVLAN"}},
            },
        ),
        (
            "/ReleaseProfileConfig",
            {"device": eth1, "claim_uid": "uid-1", "config": {"interface": {}}},
        ),
    ]


def test_static_address_conflict_is_denied_with_the_servers_message(
    serve: Any, context_for: Any, transport: str
) -> None:
    server = serve(transport)
    ctx = context_for(server.url)
    inst = start(ctx)
    mine = plugin.profile_config(ctx, inst, ETH1, "claim-a", static("10.99.0.50/24"))
    # exactly as the claim wrote it: DRANET de-duplicates by exact string
    assert mine is not None and mine.interface.addresses == ["10.99.0.50/24"]
    with pytest.raises(ProfileDenied) as info:
        plugin.profile_config(ctx, inst, ETH2, "claim-b", static("10.99.0.50/32"))
    assert info.value.status == 409
    used = "static address 10.99.0.50/32 is already used by claim claim-a on mac:0c:42:a1:00:00:11"
    assert used in str(info.value)
    # Once released, the address is free for the other claim.
    plugin.release_profile_config(ctx, inst, ETH1, "claim-a", mine)
    theirs = plugin.profile_config(ctx, inst, ETH2, "claim-b", static("10.99.0.50/32"))
    assert theirs is not None and theirs.interface.addresses == ["10.99.0.50/32"]


def test_unknown_profile_is_a_404_denial(serve: Any, context_for: Any) -> None:
    server = serve(profiles=frozenset({"gold"}))
    ctx = context_for(server.url)
    with pytest.raises(ProfileDenied) as info:
        plugin.profile_config(ctx, start(ctx), ETH1, "c", IPVLAN)
    assert info.value.status == 404 and "unknown profile 'ipam'" in str(info.value)


@pytest.mark.parametrize(
    ("status", "error"), [(409, ProfileDenied), (422, ProfileDenied), (500, ProviderUnavailable)]
)
def test_forced_statuses(
    serve: Any, context_for: Any, status: int, error: type[DranetCloudError]
) -> None:
    server = serve(status_profile=status)
    ctx = context_for(server.url)
    with pytest.raises(error) as info:
        plugin.profile_config(ctx, start(ctx), ETH1, "claim-x", IPVLAN)
    assert f"forced to answer {status} for claim claim-x" in str(info.value)
    assert info.value.exit_code == (4 if status < 500 else 5)


def test_bad_json_fails_profiles_but_not_discovery(
    serve: Any, context_for: Any, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(transport, bad_json=True)
    ctx = context_for(server.url)
    inst = start(ctx)
    with caplog.at_level(logging.WARNING):
        assert plugin.device_attributes(ctx, inst, ETH1) is None
        assert plugin.device_config(ctx, inst, ETH1) is None
    assert "not JSON" in caplog.text
    with pytest.raises(ProviderUnavailable, match="not JSON"):
        plugin.profile_config(ctx, inst, ETH1, "c", IPVLAN)


def test_invalid_profile_answer_names_the_field(serve: Any, context_for: Any) -> None:
    server = serve(invalid_config=True)
    ctx = context_for(server.url)
    with pytest.raises(ProviderUnavailable) as info:
        plugin.profile_config(ctx, start(ctx), ETH1, "c", IPVLAN)
    assert "interface.addresses: Input should be a valid list" in str(info.value)


def test_slow_webhook_times_out(serve: Any, context_for: Any, transport: str) -> None:
    server = serve(transport, slow=1.0)
    ctx = context_for(server.url, timeout="0.2")
    inst = start(ctx)  # /health is not slowed
    with pytest.raises(ProviderUnavailable, match=r"timed out after 0\.2 s"):
        plugin.profile_config(ctx, inst, ETH1, "c", IPVLAN)
    assert plugin.device_config(ctx, inst, ETH1) is None


def test_capabilities_off_keep_calls_off_the_network(
    serve: Any, context_for: Any, transport: str
) -> None:
    no_cloud = serve(transport, cloud=False)
    ctx = context_for(no_cloud.url)
    inst = start(ctx)
    assert inst.serving_roles() == {"profile"}
    assert plugin.confirm_environment(ctx, 1.0) is None  # not a cloud provider
    assert plugin.device_attributes(ctx, inst, ETH1) is None
    assert plugin.device_config(ctx, inst, ETH1) is None
    assert plugin.profile_config(ctx, inst, ETH1, "c", IPVLAN) is not None
    calls = no_cloud.webhook.calls
    assert calls["/GetDeviceAttributes"] == 0 and calls["/GetDeviceConfig"] == 0

    no_profile = serve(transport, profile=False)
    ctx = context_for(no_profile.url)
    inst = start(ctx)
    assert inst.serving_roles() == {"cloud"}
    with pytest.raises(ProviderUnavailable, match="declares profileProvider=false"):
        plugin.profile_config(ctx, inst, ETH1, "c", IPVLAN)
    assert plugin.release_profile_config(ctx, inst, ETH1, "c", IPVLAN) is None
    calls = no_profile.webhook.calls
    assert calls["/GetProfileConfig"] == 0 and calls["/ReleaseProfileConfig"] == 0


@pytest.mark.parametrize(
    ("behaviour", "error", "says"),
    [
        ({"health": "down"}, HealthBadStatus, "answered HTTP 503 instead of 200"),
        ({"health": "not-json"}, HealthNotJson, "body is not JSON"),
        (
            {"health": "body", "health_body": '{"cloudProvider": true}'},
            HealthInvalid,
            "profileProvider",
        ),
    ],
)
def test_broken_health_fails_start_up_saying_which(
    serve: Any,
    context_for: Any,
    transport: str,
    behaviour: dict[str, Any],
    error: type[Exception],
    says: str,
) -> None:
    server = serve(transport, **behaviour)
    with pytest.raises(error) as info:
        plugin.instance_properties(context_for(server.url, health_wait="0.3"), deadline=5.0)
    assert says in str(info.value) and server.url in str(info.value)


def test_missing_socket_is_unreachable(context_for: Any, short_dir: Path) -> None:
    url = f"unix://{short_dir}/absent.sock"
    with pytest.raises(ProviderUnavailable) as info:
        plugin.instance_properties(context_for(url, health_wait="0.2"), deadline=5.0)
    assert "no such unix socket" in str(info.value) and url in str(info.value)
    with pytest.raises(ProviderUnavailable):
        plugin.confirm_environment(context_for(url), 0.2)


def test_explicit_bad_url_is_a_config_error(context_for: Any) -> None:
    with pytest.raises(ConfigError, match="unsupported scheme 'tcp'"):
        plugin.instance_properties(context_for("tcp://127.0.0.1:1"), deadline=1.0)
    with pytest.raises(ConfigError, match="no webhook URL is configured"):
        plugin.instance_properties(context_for(None), deadline=1.0)


def test_concurrent_claims_share_one_pool_and_never_collide(serve: Any, context_for: Any) -> None:
    server = serve()
    ctx = context_for(server.url)
    inst = start(ctx)

    def claim(i: int) -> list[str]:
        dev = DeviceIdentifiers(name=f"eth{i % 4}")
        result = plugin.profile_config(ctx, inst, dev, f"claim-{i}", IPVLAN)
        assert result is not None
        return result.interface.addresses or []

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(claim, range(64)))
    addresses = [a for r in results for a in r]
    assert len(addresses) == 128 and len(set(addresses)) == 128
    assert pool_size() == 1


# --- on the emulator kit: connection reuse and injected faults ---------------------


def test_keep_alive_reuses_one_connection(
    context_for: Any, short_dir: Path, transport: str
) -> None:
    listen = f"unix://{short_dir}/kit.sock" if transport == "unix" else "127.0.0.1:0"
    with build_emulator(None, listen, None) as emu:
        ctx = context_for(emu.env["DRANET_CLOUD_WEBHOOK_URL"])
        inst = start(ctx)
        for i in range(10):
            plugin.profile_config(ctx, inst, ETH1, f"c{i}", IPVLAN)
        connections = {r.connection for r in emu.requests("/")}
        assert len(emu.requests("/GetProfileConfig")) == 10
        assert len(connections) == 1, f"expected one kept-alive connection, saw {connections}"


def test_connection_dropped_by_the_server_is_retried(context_for: Any) -> None:
    with build_emulator(None, "127.0.0.1:0", "drop=1;path=/GetProfileConfig") as emu:
        ctx = context_for(emu.url)
        result = plugin.profile_config(ctx, start(ctx), ETH1, "c", IPVLAN)
        assert result is not None and result.interface.addresses
        faults = [r.fault for r in emu.requests("/GetProfileConfig")]
        assert faults == ["drop", None]


def test_oversized_answer_is_refused(context_for: Any) -> None:
    with build_emulator(None, "127.0.0.1:0", "oversize=2000000;path=/GetProfileConfig") as emu:
        ctx = context_for(emu.url)
        with pytest.raises(ProviderUnavailable, match="byte limit"):
            plugin.profile_config(ctx, start(ctx), ETH1, "c", IPVLAN)


def test_emulator_fixture_sets_behaviour(context_for: Any, tmp_path: Path) -> None:
    fixture = tmp_path / "webhook.json"
    fixture.write_text(json.dumps({"mtu": 1400, "rack": "r42", "profile": False}))
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        ctx = context_for(emu.url)
        inst = start(ctx)
        assert inst.serving_roles() == {"cloud"}
        config = plugin.device_config(ctx, inst, ETH1)
        assert config is not None and config.interface.mtu == 1400
        attrs = plugin.device_attributes(ctx, inst, ETH1)
        assert attrs is not None and attrs["example.com/rack"].string == "r42"
    fixture.write_text(json.dumps({"mtuu": 1}))
    with pytest.raises(ValueError, match="unknown webhook fixture keys"):
        build_emulator(fixture, "127.0.0.1:0", None)


def test_example_webhook_logic_rejects_malformed_requests() -> None:
    hook = ExampleWebhook(Behaviour())
    assert hook.handle("POST", "/GetProfileConfig", b"{").status == 400
    assert hook.handle("POST", "/GetProfileConfig", b'{"device": {"name": "e"}}').status == 400
    assert hook.handle("GET", "/GetProfileConfig", b"").status == 405
    assert hook.handle("POST", "/Nope", b"{}").status == 404


# --- TLS ----------------------------------------------------------------------------


def test_https_with_ca_bundle_and_client_certificate(
    serve: Any, context_for: Any, tls_files: Any
) -> None:
    server = serve(
        tls=TlsServerFiles(str(tls_files.server_cert), str(tls_files.server_key), str(tls_files.ca))
    )
    assert server.url.startswith("https://127.0.0.1:")
    ctx = context_for(
        server.url,
        ca_bundle=str(tls_files.ca),
        client_cert=str(tls_files.client_cert),
        client_key=str(tls_files.client_key),
    )
    inst = start(ctx)
    result = plugin.profile_config(ctx, inst, ETH1, "tls-claim", IPVLAN)
    assert result is not None and result.interface.addresses

    # The same material from the environment works too.
    env = {
        "DRANET_CLOUD_WEBHOOK_CA_BUNDLE": str(tls_files.ca),
        "DRANET_CLOUD_WEBHOOK_CLIENT_CERT": str(tls_files.client_cert),
        "DRANET_CLOUD_WEBHOOK_CLIENT_KEY": str(tls_files.client_key),
    }
    assert start(context_for(server.url, env=env)).serving_roles() == {"cloud", "profile"}


@pytest.mark.parametrize("case", ["no-client-cert", "system-trust", "wrong-ca"])
def test_https_failures_are_unavailable(
    serve: Any, context_for: Any, tls_files: Any, case: str
) -> None:
    server = serve(
        tls=TlsServerFiles(str(tls_files.server_cert), str(tls_files.server_key), str(tls_files.ca))
    )
    settings = {
        "no-client-cert": {"ca_bundle": str(tls_files.ca)},
        "system-trust": {},
        "wrong-ca": {
            "ca_bundle": str(tls_files.other_ca),
            "client_cert": str(tls_files.client_cert),
            "client_key": str(tls_files.client_key),
        },
    }[case]
    with pytest.raises(ProviderUnavailable) as info:
        plugin.instance_properties(context_for(server.url, health_wait="0.3", **settings), 5.0)
    assert server.url in str(info.value)


def test_a_client_that_never_starts_tls_stalls_neither_others_nor_shutdown(
    serve: Any, context_for: Any, tls_files: Any
) -> None:
    """The handshake runs in the connection's own thread: a peer that connects and
    says nothing (a port scanner, a stuck client) used to hold accept(), so the next
    client waited and stop() never returned."""
    server = serve(
        tls=TlsServerFiles(str(tls_files.server_cert), str(tls_files.server_key), str(tls_files.ca))
    )
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):  # silent: no ClientHello
        ctx = context_for(
            server.url,
            ca_bundle=str(tls_files.ca),
            client_cert=str(tls_files.client_cert),
            client_key=str(tls_files.client_key),
        )
        assert start(ctx).serving_roles() == {"cloud", "profile"}
        done = threading.Event()
        stopper = threading.Thread(target=lambda: (server.stop(), done.set()), daemon=True)
        stopper.start()
        assert done.wait(10), "stop() waited on the silent client's handshake"
