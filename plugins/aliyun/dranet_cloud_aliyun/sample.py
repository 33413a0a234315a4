"""Fake ECS node roots that match the emulator's default fixture.

* ``erdma`` (the default): a GPU instance with its primary ENI ``eth0`` and
  two eRDMA ENIs ``eth1``/``eth2`` whose PCI functions are what
  ``/sys/class/infiniband/erdma_0`` and ``erdma_1`` link to.  ``eth0`` is a
  plain virtio NIC, so ``erdma`` must come out false for it.  Every ENI
  carries the global IPv6 address the metadata lists, on its /64.
* ``bond``: a Lingjun-style node whose RDMA ports ``reth0``/``reth1`` are
  aggregated by LACP into ``bond0`` (``bonding/mode`` ``802.3ad 4``).  The
  bond carries a global /64 and a MAC the metadata does not list, as on a
  real node; the ports' RDMA device is an ``mlx5`` bond, not eRDMA.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from .constants import DMI_PRODUCT_NAME

DEFAULT_VARIANT = "erdma"
VARIANTS = ("erdma", "bond")

PRIMARY = ("eth0", "00:16:3e:2c:8a:10", "0000:00:05.0")
ERDMA_NICS = (
    ("eth1", "00:16:3e:2c:8a:11", "0000:00:06.0", "erdma_0"),
    ("eth2", "00:16:3e:2c:8a:12", "0000:00:07.0", "erdma_1"),
)
PRIMARY_IPV6 = "2408:4005:3cf:7e00:fb1d:22c4:8a0e:5b31"
ERDMA_IPV6 = {
    "eth1": "2408:4005:3cf:7e11:5a0c:91d2:3e47:b6a8",
    "eth2": "2408:4005:3cf:7e12:c4e1:7b9:d25f:1a36",
}
BOND = "bond0"
BOND_MAC = "00:16:3e:5d:01:a0"
BOND_IPV6 = "2408:4005:3cf:7e20::a0"
BOND_PORTS = (
    ("reth0", "00:16:3e:5d:01:a1", "0000:3b:00.0"),
    ("reth1", "00:16:3e:5d:01:a2", "0000:3b:00.1"),
)


def _ecs_base(dest: Path) -> HostRootBuilder:
    name, mac, pci = PRIMARY
    return (
        HostRootBuilder(dest)
        .dmi(
            sys_vendor="Alibaba Cloud",
            product_name=DMI_PRODUCT_NAME,
            product_version="pc-i440fx-2.1",
            bios_vendor="SeaBIOS",
            chassis_vendor="Alibaba Cloud",
        )
        .nic(name, mac, mtu=1500, pci=pci, driver="virtio-pci")
        .inet6(PRIMARY_IPV6, 64, name)
        .inet6("fe80::216:3eff:fe2c:8a10", 64, name, scope=0x20)
    )


def erdma_host(dest: Path) -> SampleHost:
    builder = _ecs_base(dest)
    for name, mac, pci, ib in ERDMA_NICS:
        builder.nic(name, mac, mtu=8500, pci=pci, driver="virtio-pci")
        builder.infiniband(ib, pci)
        builder.inet6(ERDMA_IPV6[name], 64, name)
    root = builder.build()
    return SampleHost(
        root=root,
        description=(
            "ECS GPU instance: eth0 (primary ENI, virtio) and eRDMA ENIs eth1/eth2 "
            "(erdma_0, erdma_1), each with its global IPv6 /64"
        ),
        claim_device="eth1",
    )


def _ipv6_routes(ifname: str, address: str) -> str:
    """``/proc/net/ipv6_route`` of a bond with a global /64 and an RA default route.

    Besides the two routes a pod needs (the on-link /64, the default via the
    router's link-local address) the kernel lists the local /128, the
    link-local /64 and multicast, which the provider must leave out.
    """
    net = ipaddress.IPv6Network(f"{address}/64", strict=False)
    zero = "0" * 32

    def line(dest: str, plen: int, hop: str, metric: int, flags: int) -> str:
        return (
            f"{dest} {plen:02x} {zero} 00 {hop} {metric:08x} 00000001 00000000 "
            f"{flags:08x} {ifname:>8}"
        )

    def hx(addr: str) -> str:
        return ipaddress.IPv6Address(addr).exploded.replace(":", "")

    return (
        "\n".join(
            [
                line(hx(str(net.network_address)), 64, zero, 256, 0x00000001),
                line(hx("fe80::"), 64, zero, 256, 0x00000001),
                line(zero, 0, hx("fe80::1"), 1024, 0x00450003),
                line(hx(address), 128, zero, 0, 0x80200001),
                line(hx("ff00::"), 8, zero, 256, 0x00000001),
            ]
        )
        + "\n"
    )


def bond_host(dest: Path) -> SampleHost:
    builder = _ecs_base(dest)
    for name, mac, pci in BOND_PORTS:
        builder.nic(name, mac, mtu=1500, pci=pci, driver="mlx5_core")
    builder.infiniband("mlx5_bond_0", BOND_PORTS[0][2])
    builder.nic(BOND, BOND_MAC, mtu=1500, bond_mode="802.3ad")
    builder.file(f"/sys/class/net/{BOND}/bonding/slaves", " ".join(p[0] for p in BOND_PORTS))
    builder.inet6(BOND_IPV6, 64, BOND)
    builder.inet6("fe80::216:3eff:fe5d:1a0", 64, BOND, scope=0x20)
    builder.file("/proc/net/ipv6_route", _ipv6_routes(BOND, BOND_IPV6))
    root = builder.build()
    return SampleHost(
        root=root,
        description=(
            "ECS Lingjun node: eth0 (primary ENI) and LACP bond bond0 (802.3ad over "
            "reth0/reth1) carrying the global /64 2408:4005:3cf:7e20::/64"
        ),
        claim_device=BOND,
    )


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """The variant's host root written under ``dest``; ``None`` for unknown variants."""
    key = (variant or DEFAULT_VARIANT).strip().lower()
    if key in ("default", "erdma"):
        return erdma_host(dest)
    if key == "bond":
        return bond_host(dest)
    return None
