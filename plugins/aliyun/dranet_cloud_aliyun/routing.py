"""The cloud's baseline config for a NIC: policy routing via its vSwitch gateway,
or an IPVLAN subinterface for an LACP bond.

Policy routing.  A VPC only accepts a packet from an ENI when its source
address belongs to that ENI, so replies must leave through the NIC that owns
their source.  Each ENI the metadata knows therefore gets its own routing
table holding the vSwitch CIDR on-link and a default route via the vSwitch
gateway, plus one source rule per address of the ENI pointing at that table.

Table numbering: ``table = 256 + ifindex`` of the NIC on the host (read
through the host root), with the rule priority equal to the table number.
The ifindex is unique on a node for as long as the NIC exists, needs no
coordination between NICs and is what ``ip link`` prints, so an operator can
map a table to its NIC at a glance.  Starting at 256 keeps clear of the
kernel's reserved tables 253-255 (default, main, local) and the numbers below
them that distributions and CNIs hand out; NICs whose ifindex would reach
DRANET's VRF tables (1000 and up) get no policy routing, with a warning.
ECS publishes neither a device number nor an MTU per ENI, which is why the
ifindex and the NIC's current MTU come from the host root.

LACP bonds.  A bond moved into a pod would lose its aggregation, so a bond
in mode ``802.3ad`` that carries a global IPv6 /64 is claimed as an IPVLAN
child instead, answered exactly as DRANET's own Alibaba provider does (PR
#312): ``{"profile": "alibaba-eflo-subinterface", "interface": {"type":
"IPVLAN"}}``.  Its addresses and policy routing come from the profile role
(the eflo block, see :mod:`.eflo` and :mod:`.profile`).  A bond without a
global /64 has no eflo block, so it gets no config (as in DRANET).  A
bond's MAC is one of its slaves' and is usually not an ENI of its own in the
metadata, so bonds are recognised from the host root alone.
"""

from __future__ import annotations

import ipaddress
import logging

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import LocalNic, resolve_nic
from dranet_cloud.wire.models import (
    DeviceIdentifiers,
    InterfaceConfig,
    NetworkConfig,
    RouteConfig,
    RuleConfig,
)

from .constants import LACP_MODE, PLUGIN
from .eflo import nic_prefix
from .snapshot import AliyunInstance, AliyunNic

log = logging.getLogger(__name__)

TABLE_BASE = 256
TABLE_MAX = 999  # DRANET's VRF tables start at 1000
SCOPE_LINK = 253
# DRANET's name for the eflo profile (PR #312); this plugin's earlier name is
# still understood (the host routes every profile name to the cloud plugin).
EFLO_PROFILE = "alibaba-eflo-subinterface"
EFLO_PROFILE_ALIASES = ("alibaba.dra.net/eflo",)
RTF_GATEWAY = 0x0002
RTF_LOCAL = 0x80000000
RTF_CACHE = 0x01000000


def is_lacp_bond(host_root: HostRoot, device: DeviceIdentifiers) -> bool:
    """Whether ``device`` is a bond in 802.3ad (LACP) mode on this node."""
    return resolve_nic(host_root, device).bond_mode == LACP_MODE


def route_table_for(nic: LocalNic) -> int | None:
    """``256 + ifindex``, or ``None`` when the ifindex is unknown or too large."""
    ifindex = nic.ifindex
    if ifindex is None or ifindex < 1:
        return None
    table = TABLE_BASE + ifindex
    if table > TABLE_MAX:
        log.warning(
            "%s: NIC %s has ifindex %d, so its routing table %d would collide with DRANET's "
            "VRF tables (1000+); no policy routing for it",
            PLUGIN,
            nic.label(),
            ifindex,
            table,
        )
        return None
    return table


def _ip(text: str | None, version: int) -> str | None:
    if not text:
        return None
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    return str(addr) if addr.version == version else None


def _family_routing(
    *,
    nic: AliyunNic,
    addresses: list[str],
    subnet: ipaddress.IPv4Network | ipaddress.IPv6Network | None,
    gateway: str | None,
    default: str,
    table: int,
    routes: list[RouteConfig],
    rules: list[RuleConfig],
) -> None:
    """Routes and rules of one family, appended in place; nothing without a gateway."""
    if not addresses or gateway is None:
        return
    gw = ipaddress.ip_address(gateway)
    if subnet is not None and not gw.is_link_local and gw not in subnet:
        log.warning(
            "%s: NIC %s: gateway %s is outside its vSwitch CIDR %s; no policy routing for IPv%d",
            PLUGIN,
            nic.mac,
            gateway,
            subnet,
            gw.version,
        )
        return
    source = addresses[0]
    if subnet is not None:
        routes.append(
            RouteConfig(destination=str(subnet), source=source, scope=SCOPE_LINK, table=table)
        )
    routes.append(RouteConfig(destination=default, gateway=gateway, source=source, table=table))
    for addr in addresses:
        prefix = 32 if gw.version == 4 else 128
        rules.append(RuleConfig(priority=table, source=f"{addr}/{prefix}", table=table))


def nic_config(host_root: HostRoot, nic: AliyunNic, device: DeviceIdentifiers) -> NetworkConfig:
    """MTU and per-NIC policy routing for an ENI the metadata describes.

    The MTU and ifindex are the local NIC's, found by MAC, then PCI address,
    then name: DRANET may send a DRA device name (``pci-0000-00-06-0``) that
    no ``/sys/class/net`` entry carries.
    """
    local = resolve_nic(host_root, device)
    mtu = local.mtu if local.mtu is not None and local.mtu > 0 else None
    config = NetworkConfig(interface=InterfaceConfig(mtu=mtu))
    table = route_table_for(local)
    if table is None:
        return config
    routes: list[RouteConfig] = []
    rules: list[RuleConfig] = []
    families = (
        (4, nic.ipv4_addresses(), nic.ipv4_subnet(), nic.gateway, "0.0.0.0/0"),
        (6, nic.ipv6s, nic.ipv6_subnet(), nic.ipv6_gateway, "::/0"),
    )
    for version, addresses, subnet, gateway, default in families:
        _family_routing(
            nic=nic,
            addresses=[a for a in (_ip(x, version) for x in addresses) if a],
            subnet=subnet,
            gateway=_ip(gateway, version),
            default=default,
            table=table,
            routes=routes,
            rules=rules,
        )
    if routes:
        config.routes = routes
        config.rules = rules
    return config


def bond_config() -> NetworkConfig:
    """An IPVLAN child addressed by the eflo profile, as DRANET's provider answers."""
    return NetworkConfig(profile=EFLO_PROFILE, interface=InterfaceConfig(type="IPVLAN"))


def parent_ipv6_routes(host_root: HostRoot, ifname: str, table: int) -> list[RouteConfig]:
    """The parent's IPv6 routes (``/proc/net/ipv6_route``) moved into ``table``.

    Kept: routes of ``ifname`` that are up, not local, not cached, not
    multicast and not the link-local ``fe80::/64``.  A route without a
    gateway is on-link: scope 253, which DRANET's validation requires.
    """
    text = host_root.read_text("/proc/net/ipv6_route") or ""
    routes: list[RouteConfig] = []
    for line in text.splitlines()[:4096]:
        fields = line.split()
        if len(fields) != 10 or fields[9] != ifname:
            continue
        try:
            dest = ipaddress.IPv6Network((int(fields[0], 16), int(fields[1], 16)), strict=False)
            hop = ipaddress.IPv6Address(int(fields[4], 16))
            flags = int(fields[8], 16)
        except ValueError:
            continue
        if not flags & 0x1 or flags & (RTF_LOCAL | RTF_CACHE):
            continue
        if dest.is_multicast or (dest.is_link_local and dest.prefixlen >= 64):
            continue
        if flags & RTF_GATEWAY and int(hop):
            route = RouteConfig(destination=str(dest), gateway=str(hop), table=table)
        else:
            route = RouteConfig(destination=str(dest), scope=SCOPE_LINK, table=table)
        if route.dedup_key() not in {r.dedup_key() for r in routes}:
            routes.append(route)
    return routes


def device_config(
    host_root: HostRoot, instance: AliyunInstance | None, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """The bond config, the ENI config, or ``None`` for a NIC this plugin knows nothing of."""
    local = resolve_nic(host_root, device)
    if local.bond_mode == LACP_MODE:
        if local.ifname and nic_prefix(host_root, local.ifname) is not None:
            return bond_config()
        log.info(
            "%s: LACP bond %s has no global IPv6 /64, so no eflo block: no config for it",
            PLUGIN,
            local.label(),
        )
        return None
    nic = instance.nic_for(local.identifiers()) if instance is not None else None
    if nic is None:
        return None
    return nic_config(host_root, nic, device)
