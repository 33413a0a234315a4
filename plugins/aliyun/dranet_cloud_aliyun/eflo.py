"""The eflo pod block: 16 addresses inside each RDMA NIC's own /64.

Alibaba's eflo (Lingjun) networking reserves, inside the /64 of every RDMA
NIC, the /124 whose host part is ``0000:000f:0000:0c00``-``0c0f`` for pod
subinterfaces, so a pod's IPVLAN child never takes an address the host or the
fabric uses.  The /64 is read from the NIC's global IPv6 address in
``/proc/net/if_inet6`` (through the host root): the kernel's view is the
truth for a bond, which the metadata service does not list under a MAC of its
own.

All 16 addresses of the block are handed out, ``...:c00`` and ``...:c0f``
included.  :func:`dranet_cloud.toolkit.iprange.ip_range_from_cidr` keeps the first and
last address of a CIDR out because they are a subnet's network and broadcast
addresses; the /124 is not a subnet (the on-link subnet is the /64, whose
subnet-router anycast address is ``<prefix>::``) and IPv6 has no broadcast,
so neither end is special here and excluding them would only shrink a
16-address pool to 14.
"""

from __future__ import annotations

import ipaddress
import logging

from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.toolkit.iprange import IPRange

from .constants import PLUGIN

log = logging.getLogger(__name__)

PREFIX_LEN = 64
BLOCK_PREFIX_LEN = 124
BLOCK_HOST_PART = 0x0000_000F_0000_0C00  # 0000:000f:0000:0c00


def eflo_block(prefix: str | ipaddress.IPv6Network) -> ipaddress.IPv6Network:
    """``<prefix>:0:f:0:c00/124`` for a /64 (a shorter prefix: its first /64)."""
    net = ipaddress.IPv6Network(prefix, strict=False) if isinstance(prefix, str) else prefix
    if net.version != 6:
        raise ValueError(f"eflo blocks live in IPv6 /64s, not in {net}")
    if net.prefixlen > PREFIX_LEN:
        raise ValueError(f"{net} is narrower than the /64 eflo carves its block from")
    base = int(net.network_address) & ~((1 << (128 - PREFIX_LEN)) - 1)
    return ipaddress.IPv6Network((base | BLOCK_HOST_PART, BLOCK_PREFIX_LEN))


def eflo_range(prefix: str | ipaddress.IPv6Network) -> IPRange:
    """Every address of :func:`eflo_block`, both ends included (see the module doc)."""
    block = eflo_block(prefix)
    return IPRange(block.network_address, block.broadcast_address)


def nic_prefix(host_root: HostRoot, ifname: str) -> ipaddress.IPv6Network | None:
    """The /64 of ``ifname``'s first global IPv6 address with a /64 or shorter prefix.

    Longer prefixes (a DHCPv6 /128) do not say which /64 is on-link and are
    skipped; link-local and host-scope addresses never count.  When a NIC
    carries several /64s the first in the kernel's order wins, and the
    others are logged.
    """
    found: list[ipaddress.IPv6Network] = []
    for entry in host_root.if_inet6():
        if entry.ifname != ifname or not entry.is_global or entry.prefix_len > PREFIX_LEN:
            continue
        addr = ipaddress.IPv6Address(entry.address)
        if addr.is_link_local or addr.is_multicast or addr.is_loopback:
            continue
        net = ipaddress.IPv6Network((addr, PREFIX_LEN), strict=False)
        if net not in found:
            found.append(net)
    if len(found) > 1:
        log.info(
            "%s: %s carries several /64s (%s); eflo addresses come from the first",
            PLUGIN,
            ifname,
            ", ".join(str(n) for n in found),
        )
    return found[0] if found else None
