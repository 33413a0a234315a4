"""Per-NIC policy routing, derived exactly as DRANET's Azure provider does.

Azure's virtual network drops a packet that leaves a NIC with a source
address that NIC does not own, so a pod holding a secondary NIC needs its
own table.  For the NIC at position ``i`` of IMDS's ``network.interface``
list:

* table ``100 + i``;
* IPv4, from the NIC's first subnet: a rule ``from <subnet address>/<prefix>``
  (the subnet, not the host address) and ``0.0.0.0/0`` via the subnet's base
  address + 1, Azure's gateway; a subnet whose address is not its network
  base gets nothing (DRANET refuses it too);
* IPv6, only when the host has an IPv6 default route through a gateway on
  that NIC (read from ``/proc/net/ipv6_route`` through the host root) and
  the NIC's first IPv6 address is not link-local: a rule ``from <addr>/128``
  and ``::/0`` via that gateway;
* rules carry no priority and routes no scope or source, as DRANET's do;
  no rule or route at all means no config (``None``).

The config goes to the synthetic NIC of an accelerated-networking pair,
never to its VF, which has no address for the gateway to be reached from.
"""

from __future__ import annotations

import ipaddress
import logging

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig, RouteConfig, RuleConfig

from .constants import PLUGIN, ROUTE_TABLE_BASE
from .pairing import Role, resolve
from .snapshot import AzureInstance, AzureNic, AzureSubnet

log = logging.getLogger(__name__)

RESERVED_TABLES = frozenset({253, 254, 255})  # default, main, local


def subnet_gateway(subnet: AzureSubnet) -> str:
    """The subnet's base address + 1; ``ValueError`` for anything but an IPv4 network base."""
    network = ipaddress.ip_network(f"{subnet.address}/{subnet.prefix}", strict=False)
    if network.version != 4:
        raise ValueError(f"{subnet.address} is not an IPv4 address")
    if str(network.network_address) != subnet.address:
        raise ValueError(
            f"{subnet.address} is not the network base for /{subnet.prefix} "
            f"(expected {network.network_address})"
        )
    gateway = network.network_address + 1
    if gateway not in network:
        raise ValueError(f"gateway {gateway} falls outside {network}")
    return str(gateway)


def _ipv4(nic: AzureNic, table: int, rules: list[RuleConfig], routes: list[RouteConfig]) -> None:
    if not nic.ipv4_subnets:
        return
    subnet = nic.ipv4_subnets[0]
    try:
        gateway = subnet_gateway(subnet)
    except ValueError as exc:
        log.warning(
            "%s: NIC %s: no IPv4 policy routing, subnet %s/%s is unusable: %s",
            PLUGIN,
            nic.imds_mac,
            subnet.address,
            subnet.prefix,
            exc,
        )
        return
    rules.append(RuleConfig(source=f"{subnet.address}/{subnet.prefix}", table=table))
    routes.append(RouteConfig(destination="0.0.0.0/0", gateway=gateway, table=table))


def _ipv6(
    host_root: HostRoot,
    ifname: str | None,
    nic: AzureNic,
    table: int,
    rules: list[RuleConfig],
    routes: list[RouteConfig],
) -> None:
    if not ifname or not nic.ipv6_addresses:
        return
    address = ipaddress.IPv6Address(nic.ipv6_addresses[0])
    if address.is_link_local:
        return
    gateway = host_root.ipv6_default_gateway(ifname)
    if gateway is None:
        log.debug("%s: %s has no IPv6 default gateway; no IPv6 policy routing", PLUGIN, ifname)
        return
    rules.append(RuleConfig(source=f"{address}/128", table=table))
    routes.append(RouteConfig(destination="::/0", gateway=gateway, table=table))


def nic_config(host_root: HostRoot, nic: AzureNic, ifname: str | None) -> NetworkConfig | None:
    """The rules and routes for one IMDS NIC whose local interface is ``ifname``."""
    table = ROUTE_TABLE_BASE + nic.index
    if table in RESERVED_TABLES:
        log.warning(
            "%s: NIC %s is entry %d of IMDS's list, so its table %d would be a kernel "
            "table; no policy routing for it",
            PLUGIN,
            nic.imds_mac,
            nic.index,
            table,
        )
        return None
    rules: list[RuleConfig] = []
    routes: list[RouteConfig] = []
    _ipv4(nic, table, rules, routes)
    _ipv6(host_root, ifname, nic, table, rules, routes)
    if not rules and not routes:
        return None
    return NetworkConfig(rules=rules, routes=routes)


def device_config(
    host_root: HostRoot, instance: AzureInstance | None, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """DRANET's routing for the NIC ``device`` is, or ``None`` (VF, unknown NIC)."""
    if instance is None:
        return None
    local = resolve(host_root, device)
    if local is not None and local.role is Role.VF:
        log.debug(
            "%s: %s is the accelerated-networking VF of %s; the routing goes to %s",
            PLUGIN,
            device.label(),
            local.partner,
            local.partner,
        )
        return None
    nic = instance.nic_for_mac(device.mac or (local.mac if local else None))
    if nic is None:
        return None
    # A NIC not found here has no host routes to read (its name may be another's).
    return nic_config(host_root, nic, local.name if local is not None else None)
