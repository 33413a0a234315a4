"""The profile role: addresses for IPVLAN children from the eflo block.

A claim that becomes an IPVLAN child (an LACP bond, or any NIC the user
asked to share) gets one IPv6 address from the eflo /124 of its parent's
/64, through the node's IPAM store so that retries, restarts and concurrent
claims agree.  The owner is ``(aliyun, device, claim)``: a kubelet retry of
the same claim gets the same address, and release frees by owner whatever
the config still says.
"""

from __future__ import annotations

import logging

from dranet_cloud.context import ProviderContext
from dranet_cloud.errors import ProfileDenied
from dranet_cloud.ipam import Owner
from dranet_cloud.models import DeviceIdentifiers, InterfaceConfig, NetworkConfig

from .constants import PLUGIN
from .eflo import eflo_block, eflo_range, nic_prefix
from .routing import is_lacp_bond

log = logging.getLogger(__name__)


def owner_for(device: DeviceIdentifiers, claim_uid: str) -> Owner:
    return Owner(PLUGIN, device.key(), claim_uid)


def profile_config(
    context: ProviderContext, device: DeviceIdentifiers, claim_uid: str, config: NetworkConfig
) -> NetworkConfig | None:
    """Addresses for an IPVLAN claim; ``None`` when the claim needs none from us."""
    iface = config.interface
    if iface.type != "ipvlan" or iface.unnumbered or iface.dhcp:
        return None
    owner = owner_for(device, claim_uid)
    if iface.addresses:
        # Static addresses go through the same bookkeeping, so no pool
        # allocation can hand them to another claim (AddressConflict = 409).
        context.ipam.reserve(owner, iface.addresses)
        return NetworkConfig(interface=InterfaceConfig(addresses=list(iface.addresses)))
    prefix = nic_prefix(context.host_root, device.name) if device.name else None
    if prefix is None:
        kind = "LACP bond" if is_lacp_bond(context.host_root, device) else "NIC"
        raise ProfileDenied(
            f"{PLUGIN}: {kind} {device.label()} has no global IPv6 /64 in /proc/net/if_inet6 "
            f"(host root {context.host_root.root}), so there is no eflo block "
            "<prefix>:0:f:0:c00/124 to address its IPVLAN child from; give the "
            "interface its global IPv6 address, or set interface.addresses or "
            "interface.unnumbered in the claim",
            status=409,
        )
    addresses = context.ipam.allocate(owner, [eflo_range(prefix)])
    log.info(
        "%s: claim %s on %s gets %s from eflo block %s",
        PLUGIN,
        claim_uid,
        device.label(),
        ", ".join(addresses),
        eflo_block(prefix),
    )
    return NetworkConfig(interface=InterfaceConfig(addresses=addresses))


def release_profile_config(
    context: ProviderContext, device: DeviceIdentifiers, claim_uid: str
) -> bool:
    """Free everything the claim holds on this device; unknown claims are fine."""
    freed = context.ipam.release(owner_for(device, claim_uid))
    if freed:
        log.info(
            "%s: claim %s on %s released %s", PLUGIN, claim_uid, device.label(), ", ".join(freed)
        )
    return True
