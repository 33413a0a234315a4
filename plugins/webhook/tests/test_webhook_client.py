"""Client logic against mocked answers (respx): status mapping, parsing, caps.

Behaviour against a real peer is in test_webhook_peer.py; here respx lets
each test pick one exact answer the example server would not give.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
import respx
from dranet_cloud_webhook import plugin
from dranet_cloud_webhook.client import MAX_BODY_BYTES, pool_size
from dranet_cloud_webhook.health import (
    HealthBadStatus,
    HealthInvalid,
    HealthNotJson,
    HealthUnreachable,
)
from dranet_cloud_webhook.snapshot import WebhookInstance

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.toolkit.errors import ProfileDenied, ProviderUnavailable
from dranet_cloud.wire.models import Capabilities, DeviceIdentifiers, NetworkConfig

URL = "http://webhook.test:9000"
DEVICE = DeviceIdentifiers(name="eth1", mac_address="42:01:c0:a8:01:02", pci_address="0000:00:05.0")
CONFIG = NetworkConfig.model_validate({"profile": "ipam", "interface": {"type": "IPVLAN"}})


@pytest.fixture()
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


def ctx(**settings: str) -> ProviderContext:
    return ProviderContext(
        options=ProviderOptions(
            webhook_url=URL, settings={f"webhook.{k}": v for k, v in settings.items()}
        ),
        env={},
    )


def instance(cloud: bool = True, profile: bool = True) -> WebhookInstance:
    caps = Capabilities.model_validate({"cloudProvider": cloud, "profileProvider": profile})
    return WebhookInstance(url=URL, endpoint=URL, capabilities=caps)


# --- /health ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "error", "says"),
    [
        (httpx.Response(503, text="ipam backend down"), HealthBadStatus, "HTTP 503"),
        (httpx.Response(404, text="404 page not found"), HealthBadStatus, "HTTP 404"),
        (httpx.Response(200, text="OK"), HealthNotJson, "not JSON"),
        (httpx.Response(200, json={"cloudProvider": True}), HealthInvalid, "profileProvider"),
        (
            httpx.Response(200, json={"cloudProvider": "true", "profileProvider": True}),
            HealthInvalid,
            "cloudProvider",
        ),
        (httpx.Response(200, json=[True, True]), HealthInvalid, "instead of an object"),
    ],
)
def test_health_failures_say_which(
    mock: respx.MockRouter, response: httpx.Response, error: type[Exception], says: str
) -> None:
    mock.get("/health").mock(return_value=response)
    with pytest.raises(error) as info:
        plugin.instance_properties(ctx(health_wait="0.2"), deadline=15.0)
    assert says in str(info.value)
    assert f"{URL}/health" in str(info.value)
    assert isinstance(info.value, ProviderUnavailable)


def test_health_non_json_is_final_without_waiting(mock: respx.MockRouter) -> None:
    route = mock.get("/health").respond(200, text="OK")
    with pytest.raises(HealthNotJson):
        plugin.instance_properties(ctx(health_wait="30"), deadline=30.0)
    assert route.call_count == 1


def test_health_is_polled_while_the_webhook_comes_up(mock: respx.MockRouter) -> None:
    route = mock.get("/health")
    route.side_effect = [
        httpx.ConnectError("connection refused"),
        httpx.Response(503, text="starting"),
        httpx.Response(200, json={"cloudProvider": False, "profileProvider": True}),
    ]
    inst = plugin.instance_properties(ctx(health_wait="5"), deadline=15.0)
    assert isinstance(inst, WebhookInstance)
    assert inst.serving_roles() == frozenset({"profile"})
    assert inst.known_macs() is None
    assert route.call_count == 3


def test_unreachable_health_gives_up_within_the_wait(mock: respx.MockRouter) -> None:
    mock.get("/health").mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
    with pytest.raises(HealthUnreachable) as info:
        plugin.instance_properties(ctx(health_wait="0.3"), deadline=15.0)
    message = str(info.value)
    assert "unreachable (connection refused)" in message
    assert f"{URL}/health" in message
    assert "gave up after" in message


def test_auto_detection_ignores_a_non_webhook_and_raises_only_unavailable(
    mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    mock.get("/health").respond(200, text="<html>router login</html>")
    with caplog.at_level(logging.WARNING):
        assert plugin.confirm_environment(ctx(), timeout=0.5) is None
    assert "not JSON" in caplog.text
    mock.get("/health").respond(200, json={"cloudProvider": False, "profileProvider": True})
    assert plugin.confirm_environment(ctx(), timeout=0.5) is None
    mock.get("/health").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(ProviderUnavailable):
        plugin.confirm_environment(ctx(), timeout=0.2)


def test_auto_detection_with_a_malformed_url_is_unavailable_not_a_crash() -> None:
    bad = ProviderContext(options=ProviderOptions(webhook_url="ftp://x"), env={})
    assert plugin.local_evidence(bad) == "configured: webhook URL ftp://x"
    with pytest.raises(ProviderUnavailable, match="unsupported scheme"):
        plugin.confirm_environment(bad, timeout=0.2)


# --- status mapping -----------------------------------------------------------


@pytest.mark.parametrize("status", [400, 404, 409, 422])
def test_deny_statuses_become_profile_denied_with_the_server_message(
    mock: respx.MockRouter, status: int
) -> None:
    mock.post("/GetProfileConfig").respond(status, text=f"static IP 10.0.0.5 in use ({status})\n")
    with pytest.raises(ProfileDenied) as info:
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)
    assert info.value.status == status
    assert f"static IP 10.0.0.5 in use ({status})" in str(info.value)
    assert info.value.exit_code == 4


def test_json_error_bodies_are_unwrapped(mock: respx.MockRouter) -> None:
    mock.post("/GetProfileConfig").respond(409, json={"error": "range 10.9.0.0/28 is full"})
    with pytest.raises(ProfileDenied, match=r"HTTP 409: range 10\.9\.0\.0/28 is full"):
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)


@pytest.mark.parametrize("status", [500, 502, 503, 429, 401, 302])
def test_other_statuses_are_unavailable(mock: respx.MockRouter, status: int) -> None:
    mock.post("/GetProfileConfig").respond(status, text="boom")
    with pytest.raises(ProviderUnavailable) as info:
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)
    assert not isinstance(info.value, ProfileDenied)
    assert f"HTTP {status}: boom" in str(info.value)
    assert info.value.exit_code == 5


def test_timeouts_and_connection_errors_are_unavailable(mock: respx.MockRouter) -> None:
    route = mock.post("/GetProfileConfig")
    route.side_effect = httpx.ReadTimeout("slow")
    with pytest.raises(ProviderUnavailable, match=r"timed out after 0\.5 s"):
        plugin.profile_config(ctx(timeout="0.5"), instance(), DEVICE, "uid-1", CONFIG)
    route.side_effect = httpx.ConnectError("[Errno 111] Connection refused")
    with pytest.raises(ProviderUnavailable, match="unreachable"):
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)


def test_a_dropped_keepalive_connection_is_retried_once(mock: respx.MockRouter) -> None:
    route = mock.post("/GetProfileConfig")
    route.side_effect = [
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.Response(200, json={"interface": {"addresses": ["10.1.0.2/32"]}}),
    ]
    result = plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)
    assert result is not None and result.interface.addresses == ["10.1.0.2/32"]
    assert route.call_count == 2


# --- answers --------------------------------------------------------------------


def test_invalid_network_config_names_the_field(mock: respx.MockRouter) -> None:
    # What Go's decoder would reject is refused here; DRANET's meaning rules
    # (CIDRs, arpIgnore values) apply to the final merged config, in the host.
    mock.post("/GetProfileConfig").respond(
        200, json={"interface": {"addresses": "10.0.0.7/32", "arpIgnore": 1.5, "mtu": 10**30}}
    )
    with pytest.raises(ProviderUnavailable) as info:
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)
    message = str(info.value)
    assert "invalid NetworkConfig" in message
    assert "interface.addresses" in message and "interface.arpIgnore" in message
    assert "interface.mtu" in message


@pytest.mark.parametrize("body", ["", "null"])
def test_empty_profile_answer_adds_nothing(mock: respx.MockRouter, body: str) -> None:
    mock.post("/GetProfileConfig").respond(200, text=body)
    assert plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG) is None


def test_non_json_profile_answer_is_unavailable(mock: respx.MockRouter) -> None:
    mock.post("/GetProfileConfig").respond(200, text="{not json")
    with pytest.raises(ProviderUnavailable, match="not JSON"):
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)


def test_attribute_entries_are_parsed_one_by_one(
    mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    mock.post("/GetDeviceAttributes").respond(
        200,
        json={
            "example.com/rack": {"string": "r7"},
            "example.com/twoValues": {"int": 1, "string": "x"},
            "example.com/notAnObject": 5,
            "dra.net/webhook-attr": {"string": "left for the host"},
            "example.com/speed": {"int": 400},
        },
    )
    with caplog.at_level(logging.WARNING):
        attrs = plugin.device_attributes(ctx(), instance(), DEVICE)
    assert attrs is not None
    assert {k: v.value for k, v in attrs.items()} == {
        "example.com/rack": "r7",
        "dra.net/webhook-attr": "left for the host",  # the host drops it, with its warning
        "example.com/speed": 400,
    }
    assert "example.com/twoValues" in caplog.text and "example.com/notAnObject" in caplog.text


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(500, text="oops"),
        httpx.Response(200, text="[1, 2"),
        httpx.Response(200, json=["not", "a", "map"]),
        httpx.Response(404, text="unknown NIC"),
    ],
)
def test_discovery_failures_yield_nothing_and_never_raise(
    mock: respx.MockRouter, response: httpx.Response, caplog: pytest.LogCaptureFixture
) -> None:
    mock.post("/GetDeviceAttributes").mock(return_value=response)
    mock.post("/GetDeviceConfig").mock(return_value=response)
    with caplog.at_level(logging.INFO):
        assert plugin.device_attributes(ctx(), instance(), DEVICE) is None
        assert plugin.device_config(ctx(), instance(), DEVICE) is None
    assert "no attributes for eth1" in caplog.text and "no device config for eth1" in caplog.text


def test_device_config_timeout_yields_nothing(mock: respx.MockRouter) -> None:
    mock.post("/GetDeviceConfig").mock(side_effect=httpx.ReadTimeout("slow"))
    assert plugin.device_config(ctx(), instance(), DEVICE) is None


def test_bodies_are_capped(mock: respx.MockRouter) -> None:
    big = b'{"interface": {"name": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}}'
    mock.post("/GetProfileConfig").respond(200, content=big)
    with pytest.raises(ProviderUnavailable, match="over the 1048576-byte limit"):
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)

    def streamed(request: httpx.Request) -> httpx.Response:
        # No Content-Length: the cap must hold while reading the stream.
        chunks = (b"x" * 65536 for _ in range(40))
        return httpx.Response(200, content=chunks)

    mock.post("/GetProfileConfig").mock(side_effect=streamed)
    with pytest.raises(ProviderUnavailable, match="over the 1048576-byte limit"):
        plugin.profile_config(ctx(), instance(), DEVICE, "uid-1", CONFIG)


# --- wire format and roles ----------------------------------------------------------


def test_requests_use_dranets_paths_bodies_and_content_type(mock: respx.MockRouter) -> None:
    attrs = mock.post("/GetDeviceAttributes").respond(200, json={})
    config = mock.post("/GetDeviceConfig").respond(200, json={"interface": {}})
    get = mock.post("/GetProfileConfig").respond(200, json={"interface": {}})
    release = mock.post("/ReleaseProfileConfig").respond(200)
    plugin.device_attributes(ctx(), instance(), DEVICE)
    plugin.device_config(ctx(), instance(), DEVICE)
    plugin.profile_config(ctx(), instance(), DEVICE, "uid-9", CONFIG)
    assert plugin.release_profile_config(ctx(), instance(), DEVICE, "uid-9", None) is True

    identifiers = {
        "mac_address": "42:01:c0:a8:01:02",
        "pci_address": "0000:00:05.0",
        "name": "eth1",
    }
    for route in (attrs, config):
        request = route.calls.last.request
        assert request.method == "POST"
        assert request.headers["content-type"] == "application/json"
        assert json.loads(request.content) == identifiers
    body = json.loads(get.calls.last.request.content)
    # claim_uid for a gen1 peer, the claim (built from the UID alone here) for gen2
    assert body == {
        "device": identifiers,
        "claim_uid": "uid-9",
        "claim": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"uid": "uid-9"},
        },
        "config": {"profile": "ipam", "interface": {"type": "IPVLAN"}},
    }
    assert get.calls.last.request.headers["content-type"] == "application/json"
    released = json.loads(release.calls.last.request.content)
    assert released == {"device": identifiers, "claim_uid": "uid-9", "config": {"interface": {}}}


def test_device_without_mac_or_pci_sends_only_the_name(mock: respx.MockRouter) -> None:
    route = mock.post("/GetDeviceAttributes").respond(200, json={})
    plugin.device_attributes(ctx(), instance(), DeviceIdentifiers(name="dummy1"))
    assert route.calls.last.request.content == b'{"name":"dummy1"}'


def test_undeclared_roles_never_reach_the_network(mock: respx.MockRouter) -> None:
    routes = [mock.post(p).respond(200, json={}) for p in (
        "/GetDeviceAttributes", "/GetDeviceConfig", "/GetProfileConfig", "/ReleaseProfileConfig"
    )]  # fmt: skip
    assert plugin.device_attributes(ctx(), instance(cloud=False), DEVICE) is None
    assert plugin.device_config(ctx(), instance(cloud=False), DEVICE) is None
    with pytest.raises(ProviderUnavailable, match="declares profileProvider=false"):
        plugin.profile_config(ctx(), instance(profile=False), DEVICE, "uid", CONFIG)
    assert (
        plugin.release_profile_config(ctx(), instance(profile=False), DEVICE, "uid", None) is None
    )
    assert [r.call_count for r in routes] == [0, 0, 0, 0]


def test_release_failures_raise_for_the_host_to_log(mock: respx.MockRouter) -> None:
    mock.post("/ReleaseProfileConfig").respond(500, text="store offline")
    with pytest.raises(ProviderUnavailable, match="store offline"):
        plugin.release_profile_config(ctx(), instance(), DEVICE, "uid", CONFIG)


def test_calls_share_one_pooled_client(mock: respx.MockRouter) -> None:
    mock.post("/GetDeviceAttributes").respond(200, json={})
    mock.post("/GetProfileConfig").respond(200, json={"interface": {}})
    for _ in range(3):
        plugin.device_attributes(ctx(), instance(), DEVICE)
        plugin.profile_config(ctx(), instance(), DEVICE, "uid", CONFIG)
    assert pool_size() == 1
    # Different TLS material is a different pool.
    plugin.device_attributes(ctx(ca_bundle="/nonexistent-but-unused-for-http"), instance(), DEVICE)
    assert pool_size() == 2
