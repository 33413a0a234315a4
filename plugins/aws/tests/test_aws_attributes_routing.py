"""Device attributes and per-ENI policy routing."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from dranet_cloud_aws.attributes import device_attributes
from dranet_cloud_aws.metadata_source import load_instance
from dranet_cloud_aws.routing import (
    MAX_NETWORK_CARDS,
    RESERVED_TABLES,
    VRF_TABLE_FLOOR,
    eni_config,
    route_table,
)
from dranet_cloud_aws.sample import P5_EFA_INTERFACES, P5_EFA_ONLY
from dranet_cloud_aws.snapshot import AwsInstance, Eni

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.host.attribute_limits import attribute_name_problem, attribute_value_problem
from dranet_cloud.host.validation import validate_network_config
from dranet_cloud.wire.models import DeviceIdentifiers

D = "aws.dra.net/"


@pytest.fixture
def instance(aws_context: ProviderContext) -> AwsInstance:
    return load_instance(aws_context, 5.0)


def _values(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix(D): v.value for k, v in attrs.items()}


# --- attributes -------------------------------------------------------------------


def test_attributes_for_every_eni(
    aws_context: ProviderContext,
    instance: AwsInstance,
    aws_devices: list[DeviceIdentifiers],
    aws_macs: dict[str, dict[str, Any]],
) -> None:
    macs = aws_macs
    assert {d.mac for d in aws_devices} == set(macs)
    for dev in aws_devices:
        attrs = device_attributes(aws_context, instance, dev)
        for name, attr in attrs.items():
            assert name.startswith(D)
            assert attribute_name_problem(name) is None
            assert attribute_value_problem(attr) is None
        got = _values(attrs)
        keys = macs[dev.mac or ""]
        assert got["instanceType"] == "p5.48xlarge"
        assert got["region"] == "us-east-2"
        assert got["availabilityZone"] == "us-east-2b"
        assert got["availabilityZoneId"] == "use2-az2"
        assert got["placementGroup"] == "p5-training-cluster"
        assert "placementPartition" not in got
        assert got["networkCard"] == keys["network-card"]
        assert got["deviceNumber"] == keys["device-number"]
        assert got["interfaceId"] == keys["interface-id"]
        assert got["subnetId"] == keys["subnet-id"]
        assert got["vpcId"] == keys["vpc-id"]
        # ENA netdevs are never EFA; the card-1 ENIs are EFA interfaces whose
        # EFA function sits beside the ENA function.
        assert "efa" not in got
        if keys["network-card"] == 1:
            assert got["efaPciAddress"] == dict(P5_EFA_INTERFACES)[dev.pci_address or ""]
        else:
            assert "efaPciAddress" not in got
        assert type(attrs[D + "networkCard"].value) is int
        assert not any(k.startswith("resource.aws.com/") for k in attrs), "p5 is not Neuron"


def test_efa_sibling_is_read_through_the_pci_address(
    aws_context: ProviderContext, instance: AwsInstance, aws_devices: list[DeviceIdentifiers]
) -> None:
    ena = next(d for d in aws_devices if d.pci_address == P5_EFA_INTERFACES[0][0])
    # No name to look the NIC up by: the PCI address alone finds the sibling.
    bare = DeviceIdentifiers(mac_address=ena.mac_address, pci_address=ena.pci_address)
    assert (
        _values(device_attributes(aws_context, instance, bare))["efaPciAddress"]
        == (P5_EFA_INTERFACES[0][1])
    )
    # The MAC alone finds the same NIC on the node, and so its EFA sibling.
    no_pci = DeviceIdentifiers(mac_address=ena.mac_address)
    assert (
        _values(device_attributes(aws_context, instance, no_pci))["efaPciAddress"]
        == (P5_EFA_INTERFACES[0][1])
    )


def test_efa_function_on_p5_gets_instance_attributes_only(
    aws_context: ProviderContext, instance: AwsInstance
) -> None:
    for pci in (P5_EFA_INTERFACES[0][1], P5_EFA_ONLY[0]):
        got = device_attributes(aws_context, instance, DeviceIdentifiers(pci_address=pci))
        assert _values(got)["instanceType"] == "p5.48xlarge"
        assert "interfaceId" not in _values(got)
        assert not any(k.startswith("resource.aws.com/") for k in got)


def test_unknown_nic_gets_instance_attributes_only(
    aws_context: ProviderContext, instance: AwsInstance
) -> None:
    dev = DeviceIdentifiers(name="veth0", mac_address="aa:bb:cc:dd:ee:ff")
    got = _values(device_attributes(aws_context, instance, dev))
    assert got["instanceType"] == "p5.48xlarge"
    assert "interfaceId" not in got and "efaPciAddress" not in got


def test_partition_and_missing_group(aws_context: ProviderContext, instance: AwsInstance) -> None:
    changed = instance.model_copy(update={"placement_group": None, "partition_number": 2})
    got = _values(device_attributes(aws_context, changed, DeviceIdentifiers(name="x")))
    assert "placementGroup" not in got and got["placementPartition"] == 2


# --- table numbering ----------------------------------------------------------------


def test_table_numbers_are_unique_and_clear_of_reserved_and_vrf_tables() -> None:
    seen: dict[int, tuple[int, int]] = {}
    for card in range(MAX_NETWORK_CARDS):
        for dev in range(200):
            table = route_table(card, dev)
            if table is None:
                continue
            assert table not in RESERVED_TABLES
            assert 100 <= table < VRF_TABLE_FLOOR
            assert table not in seen, (card, dev, seen.get(table))
            seen[table] = (card, dev)
    # Every card of a p5 (32 cards) has room for its ENIs, card 0 for many more.
    assert all(route_table(card, 23) is not None for card in range(1, MAX_NETWORK_CARDS))
    assert route_table(0, 0) == 100 and route_table(0, 152) == 252
    assert route_table(1, 0) == 256 and route_table(31, 23) == 999


@pytest.mark.parametrize(("card", "dev"), [(0, 153), (1, 24), (32, 0), (0, None), (-1, 0)])
def test_outside_the_scheme_gets_no_table(card: int, dev: int | None) -> None:
    assert route_table(card, dev) is None


# --- device config -----------------------------------------------------------------


def test_prefix_eni_gets_rules_for_every_address_and_prefix(instance: AwsInstance) -> None:
    eni = instance.enis["0e:5c:1a:2b:3c:02"]
    cfg = eni_config(eni)
    assert cfg is not None
    validate_network_config(cfg)
    table = route_table(eni.network_card, eni.device_number)
    assert table == 101
    routes = {(r.destination, r.gateway, r.scope, r.table) for r in cfg.routes or []}
    assert routes == {
        ("10.0.32.0/20", None, 253, 101),
        ("0.0.0.0/0", "10.0.32.1", None, 101),
        ("2600:1f16:8c2:1a20::/64", None, 253, 101),
        ("::/0", "2600:1f16:8c2:1a20::1", None, 101),
    }
    sources = {r.source for r in cfg.rules or []}
    assert sources == {
        "10.0.32.10/32",
        "10.0.32.48/28",
        "10.0.32.96/28",
        "2600:1f16:8c2:1a20::20/128",
        "2600:1f16:8c2:1a20:7e3f::/80",
    }
    assert {(r.table, r.priority) for r in cfg.rules or []} == {(101, 101)}


def test_secondary_ip_eni_gets_a_rule_per_local_address(instance: AwsInstance) -> None:
    eni = instance.enis["0e:5c:1a:2b:3c:03"]
    cfg = eni_config(eni)
    assert cfg is not None
    table = route_table(1, 1)
    assert {r.source for r in cfg.rules or []} == {f"{a}/32" for a in eni.local_ipv4s}
    assert all(r.table == table for r in (cfg.rules or []) + (cfg.routes or []))
    # No IPv6 on this ENI: no IPv6 routes.
    assert all(ipaddress.ip_network(r.destination or "").version == 4 for r in cfg.routes or [])
    default = next(r for r in cfg.routes or [] if r.destination == "0.0.0.0/0")
    assert default.gateway == "10.0.48.1"


def test_every_eni_gets_its_own_table(instance: AwsInstance) -> None:
    tables = set()
    for eni in instance.enis.values():
        cfg = eni_config(eni)
        assert cfg is not None and cfg.rules and cfg.routes
        tables |= {r.table for r in cfg.rules}
    assert len(tables) == len(instance.enis)


def test_eni_without_subnet_or_outside_scheme_gets_nothing() -> None:
    assert eni_config(Eni(mac="0e:00:00:00:00:01", device_number=1)) is None
    far = Eni(
        mac="0e:00:00:00:00:02",
        network_card=40,
        device_number=1,
        local_ipv4s=["10.1.0.5"],
        subnet_ipv4_cidr_block="10.1.0.0/24",
    )
    assert eni_config(far) is None
