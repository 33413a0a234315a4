"""Per-NIC routing as DRANET's Azure provider derives it, and the pairing.

The vectors of DRANET's own tests are here with their exact expected rules
and routes (``10.9.255.0/24`` -> ``10.9.255.1``, table 100; the dual-stack
NIC ``000D3AF806EC`` with ``fe80::1234:5678:9abc``), plus the cases around
them: the second NIC's table, a subnet that is not a network base, a host
without an IPv6 default route, a link-local IPv6 address, and the VF of an
accelerated-networking pair.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_azure.attributes import device_attributes
from dranet_cloud_azure.pairing import Role, resolve
from dranet_cloud_azure.routing import device_config, subnet_gateway
from dranet_cloud_azure.snapshot import AzureInstance, AzureSubnet, parse_instance

from dranet_cloud.host.validation import validate_network_config
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers

GW6 = "fe80::1234:5678:9abc"


def nic(mac: str, subnet: tuple[str, str] | None, v4: str = "", v6: str = "") -> dict[str, Any]:
    return {
        "macAddress": mac,
        "ipv4": {
            "ipAddress": [{"privateIpAddress": v4, "publicIpAddress": ""}] if v4 else [],
            "subnet": [{"address": subnet[0], "prefix": subnet[1]}] if subnet else [],
        },
        "ipv6": {"ipAddress": [{"privateIpAddress": v6}] if v6 else []},
    }


def instance(*nics: dict[str, Any]) -> AzureInstance:
    return parse_instance(
        {"compute": {"vmSize": "Standard_D4s_v5"}, "network": {"interface": list(nics)}}
    )


def wire(host_root: HostRoot, inst: AzureInstance, **ids: str) -> dict[str, Any] | None:
    cfg = device_config(host_root, inst, DeviceIdentifiers(**ids))
    if cfg is None:
        return None
    validate_network_config(cfg)
    out: dict[str, Any] = cfg.to_wire()
    return out


@pytest.fixture
def host(tmp_path: Path) -> HostRoot:
    """eth0 (primary), eth1 dual stack with an IPv6 default route, eth2 IPv4 only."""
    root = (
        HostRootBuilder(tmp_path / "root")
        .vmbus_nic("eth0", "00:11:22:33:44:55", "00112233-4455-0011-2233-445500112233")
        .vmbus_nic("eth1", "00:0d:3a:f8:06:ec", "000d3af8-06ec-000d-3af8-06ec000d3af8")
        .vmbus_nic("eth2", "aa:bb:cc:dd:ee:ff", "aabbccdd-eeff-aabb-ccdd-eeffaabbccdd")
        .nic("enP2s2", "00:0d:3a:f8:06:ec", pci="0002:00:02.0", driver="mlx5_core")
        .enslave("enP2s2", "eth1")
        .ipv6_route("::/0", GW6, "eth1")
        .ipv6_route("::/0", None, "lo")  # an unreachable default is no gateway
        .build()
    )
    return HostRoot(root)


def test_dranets_ipv4_vector(host: HostRoot) -> None:
    inst = instance(nic("001122334455", ("10.9.255.0", "24"), v4="10.9.255.5"))
    assert wire(host, inst, name="eth0", mac_address="00:11:22:33:44:55") == {
        "interface": {},
        "rules": [{"source": "10.9.255.0/24", "table": 100}],
        "routes": [{"destination": "0.0.0.0/0", "gateway": "10.9.255.1", "table": 100}],
    }


def test_dranets_dual_stack_vector_on_the_second_nic(host: HostRoot) -> None:
    inst = instance(
        nic("001122334455", ("10.9.255.0", "24"), v4="10.9.255.5"),
        nic("000D3AF806EC", ("10.144.133.128", "26"), "10.144.133.132", "fda0:ad0a:cdcb:2000::5"),
    )
    assert wire(host, inst, name="eth1", mac_address="00:0d:3a:f8:06:ec") == {
        "interface": {},
        "rules": [
            {"source": "10.144.133.128/26", "table": 101},
            {"source": "fda0:ad0a:cdcb:2000::5/128", "table": 101},
        ],
        "routes": [
            {"destination": "0.0.0.0/0", "gateway": "10.144.133.129", "table": 101},
            {"destination": "::/0", "gateway": GW6, "table": 101},
        ],
    }


def test_ipv6_needs_a_default_route_on_that_link(host: HostRoot) -> None:
    inst = instance(
        nic("001122334455", None),
        nic("000D3AF806EC", None),
        nic("AABBCCDDEEFF", ("10.1.0.0", "16"), "10.1.0.4", "fd00:1::4"),
    )
    assert wire(host, inst, name="eth2", mac_address="aa:bb:cc:dd:ee:ff") == {
        "interface": {},
        "rules": [{"source": "10.1.0.0/16", "table": 102}],
        "routes": [{"destination": "0.0.0.0/0", "gateway": "10.1.0.1", "table": 102}],
    }


def test_link_local_ipv6_and_no_subnet_mean_no_config(host: HostRoot) -> None:
    inst = instance(nic("001122334455", None), nic("000D3AF806EC", None, v6="fe80::5"))
    assert wire(host, inst, name="eth1", mac_address="00:0d:3a:f8:06:ec") is None


def test_subnet_that_is_not_a_network_base_is_refused(
    host: HostRoot, caplog: pytest.LogCaptureFixture
) -> None:
    inst = instance(nic("001122334455", ("10.0.0.5", "24"), v4="10.0.0.5"))
    with caplog.at_level(logging.WARNING):
        assert wire(host, inst, name="eth0", mac_address="00:11:22:33:44:55") is None
    assert "azure: NIC 001122334455" in caplog.text and "network base" in caplog.text


@pytest.mark.parametrize(
    ("address", "prefix", "gateway"),
    [("10.9.255.0", "24", "10.9.255.1"), ("10.144.133.128", "26", "10.144.133.129")],
)
def test_subnet_gateway(address: str, prefix: str, gateway: str) -> None:
    assert subnet_gateway(AzureSubnet(address=address, prefix=prefix)) == gateway


@pytest.mark.parametrize(("address", "prefix"), [("10.0.0.5", "24"), ("fd00::", "64"), ("x", "24")])
def test_subnet_gateway_refuses(address: str, prefix: str) -> None:
    with pytest.raises(ValueError):
        subnet_gateway(AzureSubnet(address=address, prefix=prefix))


def test_unknown_mac_and_no_mac_get_nothing(host: HostRoot) -> None:
    inst = instance(nic("001122334455", ("10.9.255.0", "24")))
    assert wire(host, inst, name="eth9", mac_address="02:00:00:00:00:09") is None
    assert wire(host, inst, name="", pci_address="0101:00:00.0") is None


def test_a_skipped_entry_keeps_the_table_numbers_of_the_others(host: HostRoot) -> None:
    inst = instance(
        nic("not-a-mac", ("10.0.0.0", "24")),
        nic("000D3AF806EC", ("10.144.133.128", "26")),
    )
    assert [n.index for n in inst.interfaces] == [1]
    cfg = wire(host, inst, name="eth1", mac_address="00:0d:3a:f8:06:ec")
    assert cfg is not None and {r["table"] for r in cfg["rules"]} == {101}


# --- accelerated networking ------------------------------------------------------------


def test_the_pair_is_resolved_by_pci_presence(host: HostRoot) -> None:
    synthetic = resolve(host, DeviceIdentifiers(name="eth1", mac_address="00:0d:3a:f8:06:ec"))
    vf = resolve(
        host,
        DeviceIdentifiers(
            name="enP2s2", mac_address="00:0d:3a:f8:06:ec", pci_address="0002:00:02.0"
        ),
    )
    assert synthetic is not None and (synthetic.name, synthetic.role) == ("eth1", Role.SYNTHETIC)
    assert synthetic.partner == "enP2s2"
    assert vf is not None and (vf.name, vf.role, vf.partner) == ("enP2s2", Role.VF, "eth1")
    # gen1 names a PCI NIC by its DRA device name; MAC + PCI still find the VF.
    gen1 = resolve(
        host,
        DeviceIdentifiers(
            name="pci-0002-00-02-0", mac_address="00:0d:3a:f8:06:ec", pci_address="0002:00:02.0"
        ),
    )
    assert gen1 is not None and gen1.role is Role.VF
    # A NIC without a VF is plain.
    plain = resolve(host, DeviceIdentifiers(name="eth2", mac_address="aa:bb:cc:dd:ee:ff"))
    assert plain is not None and plain.role is Role.PLAIN


def test_routing_lands_on_the_synthetic_nic_not_its_vf(host: HostRoot) -> None:
    inst = instance(
        nic("001122334455", None),
        nic("000D3AF806EC", ("10.144.133.128", "26"), "10.144.133.132"),
    )
    vf = {"name": "enP2s2", "mac_address": "00:0d:3a:f8:06:ec", "pci_address": "0002:00:02.0"}
    assert wire(host, inst, **vf) is None
    assert wire(host, inst, name="eth1", mac_address="00:0d:3a:f8:06:ec") is not None
    vf_attrs = device_attributes(host, inst, DeviceIdentifiers(**vf))
    eth1_attrs = device_attributes(
        host, inst, DeviceIdentifiers(name="eth1", mac_address="00:0d:3a:f8:06:ec")
    )
    assert vf_attrs["azure.dra.net/acceleratedNetworkingVf"].to_wire() == {"bool": True}
    assert "azure.dra.net/acceleratedNetworking" not in vf_attrs
    assert eth1_attrs["azure.dra.net/acceleratedNetworking"].to_wire() == {"bool": True}


def test_a_vf_enslaved_to_something_else_is_not_a_pair(tmp_path: Path) -> None:
    """A bond port shares its bond's MAC too; only hv_netvsc makes a pair."""
    root = (
        HostRootBuilder(tmp_path / "bond")
        .nic("bond0", "02:00:00:00:00:01", bond_mode="802.3ad")
        .nic("ens1", "02:00:00:00:00:01", pci="0000:01:00.0", driver="mlx5_core")
        .enslave("ens1", "bond0")
        .build()
    )
    port = resolve(
        HostRoot(root),
        DeviceIdentifiers(name="ens1", mac_address="02:00:00:00:00:01", pci_address="0000:01:00.0"),
    )
    assert port is not None and port.role is Role.PLAIN
