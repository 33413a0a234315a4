"""Kubernetes device attributes under ``oke.dra.net/``.

DRANET's five topology attributes (``hpcIslandId``, ``networkBlockId``,
``localBlockId``, ``rackId``, ``gpuMemoryFabricId``) describe the host, so
they go on every device, the RDMA NICs above all: they are what a claim
aligns on to keep a job inside one HPC island, network block or local block.

Beyond DRANET, a NIC whose MAC is a VNIC's gets three facts from
``/opc/v2/vnics/``: ``vnicId`` (the OCID's suffix, like the topology IDs),
``subnetCidrBlock`` and ``virtualRouterIp``.  That is eight at most, which
leaves room under the API server's 32 per device next to the ~21 DRANET
publishes itself.  On a bare-metal GPU shape the RDMA NICs are not VNICs, so
they carry the five only.
"""

from __future__ import annotations

import logging

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from .constants import (
    GPU_MEMORY_FABRIC_ID,
    HPC_ISLAND_ID,
    LOCAL_BLOCK_ID,
    NETWORK_BLOCK_ID,
    PLUGIN,
    RACK_ID,
    SUBNET_CIDR_BLOCK,
    VIRTUAL_ROUTER_IP,
    VNIC_ID,
)
from .snapshot import OcidError, OciInstance, OciVnic, ocid_suffix

log = logging.getLogger(__name__)


def topology_attributes(instance: OciInstance) -> AttributeMap:
    """DRANET's five, each only when it has a value."""
    out: AttributeMap = {}
    for key, value in (
        (HPC_ISLAND_ID, instance.hpc_island_id),
        (NETWORK_BLOCK_ID, instance.network_block_id),
        (LOCAL_BLOCK_ID, instance.local_block_id),
        (RACK_ID, instance.rack_id),
        (GPU_MEMORY_FABRIC_ID, instance.gpu_memory_fabric_id),
    ):
        if value:
            out[key] = DeviceAttribute.of(value)
    return out


def device_mac(host_root: HostRoot, device: DeviceIdentifiers) -> str | None:
    """The MAC of the NIC ``device`` names (by MAC, then PCI address, then name)."""
    return resolve_nic(host_root, device).mac


def vnic_attributes(vnic: OciVnic, device: DeviceIdentifiers) -> AttributeMap:
    out: AttributeMap = {}
    try:
        vnic_id = ocid_suffix(vnic.vnic_id)
    except OcidError as exc:
        log.warning(
            "%s: not publishing vnicId for %s: %s; the VNIC's id must be an OCID",
            PLUGIN,
            device.label(),
            exc,
        )
        vnic_id = ""
    for key, value in (
        (VNIC_ID, vnic_id),
        (SUBNET_CIDR_BLOCK, vnic.subnet_cidr_block),
        (VIRTUAL_ROUTER_IP, vnic.virtual_router_ip),
    ):
        if value:
            out[key] = DeviceAttribute.of(value)
    return out


def device_attributes(
    host_root: HostRoot, instance: OciInstance | None, device: DeviceIdentifiers
) -> AttributeMap:
    """All attributes this plugin publishes for ``device``."""
    if instance is None:
        return {}
    out = topology_attributes(instance)
    vnic = instance.vnic_for_mac(device_mac(host_root, device))
    if vnic is not None:
        out.update(vnic_attributes(vnic, device))
    return out
