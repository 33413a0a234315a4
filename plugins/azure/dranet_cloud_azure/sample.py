"""A fake ``Standard_ND96isr_H100_v5`` node matching the emulator's default fixture.

* ``eth0``: the synthetic ``hv_netvsc`` NIC on VMBus (no PCI address), the
  one IMDS lists, dual stack, with the host's IPv6 default route via
  Azure's gateway ``fe80::1234:5678:9abc``;
* ``enP40524s1``: its accelerated-networking VF (``mlx5_core``, PCI
  ``9e4c:00:02.0``), same MAC, enslaved to ``eth0``;
* ``ib0``-``ib7``: the eight InfiniBand VFs (``0101:00:00.0``-``0108:00:00.0``,
  ``mlx5_ib0``-``mlx5_ib7``) with IPoIB netdevs and 20-byte hardware
  addresses; IMDS does not list them;
* ``/var/lib/hyperv/.kvp_pool_0``: the Hyper-V KVP pool, whose ``IPoIB_Data``
  lists one pair per IB NIC (eight), the KVP MAC being bytes 12-14 and 17-19
  of the NIC's address.

No IPVLAN claim device (Azure hands out no subinterface ranges); the
``azure-ipoib`` profile is demonstrated on ``ib0``.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.toolkit.hwaddr import format_bare_hex, parse_hwaddr

from .constants import DMI_CHASSIS_ASSET_TAG, NETVSC_DRIVER
from .kvp import DEFAULT_POOL_PATH, encode_pool
from .profile import KVP_KEY, PROFILE, kvp_mac

ETH0 = "eth0"
ETH0_MAC = "00:0d:3a:4f:2b:1c"
ETH0_VMBUS = "000d3a4f-2b1c-000d-3a4f-2b1c000d3a4f"
ETH0_IPV6 = "fd5e:9c41:7a2b:10::25"
AZURE_IPV6_GATEWAY = "fe80::1234:5678:9abc"
VF = "enP40524s1"
VF_PCI = "9e4c:00:02.0"
IB_NICS = tuple(
    (
        f"ib{i}",
        f"00:00:01:{0x48 + i:02x}:fe:80:00:00:00:00:00:00:00:15:5d:ff:fd:33:ff:{i:02x}",
        f"{0x0101 + i:04x}:00:00.0",
        f"mlx5_ib{i}",
    )
    for i in range(8)
)
# The address the host assigns each IB NIC (IPoIB_Data in the KVP pool).
IB_ADDRESSES = tuple(f"172.16.1.{10 + i}" for i in range(8))


def ipoib_data(pairs: list[tuple[str, str]]) -> str:
    """``NUMPAIRS:<N>|<12-hex MAC>:<IPv4>|...``, as the Azure host writes it."""
    return "|".join([f"NUMPAIRS:{len(pairs)}", *(f"{mac}:{ip}" for mac, ip in pairs)])


def kvp_pairs(count: int = 8) -> list[tuple[str, str]]:
    """(KVP MAC, address) of the first ``count`` IB NICs of the sample."""
    return [
        (format_bare_hex(kvp_mac(parse_hwaddr(hwaddr))), ip)
        for (_, hwaddr, _, _), ip in list(zip(IB_NICS, IB_ADDRESSES, strict=True))[:count]
    ]


def kvp_records(count: int = 8) -> list[tuple[str, str]]:
    """A KVP pool's records: a few of the host's usual keys, then ``IPoIB_Data``."""
    return [
        ("HostName", "nd-h100-host-17"),
        ("VirtualMachineName", "nd96isr-node-0"),
        (KVP_KEY, ipoib_data(kvp_pairs(count))),
    ]


def nd_h100_v5_host(dest: Path) -> SampleHost:
    builder = (
        HostRootBuilder(dest)
        .dmi(
            sys_vendor="Microsoft Corporation",
            product_name="Virtual Machine",
            product_version="7.0",
            bios_vendor="Microsoft Corporation",
            chassis_vendor="Microsoft Corporation",
            chassis_asset_tag=DMI_CHASSIS_ASSET_TAG,
        )
        .vmbus_nic(ETH0, ETH0_MAC, ETH0_VMBUS, driver=NETVSC_DRIVER, mtu=1500)
        .nic(VF, ETH0_MAC, mtu=1500, pci=VF_PCI, driver="mlx5_core")
        .enslave(VF, ETH0)
        .infiniband("mlx5_an0", VF_PCI)
        .inet6(ETH0_IPV6, 64, ETH0)
        .inet6("fe80::20d:3aff:fe4f:2b1c", 64, ETH0, scope=0x20)
        .ipv6_route("fd5e:9c41:7a2b:10::/64", None, ETH0, metric=256)
        .ipv6_route("::/0", AZURE_IPV6_GATEWAY, ETH0, metric=1024)
    )
    for name, hwaddr, pci, ib in IB_NICS:
        builder.nic(name, hwaddr, mtu=2044, pci=pci, driver="mlx5_core")
        builder.infiniband(ib, pci)
    builder.file(DEFAULT_POOL_PATH, encode_pool(kvp_records()))
    root = builder.build()
    return SampleHost(
        root=root,
        description=(
            "Azure Standard_ND96isr_H100_v5: eth0 (hv_netvsc, dual stack) with its "
            "accelerated-networking VF enP40524s1, and eight InfiniBand VFs ib0-ib7"
        ),
        claim_device=None,
        own_address_claim=(IB_NICS[0][0], PROFILE),
        own_address_nics=tuple(name for name, _, _, _ in IB_NICS),
    )


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """The variant's host root written under ``dest``; ``None`` for unknown variants."""
    key = (variant or "default").strip().lower()
    if key in ("default", "nd-h100-v5"):
        return nd_h100_v5_host(dest)
    return None
