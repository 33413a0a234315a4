"""The static per-NIC config GCE implies: MTU, gateway routes, gateway neighbor.

A GCE NIC moved into a pod loses what the guest's DHCP client set up on the
host: the VPC's MTU (8244 or 8896 on accelerator VPCs, not 1500), the on-link
route to the gateway (GCE gives the VM a /32, so the gateway is not on any
connected subnet) and the route to the rest of the subnet through it.  The
gateway's MAC follows GCE's MAC-from-IPv4 convention, so a permanent neighbor
entry saves the first ARP round trip and survives ARP suppression.
"""

from __future__ import annotations

import ipaddress

from dranet_cloud.wire.models import InterfaceConfig, NeighborConfig, NetworkConfig, RouteConfig

from .snapshot import GceNic

SCOPE_LINK = 253  # RT_SCOPE_LINK


def gce_mac_for_ipv4(address: str) -> str:
    """GCE's MAC for an IPv4 address: ``42:01`` followed by the four octets."""
    octets = ipaddress.IPv4Address(address).packed
    return ":".join(f"{b:02x}" for b in (0x42, 0x01, *octets))


def nic_config(nic: GceNic) -> NetworkConfig | None:
    """The NIC's baseline config, or ``None`` when the metadata gives nothing to set."""
    routes: list[RouteConfig] = []
    neighbors: list[NeighborConfig] = []
    gateway: ipaddress.IPv4Address | None = None
    if nic.gateway:
        try:
            gateway = ipaddress.IPv4Address(nic.gateway)
        except ValueError:
            gateway = None
    if gateway is not None:
        routes.append(RouteConfig(destination=f"{gateway}/32", scope=SCOPE_LINK))
        subnet = nic.subnet()
        if subnet is not None and subnet.prefixlen < 32 and gateway in subnet:
            routes.append(RouteConfig(destination=str(subnet), gateway=str(gateway)))
        neighbors.append(
            NeighborConfig(destination=str(gateway), hardware_addr=gce_mac_for_ipv4(str(gateway)))
        )
    if nic.mtu is None and not routes:
        return None
    return NetworkConfig(
        interface=InterfaceConfig(mtu=nic.mtu),
        routes=routes or None,
        neighbors=neighbors or None,
    )
