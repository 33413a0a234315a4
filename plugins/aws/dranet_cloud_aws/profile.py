"""The profile role: addresses for IPVLAN subinterfaces on an ENI.

A subinterface needs addresses the VPC will deliver to its parent ENI; the
VPC drops anything else (source/destination check).  Where they come from,
per family:

* IPv4: the ENI's delegated ``ipv4-prefix`` blocks (/28) when it has any,
  else its *secondary* private IPv4 addresses (``local-ipv4s`` minus the
  first, the ENI's primary address, which the node itself uses);
* IPv6: the ENI's delegated ``ipv6-prefix`` blocks (/80).

Every address of a delegated prefix is usable (a prefix is not a subnet:
it has no network, router or broadcast address of its own), so a /28 offers
16 addresses.  Several prefixes, or scattered secondary addresses, are
tried one range at a time, because the node's IPAM takes at most one range
per family per call.  An ENI with neither prefixes nor secondary addresses
is denied with a message telling the operator to assign a prefix to it.

Owners are the claim on the NIC's stable identity (``subinterface_owner``:
MAC, else PCI address, else name), so a kubelet retry of
the same claim gets the same addresses and release frees by owner.  The
claim rules (IPVLAN only, nothing for Unnumbered or DHCP claims, static
addresses reserved and echoed as written) are the core's
:mod:`dranet_cloud.providers.subinterface`; this module supplies the ENI's ranges, the
static-address check and the several-runs-per-family allocation.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext
from dranet_cloud.ipam import IpamStore, Owner
from dranet_cloud.providers.subinterface import release_subinterface, subinterface_profile
from dranet_cloud.toolkit.errors import ProfileDenied, RangeExhausted
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

from .snapshot import PLUGIN, AwsInstance, Eni

log = logging.getLogger(__name__)


def prefix_range(cidr: str) -> IPRange:
    """Every address of a delegated prefix."""
    net = ipaddress.ip_network(cidr, strict=False)
    return IPRange(net.network_address, net.broadcast_address)


def address_runs(addresses: Sequence[str]) -> list[IPRange]:
    """Scattered addresses as the fewest ranges of consecutive ones, ascending."""
    values = sorted({ipaddress.ip_address(a) for a in addresses}, key=lambda a: (a.version, a))
    runs: list[IPRange] = []
    for addr in values:
        last = runs[-1] if runs else None
        if last is not None and last.version == addr.version and int(last.end) + 1 == int(addr):
            runs[-1] = IPRange(last.start, addr)
        else:
            runs.append(IPRange(addr, addr))
    return runs


def candidate_ranges(eni: Eni) -> dict[int, list[IPRange]]:
    """The ranges to allocate from, per family (module docstring)."""
    out: dict[int, list[IPRange]] = {}
    if eni.ipv4_prefixes:
        out[4] = [prefix_range(p) for p in eni.ipv4_prefixes]
    elif eni.secondary_ipv4s:
        out[4] = address_runs(eni.secondary_ipv4s)
    if eni.ipv6_prefixes:
        out[6] = [prefix_range(p) for p in eni.ipv6_prefixes]
    return out


def _unknown_nic(instance: AwsInstance, device: DeviceIdentifiers) -> ProfileDenied:
    return ProfileDenied(
        f"aws: NIC {device.label()} is not an ENI of instance "
        f"{instance.identity.instance_id or '?'} according to IMDS "
        f"(known MACs: {', '.join(sorted(instance.enis)) or 'none'}); claim an ENI "
        "attached to this node"
    )


def _no_ranges(eni: Eni, device: DeviceIdentifiers) -> ProfileDenied:
    eni_id = eni.interface_id or eni.mac
    return ProfileDenied(
        f"aws: ENI {eni_id} (NIC {device.label()}) has no delegated prefix (ipv4-prefix, "
        "ipv6-prefix) and no secondary private IPv4 address in IMDS, so there is nothing "
        "to give an IPVLAN subinterface; assign a prefix to that ENI, e.g. "
        f"`aws ec2 assign-private-ip-addresses --network-interface-id {eni_id} "
        "--ipv4-prefix-count 1`, or assign it secondary private IPv4 addresses",
        status=400,
    )


def _allowed(eni: Eni) -> list[IPRange]:
    """What a static address may be: anything the ENI owns except its primary IPv4."""
    ranges = [prefix_range(p) for p in eni.ipv4_prefixes + eni.ipv6_prefixes]
    ranges += address_runs(eni.secondary_ipv4s + eni.ipv6s)
    return ranges


def _check_static(eni: Eni, device: DeviceIdentifiers, addresses: Sequence[str]) -> None:
    allowed = _allowed(eni)
    for text in addresses:
        addr = ipaddress.ip_interface(text).ip
        if str(addr) == eni.primary_ipv4:
            raise ProfileDenied(
                f"aws: {text} is the primary private IPv4 address of ENI "
                f"{eni.interface_id or eni.mac} (NIC {device.label()}), used by the node "
                "itself; ask for a secondary address or an address of a delegated prefix"
            )
        if not any(addr in r for r in allowed):
            raise ProfileDenied(
                f"aws: {text} is not assigned to ENI {eni.interface_id or eni.mac} "
                f"(NIC {device.label()}), so the VPC would drop its traffic; use an address "
                "of its delegated prefixes or secondary addresses "
                f"({', '.join(str(r) for r in allowed) or 'it has none'})"
            )


def _held(store: IpamStore, owner: Owner) -> dict[int, str]:
    """The owner's dynamic allocations by family."""
    out: dict[int, str] = {}
    for alloc in store.held(owner):
        if not alloc.static:
            version = ipaddress.ip_interface(alloc.address).version
            out.setdefault(version, alloc.address)
    return out


def _allocate_family(
    store: IpamStore,
    owner: Owner,
    ranges: Sequence[IPRange],
    eni: Eni,
    claim: ClaimReference | None = None,
) -> str:
    for rng in ranges:
        try:
            got = store.allocate(owner, [rng], claim=claim)
        except RangeExhausted:
            continue
        return got[0]
    family = ranges[0].version if ranges else 4
    raise RangeExhausted(
        f"aws: every IPv{family} address of ENI {eni.interface_id or eni.mac} "
        f"({', '.join(str(r) for r in ranges)}) is held by another claim; assign another "
        "prefix to the ENI or release finished claims"
    )


def _allocate(
    store: IpamStore,
    owner: Owner,
    eni: Eni,
    device: DeviceIdentifiers,
    claim: ClaimReference | None = None,
) -> list[str]:
    """One address per family, trying the ENI's candidate ranges in turn."""
    candidates = candidate_ranges(eni)
    if not candidates:
        raise _no_ranges(eni, device)
    held = _held(store, owner)
    addresses: list[str] = []
    fresh = False
    try:
        for family in sorted(candidates):
            if family in held:
                addresses.append(held[family])
                continue
            addresses.append(_allocate_family(store, owner, candidates[family], eni, claim))
            fresh = True
    except ProfileDenied:
        if fresh and not held:
            # All or nothing: do not leave half a claim behind.
            store.release(owner)
        raise
    return addresses


def profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot | None,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    """Addresses for an IPVLAN claim; ``None`` when the claim needs none from us.

    The metadata and the ENI are looked up only when addresses are needed, so
    a claim asking for none (DHCP, Unnumbered, not IPVLAN) is never denied
    over them.  ``instance``: the host's snapshot, which is ours unless the
    host runs another cloud plugin.
    """
    ours = instance if isinstance(instance, AwsInstance) else None

    def eni() -> Eni:
        if ours is None:
            raise ProfileDenied(
                f"aws: no EC2 instance metadata is loaded, so device {device.label()} has no "
                "prefixes or secondary addresses to allocate from; start the host with the "
                "aws cloud plugin",
                status=400,
            )
        found = ours.eni(device.mac)
        if found is None:
            raise _unknown_nic(ours, device)
        return found

    return subinterface_profile(
        context,
        pool=PLUGIN,
        device=device,
        claim_uid=claim_uid,
        config=config,
        claim=claim,
        allocate=lambda store, owner, ref: _allocate(store, owner, eni(), device, ref),
        check_static=lambda addresses: _check_static(eni(), device, addresses),
    )


def release_profile_config(
    context: ProviderContext, device: DeviceIdentifiers, claim_uid: str
) -> bool:
    """Free what the claim holds on this device; releasing nothing is success."""
    return release_subinterface(context, pool=PLUGIN, device=device, claim_uid=claim_uid)
