"""Kubernetes device attributes under ``azure.dra.net/``.

DRANET's four are VM-wide (``vmSize``, ``placementGroupId``,
``interconnectGroupId``, ``interconnectSubgroupId``): strings, the same on
every device, left out when IMDS has them empty.  They go on every device,
the InfiniBand functions included (DRANET publishes those without a netdev
or MAC), because ``placementGroupId`` is what tells which VMs share an
InfiniBand fabric.

Per NIC, ``ipv4Subnet`` as DRANET publishes it since PR #335: the first
``ipv4.subnet`` entry of the IMDS interface with the NIC's MAC, written
``<address>/<prefix>``, and left out when the NIC has no MAC, no IMDS entry,
or a subnet entry without both parts.

Beyond DRANET, two booleans mark an accelerated-networking pair (see
:mod:`.pairing`): ``acceleratedNetworking`` on the synthetic NIC and
``acceleratedNetworkingVf`` on its VF, so a claim's selector can skip VFs,
which would strand their synthetic NIC if moved alone.
"""

from __future__ import annotations

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from .constants import (
    ACCELERATED_NETWORKING,
    ACCELERATED_NETWORKING_VF,
    INTERCONNECT_GROUP_ID,
    INTERCONNECT_SUBGROUP_ID,
    IPV4_SUBNET,
    PLACEMENT_GROUP_ID,
    VM_SIZE,
)
from .pairing import Role, resolve
from .snapshot import AzureInstance


def instance_attributes(instance: AzureInstance) -> AttributeMap:
    """DRANET's four VM-wide attributes, each only when IMDS has a value."""
    out: AttributeMap = {}
    for key, value in (
        (VM_SIZE, instance.vm_size),
        (PLACEMENT_GROUP_ID, instance.placement_group_id),
        (INTERCONNECT_GROUP_ID, instance.interconnect_group_id),
        (INTERCONNECT_SUBGROUP_ID, instance.interconnect_subgroup_id),
    ):
        if value:
            out[key] = DeviceAttribute.of(value)
    return out


def ipv4_subnet(instance: AzureInstance, mac: str | None) -> str | None:
    """``<address>/<prefix>`` of the IMDS NIC with ``mac``, when both parts are there."""
    nic = instance.nic_for_mac(mac)
    if nic is None or not nic.ipv4_subnets:
        return None
    subnet = nic.ipv4_subnets[0]
    return f"{subnet.address}/{subnet.prefix}" if subnet.address and subnet.prefix else None


def device_attributes(
    host_root: HostRoot, instance: AzureInstance | None, device: DeviceIdentifiers
) -> AttributeMap:
    """All attributes this plugin publishes for ``device``."""
    out = instance_attributes(instance) if instance is not None else {}
    local = resolve(host_root, device)
    if instance is not None:
        subnet = ipv4_subnet(instance, device.mac or (local.mac if local else None))
        if subnet is not None:
            out[IPV4_SUBNET] = DeviceAttribute.of(subnet)
    if local is not None and local.role is Role.SYNTHETIC:
        out[ACCELERATED_NETWORKING] = DeviceAttribute.of(True)
    elif local is not None and local.role is Role.VF:
        out[ACCELERATED_NETWORKING_VF] = DeviceAttribute.of(True)
    return out
