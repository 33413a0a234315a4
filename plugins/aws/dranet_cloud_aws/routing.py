"""Per-ENI policy routing: the baseline device config of every ENI.

Why: a node with many ENIs (a p5 has 32 network cards) has one default route,
through the primary ENI.  A reply to traffic that arrived on another ENI would
leave through the primary one, where the VPC drops it (source/destination
check) or where it crosses the wrong network card.  So every ENI gets its own
route table, and a rule sends traffic *from* the ENI's addresses to it.

For an ENI the config holds:

* rules, one per address the ENI owns: each local IPv4 (primary and
  secondary), each IPv6 address, and each delegated prefix (so IPVLAN
  subinterface addresses carved from a prefix follow the same table);
  the rule priority equals the table number;
* in that table: the subnet on-link (scope link) and a default route via the
  VPC router, which AWS places at the subnet's base address + 1; the same for
  the ENI's first IPv6 subnet when the ENI has IPv6 addresses or prefixes
  (there the on-link route carries no scope: the kernel has none for IPv6,
  a route without a gateway is on-link).

Table numbering (stable: it depends only on the ENI's network card and
device number, never on which other ENIs exist, so a hot-attached ENI does
not renumber anyone):

* network card 0: ``table = 100 + device_number`` (100..252 for device
  numbers 0..152);
* network card ``c`` >= 1: ``table = 256 + 24 * (c - 1) + device_number``
  for device numbers 0..23 (card 1 -> 256..279, ..., card 31 -> 976..999).

This keeps every table in 100..252 or 256..999: clear of the kernel's
reserved 253 (default), 254 (main) and 255 (local), and below 1000 where
DRANET numbers its VRF tables.  32 network cards is the most any instance
type has (p5); an ENI outside the scheme (card >= 32, or more device numbers
than its card has room for) gets no policy routing and a warning.

The primary ENI (card 0, device 0) gets table 100 like any other.  Device
configs are applied in the pod's network namespace, where the main table
belongs to the pod's own interface; a pod using the primary ENI (through an
IPVLAN subinterface) needs the VPC routes in a table of their own just as
much as one on a secondary ENI.
"""

from __future__ import annotations

import ipaddress
import logging

from dranet_cloud.wire.models import InterfaceConfig, NetworkConfig, RouteConfig, RuleConfig

from .snapshot import Eni

log = logging.getLogger(__name__)

CARD0_BASE = 100
CARD0_MAX_DEVICE = 152  # 100 + 152 = 252, just below the reserved 253
CARDN_BASE = 256
CARDN_SLOTS = 24  # device numbers 0..23 on cards 1..31
MAX_NETWORK_CARDS = 32
SCOPE_LINK = 253
RESERVED_TABLES = frozenset({253, 254, 255})
VRF_TABLE_FLOOR = 1000


def route_table(network_card: int, device_number: int | None) -> int | None:
    """The ENI's table number (module docstring), or ``None`` outside the scheme."""
    if device_number is None or device_number < 0 or network_card < 0:
        return None
    if network_card == 0:
        return CARD0_BASE + device_number if device_number <= CARD0_MAX_DEVICE else None
    if network_card >= MAX_NETWORK_CARDS or device_number >= CARDN_SLOTS:
        return None
    return CARDN_BASE + CARDN_SLOTS * (network_card - 1) + device_number


def vpc_router(subnet: str) -> str:
    """The VPC router of a subnet: its base address + 1."""
    net = ipaddress.ip_network(subnet, strict=False)
    return str(net.network_address + 1)


def _host(addr: str) -> str:
    ip = ipaddress.ip_address(addr)
    return f"{ip}/{ip.max_prefixlen}"


def eni_config(eni: Eni) -> NetworkConfig | None:
    """Rules and routes for one ENI, or ``None`` when it has no table or no subnet."""
    table = route_table(eni.network_card, eni.device_number)
    if table is None:
        log.warning(
            "aws: %s (network card %s, device %s) is outside the route-table numbering "
            "(cards 0-31; device 0-152 on card 0, 0-23 on the others); it gets no policy "
            "routing",
            eni.label(),
            eni.network_card,
            eni.device_number,
        )
        return None
    routes: list[RouteConfig] = []
    sources: list[str] = []
    if eni.subnet_ipv4_cidr_block and (eni.local_ipv4s or eni.ipv4_prefixes):
        subnet = eni.subnet_ipv4_cidr_block
        routes.append(RouteConfig(destination=subnet, scope=SCOPE_LINK, table=table))
        routes.append(RouteConfig(destination="0.0.0.0/0", gateway=vpc_router(subnet), table=table))
        sources += [_host(a) for a in eni.local_ipv4s] + list(eni.ipv4_prefixes)
    if eni.subnet_ipv6_cidr_blocks and (eni.ipv6s or eni.ipv6_prefixes):
        subnet6 = eni.subnet_ipv6_cidr_blocks[0]
        # The kernel ignores scope for IPv6, but DRANET's validation (PRs
        # #317/#326, on the final config) requires a gateway unless the scope
        # is link (253), so the on-link subnet route says so explicitly.
        routes.append(RouteConfig(destination=subnet6, scope=SCOPE_LINK, table=table))
        routes.append(RouteConfig(destination="::/0", gateway=vpc_router(subnet6), table=table))
        sources += [_host(a) for a in eni.ipv6s] + list(eni.ipv6_prefixes)
    if not routes:
        log.info("aws: %s has no subnet in the metadata; no policy routing", eni.label())
        return None
    rules = [RuleConfig(priority=table, source=src, table=table) for src in sources]
    return NetworkConfig(interface=InterfaceConfig(), routes=routes, rules=rules)
