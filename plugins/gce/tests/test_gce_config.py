"""The static per-NIC config: MTU, gateway routes and the gateway neighbor."""

from __future__ import annotations

from typing import Any

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.routing import SCOPE_LINK, gce_mac_for_ipv4
from dranet_cloud_gce.snapshot import GceInstance, parse_instance

from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig


def _config(inst: GceInstance, device: DeviceIdentifiers) -> NetworkConfig | None:
    return plugin.device_config(inst, device)


def test_primary_nic_config(gce_instance: GceInstance, gce_devices: list[Any]) -> None:
    config = _config(gce_instance, gce_devices[0])
    assert config is not None
    assert config.to_wire() == {
        "interface": {"mtu": 1460},
        "routes": [
            {"destination": "10.128.0.1/32", "scope": 253},
            {"destination": "10.128.0.0/20", "gateway": "10.128.0.1"},
        ],
        "neighbors": [{"destination": "10.128.0.1", "hardwareAddr": "42:01:0a:80:00:01"}],
    }


def test_every_gpu_nic_has_mtu_routes_and_neighbor(
    gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    for n, device in enumerate(gce_devices[1:], start=1):
        config = _config(gce_instance, device)
        assert config is not None
        assert config.interface.mtu == 8244
        assert config.routes is not None and config.neighbors is not None
        gw = f"192.168.{n}.1"
        assert [(r.destination, r.gateway, r.scope) for r in config.routes] == [
            (f"{gw}/32", None, SCOPE_LINK),
            (f"192.168.{n}.0/24", gw, None),
        ]
        assert [(x.destination, x.hardware_addr) for x in config.neighbors] == [
            (gw, f"42:01:c0:a8:{n:02x}:01")
        ]


def test_unknown_nic_gets_no_config(gce_instance: GceInstance) -> None:
    assert (
        _config(gce_instance, DeviceIdentifiers(name="eth9", mac_address="02:00:00:00:00:01"))
        is None
    )
    assert _config(gce_instance, DeviceIdentifiers(name="eth9")) is None


@pytest.mark.parametrize(
    ("ip", "mac"),
    [
        ("10.128.0.1", "42:01:0a:80:00:01"),
        ("192.168.1.1", "42:01:c0:a8:01:01"),
        ("255.0.16.9", "42:01:ff:00:10:09"),
    ],
)
def test_gce_mac_convention(ip: str, mac: str) -> None:
    assert gce_mac_for_ipv4(ip) == mac


def test_the_convention_matches_the_fixture_nic_macs(gce_instance: GceInstance) -> None:
    # The metadata's own NIC MACs follow the rule the neighbor entry relies on.
    for nic in gce_instance.nics:
        assert nic.ip is not None
        assert gce_mac_for_ipv4(nic.ip) == nic.mac


def test_nic_without_gateway_gets_mtu_only(gce_tree: dict[str, Any]) -> None:
    del gce_tree["instance"]["networkInterfaces"][1]["gateway"]
    inst = parse_instance(gce_tree)
    config = _config(inst, DeviceIdentifiers(name="eth1", mac_address="42:01:c0:a8:01:02"))
    assert config is not None
    assert config.to_wire() == {"interface": {"mtu": 8244}}


def test_nic_with_a_32_subnet_gets_only_the_gateway_route(gce_tree: dict[str, Any]) -> None:
    # Older GCE images saw a /32 netmask: the subnet route is then meaningless.
    gce_tree["instance"]["networkInterfaces"][1]["subnetmask"] = "255.255.255.255"
    inst = parse_instance(gce_tree)
    config = _config(inst, DeviceIdentifiers(name="eth1", mac_address="42:01:c0:a8:01:02"))
    assert config is not None and config.routes is not None
    assert [r.destination for r in config.routes] == ["192.168.1.1/32"]


def test_nic_with_nothing_known_gets_none(gce_tree: dict[str, Any]) -> None:
    nic = gce_tree["instance"]["networkInterfaces"][1]
    for key in ("gateway", "mtu"):
        del nic[key]
    inst = parse_instance(gce_tree)
    assert _config(inst, DeviceIdentifiers(name="eth1", mac_address=nic["mac"])) is None


def test_config_is_independent_of_the_device_name(gce_instance: GceInstance) -> None:
    a = _config(gce_instance, DeviceIdentifiers(name="eth1", mac_address="42:01:c0:a8:01:02"))
    b = _config(gce_instance, DeviceIdentifiers(name="gpu0", mac_address="42:01:C0:A8:01:02"))
    assert a is not None and a == b
