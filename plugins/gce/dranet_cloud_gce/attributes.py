"""DRANET's ``gce.dra.net/`` device attributes, kept inside the API-server limits.

A ResourceSlice with one oversized attribute is rejected whole and the node
publishes nothing, so every value is checked here by construction: strings
over 64 bytes are dropped (logged), and the comma-joined alias list is cut at
an element boundary instead of mid-CIDR.
"""

from __future__ import annotations

import logging

from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from .snapshot import GceInstance

DOMAIN = "gce.dra.net"
MAX_STRING_BYTES = 64

ATTR_MACHINE_TYPE = f"{DOMAIN}/machineType"
ATTR_BLOCK = f"{DOMAIN}/block"
ATTR_SUB_BLOCK = f"{DOMAIN}/subBlock"
ATTR_HOST = f"{DOMAIN}/host"
ATTR_GPU_DIRECT = f"{DOMAIN}/gpuDirect"
ATTR_NETWORK_NAME = f"{DOMAIN}/networkName"
ATTR_NETWORK_PROJECT_NUMBER = f"{DOMAIN}/networkProjectNumber"
ATTR_IP_ALIASES = f"{DOMAIN}/ipAliases"

log = logging.getLogger(__name__)


def join_within(items: list[str], limit: int = MAX_STRING_BYTES, sep: str = ",") -> str:
    """Join ``items`` with ``sep``, keeping only whole items that fit in ``limit`` bytes."""
    out = ""
    for item in items:
        candidate = f"{out}{sep}{item}" if out else item
        if len(candidate.encode()) > limit:
            break
        out = candidate
    return out


def _put_string(attrs: AttributeMap, key: str, value: str | None, device: str) -> None:
    if not value:
        return
    if len(value.encode()) > MAX_STRING_BYTES:
        log.warning(
            "gce: %s: attribute %s dropped, value %r is over %d bytes",
            device,
            key,
            value,
            MAX_STRING_BYTES,
        )
        return
    attrs[key] = DeviceAttribute.of(value)


def device_attributes(instance: GceInstance, device: DeviceIdentifiers) -> AttributeMap:
    """Instance-wide attributes for every NIC, plus the NIC's own when the MAC is known."""
    label = device.label()
    attrs: AttributeMap = {}
    _put_string(attrs, ATTR_MACHINE_TYPE, instance.machine_type, label)
    _put_string(attrs, ATTR_BLOCK, instance.block, label)
    _put_string(attrs, ATTR_SUB_BLOCK, instance.sub_block, label)
    _put_string(attrs, ATTR_HOST, instance.host, label)
    _put_string(attrs, ATTR_GPU_DIRECT, instance.gpu_direct, label)

    nic = instance.nic_for(device)
    if nic is None:
        log.debug("gce: %s is not in the instance metadata; instance attributes only", label)
        return attrs
    _put_string(attrs, ATTR_NETWORK_NAME, nic.network_name, label)
    if nic.network_project_number is not None:
        attrs[ATTR_NETWORK_PROJECT_NUMBER] = DeviceAttribute.of(nic.network_project_number)
    if nic.ip_aliases:
        joined = join_within(nic.ip_aliases)
        kept = joined.count(",") + 1 if joined else 0
        if kept < len(nic.ip_aliases):
            log.warning(
                "gce: %s: %s lists %d of %d alias ranges (values are limited to %d bytes); "
                "the full list is in `dranet-cloud describe`",
                label,
                ATTR_IP_ALIASES,
                kept,
                len(nic.ip_aliases),
                MAX_STRING_BYTES,
            )
        _put_string(attrs, ATTR_IP_ALIASES, joined, label)
    return attrs
