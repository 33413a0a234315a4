"""The webhook through ProviderHost: explicit vs auto-detected, routing, mixing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.toolkit.errors import ProfileDenied, ProviderInitError, ProviderUnavailable
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

IPVLAN = NetworkConfig.model_validate({"profile": "ipam", "interface": {"type": "IPVLAN"}})


def make_host(
    url: str | None, root: Path, env: dict[str, str] | None = None, **kw: Any
) -> ProviderHost:
    return ProviderHost(
        webhook_url=url, host_root=str(root), env=env or {}, ipam=MemoryStore(), **kw
    )


def eth(host: ProviderHost, name: str) -> DeviceIdentifiers:
    return next(d for d in host.context.host_root.net_devices() if d.name == name)


def test_explicit_cloud_webhook_hyphenated_attribute_dropped_by_the_host(
    serve: Any, sample_root: Path, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(transport, hyphen_attr=True)
    host = make_host(server.url, sample_root, cloud_provider_hint="webhook")
    host.start()
    assert host.cloud == "webhook" and host.profile == "webhook"
    with caplog.at_level(logging.WARNING):
        attrs = host.device_attributes(eth(host, "eth1"))
    assert "dra.net/webhook-attr" not in attrs
    assert attrs["example.com/rack"].string == "rack-7"
    assert attrs["example.com/nicName"].string == "eth1"
    dropped = [r for r in caplog.records if "dra.net/webhook-attr" in r.getMessage()]
    assert dropped and all(r.levelno == logging.WARNING for r in dropped)
    assert "not a C identifier" in dropped[0].getMessage()
    final = host.network_config(eth(host, "eth1"), "claim-1", IPVLAN)
    assert final.interface.mtu == 8896
    assert final.interface.addresses == ["10.99.0.2/32", "fd00:99::2/128"]
    assert host.release(eth(host, "eth1"), "claim-1", final)


@pytest.mark.parametrize(
    ("behaviour", "flags", "says"),
    [
        ({"health": "down"}, {"cloud_provider_hint": "webhook"}, "answered HTTP 503"),
        ({"health": "not-json"}, {"cloud_provider_hint": "webhook"}, "not JSON"),
        (
            {"profile": False},
            {"cloud_provider_hint": "none", "profile_provider": "webhook"},
            "profile role",
        ),
        ({"cloud": False}, {"cloud_provider_hint": "webhook"}, "cloud role"),
    ],
)
def test_explicit_webhook_that_cannot_serve_fails_start_up(
    serve: Any,
    sample_root: Path,
    behaviour: dict[str, Any],
    flags: dict[str, Any],
    says: str,
) -> None:
    server = serve(**behaviour)
    host = make_host(server.url, sample_root, **flags)
    host.context.options.settings["webhook.health_wait"] = "0.3"
    with pytest.raises(ProviderInitError) as info:
        host.start()
    assert says in str(info.value) and server.url in str(info.value)


def test_auto_detected_webhook_that_is_down_never_fails_the_host(
    sample_root: Path, short_dir: Path
) -> None:
    host = make_host(f"unix://{short_dir}/down.sock", sample_root)
    host.context.options.probe_timeout = 0.3
    result = host.start()
    assert result.provider == "none"
    assert host.cloud is None and host.profile is None
    assert "no such unix socket" in result.failures["webhook"]
    assert host.device_attributes(DeviceIdentifiers(name="eth1")) == {}


def test_auto_detected_webhook_is_the_cloud_provider(serve: Any, sample_root: Path) -> None:
    server = serve()
    host = make_host(server.url, sample_root)
    result = host.start()
    assert result.provider == "webhook" and not result.explicit
    assert host.device_config(eth(host, "eth2")) is not None


def test_denials_and_outages_reach_the_caller(serve: Any, sample_root: Path) -> None:
    for status, error in ((409, ProfileDenied), (500, ProviderUnavailable)):
        server = serve(status_profile=status)
        host = make_host(server.url, sample_root, cloud_provider_hint="webhook")
        host.start()
        with pytest.raises(error, match=f"forced to answer {status}"):
            host.network_config(eth(host, "eth1"), "claim-1", IPVLAN)


def test_failed_release_is_reported_not_raised(
    serve: Any, sample_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(status_release=500)
    host = make_host(server.url, sample_root, cloud_provider_hint="webhook")
    host.start()
    with caplog.at_level(logging.ERROR):
        assert host.release(eth(host, "eth1"), "claim-1", IPVLAN) is False
    assert "forced to answer 500" in caplog.text


def test_gce_cloud_with_webhook_profiles(
    serve: Any, gce_node: tuple[dict[str, str], Path, str], transport: str
) -> None:
    env, root, nic = gce_node
    server = serve(transport)
    host = make_host(
        server.url, root, env=env, cloud_provider_hint="gce", profile_provider="webhook"
    )
    host.start()
    assert host.cloud == "gce" and host.profile == "webhook"
    device = eth(host, nic)
    attrs = host.device_attributes(device)
    assert any(k.startswith("gce.dra.net/") for k in attrs)
    assert not any(k.startswith("example.com/") for k in attrs)
    cloud_config = host.device_config(device)
    final = host.network_config(device, "mixed-claim", IPVLAN)
    assert final.interface.addresses == ["10.99.0.2/32", "fd00:99::2/128"]
    assert cloud_config is not None and cloud_config.interface.mtu not in (None, 8896)
    assert final.interface.mtu == cloud_config.interface.mtu  # GCE's, not the webhook's
    assert host.release(device, "mixed-claim", final)
    calls = server.webhook.calls
    assert calls["/GetProfileConfig"] == 1 and calls["/ReleaseProfileConfig"] == 1
    assert calls["/GetDeviceAttributes"] == 0 and calls["/GetDeviceConfig"] == 0
