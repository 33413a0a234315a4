"""Device config: per-ENI policy routing, and IPVLAN for LACP bonds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dranet_cloud_aliyun import plugin
from dranet_cloud_aliyun.routing import TABLE_BASE, route_table_for
from dranet_cloud_aliyun.snapshot import AliyunInstance, AliyunNic

from dranet_cloud.contract.context import ProviderContext, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.host.validation import validate_network_config
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.testing import Emulator, HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers

RDMA0 = "00:16:3e:2c:8a:11"
StartHost = Callable[[Path, dict[str, str]], ProviderHost]


def _instance(**overrides: str | None) -> AliyunInstance:
    values: dict[str, str | None] = {
        "primary-ip-address": "172.16.33.10",
        "private-ipv4s": '["172.16.33.10","172.16.33.20"]',
        "netmask": "255.255.240.0",
        "gateway": "172.16.47.253",
        "vswitch-cidr-block": "172.16.32.0/20",
        "ipv6s": "[2408:4005:3cf:7e11::b6a8]",
        "ipv6-gateway": "2408:4005:3cf:7e11:ffff:ffff:ffff:fffd",
        "vswitch-ipv6-cidr-block": "2408:4005:3cf:7e11::/64",
    }
    values.update(overrides)
    nic = AliyunNic.from_values(RDMA0, values)
    return AliyunInstance(nics={nic.mac: nic})


def _eth1(sample: SampleHost) -> tuple[ProviderContext, DeviceIdentifiers]:
    hr = HostRoot(sample.root)
    dev = next(d for d in hr.net_devices() if d.name == "eth1")
    return ProviderContext(host_root=hr), dev


def test_eni_gets_a_table_of_its_own(erdma_sample: SampleHost) -> None:
    context, dev = _eth1(erdma_sample)
    ifindex = int((erdma_sample.root / "sys/class/net/eth1/ifindex").read_text())
    table = TABLE_BASE + ifindex
    config = plugin.device_config(context=context, instance=_instance(), device=dev)
    assert config is not None
    validate_network_config(config)
    assert config.interface.mtu == 8500
    assert config.interface.type is None  # an ENI moves into the pod as it is
    routes = [(r.destination, r.gateway, r.scope, r.table) for r in config.routes or []]
    assert routes == [
        ("172.16.32.0/20", None, 253, table),
        ("0.0.0.0/0", "172.16.47.253", None, table),
        ("2408:4005:3cf:7e11::/64", None, 253, table),
        ("::/0", "2408:4005:3cf:7e11:ffff:ffff:ffff:fffd", None, table),
    ]
    assert all(
        r.source in ("172.16.33.10", "2408:4005:3cf:7e11::b6a8") for r in config.routes or []
    )
    rules = [(r.priority, r.source, r.table) for r in config.rules or []]
    assert rules == [
        (table, "172.16.33.10/32", table),
        (table, "172.16.33.20/32", table),
        (table, "2408:4005:3cf:7e11::b6a8/128", table),
    ]


def test_tables_differ_per_nic_and_avoid_reserved_numbers(erdma_sample: SampleHost) -> None:
    hr = HostRoot(erdma_sample.root)
    tables = [route_table_for(resolve_nic(hr, d)) for d in hr.net_devices()]
    assert None not in tables
    assert len(set(tables)) == len(tables)
    assert all(t is not None and 255 < t < 1000 for t in tables)


def test_no_policy_routing_without_a_usable_ifindex(tmp_path: Path) -> None:
    root = HostRootBuilder(tmp_path).nic("eth1", RDMA0).build()
    (root / "sys/class/net/eth1/ifindex").write_text("800\n")  # 1056: DRANET's VRF range
    hr = HostRoot(root)
    assert route_table_for(resolve_nic(hr, DeviceIdentifiers(name="eth1"))) is None
    dev = DeviceIdentifiers(name="eth1", mac_address=RDMA0)
    config = plugin.device_config(
        context=ProviderContext(host_root=hr), instance=_instance(), device=dev
    )
    assert config is not None
    assert config.routes is None and config.rules is None
    assert config.interface.mtu == 1500


def test_gateway_outside_the_vswitch_drops_that_family_only(erdma_sample: SampleHost) -> None:
    context, dev = _eth1(erdma_sample)
    inst = _instance(gateway="10.9.9.1")
    config = plugin.device_config(context=context, instance=inst, device=dev)
    assert config is not None
    assert {r.destination for r in config.routes or []} == {"2408:4005:3cf:7e11::/64", "::/0"}


def test_link_local_ipv6_gateway_is_accepted(erdma_sample: SampleHost) -> None:
    context, dev = _eth1(erdma_sample)
    config = plugin.device_config(
        context=context, instance=_instance(**{"ipv6-gateway": "fe80::1"}), device=dev
    )
    assert config is not None
    assert ("::/0", "fe80::1") in [(r.destination, r.gateway) for r in config.routes or []]


def test_subnet_from_netmask_when_the_vswitch_cidr_is_missing(erdma_sample: SampleHost) -> None:
    context, dev = _eth1(erdma_sample)
    inst = _instance(**{"vswitch-cidr-block": None, "ipv6s": None})
    config = plugin.device_config(context=context, instance=inst, device=dev)
    assert config is not None
    assert [r.destination for r in config.routes or []] == ["172.16.32.0/20", "0.0.0.0/0"]


def test_nic_unknown_to_metadata_gets_no_config(erdma_sample: SampleHost) -> None:
    context, dev = _eth1(erdma_sample)
    empty = AliyunInstance()
    assert plugin.device_config(context=context, instance=empty, device=dev) is None


def test_lacp_bond_becomes_ipvlan_from_the_host_root_alone(bond_sample: SampleHost) -> None:
    hr = HostRoot(bond_sample.root)
    bond = next(d for d in hr.net_devices() if d.name == "bond0")
    # The bond's MAC is not an ENI in the metadata; the config still comes.
    config = plugin.device_config(
        context=ProviderContext(host_root=hr), instance=AliyunInstance(), device=bond
    )
    assert config is not None
    validate_network_config(config)
    # Exactly DRANET's Alibaba provider answer (PR #312); routing comes with the profile.
    assert config.to_wire() == {
        "profile": "alibaba-eflo-subinterface",
        "interface": {"type": "IPVLAN"},
    }


def test_lacp_bond_without_a_global_64_gets_no_config(tmp_path: Path) -> None:
    root = HostRootBuilder(tmp_path).nic("bond0", "00:16:3e:00:00:08", bond_mode="802.3ad")
    hr = HostRoot(root.build())
    dev = DeviceIdentifiers(name="bond0", mac_address="00:16:3e:00:00:08")
    context = ProviderContext(host_root=hr)
    assert plugin.device_config(context=context, instance=AliyunInstance(), device=dev) is None


def test_other_bond_modes_are_not_ipvlan(tmp_path: Path) -> None:
    root = HostRootBuilder(tmp_path).nic("bond1", "00:16:3e:00:00:07", bond_mode="active-backup")
    hr = HostRoot(root.build())
    dev = DeviceIdentifiers(name="bond1", mac_address="00:16:3e:00:00:07")
    assert (
        plugin.device_config(
            context=ProviderContext(host_root=hr), instance=AliyunInstance(), device=dev
        )
        is None
    )


def test_bond_config_through_the_host(
    ecs_emulator: Emulator, bond_sample: SampleHost, started_host: StartHost
) -> None:
    host = started_host(bond_sample.root, ecs_emulator.env)
    try:
        config = host.device_config(
            DeviceIdentifiers(name="bond0", mac_address="00:16:3e:5d:01:a0")
        )
        eth0 = host.device_config(DeviceIdentifiers(name="eth0", mac_address="00:16:3e:2c:8a:10"))
    finally:
        host.close()
    assert config is not None and config.to_wire()["interface"]["type"] == "IPVLAN"
    assert eth0 is not None and eth0.routes


def test_a_pci_nic_named_by_dranet_gets_its_mtu_and_policy_routing(
    erdma_sample: SampleHost, erdma_host: ProviderHost
) -> None:
    """Gen1 DRANET names eth1 ``pci-0000-00-06-0``; no /sys/class/net entry has that name."""
    context, eth1 = _eth1(erdma_sample)
    assert eth1.pci_address == "0000:00:06.0"
    expected = plugin.device_config(context=context, instance=_instance(), device=eth1)
    assert expected is not None and expected.interface.mtu == 8500 and expected.rules
    for device in (
        DeviceIdentifiers(name="pci-0000-00-06-0", mac_address=RDMA0, pci_address="0000:00:06.0"),
        DeviceIdentifiers(name="pci-0000-00-06-0"),
        DeviceIdentifiers(pci_address="0000:00:06.0"),
        DeviceIdentifiers(mac_address=RDMA0),
    ):
        got = plugin.device_config(context=context, instance=_instance(), device=device)
        assert got == expected, device
    by_name = erdma_host.device_config(DeviceIdentifiers(name="eth1", mac_address=RDMA0))
    by_dra = erdma_host.device_config(DeviceIdentifiers(name="pci-0000-00-06-0"))
    assert by_name is not None and by_name.interface.mtu == 8500 and by_name.rules
    assert by_dra == by_name
