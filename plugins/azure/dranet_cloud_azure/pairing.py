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
import logging
from dataclasses import dataclass

from dranet_cloud.hostroot import HostRoot
from dranet_cloud.models import DeviceIdentifiers, normalize_mac

from .constants import NETVSC_DRIVER

log = logging.getLogger(__name__)


class Role(enum.Enum):
    PLAIN = "plain"  # no accelerated-networking pair (IPoIB, a NIC without AN)
    SYNTHETIC = "synthetic"  # hv_netvsc with a VF enslaved to it
    VF = "vf"  # the VF of a synthetic NIC


@dataclass(frozen=True)
class LocalNic:
    """A NIC of this node as sysfs shows it, and its place in a pair."""

    name: str
    mac: str | None
    pci: str | None
    role: Role = Role.PLAIN
    partner: str | None = None  # the other half's interface name


def _mac(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return normalize_mac(text)
    except ValueError:
        return None


def _mac_of(host_root: HostRoot, ifname: str) -> str | None:
    return _mac(host_root.read_text(f"/sys/class/net/{ifname}/address"))


def find_local(host_root: HostRoot, device: DeviceIdentifiers) -> DeviceIdentifiers | None:
    """The local NIC ``device`` names: by MAC, then PCI address, then name.

    Two NICs share a MAC exactly when they are an accelerated-networking
    pair; the PCI address (or its absence) then picks the half.
    """
    nics = host_root.net_devices()
    mac = _mac(device.mac_address)
    pci = device.pci_address.lower() if device.pci_address else None
    if mac:
        same = [n for n in nics if n.mac_address == mac]
        if len(same) > 1:
            same = [n for n in same if (n.pci_address or None) == pci] or same
        if len(same) > 1 and device.name:
            same = [n for n in same if n.name == device.name] or same
        if same:
            return same[0]
    if pci:
        by_pci = [n for n in nics if (n.pci_address or "").lower() == pci]
        if by_pci:
            return by_pci[0]
    if device.name and not mac and not pci:
        return next((n for n in nics if n.name == device.name), None)
    return None


def classify(host_root: HostRoot, nic: DeviceIdentifiers) -> LocalNic:
    """Place a local NIC in its accelerated-networking pair, if it has one."""
    name, mac = nic.name, nic.mac_address
    base = LocalNic(name=name, mac=mac, pci=nic.pci_address)
    if not name or not mac:
        return base
    master = host_root.master(name)
    if (
        master
        and host_root.net_driver(master) == NETVSC_DRIVER
        and _mac_of(host_root, master) == mac
    ):
        return LocalNic(name, mac, nic.pci_address, Role.VF, master)
    if host_root.net_driver(name) == NETVSC_DRIVER:
        for other in host_root.listdir("/sys/class/net"):
            if (
                other != name
                and host_root.master(other) == name
                and _mac_of(host_root, other) == mac
            ):
                return LocalNic(name, mac, nic.pci_address, Role.SYNTHETIC, other)
    return base


def resolve(host_root: HostRoot, device: DeviceIdentifiers) -> LocalNic | None:
    """The local NIC behind ``device`` and its pair role; ``None`` when not on this node."""
    found = find_local(host_root, device)
    return classify(host_root, found) if found is not None else None
