"""Which local NIC a device is, and Azure's accelerated-networking pairs.

With accelerated networking, Azure gives a VM two netdevs per NIC that share
one MAC: the synthetic ``hv_netvsc`` NIC (``eth1``, on VMBus, no PCI
address), which owns the IP configuration, and a Mellanox VF (``enP…s…``,
``mlx5_core``, a PCI device) that the kernel enslaves to it
(``/sys/class/net/<vf>/master``) as a transparent fast path.  Traffic and
addresses live on the synthetic NIC; the VF only carries its packets.

What DRANET publishes: it excludes the default-route uplink and every
device enslaved below it, so the primary NIC's pair is not published at
all; for any other NIC it publishes both halves, the synthetic one under its
interface name and the VF under its PCI name, both with the same MAC.  A
lookup by MAC alone is therefore ambiguous, and this module breaks the tie
the way the identifiers allow: a device that arrives with a PCI address is
the VF, one without is the synthetic NIC.  Per-NIC facts (the routing) land
on the synthetic NIC; the VF is marked so a claim can leave it alone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import LocalNic, resolve_nic
from dranet_cloud.toolkit.hwaddr import link_address
from dranet_cloud.wire.models import DeviceIdentifiers

from .constants import NETVSC_DRIVER


class Role(enum.Enum):
    PLAIN = "plain"  # no accelerated-networking pair (IPoIB, a NIC without AN)
    SYNTHETIC = "synthetic"  # hv_netvsc with a VF enslaved to it
    VF = "vf"  # the VF of a synthetic NIC


@dataclass(frozen=True)
class PairedNic:
    """A NIC of this node as sysfs shows it, and its place in a pair."""

    name: str
    mac: str | None
    pci: str | None
    role: Role = Role.PLAIN
    partner: str | None = None  # the other half's interface name


def _mac_of(host_root: HostRoot, ifname: str) -> str | None:
    return link_address(host_root.read_text(f"/sys/class/net/{ifname}/address"))


def classify(host_root: HostRoot, nic: LocalNic) -> PairedNic | None:
    """Place a NIC found on this node in its accelerated-networking pair, if any.

    ``None`` for a NIC without a netdev (an InfiniBand-only function) or one
    not under the host root.
    """
    name, mac = nic.ifname, nic.mac
    if not nic.found or not name:
        return None
    base = PairedNic(name=name, mac=mac, pci=nic.pci_address)
    if not mac:
        return base
    master = nic.bond_master
    if (
        master
        and host_root.net_driver(master) == NETVSC_DRIVER
        and _mac_of(host_root, master) == mac
    ):
        return PairedNic(name, mac, nic.pci_address, Role.VF, master)
    if host_root.net_driver(name) == NETVSC_DRIVER:
        for other in host_root.listdir("/sys/class/net"):
            if (
                other != name
                and host_root.master(other) == name
                and _mac_of(host_root, other) == mac
            ):
                return PairedNic(name, mac, nic.pci_address, Role.SYNTHETIC, other)
    return base


def resolve(host_root: HostRoot, device: DeviceIdentifiers) -> PairedNic | None:
    """The local NIC behind ``device`` and its pair role; ``None`` when not on this node.

    The core resolver finds it by MAC, then PCI address, then name; among
    netdevs sharing a MAC it takes the one with the given PCI address, else
    the given name, else the one enslaved to nothing: the synthetic NIC.
    """
    return classify(host_root, resolve_nic(host_root, device))
