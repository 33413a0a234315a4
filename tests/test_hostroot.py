"""HostRootBuilder writes what HostRoot reads, with the kernel's layout."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dranet_cloud.node.hostroot import HostRoot, Inet6Address
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers


def build_node(root: Path) -> Path:
    return (
        HostRootBuilder(root)
        .dmi(product_name="Alibaba Cloud ECS", sys_vendor="Alibaba Cloud", product_uuid="ABC-1")
        .hypervisor_uuid("ec2e1916-9099-7caf-fd21-012345abcdef")
        .nic("eth0", "00:16:3E:AA:BB:01", mtu=1500, pci="0000:00:05.0", driver="virtio-pci")
        .nic("eth1", "00-16-3E-AA-BB-02", mtu=8500, pci="0000:00:06.0", driver="mlx5_core")
        .nic("bond0", "00:16:3e:aa:bb:03", mtu=9000, bond_mode="802.3ad")
        .nic("bond1", "00:16:3e:aa:bb:04", bond_mode="active-backup 1")
        .infiniband("erdma_0", "0000:00:06.0", driver="mlx5_core")
        .infiniband("mlx5_1", "0000:00:07.0", driver="mlx5_core")
        .inet6("2001:db8:1:2:216:3eff:feaa:bb02", 64, "eth1")
        .inet6("fe80::216:3eff:feaa:bb02", 64, "eth1", scope=0x20)
        .file("/proc/cmdline", "root=/dev/vda1\n")
        .build()
    )


@pytest.fixture
def host(tmp_path: Path) -> HostRoot:
    return HostRoot(build_node(tmp_path / "node"))


def test_dmi_and_hypervisor(host: HostRoot) -> None:
    assert host.dmi_readable()
    assert host.dmi("product_name") == "Alibaba Cloud ECS"
    assert host.dmi("sys_vendor") == "Alibaba Cloud"
    assert host.dmi("bios_vendor") is None
    assert host.read_text("/sys/hypervisor/uuid") == "ec2e1916-9099-7caf-fd21-012345abcdef"
    assert host.read_text("/proc/cmdline") == "root=/dev/vda1"


def test_no_dmi_means_unreadable(tmp_path: Path) -> None:
    root = HostRootBuilder(tmp_path / "bare").nic("eth0", "02:00:00:00:00:01").build()
    host = HostRoot(root)
    assert not host.dmi_readable()
    assert host.dmi("product_name") is None
    assert host.net_devices() == [
        DeviceIdentifiers(name="eth0", mac_address="02:00:00:00:00:01", pci_address=None)
    ]


def test_net_devices_normalize_macs_and_find_pci(host: HostRoot) -> None:
    assert host.net_devices() == [
        DeviceIdentifiers(name="bond0", mac_address="00:16:3e:aa:bb:03"),
        DeviceIdentifiers(name="bond1", mac_address="00:16:3e:aa:bb:04"),
        DeviceIdentifiers(name="eth0", mac_address="00:16:3e:aa:bb:01", pci_address="0000:00:05.0"),
        DeviceIdentifiers(name="eth1", mac_address="00:16:3e:aa:bb:02", pci_address="0000:00:06.0"),
    ]
    assert host.read_text("/sys/class/net/eth1/mtu") == "8500"


def test_pci_drivers(host: HostRoot) -> None:
    assert host.pci_driver("0000:00:05.0") == "virtio-pci"
    assert host.pci_driver("0000:00:06.0") == "mlx5_core"
    assert host.pci_driver("0000:00:99.0") is None


def test_bonding_mode(host: HostRoot) -> None:
    assert host.bonding_mode("bond0") == "802.3ad"
    assert host.read_text("/sys/class/net/bond0/bonding/mode") == "802.3ad 4"
    assert host.bonding_mode("bond1") == "active-backup"
    assert host.bonding_mode("eth0") is None


def test_infiniband(host: HostRoot) -> None:
    assert host.infiniband_pci_addresses() == {
        "erdma_0": "0000:00:06.0",
        "mlx5_1": "0000:00:07.0",
    }
    assert host.infiniband_pci_addresses("erdma") == {"erdma_0": "0000:00:06.0"}


def test_if_inet6(host: HostRoot) -> None:
    entries = host.if_inet6()
    assert entries == [
        Inet6Address("::1", 128, 0x10, "lo"),
        Inet6Address("2001:db8:1:2:216:3eff:feaa:bb02", 64, 0, "eth1"),
        Inet6Address("fe80::216:3eff:feaa:bb02", 64, 0x20, "eth1"),
    ]
    assert [e.ifname for e in entries if e.is_global] == ["eth1"]


def test_if_inet6_is_in_the_kernel_format(host: HostRoot) -> None:
    lines = host.path("/proc/net/if_inet6").read_text().splitlines()
    fields = lines[1].split()
    assert fields[0] == "20010db80001000202163efffeaabb02"
    assert len(fields[0]) == 32
    ifindex = int(host.read_text("/sys/class/net/eth1/ifindex") or "0")
    assert fields[1:] == [f"{ifindex:02x}", "40", "00", "80", "eth1"]


def test_links_are_relative_and_stay_inside_the_root(tmp_path: Path) -> None:
    root = build_node(tmp_path / "node")
    link = root / "sys/class/net/eth0/device"
    assert os.readlink(link) == "../../../devices/pci0000:00/0000:00:05.0"
    assert link.resolve() == (root / "sys/devices/pci0000:00/0000:00:05.0").resolve()
    bus = root / "sys/bus/pci/devices/0000:00:05.0"
    assert not os.readlink(bus).startswith("/")
    assert bus.resolve() == link.resolve()
    driver = link.resolve() / "driver"
    assert driver.resolve() == (root / "sys/bus/pci/drivers/virtio-pci").resolve()
    ib = root / "sys/class/infiniband/erdma_0/device"
    assert ib.resolve() == (root / "sys/devices/pci0000:00/0000:00:06.0").resolve()
    for path in root.rglob("*"):
        if path.is_symlink():
            assert not os.readlink(path).startswith("/"), path
            assert path.resolve().is_relative_to(root.resolve()), path


def test_a_copied_root_reads_the_same(tmp_path: Path) -> None:
    original = build_node(tmp_path / "node")
    copy = tmp_path / "copy"
    shutil.copytree(original, copy, symlinks=True)
    shutil.rmtree(original)
    host = HostRoot(copy)
    assert host.pci_address("eth1") == "0000:00:06.0"
    assert host.pci_driver("0000:00:06.0") == "mlx5_core"
    assert (copy / "sys/class/net/eth1/device/driver").resolve().is_dir()


def test_build_is_repeatable_and_incremental(tmp_path: Path) -> None:
    builder = HostRootBuilder(tmp_path / "n").nic("eth0", "02:00:00:00:00:01", pci="0000:00:04.0")
    builder.build()
    builder.nic("eth0", "02:00:00:00:00:01", pci="0000:00:04.0", driver="gve").build()
    builder.nic("eth2", "02:00:00:00:00:02").build()
    host = HostRoot(tmp_path / "n")
    assert [d.name for d in host.net_devices()] == ["eth0", "eth2"]
    assert host.pci_driver("0000:00:04.0") == "gve"


def test_pci_device_without_netdev(tmp_path: Path) -> None:
    root = HostRootBuilder(tmp_path / "n").pci_device("0000:8a:00.0", driver="nvidia").build()
    assert HostRoot(root).pci_driver("0000:8a:00.0") == "nvidia"
    assert HostRoot(root).net_devices() == []


def test_ipoib_address_is_the_nics_hardware_address(tmp_path: Path) -> None:
    # DRANET sends an IPoIB netdev's 20-byte address as mac_address.
    ipoib = "00:00:10:49:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:d4:b5:3e"
    root = (
        HostRootBuilder(tmp_path / "n")
        .nic("ib0", ipoib.upper().replace(":", "-"), mtu=2044)
        .nic("tun0", "00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00")
        .build()
    )
    host = HostRoot(root)
    assert host.read_text("/sys/class/net/ib0/address") == ipoib
    # A 16-byte tunnel address is no hardware address Go would parse.
    assert host.net_devices() == [
        DeviceIdentifiers(name="ib0", mac_address=ipoib),
        DeviceIdentifiers(name="tun0"),
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.nic("a-very-long-interface-name", "02:00:00:00:00:01"),
        lambda b: b.nic("eth0", "02:00:00:00:00:01", driver="gve"),
        lambda b: b.nic("eth0", "02:00:00:00:00:01", pci="05.0"),
        lambda b: b.infiniband("mlx5_0", "nonsense"),
        lambda b: b.inet6("10.0.0.1", 64, "eth0"),
        lambda b: b.inet6("2001:db8::1", 129, "eth0"),
    ],
)
def test_builder_rejects_impossible_nodes(tmp_path: Path, call: object) -> None:
    with pytest.raises(ValueError):
        call(HostRootBuilder(tmp_path))  # type: ignore[operator]


def test_ipv6_default_gateway_from_the_fib(tmp_path: Path) -> None:
    root = (
        HostRootBuilder(tmp_path / "n")
        .nic("eth0", "02:00:00:00:00:01")
        .nic("eth1", "02:00:00:00:00:02")
        .ipv6_route("fd00:1::/64", None, "eth0", metric=256)
        .ipv6_route("::/0", "fe80::1", "eth0", metric=1024)
        .ipv6_route("::/0", "fe80::2", "eth0", metric=100)
        .ipv6_route("::/0", None, "eth1")  # on-link default: no gateway
        .build()
    )
    host = HostRoot(root)
    assert len(host.ipv6_routes()) == 4
    assert host.ipv6_default_gateway("eth0") == "fe80::2"  # the lowest metric wins
    assert host.ipv6_default_gateway("eth1") is None
    assert host.ipv6_default_gateway("eth9") is None


def test_ipv6_routes_as_the_kernel_prints_them(tmp_path: Path) -> None:
    """Lines copied from a node: a reject route on lo never counts as a gateway."""
    fib = tmp_path / "proc/net/ipv6_route"
    fib.parent.mkdir(parents=True)
    fib.write_text(
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000009 ffffffff 00000001 00000000 00200203       lo\n"
        "garbage line\n"
    )
    host = HostRoot(tmp_path)
    assert [r.ifname for r in host.ipv6_routes()] == ["eth0", "lo"]
    assert host.ipv6_default_gateway("eth0") == "fe80::1"
    assert host.ipv6_default_gateway("lo") is None


def test_master_and_bus_driver_of_a_vmbus_pair(tmp_path: Path) -> None:
    root = (
        HostRootBuilder(tmp_path / "n")
        .vmbus_nic("eth0", "00:0d:3a:00:00:01", "000d3a00-0001-000d-3a00-0001000d3a00")
        .nic("enP1s1", "00:0d:3a:00:00:01", pci="0001:00:02.0", driver="mlx5_core")
        .enslave("enP1s1", "eth0")
        .build()
    )
    host = HostRoot(root)
    assert host.net_driver("eth0") == "hv_netvsc" and host.pci_address("eth0") is None
    assert host.net_driver("enP1s1") == "mlx5_core" and host.master("enP1s1") == "eth0"
    assert host.master("eth0") is None
