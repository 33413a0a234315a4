"""The rules every profile provider shares for addressing a subinterface.

A profile provider that hands addresses to IPVLAN subinterfaces (a cloud
plugin's profile role, or the built-in ``local-ipam`` provider) answers the
same questions in the same order; only *where the addresses come from* is
cloud specific.  Keeping the order here stops the copies from drifting:

1. not an IPVLAN claim (when the provider requires one): nothing to do;
2. ``addressing`` ``Unnumbered`` (an L2-only subinterface) or ``DHCP``
   (also the deprecated ``dhcp: true``): nothing to do, the
   user asked for no addresses from us (allocating anyway would leave them
   held once the host rejects the final config);
3. static ``addresses``: the provider may validate them (``check_static``),
   they are reserved in the node's IPAM so no pool allocation collides with
   them, and they are echoed back *as the user wrote them* (with their
   prefix), so the merge of user and profile config lists each only once;
4. otherwise: allocate, from the provider's ``ranges()`` or with its own
   ``allocate`` routine.

Every allocation is owned by the claim on the NIC's stable identity
(:meth:`dranet_cloud.ipam.base.Owner.for_nic`: MAC, else PCI address, else
name; the NIC the host resolved, carried by ``device``): a
kubelet retry of the same claim gets the same addresses whatever name DRANET
sends, and release frees by owner whatever the config says by then.  The
claim reference (namespace, name, pods when gen2 DRANET sent them) is
recorded with the allocation.

Status codes follow the BYODP convention: a NIC with nothing to allocate
from is a configuration problem (400, raised by the provider's ``ranges``);
409 is only for conflicts and exhaustion (:class:`AddressConflict`,
:class:`RangeExhausted`, raised by the IPAM store).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.ipam.base import IpamStore, Owner
from dranet_cloud.ipam.requests import parse_static
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.toolkit.errors import ProfileDenied
from dranet_cloud.toolkit.iprange import IPAddress, IPRange
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import (
    ADDRESSING_DHCP,
    ADDRESSING_UNNUMBERED,
    DeviceIdentifiers,
    InterfaceConfig,
    NetworkConfig,
)

log = logging.getLogger(__name__)

RangeSource = Callable[[], Sequence[IPRange]]
Allocator = Callable[[IpamStore, Owner, ClaimReference | None], list[str]]
StaticCheck = Callable[[Sequence[str]], None]


def inside_ranges(pool: str, ranges: Sequence[IPRange], allow_flag: str) -> StaticCheck:
    """A ``check_static`` refusing (400) any static address outside every one of ``ranges``.

    A claim's static address is reserved as asked; one outside the ranges the
    operator configured (``8.8.8.8``, ``0.0.0.0/0``) is a mistake or an
    attempt to take an address this node does not own.
    """
    configured = list(dict.fromkeys(ranges))

    def check(addresses: Sequence[str]) -> None:
        for text, addr in zip(addresses, (parse_one(pool, a) for a in addresses), strict=True):
            if not any(
                r.version == addr.version and int(r.start) <= int(addr) <= int(r.end)
                for r in configured
            ):
                where = ", ".join(str(r) for r in configured) or "none"
                raise ProfileDenied(
                    f"{pool}: static address {text!r} is outside every configured range "
                    f"({where}); ask for an address inside one, or start the server with "
                    f"{allow_flag} to reserve addresses outside them",
                    status=400,
                )

    return check


def parse_one(pool: str, text: str) -> IPAddress:
    """The address part of one static address, refused like the store refuses it."""
    return parse_static(pool, [text])[0]


def subinterface_owner(
    context: ProviderContext, pool: str, device: DeviceIdentifiers, claim_uid: str
) -> Owner:
    """Who holds a claim's addresses on a device, for ``pool`` (plugin name).

    ``device`` is what the host passed the hook: it carries the NIC the host
    resolved, so this reads nothing from sysfs.
    """
    return Owner.for_nic(pool, resolve_nic(context.host_root, device), claim_uid)


def subinterface_profile(
    context: ProviderContext,
    *,
    pool: str,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
    ranges: RangeSource | None = None,
    allocate: Allocator | None = None,
    check_static: StaticCheck | None = None,
    require_ipvlan: bool = True,
) -> NetworkConfig | None:
    """The addresses for one claim's subinterface, or ``None`` when it needs none.

    ``ranges`` returns at most one range per family and raises
    ``ProfileDenied(status=400)`` naming the NIC and the missing metadata when
    there is none; it is only called when an allocation is needed, so claims
    that need no addresses never trip over a NIC the provider does not know.
    ``allocate`` replaces the plain ``store.allocate(owner, ranges())`` for a
    provider with several candidate ranges per family; it receives ``claim``
    to pass on to the store.
    """
    if ranges is None and allocate is None:
        raise TypeError(f"{pool}: subinterface_profile needs ranges or allocate")
    iface = config.interface
    if require_ipvlan and not iface.is_subinterface:
        return None
    addressing = iface.effective_addressing
    if addressing in (ADDRESSING_UNNUMBERED, ADDRESSING_DHCP):
        log.debug(
            "%s: %s: claim %s asks for addressing %s; no addresses allocated",
            pool,
            safe(device.label()),
            safe(claim_uid),
            addressing,
        )
        return None
    owner = subinterface_owner(context, pool, device, claim_uid)
    if iface.addresses:
        static = list(iface.addresses)
        if check_static is not None:
            check_static(static)
        context.ipam.reserve(owner, static, claim=claim)
        log.info(
            "%s: %s: reserved static %s for claim %s",
            pool,
            safe(device.label()),
            safe(static),
            safe(claim_uid),
        )
        return NetworkConfig(interface=InterfaceConfig(addresses=static))
    if allocate is not None:
        addresses = allocate(context.ipam, owner, claim)
    else:
        assert ranges is not None
        candidates = list(ranges())
        if not candidates:
            raise ProfileDenied(
                f"{pool}: device {device.label()} has no range to allocate subinterface "
                "addresses from; give the provider a range for it, or set "
                'interface.addresses or interface.addressing "Unnumbered" in the claim',
                status=400,
            )
        addresses = context.ipam.allocate(owner, candidates, claim=claim)
    if log.isEnabledFor(logging.INFO):
        log.info("%s: %s: claim %s gets %s", pool, safe(device.label()), safe(claim_uid), addresses)
    return NetworkConfig(interface=InterfaceConfig(addresses=addresses))


def release_subinterface(
    context: ProviderContext, *, pool: str, device: DeviceIdentifiers, claim_uid: str
) -> bool:
    """Free what the claim holds on this device; releasing nothing is success."""
    freed = context.ipam.release(subinterface_owner(context, pool, device, claim_uid))
    if freed:
        log.info("%s: %s: claim %s released %s", pool, safe(device.label()), safe(claim_uid), freed)
    return True
