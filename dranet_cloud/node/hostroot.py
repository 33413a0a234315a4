"""Reading a node's sysfs/procfs through a movable root.

Every file a plugin reads about the node goes through :class:`HostRoot`, so a
test or an operator can point the whole framework at a copy of another node's
files (``--host-root``, ``DRANET_CLOUD_HOST_ROOT``).  Symlinks are resolved by
reading their target's last path component, never by following them, because
sysfs links are absolute or relative to the real ``/sys`` and would escape a
copied root.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import NamedTuple

from dranet_cloud.toolkit.hwaddr import link_address
from dranet_cloud.wire.models import DeviceIdentifiers

HOST_ROOT_ENV = "DRANET_CLOUD_HOST_ROOT"

# route flags in /proc/net/ipv6_route (include/uapi/linux/route.h)
RTF_REJECT = 0x0200


class Inet6Address(NamedTuple):
    """One line of ``/proc/net/if_inet6``."""

    address: str  # compressed textual form
    prefix_len: int
    scope: int  # 0x00 global, 0x20 link, 0x10 host
    ifname: str

    @property
    def is_global(self) -> bool:
        return self.scope == 0


class Inet6Route(NamedTuple):
    """One line of ``/proc/net/ipv6_route`` (the kernel's IPv6 FIB dump)."""

    destination: str  # compressed network address
    prefix_len: int
    next_hop: str  # "::" when the route has no gateway
    metric: int
    flags: int
    ifname: str

    @property
    def is_default_via_gateway(self) -> bool:
        """``::/0`` through a next hop, and not an unreachable/prohibit route."""
        return (
            self.prefix_len == 0
            and self.destination == "::"
            and self.next_hop != "::"
            and not self.flags & RTF_REJECT
        )


class HostRoot:
    """A view of a node's ``/sys`` and ``/proc`` under ``root``."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        self._root = os.fspath(root)  # files are read by string path, without Path objects
        self._dmi: dict[str, str | None] | None = None

    @classmethod
    def from_env(cls, root: str | os.PathLike[str] | None = None) -> HostRoot:
        """Explicit argument, else ``DRANET_CLOUD_HOST_ROOT``, else ``/``."""
        return cls(root or os.environ.get(HOST_ROOT_ENV) or "/")

    def __repr__(self) -> str:
        return f"HostRoot({str(self.root)!r})"

    def path(self, absolute: str) -> Path:
        """Map an absolute node path such as ``/sys/class/net`` into the root."""
        return self.root / absolute.lstrip("/")

    def _join(self, absolute: str) -> str:
        return os.path.join(self._root, absolute.lstrip("/"))

    def read_text(self, absolute: str) -> str | None:
        """Stripped file content, or ``None`` when absent or unreadable."""
        try:
            with open(self._join(absolute), errors="replace") as fh:
                return fh.read().strip()
        except (OSError, ValueError):  # ValueError: a NUL in the path
            return None

    def link_name(self, absolute: str) -> str | None:
        """Last component of a symlink's target, without following it."""
        try:
            return os.path.basename(os.readlink(self._join(absolute)).rstrip("/"))
        except (OSError, ValueError):
            return None

    def listdir(self, absolute: str) -> list[str]:
        try:
            return sorted(os.listdir(self._join(absolute)))
        except (OSError, ValueError):
            return []

    # --- DMI -----------------------------------------------------------------

    def dmi_readable(self) -> bool:
        """Whether ``/sys/class/dmi/id`` exists; containers often hide it."""
        return os.path.isdir(self._join("/sys/class/dmi/id"))

    def dmi(self, field: str) -> str | None:
        """One DMI field (``product_name``...), read once and cached."""
        if self._dmi is None:
            self._dmi = {}
        if field not in self._dmi:
            self._dmi[field] = self.read_text(f"/sys/class/dmi/id/{field}")
        return self._dmi[field]

    def dmi_evidence(self, field: str, expected: str) -> str | None:
        """``"DMI <field>=<expected>"`` when the field reads exactly that, else ``None``.

        The form every plugin's local evidence takes, so detection output
        reads the same whichever cloud recognised the node.
        """
        value = self.dmi(field)
        if value is not None and value.strip() == expected:
            return f"DMI {field}={expected}"
        return None

    # --- network devices -------------------------------------------------------

    def net_devices(self) -> list[DeviceIdentifiers]:
        """The node's NICs from ``/sys/class/net`` (loopback excluded)."""
        out: list[DeviceIdentifiers] = []
        for name in self.listdir("/sys/class/net"):
            if name == "lo":
                continue
            mac = link_address(self.read_text(f"/sys/class/net/{name}/address"))
            pci = self.pci_address(name)
            out.append(DeviceIdentifiers(name=name, mac_address=mac, pci_address=pci))
        return out

    def pci_address(self, ifname: str) -> str | None:
        """PCI address behind a NIC, from its ``device`` link (``0000:00:05.0``)."""
        target = self.link_name(f"/sys/class/net/{ifname}/device")
        if target and target.count(":") == 2:
            return target
        return None

    def pci_driver(self, pci_address: str) -> str | None:
        """Kernel driver bound to a PCI device (``efa``, ``gve``, ``erdma``...)."""
        return self.link_name(f"/sys/bus/pci/devices/{pci_address}/driver")

    def infiniband_pci_addresses(self, prefix: str = "") -> dict[str, str]:
        """RDMA device name -> PCI address for ``/sys/class/infiniband/<prefix>*``."""
        out: dict[str, str] = {}
        for dev in self.listdir("/sys/class/infiniband"):
            if not dev.startswith(prefix):
                continue
            pci = self.link_name(f"/sys/class/infiniband/{dev}/device")
            if pci:
                out[dev] = pci
        return out

    def net_driver(self, ifname: str) -> str | None:
        """Driver of the device behind a NIC, PCI or not (``hv_netvsc``, ``mlx5_core``)."""
        return self.link_name(f"/sys/class/net/{ifname}/device/driver")

    def master(self, ifname: str) -> str | None:
        """The upper device a NIC is enslaved to (bond, bridge, Azure's netvsc), if any."""
        return self.link_name(f"/sys/class/net/{ifname}/master")

    def bonding_mode(self, ifname: str) -> str | None:
        """``802.3ad``, ``active-backup``... or ``None`` when not a bond."""
        raw = self.read_text(f"/sys/class/net/{ifname}/bonding/mode")
        return raw.split()[0] if raw else None

    def if_inet6(self) -> list[Inet6Address]:
        """Parse ``/proc/net/if_inet6`` (addr, ifindex, plen, scope, flags, name)."""
        raw = self.read_text("/proc/net/if_inet6") or ""
        out: list[Inet6Address] = []
        for line in raw.splitlines():
            parts = line.split()
            if len(parts) != 6 or len(parts[0]) != 32:
                continue
            try:
                addr = ipaddress.IPv6Address(int(parts[0], 16))
                out.append(Inet6Address(str(addr), int(parts[2], 16), int(parts[3], 16), parts[5]))
            except ValueError:
                continue
        return out

    def ipv6_routes(self) -> list[Inet6Route]:
        """Parse ``/proc/net/ipv6_route``; malformed lines are skipped.

        The file dumps every table the kernel holds, without saying which;
        callers looking for the main table's default route filter by
        destination, next hop and device, which is what a node shows there.
        """
        raw = self.read_text("/proc/net/ipv6_route") or ""
        out: list[Inet6Route] = []
        for line in raw.splitlines():
            parts = line.split()
            if len(parts) != 10 or len(parts[0]) != 32 or len(parts[4]) != 32:
                continue
            try:
                out.append(
                    Inet6Route(
                        destination=str(ipaddress.IPv6Address(int(parts[0], 16))),
                        prefix_len=int(parts[1], 16),
                        next_hop=str(ipaddress.IPv6Address(int(parts[4], 16))),
                        metric=int(parts[5], 16),
                        flags=int(parts[8], 16),
                        ifname=parts[9],
                    )
                )
            except ValueError:
                continue
        return out

    def ipv6_default_gateway(self, ifname: str) -> str | None:
        """The gateway of the lowest-metric IPv6 default route on ``ifname``, if any."""
        routes = [r for r in self.ipv6_routes() if r.ifname == ifname and r.is_default_via_gateway]
        if not routes:
            return None
        return min(routes, key=lambda r: r.metric).next_hop
