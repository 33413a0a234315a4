"""How many attributes the providers may add to a device without DRANET's
ResourceSlice being rejected.

The API server accepts at most 32 attributes plus capacities per device,
DRANET's own included, and rejects the node's *whole* ResourceSlice when one
device has more: the node then publishes nothing.  Kubernetes 1.36 adds a
second cap beside it: at most 48 attribute *values* per device, where a
scalar attribute is one value and a list attribute (``ints``, ``bools``,
``strings``, ``versions``) counts each of its values.  DRANET publishes 18-24
of its own on a NIC, so the providers share what is left.  This module
counts, from the node's sysfs, what DRANET publishes for one NIC (read from
DRANET's inventory code: ``pkg/inventory/db.go``, ``sysfs.go``) and caps the
providers at ``32 - that count`` attributes and ``48 - that count`` values
(DRANET's own are scalars: one value each).

The count is an upper bound on purpose.  Provider attributes are cached per
device, while some of DRANET's depend on state that changes at run time
(addresses, tc/tcx eBPF programs a CNI attaches later); those are counted as
present, so the cap still holds after they appear.  Counting rules:

* a netdev: ``ifName``, ``mac``, ``mtu``, ``encapsulation``, ``alias``,
  ``state``, ``type``, ``ebpf``, ``sriov``, ``virtual`` always; ``ipv4``,
  ``ipv6``, ``tcFilterNames``, ``tcxProgramNames`` always (run-time state);
  ``sriovVfs`` when ``device/sriov_totalvfs`` > 0; ``isSriovVf`` when
  ``device/physfn`` is a link;
* a PCI function (with or without a netdev): ``pciAddress``,
  ``resource.kubernetes.io/pcieRoot``, ``pciVendor``, ``pciDevice``,
  ``pciSubsystem`` (DRANET's PCI database names them whenever the device is
  listed), ``numaNode`` and ``resource.kubernetes.io/numaNode`` unless
  ``numa_node`` reads negative;
* every device: ``rdma``; ``rdmaDevice`` when an RDMA device sits on the
  netdev (``device/infiniband/*``) or on the PCI function
  (``/sys/class/infiniband/*/device``);
* DRANET sets no capacities.

A device the node's files do not show at all is charged DRANET's maximum
(:data:`DRANET_MAX`).  ``--dranet-attribute-floor N`` raises the count to
at least ``N`` on every device, for a DRANET build that publishes more than
the one read here; it can only lower the providers' budget, never raise it,
so no setting can make the node publish a slice the API server rejects.

Ranking: the host keeps each plugin's most useful attributes first.  A plugin
ranks them with the ``attribute_ranking`` hook, or by the order of the mapping
``device_attributes`` returns (see :mod:`dranet_cloud.contract.hookspecs`).  The cloud
plugin's attributes fill the budget first, then each enricher's in turn.
Attributes are taken in rank order while both caps have room; one that does
not fit (no attribute left, or more values than are left) is dropped, and a
lower-ranked one that still fits is kept, so a higher-ranked attribute never
loses its place to a lower-ranked one.  Every drop is logged once per device,
attribute and plugin, naming the cap it broke.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cachetools import LRUCache

from dranet_cloud.host.attribute_limits import MAX_ATTRIBUTE_VALUES, MAX_ATTRIBUTES, value_count
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import described_nic, local_nics, resolve_nic
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers

log = logging.getLogger(__name__)

DRA = "dra.net"
STANDARD = "resource.kubernetes.io"

# Link attributes DRANET publishes on every netdev, plus the ones that follow
# run-time state (counted as present: they may appear after we answered).
_LINK = ("ifName", "mac", "mtu", "encapsulation", "alias", "state", "type", "ebpf", "sriov")
NETDEV_ALWAYS = tuple(f"{DRA}/{n}" for n in (*_LINK, "virtual"))
NETDEV_RUNTIME = tuple(f"{DRA}/{n}" for n in ("ipv4", "ipv6", "tcFilterNames", "tcxProgramNames"))
PCI_ALWAYS = (
    f"{DRA}/pciAddress",
    f"{STANDARD}/pcieRoot",
    f"{DRA}/pciVendor",
    f"{DRA}/pciDevice",
    f"{DRA}/pciSubsystem",
)
PCI_NUMA = (f"{DRA}/numaNode", f"{STANDARD}/numaNode")
RDMA = f"{DRA}/rdma"
RDMA_DEVICE = f"{DRA}/rdmaDevice"
SRIOV_VFS = f"{DRA}/sriovVfs"
IS_SRIOV_VF = f"{DRA}/isSriovVf"
DRANET_CAPACITIES = 0

# Every attribute DRANET knows (23 under dra.net, 2 standard): charged to a
# device the node's files do not show.
DRANET_MAX = (
    len(NETDEV_ALWAYS) + len(NETDEV_RUNTIME) + 2 + len(PCI_ALWAYS) + len(PCI_NUMA) + 2
) + DRANET_CAPACITIES

FLOOR_FLAG = "--dranet-attribute-floor"
_DROP_LOG_SIZE = 4096


@dataclass(frozen=True)
class LocatedNic:
    """Where a device lives in the node's files: its netdev and/or PCI function.

    ``netdev`` is true when DRANET sees a netdev: one was found, or the caller
    named one (a MAC or an interface name) even if it has since moved into a
    pod's namespace, where the host's sysfs no longer shows it.
    """

    ifname: str | None
    pci_address: str | None
    netdev: bool = True
    identity: str = ""  # the resolver's stable key (mac:..., else pci:..., else name:...)


def locate(root: HostRoot, device: DeviceIdentifiers) -> LocatedNic | None:
    """Where ``device`` is on the node, through the core's NIC resolver.

    ``None`` when neither its netdev nor its PCI function is under ``root``.
    A NIC the resolver did not find whose PCI function is still there (its
    netdev moved into a pod) keeps its netdev in DRANET's count when the
    caller named one (a MAC or an interface name).
    """
    nic = resolve_nic(root, device)
    if nic.found:
        return LocatedNic(nic.ifname, nic.pci_address, nic.ifname is not None, nic.identity)
    pci = nic.pci_address
    if pci is not None and root.path(f"/sys/bus/pci/devices/{pci}").exists():
        named = device.mac is not None or bool(device.name)
        return LocatedNic(None, pci, named, nic.identity)
    return None


def dranet_devices(root: HostRoot) -> list[DeviceIdentifiers]:
    """The devices DRANET publishes on this node, as it asks about them."""
    return [nic.identifiers() for nic in local_nics(root)]


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def _rdma_device(root: HostRoot, nic: LocatedNic) -> str | None:
    if nic.ifname is not None:
        found = root.listdir(f"/sys/class/net/{nic.ifname}/device/infiniband")
        if found:
            return found[0]
    if nic.pci_address is not None:
        for dev, pci in root.infiniband_pci_addresses().items():
            if pci == nic.pci_address:
                return dev
    return None


def dranet_attributes(root: HostRoot, nic: LocatedNic) -> list[str]:
    """The names of the attributes DRANET publishes for ``nic`` (upper bound)."""
    names: list[str] = []
    if nic.netdev:
        if nic.pci_address is not None:
            function = f"/sys/bus/pci/devices/{nic.pci_address}"
        else:
            function = f"/sys/class/net/{nic.ifname}/device"
        names += NETDEV_ALWAYS + NETDEV_RUNTIME
        if (_int(root.read_text(f"{function}/sriov_totalvfs")) or 0) > 0:
            names.append(SRIOV_VFS)
        if root.path(f"{function}/physfn").is_symlink():
            names.append(IS_SRIOV_VF)
    if nic.pci_address is not None:
        names += PCI_ALWAYS
        numa = _int(root.read_text(f"/sys/bus/pci/devices/{nic.pci_address}/numa_node"))
        if numa is None or numa >= 0:
            names += PCI_NUMA
    names.append(RDMA)
    if _rdma_device(root, nic) is not None:
        names.append(RDMA_DEVICE)
    return names


@dataclass(frozen=True)
class DeviceBudget:
    """DRANET's count for one device and what is left for the providers.

    ``dranet``/``providers`` count attributes (of 32, capacities included);
    ``dranet_values``/``provider_values`` count values (of 48).
    """

    dranet: int
    providers: int
    source: str  # "sysfs" or why the maximum was charged
    dranet_attributes: tuple[str, ...] = ()
    key: str = ""  # the device's stable identity: drops are recorded and logged under it
    dranet_values: int = 0
    provider_values: int = MAX_ATTRIBUTE_VALUES

    def to_json(self) -> dict[str, object]:
        return {
            "dranet": self.dranet,
            "providers": self.providers,
            "dranet_values": self.dranet_values,
            "provider_values": self.provider_values,
            "source": self.source,
        }


@dataclass
class AttributeBudget:
    """Caps provider attributes per device; logs each drop once."""

    floor: int = 0
    limit: int = MAX_ATTRIBUTES
    value_limit: int = MAX_ATTRIBUTE_VALUES
    _logged: LRUCache[tuple[str, str, str], None] = field(
        default_factory=lambda: LRUCache(maxsize=_DROP_LOG_SIZE), repr=False
    )
    _dropped: LRUCache[str, tuple[str, ...]] = field(
        default_factory=lambda: LRUCache(maxsize=_DROP_LOG_SIZE), repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def with_floor(cls, floor: int) -> AttributeBudget:
        """A budget assuming DRANET publishes at least ``floor`` (0-32) per device."""
        if not 0 <= floor <= MAX_ATTRIBUTES:
            raise ConfigError(
                f"{FLOOR_FLAG} {floor}: expected a whole number from 0 to {MAX_ATTRIBUTES} "
                "(the fewest attributes DRANET is assumed to publish per device)"
            )
        return cls(floor=floor)

    def for_device(self, root: HostRoot, device: DeviceIdentifiers) -> DeviceBudget:
        nic = locate(root, device)
        names: tuple[str, ...] = ()
        key = nic.identity if nic is not None and nic.identity else described_nic(device).identity
        if nic is None:
            count, source = DRANET_MAX, "not found on the node: DRANET's maximum"
            values = DRANET_MAX - DRANET_CAPACITIES
        else:
            names = tuple(dranet_attributes(root, nic))
            count, source = len(names) + DRANET_CAPACITIES, "sysfs"
            values = len(names)  # DRANET's attributes are scalars: one value each
        if self.floor > count:
            count, source = self.floor, f"{source}; raised to {FLOOR_FLAG} {self.floor}"
        # The floor counts attributes DRANET may publish beyond the ones read
        # here; each is at least one value.
        values = max(values, self.floor)
        return DeviceBudget(
            count,
            max(0, self.limit - count),
            source,
            names,
            key,
            dranet_values=values,
            provider_values=max(0, self.value_limit - values),
        )

    def fit(
        self,
        plugin: str,
        device: DeviceIdentifiers,
        attributes: AttributeMap,
        ranking: Sequence[str] | None,
        room: int,
        budget: DeviceBudget,
        value_room: int | None = None,
    ) -> AttributeMap:
        """The best-ranked of ``attributes`` within ``room`` attributes and
        ``value_room`` values (``None``: the device's whole value budget); log
        what is dropped (once).

        Taken in rank order: an attribute that does not fit is dropped and the
        next one is tried, so a lower-ranked scalar may still fill the last
        value a higher-ranked list did not fit in.
        """
        ordered = rank(attributes, ranking)
        values_left = budget.provider_values if value_room is None else value_room
        kept: AttributeMap = {}
        dropped: list[tuple[str, str]] = []
        for name, attr in ordered.items():
            count = value_count(attr)
            if len(kept) >= room:
                dropped.append((name, "attributes"))
            elif count > values_left:
                dropped.append((name, f"values ({count})"))
            else:
                kept[name] = attr
                values_left -= count
        if dropped:
            self._note_drops(plugin, device, dropped, budget)
        return kept

    def dropped(self, budget: DeviceBudget) -> tuple[str, ...]:
        """What was dropped for the device at its last publication (for ``describe``)."""
        with self._lock:
            return self._dropped.get(budget.key, ())

    def clear_drops(self, budget: DeviceBudget) -> None:
        with self._lock:
            self._dropped.pop(budget.key, None)

    def _note_drops(
        self,
        plugin: str,
        device: DeviceIdentifiers,
        dropped: Iterable[tuple[str, str]],
        budget: DeviceBudget,
    ) -> None:
        """Record ``(name, cap)`` drops for ``describe``; log each one once."""
        key = budget.key
        dropped = list(dropped)
        fresh: list[tuple[str, str]] = []
        with self._lock:
            self._dropped[key] = self._dropped.get(key, ()) + tuple(n for n, _ in dropped)
            for name, cap in dropped:
                if (key, plugin, name) not in self._logged:
                    self._logged[(key, plugin, name)] = None
                    fresh.append((name, cap))
        for name, cap in fresh:
            if cap == "attributes":
                log.warning(
                    "plugin %s, device %s: dropping attribute %r: over the attribute budget "
                    "(%d of %d per device are DRANET's own, %s; %d left for providers). "
                    "Rank it higher with the attribute_ranking hook, or publish fewer "
                    "attributes.",
                    plugin,
                    device.label(),
                    name,
                    budget.dranet,
                    self.limit,
                    budget.source,
                    budget.providers,
                )
            else:
                log.warning(
                    "plugin %s, device %s: dropping attribute %r: its %s do not fit the "
                    "attribute-value budget (a device carries at most %d values, a list "
                    "counting each; %d are DRANET's own, %s; %d left for providers). "
                    "Rank it higher with the attribute_ranking hook, or publish shorter lists.",
                    plugin,
                    device.label(),
                    name,
                    cap,
                    self.value_limit,
                    budget.dranet_values,
                    budget.source,
                    budget.provider_values,
                )


def rank(attributes: AttributeMap, ranking: Sequence[str] | None) -> AttributeMap:
    """``attributes`` reordered: names in ``ranking`` first, in its order; then
    the rest in the order the plugin returned them.

    A ranking entry ending in ``/`` names a whole domain
    (``"resource.aws.com/"``).
    """
    if not ranking:
        return dict(attributes)
    position: dict[str, int] = {}
    for i, entry in enumerate(ranking):
        position.setdefault(entry, i)

    def order(item: tuple[int, str]) -> tuple[int, int]:
        index, name = item
        if name in position:
            return (position[name], index)
        domain = name.rpartition("/")[0] + "/"
        if domain in position:
            return (position[domain], index)
        return (len(position), index)

    names = sorted(enumerate(attributes), key=order)
    return {name: attributes[name] for _, name in names}
