"""Write a fake node's sysfs/procfs files under a directory.

The layout copies the kernel's: ``/sys/class/net/<if>/device`` is a relative
symlink into ``/sys/devices/pci0000:00/<pci>``, ``/sys/bus/pci/devices/<pci>``
links to the same directory, whose ``driver`` links to
``/sys/bus/pci/drivers/<driver>``.  :class:`dranet_cloud.node.hostroot.HostRoot`
reads links by their last component, so the relative links keep working when
the tree is copied or moved.

Calls record what to write; :meth:`HostRootBuilder.build` writes it (and may
be called again after more calls).  Every method returns the builder so calls
chain.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from dranet_cloud.toolkit.hwaddr import normalize_mac

__all__ = ["HostRootBuilder"]

PCI_BUS_DIR = "sys/devices/pci0000:00"


@dataclass
class _Nic:
    name: str
    mac: str | None
    mtu: int | None
    pci: str | None
    driver: str | None
    bond_mode: str | None
    ifindex: int
    slave_of: str | None = None


@dataclass(frozen=True)
class _Inet6:
    address: ipaddress.IPv6Address
    prefix_len: int
    ifname: str
    scope: int
    flags: int


_BOND_MODE_NUMBERS = {
    "balance-rr": 0,
    "active-backup": 1,
    "balance-xor": 2,
    "broadcast": 3,
    "802.3ad": 4,
    "balance-tlb": 5,
    "balance-alb": 6,
}


def _check_pci(pci: str) -> str:
    parts = pci.split(":")
    if len(parts) != 3 or "." not in parts[2]:
        raise ValueError(f"PCI address {pci!r} must look like 0000:00:05.0")
    return pci.lower()


class HostRootBuilder:
    """Fake node files under ``root`` (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._dmi: dict[str, str] = {}
        self._hypervisor_uuid: str | None = None
        self._nics: dict[str, _Nic] = {}
        self._ib: dict[str, str] = {}
        self._inet6: list[_Inet6] = []
        self._pci_devices: dict[str, str | None] = {}
        self._files: dict[str, str | bytes] = {}
        self._links: dict[str, str] = {}
        self._routes6: list[tuple[ipaddress.IPv6Network, ipaddress.IPv6Address, int, str]] = []

    # --- recording ---------------------------------------------------------------------

    def dmi(self, **fields: str) -> HostRootBuilder:
        """DMI fields (``product_name="Google Compute Engine"``...)."""
        self._dmi.update(fields)
        return self

    def hypervisor_uuid(self, value: str) -> HostRootBuilder:
        """``/sys/hypervisor/uuid`` (Xen-era EC2 starts it with ``ec2``)."""
        self._hypervisor_uuid = value
        return self

    def nic(
        self,
        name: str,
        mac: str | None,
        mtu: int | None = 1500,
        pci: str | None = None,
        driver: str | None = None,
        bond_mode: str | None = None,
        slave_of: str | None = None,
    ) -> HostRootBuilder:
        """A NIC in ``/sys/class/net``; ``pci`` makes it a PCI device, ``driver``
        binds one, ``bond_mode`` (``"802.3ad"``) makes it a bond, ``slave_of``
        enslaves it to that bond: as in the kernel, its ``address`` then shows
        the bond's MAC and ``bonding_slave/perm_hwaddr`` its own."""
        if len(name) > 15 or "/" in name or not name:
            raise ValueError(f"interface name {name!r} is not a valid Linux name")
        if mac is not None:
            try:
                mac = normalize_mac(mac)
            except ValueError:
                mac = mac.strip().lower()  # a tunnel's 4- or 16-byte address stays as given
        if driver is not None and pci is None:
            raise ValueError(f"nic {name}: a driver needs a PCI address")
        if pci is not None:
            pci = _check_pci(pci)
            self._pci_devices[pci] = driver or self._pci_devices.get(pci)
        ifindex = self._nics[name].ifindex if name in self._nics else len(self._nics) + 2
        self._nics[name] = _Nic(name, mac, mtu, pci, driver, bond_mode, ifindex, slave_of)
        return self

    def pci_device(self, pci: str, driver: str | None = None) -> HostRootBuilder:
        """A PCI device with no netdev (an accelerator, an RDMA-only function)."""
        pci = _check_pci(pci)
        self._pci_devices[pci] = driver or self._pci_devices.get(pci)
        return self

    def infiniband(self, name: str, pci: str, driver: str | None = None) -> HostRootBuilder:
        """An RDMA device ``/sys/class/infiniband/<name>`` on PCI device ``pci``."""
        pci = _check_pci(pci)
        self._ib[name] = pci
        self._pci_devices[pci] = driver or self._pci_devices.get(pci)
        return self

    def inet6(
        self,
        address: str,
        prefix_len: int,
        ifname: str,
        scope: int = 0,
        flags: int = 0x80,
    ) -> HostRootBuilder:
        """A line of ``/proc/net/if_inet6`` (scope 0 global, 0x20 link, 0x10 host).

        ``flags`` defaults to ``IFA_F_PERMANENT``.
        """
        addr = ipaddress.IPv6Address(address)
        if not 0 <= prefix_len <= 128:
            raise ValueError(f"prefix length {prefix_len} out of range")
        self._inet6.append(_Inet6(addr, prefix_len, ifname, scope, flags))
        return self

    def vmbus_nic(
        self, name: str, mac: str, guid: str, driver: str = "hv_netvsc", mtu: int | None = 1500
    ) -> HostRootBuilder:
        """A NIC on a non-PCI bus (Hyper-V's VMBus): ``device`` names a GUID, not a PCI address.

        Azure's synthetic NIC looks like this; its accelerated-networking VF
        is a PCI NIC enslaved to it (see :meth:`enslave`).
        """
        self.nic(name, mac, mtu=mtu)
        device = f"/sys/devices/LNXSYSTM:00/LNXSYBUS:00/vmbus/{guid}"
        self.link(f"/sys/class/net/{name}/device", device)
        self.link(f"{device}/driver", f"/sys/bus/vmbus/drivers/{driver}")
        return self

    def enslave(self, child: str, master: str) -> HostRootBuilder:
        """``/sys/class/net/<child>/master`` points at ``master`` (bond port, netvsc VF)."""
        return self.link(f"/sys/class/net/{child}/master", f"/sys/class/net/{master}")

    def ipv6_route(
        self, destination: str, gateway: str | None, ifname: str, metric: int = 1024
    ) -> HostRootBuilder:
        """A line of ``/proc/net/ipv6_route`` (``"::/0"`` via ``gateway`` on ``ifname``)."""
        net = ipaddress.IPv6Network(destination)
        via = ipaddress.IPv6Address(gateway or "::")
        self._routes6.append((net, via, metric, ifname))
        return self

    def file(self, absolute: str, content: str | bytes) -> HostRootBuilder:
        """Any other file (``/proc/cmdline``, a binary pool file...), written verbatim."""
        self._files[absolute] = content
        return self

    def link(self, absolute: str, target: str) -> HostRootBuilder:
        """A symlink at ``absolute`` to ``target`` (both node paths), written relative
        (an SR-IOV VF's ``physfn``...)."""
        self._links[absolute] = target
        return self

    # --- writing ----------------------------------------------------------------------------

    def build(self) -> Path:
        """Write everything; returns the root to hand to ``HostRoot``."""
        self.root.mkdir(parents=True, exist_ok=True)
        for field_name, value in self._dmi.items():
            self._write(f"sys/class/dmi/id/{field_name}", value + "\n")
        if self._hypervisor_uuid is not None:
            self._write("sys/hypervisor/uuid", self._hypervisor_uuid + "\n")
        for pci, driver in self._pci_devices.items():
            self._pci(pci, driver)
        self._dir("sys/class/net")
        for nic in self._nics.values():
            self._nic(nic)
        for name, pci in self._ib.items():
            base = f"sys/class/infiniband/{name}"
            self._dir(base)
            self._link(f"{base}/device", f"{PCI_BUS_DIR}/{pci}")
        self._write("proc/net/if_inet6", self._render_inet6())
        if self._routes6:
            self._write("proc/net/ipv6_route", self._render_routes6())
        for absolute, content in self._files.items():
            self._write(absolute.lstrip("/"), content)
        for absolute, target in self._links.items():
            if not (self.root / target.lstrip("/")).exists():
                self._dir(target.lstrip("/"))  # a device directory nothing else wrote
            self._link(absolute.lstrip("/"), target.lstrip("/"))
        return self.root

    def _nic(self, nic: _Nic) -> None:
        base = f"sys/class/net/{nic.name}"
        self._dir(base)
        mac = nic.mac
        if nic.slave_of is not None:
            bond = self._nics.get(nic.slave_of)
            if bond is None:
                raise ValueError(f"nic {nic.name}: bond {nic.slave_of} is not defined")
            self._dir(f"sys/class/net/{bond.name}")
            self._link(f"{base}/master", f"sys/class/net/{bond.name}")
            if nic.mac is not None:
                self._write(f"{base}/bonding_slave/perm_hwaddr", nic.mac + "\n")
            mac = bond.mac
        if mac is not None:
            self._write(f"{base}/address", mac + "\n")
        if nic.mtu is not None:
            self._write(f"{base}/mtu", f"{nic.mtu}\n")
        self._write(f"{base}/ifindex", f"{nic.ifindex}\n")
        if nic.pci is not None:
            self._link(f"{base}/device", f"{PCI_BUS_DIR}/{nic.pci}")
        if nic.bond_mode is not None:
            mode = nic.bond_mode.split()[0]
            number = _BOND_MODE_NUMBERS.get(mode)
            text = nic.bond_mode if number is None or " " in nic.bond_mode else f"{mode} {number}"
            self._write(f"{base}/bonding/mode", text + "\n")

    def _pci(self, pci: str, driver: str | None) -> None:
        device_dir = f"{PCI_BUS_DIR}/{pci}"
        self._dir(device_dir)
        self._dir("sys/bus/pci/devices")
        self._link(f"sys/bus/pci/devices/{pci}", device_dir)
        if driver is not None:
            driver_dir = f"sys/bus/pci/drivers/{driver}"
            self._dir(driver_dir)
            self._link(f"{device_dir}/driver", driver_dir)
            self._link(f"{driver_dir}/{pci}", device_dir)

    def _render_inet6(self) -> str:
        # Loopback first, like the kernel's table on a real node.
        lines = [f"{'0' * 31}1 01 80 10 80       lo"]
        for entry in self._inet6:
            nic = self._nics.get(entry.ifname)
            ifindex = nic.ifindex if nic is not None else 1
            lines.append(
                f"{entry.address.packed.hex()} {ifindex:02x} {entry.prefix_len:02x} "
                f"{entry.scope:02x} {entry.flags:02x} {entry.ifname:>8}"
            )
        return "\n".join(lines) + "\n"

    def _render_routes6(self) -> str:
        lines = []
        for net, via, metric, ifname in self._routes6:
            flags = 0x0001 | (0x0002 if int(via) else 0)  # RTF_UP, RTF_GATEWAY
            lines.append(
                f"{net.network_address.packed.hex()} {net.prefixlen:02x} {'0' * 32} 00 "
                f"{via.packed.hex()} {metric:08x} 00000001 00000000 {flags:08x} {ifname:>8}"
            )
        return "\n".join(lines) + "\n"

    # --- filesystem helpers -------------------------------------------------------------

    def _dir(self, rel: str) -> Path:
        path = self.root / rel
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write(self, rel: str, content: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    def _link(self, rel: str, target_rel: str) -> None:
        """A symlink at ``rel`` pointing relatively at ``target_rel`` (both under root)."""
        link = self.root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        relative = os.path.relpath(self.root / target_rel, link.parent)
        if link.is_symlink() or link.exists():
            if link.is_symlink() and os.readlink(link) == relative:
                return
            link.unlink()
        link.symlink_to(relative)
