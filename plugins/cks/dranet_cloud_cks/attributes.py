"""The attribute hook of the CKS plugin: DRANET's ``coreweave.dra.net/``
attributes for one device, from the snapshot's Node labels.

Every device gets the node-wide attributes of :data:`.labels.NODE_ATTRIBUTES`;
a device whose RDMA device has a neighbour label also gets ``leafSwitch``.
The RDMA device is found by the device's PCI function (the snapshot maps
``/sys/class/infiniband/*/device`` by PCI address); without one, an ``ibp*``
interface name is taken as the RDMA device's name, as DRANET's CKS provider
(PR #302) does.  An empty value publishes nothing; a value over 64 bytes is
dropped with a warning, never cut.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from .labels import (
    IB_NAME_PREFIX,
    LEAF_SWITCH,
    MAX_VALUE_BYTES,
    NODE_ATTRIBUTES,
    neighbor_label,
    normalize_pci,
    qualified,
)
from .snapshot import CksInstance

log = logging.getLogger(__name__)


def usable(name: str, value: str | None, device: str) -> str | None:
    """``value`` when publishable; ``None`` for empty, or over 64 bytes (with a warning)."""
    if not value:
        return None
    if len(value.encode()) > MAX_VALUE_BYTES:
        log.warning(
            "plugin cks, device %s: ignoring %s: the label value is over %d bytes",
            device,
            qualified(name),
            MAX_VALUE_BYTES,
        )
        return None
    return value


def node_values(labels: Mapping[str, str], device: str) -> dict[str, str]:
    """Attribute name (qualified) -> value for the node-wide attributes."""
    out: dict[str, str] = {}
    for name, label in NODE_ATTRIBUTES.items():
        value = usable(name, labels.get(label), device)
        if value is not None:
            out[qualified(name)] = value
    return out


def leaf_switch(labels: Mapping[str, str], rdma_device: str | None, device: str) -> str | None:
    if not rdma_device:
        return None
    return usable(LEAF_SWITCH, labels.get(neighbor_label(rdma_device)), device)


def rdma_device(
    context: ProviderContext, instance: CksInstance, device: DeviceIdentifiers
) -> str | None:
    """The device's RDMA device: by its PCI function, else an ``ibp*`` interface name.

    The NIC is resolved by MAC, then PCI address, then name, so a gen1 DRA
    device name (``pci-0000-1a-00-0``) and a PCI-only device find it too.
    """
    nic = resolve_nic(context.host_root, device)
    pci = nic.pci_address
    found = instance.rdma_by_pci.get(normalize_pci(pci)) if pci else None
    ifname = nic.ifname or ""
    if found is None and ifname.startswith(IB_NAME_PREFIX):
        found = ifname
    return found


def device_attributes(
    context: ProviderContext, instance: CksInstance, device: DeviceIdentifiers
) -> AttributeMap:
    label = device.label()
    values = node_values(instance.labels, label)
    switch = leaf_switch(instance.labels, rdma_device(context, instance, device), label)
    if switch is not None:
        values[qualified(LEAF_SWITCH)] = switch
    return {k: DeviceAttribute(string=v) for k, v in values.items()}
