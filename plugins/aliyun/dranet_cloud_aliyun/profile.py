"""The profile role: addresses for IPVLAN children from the eflo block.

A claim that becomes an IPVLAN child (an LACP bond, or any NIC the user
asked to share) gets one IPv6 address from the eflo /124 of its parent's
/64, through the node's IPAM store so that retries, restarts and concurrent
claims agree.  The owner is ``(aliyun, device, claim)``: a kubelet retry of
the same claim gets the same address, and release frees by owner whatever
the config still says.  The claim rules (Unnumbered, DHCP, static
addresses) are the core's :mod:`dranet_cloud.providers.subinterface`; a NIC without a
global /64 is a configuration problem (400), not a conflict.
"""

from __future__ import annotations

import ipaddress
import logging

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.ipam import Owner
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.providers.subinterface import (
    release_subinterface,
    subinterface_owner,
    subinterface_profile,
)
from dranet_cloud.toolkit.errors import ProfileDenied
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig, RouteConfig, RuleConfig

from .constants import PLUGIN
from .eflo import eflo_block, eflo_range, nic_prefix
from .routing import SCOPE_LINK, parent_ipv6_routes, route_table_for

log = logging.getLogger(__name__)


def owner_for(context: ProviderContext, device: DeviceIdentifiers, claim_uid: str) -> Owner:
    return subinterface_owner(context, PLUGIN, device, claim_uid)


def _eflo_ranges(context: ProviderContext, device: DeviceIdentifiers) -> list[IPRange]:
    """The eflo block of the device's /64; a 400 naming the device when it has none."""
    local = resolve_nic(context.host_root, device)
    prefix = nic_prefix(context.host_root, local.ifname) if local.ifname else None
    if prefix is None:
        kind = "LACP bond" if local.is_lacp_bond else "NIC"
        raise ProfileDenied(
            f"{PLUGIN}: {kind} {device.label()} has no global IPv6 /64 in /proc/net/if_inet6 "
            f"(host root {context.host_root.root}), so there is no eflo block "
            "<prefix>:0:f:0:c00/124 to address its IPVLAN child from; give the "
            "interface its global IPv6 address, or set interface.addresses or "
            "interface.addressing 'Unnumbered' in the claim",
            status=400,
        )
    log.debug("%s: %s: eflo block %s", PLUGIN, device.label(), eflo_block(prefix))
    return [eflo_range(prefix)]


def profile_config(
    context: ProviderContext,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    """Addresses for an IPVLAN claim and their policy routing, as DRANET's provider answers.

    ``None`` when the claim needs no addresses from us.  With the addresses
    (allocated from the eflo /124, or the claim's static ones reserved) come
    the parent's IPv6 routes in the parent's own table and one /128 source
    rule per IPv6 address, so replies leave through the parent; skipped
    when the config already has routes, rules or a VRF (the user or the
    cloud decided routing).
    """
    answer = subinterface_profile(
        context,
        pool=PLUGIN,
        device=device,
        claim_uid=claim_uid,
        config=config,
        claim=claim,
        ranges=lambda: _eflo_ranges(context, device),
    )
    if answer is None or config.routes or config.rules or config.interface.vrf is not None:
        return answer
    _add_policy_routing(context, device, answer)
    return answer


def _add_policy_routing(
    context: ProviderContext, device: DeviceIdentifiers, answer: NetworkConfig
) -> None:
    local = resolve_nic(context.host_root, device)
    table = route_table_for(local)
    if table is None or not local.ifname:
        return
    routes = parent_ipv6_routes(context.host_root, local.ifname, table)
    if not routes:
        prefix = nic_prefix(context.host_root, local.ifname)
        if prefix is None:
            return
        routes = [RouteConfig(destination=str(prefix), scope=SCOPE_LINK, table=table)]
    sources = []
    for addr in answer.interface.addresses or []:
        ip = ipaddress.ip_interface(addr).ip
        if ip.version == 6:
            sources.append(f"{ip}/128")
    if not sources:
        return
    answer.routes = routes
    answer.rules = [RuleConfig(priority=table, source=s, table=table) for s in sources]


def release_profile_config(
    context: ProviderContext, device: DeviceIdentifiers, claim_uid: str
) -> bool:
    """Free everything the claim holds on this device; unknown claims are fine."""
    return release_subinterface(context, pool=PLUGIN, device=device, claim_uid=claim_uid)
