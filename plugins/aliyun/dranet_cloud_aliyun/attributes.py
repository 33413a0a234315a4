"""Kubernetes device attributes under ``alibaba.dra.net/``.

Instance-wide facts (type, region, zone) go on every NIC so a claim can
select by them; ENI facts (interface, VPC and vSwitch ids) only on NICs the
metadata lists.  ``erdma`` comes from the node itself and, as DRANET does,
is set (``true``) only on an eRDMA device, absent elsewhere: a NIC is one
exactly when its PCI function is what an ``/sys/class/infiniband/erdma*``
device links to (DRANET's ``pkg/cloudprovider/alibaba/alibaba.go`` at
``f258477`` sets ``erdma: true`` for a PCI address in that set and nothing
otherwise).
"""

from __future__ import annotations

import logging

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from .constants import ATTRIBUTE_DOMAIN, ERDMA_PREFIX, PLUGIN
from .snapshot import AliyunInstance

log = logging.getLogger(__name__)

MAX_STRING_BYTES = 64  # API-server limit on string attribute values

INSTANCE_TYPE = f"{ATTRIBUTE_DOMAIN}/instanceType"
ERDMA = f"{ATTRIBUTE_DOMAIN}/erdma"
REGION_ID = f"{ATTRIBUTE_DOMAIN}/regionId"
ZONE_ID = f"{ATTRIBUTE_DOMAIN}/zoneId"
NETWORK_INTERFACE_ID = f"{ATTRIBUTE_DOMAIN}/networkInterfaceId"
VPC_ID = f"{ATTRIBUTE_DOMAIN}/vpcId"
VSWITCH_ID = f"{ATTRIBUTE_DOMAIN}/vswitchId"


def device_pci_address(host_root: HostRoot, device: DeviceIdentifiers) -> str | None:
    """The PCI address of the local NIC ``device`` resolves to (MAC, PCI, then name)."""
    return resolve_nic(host_root, device).pci_address


def is_erdma(host_root: HostRoot, device: DeviceIdentifiers) -> bool:
    """Whether an ``erdma*`` InfiniBand device sits on this NIC's PCI function."""
    pci = device_pci_address(host_root, device)
    if not pci:
        return False
    targets = {p.lower() for p in host_root.infiniband_pci_addresses(ERDMA_PREFIX).values()}
    return pci in targets


def _put_string(out: AttributeMap, key: str, value: str | None, device: DeviceIdentifiers) -> None:
    if not value:
        return
    if len(value.encode()) > MAX_STRING_BYTES:
        # An id cut short would name another resource; better to leave it out.
        log.warning(
            "%s: not publishing %s for %s: %r is over %d bytes",
            PLUGIN,
            key,
            device.label(),
            value[:80],
            MAX_STRING_BYTES,
        )
        return
    out[key] = DeviceAttribute.of(value)


def device_attributes(
    host_root: HostRoot, instance: AliyunInstance | None, device: DeviceIdentifiers
) -> AttributeMap:
    """All attributes this plugin publishes for ``device``."""
    # DRANET sets erdma only on eRDMA devices (never ``false``), so a selector
    # testing whether the attribute exists matches the same NICs here.
    out: AttributeMap = {ERDMA: DeviceAttribute.of(True)} if is_erdma(host_root, device) else {}
    if instance is None:
        return out
    _put_string(out, INSTANCE_TYPE, instance.instance_type, device)
    _put_string(out, REGION_ID, instance.region_id, device)
    _put_string(out, ZONE_ID, instance.zone_id, device)
    nic = instance.nic_for(resolve_nic(host_root, device).identifiers())
    if nic is not None:
        _put_string(out, NETWORK_INTERFACE_ID, nic.network_interface_id, device)
        _put_string(out, VPC_ID, nic.vpc_id, device)
        _put_string(out, VSWITCH_ID, nic.vswitch_id, device)
    return out
