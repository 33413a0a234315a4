"""One identity for a NIC: find the local NIC behind DRANET's DeviceIdentifiers.

``DeviceIdentifiers.name`` is not a stable key.  DRANET sends the interface
name to ``/GetDeviceAttributes``; up to Aug 2026 it sent the DRA device name
(``pci-0000-00-05-0``, or ``net-<base32>`` for an interface whose name is not
a DNS-1123 label) to the other calls; since Sep 2026 it sends the interface
name, or ``""`` for a PCI function with no netdev (EFA, InfiniBand-only).  Two
different NICs can arrive under one name over time (renames, hot-plug, a
reboot that reorders ``eth*``), and one NIC arrives under several names.

So every lookup goes through :func:`resolve_nic`, which matches the node's
NICs by MAC, then PCI address, then name (an interface name or a decoded DRA
device name).  When the identifiers disagree (the MAC names one NIC, the name
another) the MAC wins and the conflict is logged.  The result,
:class:`LocalNic`, carries what plugins read from sysfs (interface name,
ifindex, MTU, driver, bond mode), so no plugin ever opens
``/sys/class/net/<name sent by DRANET>``; and it carries :attr:`LocalNic.identity`
(``mac:...``, else ``pci:...``, else ``name:...``), the one key for caches and
IPAM owners, plus :attr:`LocalNic.keys`, every form the NIC may be known by,
so an allocation made under one form is found under any other.

Resolution reads a handful of sysfs files on every call and caches nothing:
a cached view is exactly what hands one NIC's answer to another.  The host
resolves a claim's device once and passes the result along with the
identifiers (:class:`ResolvedDevice`), so one call reads sysfs once.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import PrivateAttr

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.toolkit.hwaddr import link_address, normalize_mac
from dranet_cloud.toolkit.logsafe import WarnOnce
from dranet_cloud.wire.models import DeviceIdentifiers

log = logging.getLogger(__name__)

MAC_PREFIX = "mac:"
PCI_PREFIX = "pci:"
NAME_PREFIX = "name:"

DRA_PCI_PREFIX = "pci-"
DRA_NET_PREFIX = "net-"

_PCI_ADDRESS = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_DRA_PCI = re.compile(r"^pci-([0-9a-f]{4})-([0-9a-f]{2})-([0-9a-f]{2})-([0-7])$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_LABEL = 63
_MAX_IFNAME = 15
# Bytes the kernel refuses in an interface name (dev_valid_name; isspace includes 0xA0).
_NOT_IN_IFNAMES = frozenset(b"/:\0 \t\n\v\f\r\xa0")
# PCI classes DRANET publishes: network controllers (0x02....).
_NETWORK_CLASS_PREFIX = "0x02"
_NO_NETDEV_DRIVERS = frozenset({"efa"})


def normalize_pci(address: str | None) -> str | None:
    """``0000:00:05.0`` lower-case, or ``None`` when it is not a PCI address."""
    if not address:
        return None
    text = address.strip().lower()
    return text if _PCI_ADDRESS.fullmatch(text) else None


def dra_pci_name(pci_address: str) -> str:
    """DRANET's device name for a PCI function: ``0000:00:05.0`` -> ``pci-0000-00-05-0``."""
    return DRA_PCI_PREFIX + pci_address.replace(":", "-").replace(".", "-")


def could_be_ifname(name: str) -> bool:
    """Whether Linux would accept ``name`` for a network interface.

    The kernel's rule, on the name's bytes: 1 to 15 of them, not ``.`` or
    ``..``, and none of ``/``, ``:``, NUL or a byte its ``isspace`` counts
    (ASCII white space and 0xA0).  A name sent in a request that fails this
    is no NIC of this node, and must not become part of a sysfs path (a NUL
    makes ``open`` raise).
    """
    raw = name.encode("utf-8", "surrogatepass")
    if raw in (b"", b".", b"..") or len(raw) > _MAX_IFNAME:
        return False
    return not any(byte in _NOT_IN_IFNAMES for byte in raw)


def dra_interface_name(ifname: str) -> str:
    """DRANET's device name for a non-PCI interface.

    The name itself when it is a DNS-1123 label, else ``net-`` + the
    lower-case unpadded base32 of it.
    """
    if not ifname:
        return ""
    if len(ifname) <= _MAX_LABEL and _DNS1123_LABEL.fullmatch(ifname):
        return ifname
    encoded = base64.b32encode(ifname.encode()).decode().rstrip("=").lower()
    return DRA_NET_PREFIX + encoded


def dra_device_name(ifname: str | None, pci_address: str | None) -> str | None:
    """What DRANET calls this NIC in its ResourceSlice (gen1 sends it as ``name``)."""
    if pci_address:
        return dra_pci_name(pci_address)
    return dra_interface_name(ifname) if ifname else None


def decode_dra_name(name: str) -> tuple[str | None, str | None]:
    """``(pci_address, ifname)`` a DRA device name stands for; ``(None, None)`` otherwise.

    ``pci-0000-00-05-0`` -> ``("0000:00:05.0", None)``;
    ``net-mv2gq3bqgexdcmbq`` -> ``(None, "eth0.100")``.  Plain interface names
    are not DRA-encoded and decode to nothing.
    """
    text = name.strip().lower()
    match = _DRA_PCI.fullmatch(text)
    if match:
        domain, bus, dev, fn = match.groups()
        return f"{domain}:{bus}:{dev}.{fn}", None
    if text.startswith(DRA_NET_PREFIX):
        payload = text[len(DRA_NET_PREFIX) :].upper()
        if not payload or not re.fullmatch(r"[A-Z2-7]+", payload):
            return None, None
        try:
            raw = base64.b32decode(payload + "=" * (-len(payload) % 8))
            ifname = raw.decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None, None
        if could_be_ifname(ifname) and ifname.isprintable():
            return None, ifname
    return None, None


def legacy_keys(device: str) -> frozenset[str]:
    """The keys of an IPAM owner written before identities existed (schema 1).

    Schema-1 owners were keyed by ``name or mac or pci_address``, so the stored
    string is an interface name, a DRA device name, a MAC or a PCI address.
    """
    keys = {device}
    try:
        keys.add(MAC_PREFIX + normalize_mac(device))
        return frozenset(keys)
    except ValueError:
        pass
    pci = normalize_pci(device)
    if pci is not None:
        keys.add(PCI_PREFIX + pci)
        return frozenset(keys)
    keys.add(NAME_PREFIX + device)
    dra_pci, dra_if = decode_dra_name(device)
    if dra_pci:
        keys.add(PCI_PREFIX + dra_pci)
    if dra_if:
        keys.add(NAME_PREFIX + dra_if)
    return frozenset(keys)


@dataclass(frozen=True)
class LocalNic:
    """A NIC as this node sees it (or as the caller described it, when not found).

    ``ifname`` is ``None`` for a PCI function with no netdev.  ``found`` says
    whether the NIC was found under the host root; when it was not (a
    passthrough NIC already moved into a pod, a host root without
    ``/sys/class/net``) every field comes from the identifiers alone.
    """

    ifname: str | None
    mac: str | None
    pci_address: str | None
    found: bool
    ifindex: int | None = None
    mtu: int | None = None
    driver: str | None = None
    bond_mode: str | None = None
    bond_master: str | None = None
    # True for the lower half of a pair that shows its master's MAC as its
    # own with no permanent MAC behind it (Azure's accelerated-networking VF
    # under its hv_netvsc NIC): the MAC then names the master, so this NIC is
    # identified by its PCI address instead.
    mac_shared: bool = False
    given_name: str = ""
    _extra_names: tuple[str, ...] = field(default=(), repr=False)

    @property
    def dra_name(self) -> str | None:
        """DRANET's device name for this NIC."""
        return dra_device_name(self.ifname, self.pci_address)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name DRANET may send for this NIC: interface name, DRA name, given name."""
        out: list[str] = []
        for name in (self.ifname, self.dra_name, *self._extra_names):
            if name and name not in out:
                out.append(name)
        return tuple(out)

    @property
    def identity(self) -> str:
        """The stable key: ``mac:<mac>``, else ``pci:<address>``, else ``name:<name>``.

        A NIC whose MAC is its master's (``mac_shared``) is keyed by PCI address,
        so the two halves of a pair never share a cache entry or an IPAM owner.
        """
        if self.mac and not self.mac_shared:
            return MAC_PREFIX + self.mac
        if self.pci_address:
            return PCI_PREFIX + self.pci_address
        names = self.names
        return NAME_PREFIX + (names[0] if names else "")

    @functools.cached_property
    def keys(self) -> frozenset[str]:
        """Every key this NIC may have been recorded under (the identity included).

        Computed once per resolution: the host, the attribute budget and the
        IPAM owner of one call each ask.
        """
        keys = {self.identity}
        if self.mac and not self.mac_shared:
            keys.add(MAC_PREFIX + self.mac)
        if self.pci_address:
            keys.add(PCI_PREFIX + self.pci_address)
        keys.update(NAME_PREFIX + n for n in self.names)
        return frozenset(keys)

    @property
    def is_lacp_bond(self) -> bool:
        return self.bond_mode == "802.3ad"

    def identifiers(self) -> DeviceIdentifiers:
        """The identifiers plugins get: interface name (or the given name), MAC, PCI."""
        name = self.ifname if self.ifname is not None else ("" if self.found else self.given_name)
        return DeviceIdentifiers(name=name, mac_address=self.mac, pci_address=self.pci_address)

    def label(self) -> str:
        parts = [self.ifname or self.given_name or "(no netdev)"]
        parts += [p for p in (self.mac, self.pci_address) if p]
        return "/".join(parts)


@dataclass(frozen=True)
class _Netdev:
    name: str
    mac: str | None
    pci: str | None
    master: str | None


def _read_netdev(root: HostRoot, name: str) -> _Netdev | None:
    base = f"/sys/class/net/{name}"
    raw_mac = root.read_text(f"{base}/address")
    if raw_mac is None and not root.path(base).is_dir():
        return None
    mac = link_address(raw_mac)
    pci = normalize_pci(root.pci_address(name))
    master = root.link_name(f"{base}/master")
    return _Netdev(name, mac, pci, master)


def _netdevs(root: HostRoot) -> list[_Netdev]:
    out = []
    for name in root.listdir("/sys/class/net"):
        if name == "lo":
            continue
        dev = _read_netdev(root, name)
        if dev is not None:
            out.append(dev)
    return out


def _int_file(root: HostRoot, path: str) -> int | None:
    raw = root.read_text(path)
    return int(raw) if raw is not None and raw.isdigit() else None


def _permanent_mac(root: HostRoot, name: str) -> str | None:
    return link_address(root.read_text(f"/sys/class/net/{name}/bonding_slave/perm_hwaddr"))


def _from_netdev(root: HostRoot, dev: _Netdev, given_name: str) -> LocalNic:
    base = f"/sys/class/net/{dev.name}"
    mac = dev.mac
    shared = False
    if dev.master is not None:
        # A bond slave shows the bond's MAC; its own is the permanent one.
        permanent = _permanent_mac(root, dev.name)
        mac = permanent or mac
        if permanent is None and dev.pci is not None and mac is not None:
            master = _read_netdev(root, dev.master)
            shared = master is not None and master.mac == mac
    mode = root.bonding_mode(dev.name)
    return LocalNic(
        ifname=dev.name,
        mac=mac,
        pci_address=dev.pci,
        found=True,
        ifindex=_int_file(root, f"{base}/ifindex"),
        mtu=_int_file(root, f"{base}/mtu"),
        driver=root.pci_driver(dev.pci) if dev.pci else None,
        bond_mode=mode,
        bond_master=dev.master,
        mac_shared=shared,
        given_name=given_name,
    )


def _pci_function(root: HostRoot, pci: str, given_name: str) -> LocalNic | None:
    """A PCI function with no netdev (EFA, InfiniBand-only), when it exists."""
    if not root.path(f"/sys/bus/pci/devices/{pci}").exists():
        return None
    return LocalNic(
        ifname=None,
        mac=None,
        pci_address=pci,
        found=True,
        driver=root.pci_driver(pci),
        given_name=given_name,
    )


_conflicts = WarnOnce(log)


def _pick(candidates: list[_Netdev], pci: str | None, names: list[str]) -> _Netdev:
    """Among netdevs sharing a MAC (a bond and its slaves), the one the caller meant."""
    for dev in candidates:
        if pci and dev.pci == pci:
            return dev
    for dev in candidates:
        if dev.name in names:
            return dev
    masters = [d for d in candidates if d.master is None]
    return (masters or candidates)[0]


def _name_forms(name: str) -> tuple[list[str], str | None]:
    """(interface names, PCI address) a given ``name`` may stand for."""
    if not name:
        return [], None
    dra_pci, dra_if = decode_dra_name(name)
    ifnames = [name] + ([dra_if] if dra_if else [])
    return ifnames, dra_pci


def described_nic(device: DeviceIdentifiers) -> LocalNic:
    """The NIC as the identifiers alone describe it (``found=False``).

    Used when the NIC is not under the host root: a passthrough NIC already
    in a pod, a node whose ``/sys/class/net`` is not visible.  Its
    :attr:`~LocalNic.identity` is the key these identifiers alone give
    (``mac:``, else ``pci:``, else ``name:``); :func:`resolve_nic` also looks
    at the node, so a name-only call gets the NIC's MAC identity there.  (The
    wire model :class:`DeviceIdentifiers` has no such key of its own: the rule
    lives here alone, and the models do not import this module back.)
    """
    given = device.name or ""
    ifnames, name_pci = _name_forms(given)
    return LocalNic(
        ifname=(ifnames[-1] if ifnames and name_pci is None else None),
        mac=device.mac,
        pci_address=normalize_pci(device.pci_address) or name_pci,
        found=False,
        given_name=given,
        _extra_names=(given,) if given else (),
    )


class ResolvedDevice(DeviceIdentifiers):
    """The identifiers of a NIC already resolved on a host root, carrying that NIC.

    The host resolves a claim's device once and hands plugins this (the
    hookspecs' ``device`` argument is still a :class:`DeviceIdentifiers`):
    :func:`resolve_nic` on the same host root answers with :attr:`nic`
    without reading sysfs, so the plugin, the attribute budget and the IPAM
    owner all see the NIC the host saw.  It compares equal to plain
    identifiers with the same fields.
    """

    _nic: LocalNic | None = PrivateAttr(default=None)
    _root: HostRoot | None = PrivateAttr(default=None)
    _built: tuple[str, str | None, str | None] | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, host_root: HostRoot, nic: LocalNic) -> ResolvedDevice:
        ids = nic.identifiers()
        out = cls.model_construct(name=ids.name, mac_address=ids.mac, pci_address=ids.pci_address)
        out._nic, out._root, out._built = nic, host_root, out._fields()
        return out

    def _fields(self) -> tuple[str, str | None, str | None]:
        return (self.name, self.mac_address, self.pci_address)

    @property
    def nic(self) -> LocalNic:
        assert self._nic is not None, "ResolvedDevice built without ResolvedDevice.of"
        return self._nic

    def resolved_on(self, host_root: HostRoot) -> LocalNic | None:
        """The carried NIC when it was resolved on ``host_root``, else ``None``.

        ``None`` too once a field was changed (a copy with an update, an
        assignment): the NIC then no longer stands for these identifiers.
        """
        if self._root is not host_root or self._built != self._fields():
            return None
        return self._nic

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceIdentifiers):
            return NotImplemented
        return self._fields() == (other.name, other.mac_address, other.pci_address)

    __hash__ = None  # type: ignore[assignment]  # mutable, like every model

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> ResolvedDevice:
        """A shallow copy is a deep one (the fields are strings); the NIC
        (immutable) and the host root are shared, never copied."""
        return self.model_copy()


def resolve_device(host_root: HostRoot, device: DeviceIdentifiers) -> ResolvedDevice:
    """``device`` resolved on ``host_root`` (at most one resolution, however often asked)."""
    if isinstance(device, ResolvedDevice) and device.resolved_on(host_root) is not None:
        return device
    return ResolvedDevice.of(host_root, resolve_nic(host_root, device))


def resolve_nic(host_root: HostRoot, device: DeviceIdentifiers) -> LocalNic:
    """The local NIC ``device`` means; the carried one for a :class:`ResolvedDevice`."""
    if isinstance(device, ResolvedDevice):
        nic = device.resolved_on(host_root)
        if nic is not None:
            return nic
    return _resolve_nic(host_root, device)


def _resolve_nic(host_root: HostRoot, device: DeviceIdentifiers) -> LocalNic:
    """The local NIC ``device`` means: by MAC, then PCI address, then name.

    Never raises for an unknown NIC: it returns a :class:`LocalNic` with
    ``found=False`` built from the identifiers, whose identity is still the
    MAC, else the PCI address (also decoded from a ``pci-...`` name), else
    the name (decoded from ``net-...``).
    """
    mac = device.mac
    pci = normalize_pci(device.pci_address)
    given = device.name or ""
    ifnames, name_pci = _name_forms(given)

    # Fast path: the name is an interface that agrees with the MAC and PCI given.
    for ifname in ifnames:
        if not could_be_ifname(ifname):
            continue
        dev = _read_netdev(host_root, ifname)
        if dev is None:
            continue
        mac_ok = (
            mac is None
            or dev.mac == mac
            or (dev.master is not None and _permanent_mac(host_root, dev.name) == mac)
        )
        if mac_ok and (pci is None or dev.pci == pci):
            return _from_netdev(host_root, dev, given)
        break

    devs = _netdevs(host_root)
    chosen: _Netdev | None = None
    how = ""
    if mac is not None:
        matches = [d for d in devs if d.mac == mac]
        if not matches:
            matches = [d for d in devs if d.master and _permanent_mac(host_root, d.name) == mac]
        if matches:
            chosen, how = _pick(matches, pci, ifnames), "MAC"
    want_pci = pci or name_pci
    if chosen is None and want_pci is not None:
        matches = [d for d in devs if d.pci == want_pci]
        if matches:
            chosen, how = _pick(matches, None, ifnames), "PCI address"
        elif mac is None:
            function = _pci_function(host_root, want_pci, given)
            if function is not None:
                _check_name(host_root, function, ifnames, name_pci, devs, "PCI address")
                return function
    if chosen is None and ifnames and mac is None and pci is None:
        for dev in devs:
            if dev.name in ifnames:
                chosen, how = dev, "name"
                break
    if chosen is None:
        return described_nic(device)
    nic = _from_netdev(host_root, chosen, given)
    _check_name(host_root, nic, ifnames, name_pci, devs, how)
    if mac is not None and how != "MAC":
        _conflicts.warn(
            ("mac", mac, nic.identity),
            "device %s: no NIC on this node has MAC %s; answering for NIC %s, matched by %s "
            "(its MAC changed, or the identifiers are stale)",
            device.label(),
            mac,
            nic.label(),
            how,
        )
    if pci is not None and nic.pci_address != pci:
        _conflicts.warn(
            ("pci", device.label(), nic.identity),
            "device %s: the %s names NIC %s, but PCI address %s does not belong to it; "
            "answering for %s (matched by %s)",
            device.label(),
            how,
            nic.label(),
            pci,
            nic.label(),
            how,
        )
    return nic


def _check_name(
    root: HostRoot,
    nic: LocalNic,
    ifnames: list[str],
    name_pci: str | None,
    devs: list[_Netdev],
    how: str,
) -> None:
    """Log when the name given is another NIC's than the one matched by MAC or PCI.

    ``name_pci`` is the PCI address a gen1 DRA device name (``pci-...``)
    stands for: no netdev carries that name, so the NIC it names is found by
    its PCI function.
    """
    if not ifnames or nic.ifname in ifnames:
        return
    if nic.dra_name is not None and nic.dra_name in ifnames:
        return
    other = next((d.name for d in devs if d.name in ifnames), None)
    if other is None and name_pci is not None and name_pci != nic.pci_address:
        other = next((d.name for d in devs if d.pci == name_pci), None)
        if other is None and root.path(f"/sys/bus/pci/devices/{name_pci}").exists():
            other = f"(no netdev)/{name_pci}"
    if other is None:
        return  # a name no local NIC carries (yet): nothing contradicts the match
    _conflicts.warn(
        ("name", ifnames[0], nic.identity),
        "device name %r is NIC %s on this node, but the %s identifies NIC %s; "
        "answering for %s (the name is not a stable identity)",
        ifnames[0],
        other,
        how,
        nic.label(),
        nic.label(),
    )


def local_nics(host_root: HostRoot) -> list[LocalNic]:
    """Every NIC DRANET could publish on this node.

    Netdevs from ``/sys/class/net`` (loopback excluded), then PCI network
    functions with no netdev (an EFA, an InfiniBand-only function): a
    network-class (``0x02....``) function, one an ``/sys/class/infiniband``
    device sits on, or one bound to a driver that never creates a netdev.
    """
    nics = [_from_netdev(host_root, d, d.name) for d in _netdevs(host_root)]
    with_netdev = {n.pci_address for n in nics if n.pci_address}
    rdma = {normalize_pci(p) for p in host_root.infiniband_pci_addresses().values()}
    for raw in host_root.listdir("/sys/bus/pci/devices"):
        pci = normalize_pci(raw)
        if pci is None or pci in with_netdev:
            continue
        klass = host_root.read_text(f"/sys/bus/pci/devices/{raw}/class") or ""
        driver = host_root.pci_driver(pci)
        if klass.startswith(_NETWORK_CLASS_PREFIX) or pci in rdma or driver in _NO_NETDEV_DRIVERS:
            nics.append(LocalNic(ifname=None, mac=None, pci_address=pci, found=True, driver=driver))
    return nics
