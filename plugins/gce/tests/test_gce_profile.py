"""The profile role: IPVLAN subinterface addresses through the node-local IPAM."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.profile import SUBINTERFACE_MARKER
from dranet_cloud_gce.snapshot import GceInstance, parse_instance

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.ipam import Owner
from dranet_cloud.node.nic import described_nic
from dranet_cloud.toolkit.errors import AddressConflict, ProfileDenied
from dranet_cloud.toolkit.iprange import ip_range_from_cidr, marker_range
from dranet_cloud.wire.models import DeviceIdentifiers, InterfaceConfig, NetworkConfig

IPVLAN = NetworkConfig(profile="gce", interface=InterfaceConfig(type="IPVLAN"))


def _get(
    ctx: ProviderContext,
    inst: GceInstance,
    device: DeviceIdentifiers,
    claim: str,
    config: NetworkConfig = IPVLAN,
) -> NetworkConfig | None:
    return plugin.profile_config(ctx, inst, device, claim, config)


def _addresses(result: NetworkConfig | None) -> list[str]:
    assert result is not None and result.interface.addresses is not None
    return result.interface.addresses


def test_not_a_subinterface_claim_allocates_nothing(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    for config in (
        NetworkConfig(profile="gce"),
        NetworkConfig(profile="gce", interface=InterfaceConfig(type="Passthrough")),
    ):
        assert _get(ipam_context, gce_instance, gce_devices[0], "c1", config) is None
    assert ipam_context.ipam.list() == []


def test_unnumbered_allocates_nothing(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    config = NetworkConfig(interface=InterfaceConfig(type="IPVLAN", addressing="Unnumbered"))
    assert _get(ipam_context, gce_instance, gce_devices[0], "c1", config) is None
    assert ipam_context.ipam.list() == []


def test_same_claim_twice_gets_the_same_addresses(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    first = _addresses(_get(ipam_context, gce_instance, gce_devices[0], "claim-a"))
    again = _addresses(_get(ipam_context, gce_instance, gce_devices[0], "claim-a"))
    assert first == again
    assert len(ipam_context.ipam.list()) == 2  # one per family, nothing new on retry


def test_two_claims_get_distinct_addresses_inside_the_ranges(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    a = _addresses(_get(ipam_context, gce_instance, gce_devices[0], "claim-a"))
    b = _addresses(_get(ipam_context, gce_instance, gce_devices[0], "claim-b"))
    assert set(a).isdisjoint(b)
    v4_range = ip_range_from_cidr("10.24.3.0/24")
    v6_range = marker_range("2600:1900:4000:318::/64", SUBINTERFACE_MARKER)
    # The /64 became a /80 with 0xC0DE right after the prefix.
    assert str(v6_range.start) == "2600:1900:4000:318:c0de::1"
    assert str(v6_range.end) == "2600:1900:4000:318:c0de:ffff:ffff:fffe"
    for addrs in (a, b):
        v4, v6 = addrs  # IPv4 first
        assert v4.endswith("/32") and v4 in v4_range
        assert v6.endswith("/128") and v6 in v6_range
        assert ipaddress.ip_interface(v6).ip in ipaddress.ip_network("2600:1900:4000:318:c0de::/80")


def test_release_frees_by_owner_whatever_the_config(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    dev = gce_devices[0]
    _get(ipam_context, gce_instance, dev, "claim-a")
    b = _addresses(_get(ipam_context, gce_instance, dev, "claim-b"))
    # The config at teardown no longer lists the addresses (or is gone entirely).
    assert plugin.release_profile_config(ipam_context, dev, "claim-a") is True
    held = ipam_context.ipam.list()
    assert {a.address for a in held} == set(b)
    assert all(a.owner == Owner("gce", described_nic(dev).identity, "claim-b") for a in held)
    # Idempotent, and unknown claims are fine.
    assert plugin.release_profile_config(ipam_context, dev, "claim-a") is True
    assert plugin.release_profile_config(ipam_context, dev, "never") is True
    assert len(ipam_context.ipam.list()) == 2


def test_after_release_the_claim_can_allocate_again(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    dev = gce_devices[0]
    _get(ipam_context, gce_instance, dev, "claim-a")
    plugin.release_profile_config(ipam_context, dev, "claim-a")
    assert ipam_context.ipam.list() == []
    assert len(_addresses(_get(ipam_context, gce_instance, dev, "claim-a"))) == 2


def test_static_addresses_are_reserved(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    config = NetworkConfig(
        interface=InterfaceConfig(type="IPVLAN", addresses=["10.24.3.50/32"]),
    )
    result = _get(ipam_context, gce_instance, gce_devices[0], "claim-s", config)
    assert _addresses(result) == ["10.24.3.50/32"]
    held = ipam_context.ipam.list()
    assert [(a.address, a.static) for a in held] == [("10.24.3.50/32", True)]
    # Same claim again: same answer, no conflict with itself.
    assert _addresses(_get(ipam_context, gce_instance, gce_devices[0], "claim-s", config)) == [
        "10.24.3.50/32"
    ]
    # Another claim asking for the same address is denied with 409.
    with pytest.raises(AddressConflict) as info:
        _get(ipam_context, gce_instance, gce_devices[0], "claim-t", config)
    assert info.value.status == 409
    # The pool never hands the reserved address out.
    for i in range(20):
        v4 = _addresses(_get(ipam_context, gce_instance, gce_devices[0], f"dyn-{i}"))[0]
        assert v4 != "10.24.3.50/32"


def test_static_address_held_by_a_dynamic_claim_is_a_conflict(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    v4 = _addresses(_get(ipam_context, gce_instance, gce_devices[0], "dyn"))[0]
    config = NetworkConfig(interface=InterfaceConfig(type="IPVLAN", addresses=[v4]))
    with pytest.raises(AddressConflict):
        _get(ipam_context, gce_instance, gce_devices[0], "static", config)


def test_nic_without_ranges_is_denied_naming_the_metadata(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    with pytest.raises(ProfileDenied) as info:
        _get(ipam_context, gce_instance, gce_devices[3], "claim-x")
    message = str(info.value)
    assert "eth3" in message
    assert "ip-aliases" in message and "ipv6s" in message
    assert "network-interfaces/3" in message
    assert info.value.status == 400
    assert ipam_context.ipam.list() == []


def test_unknown_nic_is_denied(ipam_context: ProviderContext, gce_instance: GceInstance) -> None:
    device = DeviceIdentifiers(name="eth9", mac_address="02:00:00:00:00:09")
    with pytest.raises(ProfileDenied, match="not in the instance metadata"):
        _get(ipam_context, gce_instance, device, "claim-x")


def test_ipv4_only_nic_gets_one_address(
    ipam_context: ProviderContext, gce_tree: dict[str, Any]
) -> None:
    gce_tree["instance"]["networkInterfaces"][2]["ipAliases"] = ["192.168.102.0/28"]
    inst = parse_instance(gce_tree)
    dev = DeviceIdentifiers(name="eth2", mac_address="42:01:c0:a8:02:02")
    addrs = _addresses(_get(ipam_context, inst, dev, "c"))
    assert len(addrs) == 1 and addrs[0] in ip_range_from_cidr("192.168.102.0/28")


def test_vm_96_gets_a_112_marker_range(
    ipam_context: ProviderContext, gce_tree: dict[str, Any]
) -> None:
    nic = gce_tree["instance"]["networkInterfaces"][0]
    nic["ipAliases"] = []
    nic["ipv6s"] = ["2600:1900:4000:318:0:5:0:0/96"]
    inst = parse_instance(gce_tree)
    dev = DeviceIdentifiers(name="eth0", mac_address=nic["mac"])
    (v6,) = _addresses(_get(ipam_context, inst, dev, "c"))
    assert ipaddress.ip_interface(v6).ip in ipaddress.ip_network(
        "2600:1900:4000:318:0:5:c0de:0/112"
    )


def test_owners_are_per_device(ipam_context: ProviderContext, gce_tree: dict[str, Any]) -> None:
    nics = gce_tree["instance"]["networkInterfaces"]
    nics[1]["ipAliases"] = ["192.168.101.0/24"]
    inst = parse_instance(gce_tree)
    dev0 = DeviceIdentifiers(name="eth0", mac_address=nics[0]["mac"])
    dev1 = DeviceIdentifiers(name="eth1", mac_address=nics[1]["mac"])
    _get(ipam_context, inst, dev0, "same-claim")
    _get(ipam_context, inst, dev1, "same-claim")
    owners = {a.owner for a in ipam_context.ipam.list()}
    assert owners == {
        Owner("gce", described_nic(dev0).identity, "same-claim"),
        Owner("gce", described_nic(dev1).identity, "same-claim"),
    }
    plugin.release_profile_config(ipam_context, dev1, "same-claim")
    assert {a.owner for a in ipam_context.ipam.list()} == {
        Owner("gce", described_nic(dev0).identity, "same-claim")
    }


def test_without_a_gce_snapshot_the_claim_is_denied(
    ipam_context: ProviderContext, gce_devices: list[Any]
) -> None:
    with pytest.raises(ProfileDenied, match="no GCE instance metadata"):
        plugin.profile_config(ipam_context, None, gce_devices[0], "c", IPVLAN)  # type: ignore[arg-type]


def test_dhcp_claim_allocates_nothing(
    ipam_context: ProviderContext, gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    config = NetworkConfig(interface=InterfaceConfig(type="IPVLAN", dhcp=True))
    assert _get(ipam_context, gce_instance, gce_devices[0], "c", config) is None
    assert ipam_context.ipam.list() == []


def test_device_without_mac_is_denied_saying_why(
    ipam_context: ProviderContext, gce_instance: GceInstance
) -> None:
    with pytest.raises(ProfileDenied, match="no MAC address"):
        _get(ipam_context, gce_instance, DeviceIdentifiers(name="eth0"), "c")


def test_unusable_ipv6_range_is_named_in_the_denial(
    ipam_context: ProviderContext, gce_tree: dict[str, Any]
) -> None:
    nic = gce_tree["instance"]["networkInterfaces"][0]
    nic["ipAliases"] = []
    nic["ipv6s"] = ["2600:1900:4000:318::5/128"]
    inst = parse_instance(gce_tree)
    with pytest.raises(ProfileDenied) as info:
        _get(ipam_context, inst, DeviceIdentifiers(name="eth0", mac_address=nic["mac"]), "c")
    message = str(info.value)
    assert "no ip-aliases range" in message
    assert "2600:1900:4000:318::5/128 cannot carry the 0xC0DE marker" in message
