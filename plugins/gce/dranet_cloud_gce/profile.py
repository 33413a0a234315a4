"""The profile role: IPVLAN subinterface addresses from a NIC's GCE ranges.

Seed 003 settled where this belongs: the cloud provider's profile hook, with
the node-local IPAM as a library.  The IPv4 address comes from the NIC's first
alias range; the IPv6 address from the ``0xC0DE`` range written right after the
NIC's first IPv6 prefix (a /64 becomes a /80, a VM's /96 a /112), so pod
addresses never collide with what GCE hands the VM itself.

Allocations are owned by (plugin, device, claim UID): a kubelet retry of the
same claim gets the same addresses, and release frees by owner whatever the
config says by then.
"""

from __future__ import annotations

import logging

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext
from dranet_cloud.ipam import Owner
from dranet_cloud.providers.subinterface import (
    release_subinterface,
    subinterface_owner,
    subinterface_profile,
)
from dranet_cloud.toolkit.errors import ProfileDenied
from dranet_cloud.toolkit.iprange import IPRange, ip_range_from_cidr, marker_range
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

from .snapshot import PLUGIN, GceInstance, GceNic

log = logging.getLogger(__name__)

# What GCE writes right after a NIC's IPv6 prefix to carve out the range its
# IPVLAN subinterfaces are addressed from (a /64 becomes a /80).
SUBINTERFACE_MARKER = 0xC0DE


def owner_for(context: ProviderContext, device: DeviceIdentifiers, claim_uid: str) -> Owner:
    return subinterface_owner(context, PLUGIN, device, claim_uid)


def subinterface_ranges(nic: GceNic) -> tuple[list[IPRange], list[str]]:
    """At most one range per family (first alias range, then the 0xC0DE IPv6
    range), and why a family has none, for the denial message."""
    ranges: list[IPRange] = []
    missing: list[str] = []
    if nic.ip_aliases:
        ranges.append(ip_range_from_cidr(nic.ip_aliases[0]))
    else:
        missing.append("no ip-aliases range")
    if nic.ipv6_ranges:
        try:
            ranges.append(marker_range(nic.ipv6_ranges[0], SUBINTERFACE_MARKER))
        except ValueError as exc:
            missing.append(f"ipv6s {nic.ipv6_ranges[0]} cannot carry the 0xC0DE marker ({exc})")
            log.warning("gce: NIC %s: no IPv6 subinterface range: %s", nic.mac, exc)
    else:
        missing.append("no ipv6s range")
    return ranges, missing


def _device_ranges(instance: GceInstance | None, device: DeviceIdentifiers) -> list[IPRange]:
    """The NIC's subinterface ranges; a 400 naming the NIC and what it lacks."""
    if instance is None:
        raise ProfileDenied(
            f"gce: no GCE instance metadata is loaded, so device {device.label()} has no "
            "ranges to allocate from; start the host with the gce cloud plugin",
            status=400,
        )
    if device.mac is None:
        raise ProfileDenied(
            f"gce: device {device.label()} has no MAC address, so it cannot be matched to a "
            "NIC in the instance metadata; pass the device's MAC (name=IF,mac=MAC)",
            status=400,
        )
    nic = instance.nic_for(device)
    if nic is None:
        raise ProfileDenied(
            f"gce: device {device.label()} is not in the instance metadata "
            f"(known MACs: {', '.join(sorted(instance.known_macs())) or 'none'}), so it has no "
            "GCE ranges for an IPVLAN subinterface; set interface.addresses or "
            "interface.addressing 'Unnumbered' in the claim, or claim a GCE NIC",
            status=400,
        )
    ranges, missing = subinterface_ranges(nic)
    if not ranges:
        raise ProfileDenied(
            f"gce: NIC {device.label()} (metadata instance/network-interfaces/{nic.index}) has "
            f"{' and '.join(missing)}, so there is nothing to allocate IPVLAN subinterface "
            "addresses from; add an alias IP range or an IPv6 stack to the NIC, or set "
            "interface.addresses or interface.addressing 'Unnumbered' in the claim",
            status=400,
        )
    return ranges


def profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot | None,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    """Addresses for an IPVLAN claim; ``None`` for anything else.

    The metadata is consulted only when addresses are needed, so a claim
    asking for none is never denied over a missing NIC.  ``instance``: the
    host's snapshot, which is ours unless the host runs another cloud plugin.
    """
    gce = instance if isinstance(instance, GceInstance) else None
    return subinterface_profile(
        context,
        pool=PLUGIN,
        device=device,
        claim_uid=claim_uid,
        config=config,
        claim=claim,
        ranges=lambda: _device_ranges(gce, device),
    )


def release_profile_config(
    context: ProviderContext, device: DeviceIdentifiers, claim_uid: str
) -> bool:
    """Free what the claim holds on this device; releasing nothing is success."""
    return release_subinterface(context, pool=PLUGIN, device=device, claim_uid=claim_uid)
