"""Address ranges for node-local IPAM, and the range derivations clouds share.

A range is an inclusive ``[start, end]`` pair of one IP family.  Ranges are
never enumerated: a /64 holds 2^64 addresses, so everything here is integer
arithmetic on the endpoints.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def address_of(version: int, value: int) -> IPAddress:
    """The address of family ``version`` whose integer value is ``value``.

    ``ipaddress.ip_address(int)`` guesses IPv4 for any value below 2^32, which
    turns ``::1`` into ``0.0.0.1``; integer arithmetic on IPv6 must keep its family.
    """
    if version == 4:
        return ipaddress.IPv4Address(value)
    if version == 6:
        return ipaddress.IPv6Address(value)
    raise ValueError(f"IP version must be 4 or 6, not {version}")


@dataclass(frozen=True, order=True)
class IPRange:
    """Inclusive ``[start, end]`` of one family."""

    start: IPAddress
    end: IPAddress

    def __post_init__(self) -> None:
        if self.start.version != self.end.version:
            raise ValueError(f"range {self.start}-{self.end} mixes IPv4 and IPv6")
        if int(self.start) > int(self.end):
            raise ValueError(f"range start {self.start} is after its end {self.end}")

    @classmethod
    def parse(cls, text: str) -> IPRange:
        """``10.0.0.0/24`` (network and broadcast excluded) or ``10.0.0.5-10.0.0.9``.

        What an operator types: a CIDR with host bits set (``10.5.0.1/16``) is
        refused with the network it meant (:func:`parse_network`).
        """
        text = text.strip()
        if "-" in text:
            a, b = text.split("-", 1)
            return cls(ipaddress.ip_address(a.strip()), ipaddress.ip_address(b.strip()))
        return ip_range_from_cidr(parse_network(text))

    @property
    def version(self) -> int:
        return self.start.version

    @property
    def size(self) -> int:
        return int(self.end) - int(self.start) + 1

    def __contains__(self, addr: object) -> bool:
        if isinstance(addr, str):
            addr = ipaddress.ip_interface(addr).ip if "/" in addr else ipaddress.ip_address(addr)
        if not isinstance(addr, ipaddress.IPv4Address | ipaddress.IPv6Address):
            return False
        return addr.version == self.version and int(self.start) <= int(addr) <= int(self.end)

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"


def parse_network(text: str) -> IPNetwork:
    """A CIDR an operator typed, exactly: host bits set are an error naming the network.

    ``ipaddress`` either masks ``10.5.0.1/16`` silently (``strict=False``: the
    operator then gets a range they did not read) or says only "has host
    bits set"; the error here names the network meant and the range form for
    a range that starts at that address.
    """
    text = text.strip()
    try:
        return ipaddress.ip_network(text)
    except ValueError as exc:
        if "host bits set" not in str(exc):
            raise
    net = ipaddress.ip_network(text, strict=False)
    addr = ipaddress.ip_interface(text).ip
    last = ip_range_from_cidr(net).end
    raise ValueError(
        f"{text} has host bits set: did you mean {net}? (a CIDR names its network; for the "
        f"addresses from {addr} on, write the range {addr}-{last})"
    )


def ip_range_from_cidr(
    cidr: str | IPNetwork, start_reserved: int = 0, end_reserved: int = 0
) -> IPRange:
    """The usable range of a CIDR.

    ``cidr`` as a string may have host bits set (a cloud's metadata writes
    an interface address with its prefix); what an operator typed goes through
    :func:`parse_network` first, as :meth:`IPRange.parse` does.

    The network address and the last address (IPv4 broadcast; for IPv6 kept
    out too, so both families behave alike) are never included, then
    ``start_reserved``/``end_reserved`` more are skipped at each end (AWS keeps
    the first four and the last).  A /32 or /128 is the single address itself;
    a /31 or /127 both addresses (point-to-point).
    """
    net = ipaddress.ip_network(cidr, strict=False) if isinstance(cidr, str) else cidr
    if start_reserved < 0 or end_reserved < 0:
        raise ValueError("reserved counts cannot be negative")
    first, last = int(net.network_address), int(net.broadcast_address)
    if net.num_addresses > 2:
        first, last = first + 1, last - 1
    first += start_reserved
    last -= end_reserved
    if first > last:
        raise ValueError(
            f"{net} has no usable address once {start_reserved} at the start and "
            f"{end_reserved} at the end are reserved"
        )
    return IPRange(address_of(net.version, first), address_of(net.version, last))


def marker_subnet(
    prefix: str | ipaddress.IPv6Network,
    marker: int,
    marker_bits: int = 16,
) -> ipaddress.IPv6Network:
    """Write ``marker`` right after ``prefix``, byte aligned: a /64 becomes a /80.

    The marker is the caller's (a cloud's convention, e.g. GCE's ``0xC0DE``);
    core knows only the arithmetic.

    A prefix whose length is not a multiple of 8 is first widened to the next
    byte boundary (its extra bits are zero).
    """
    net = ipaddress.IPv6Network(prefix, strict=False) if isinstance(prefix, str) else prefix
    if net.version != 6:
        raise ValueError(f"marker subnets are IPv6 only, got {net}")
    base_len = (net.prefixlen + 7) // 8 * 8
    new_len = base_len + marker_bits
    if new_len > 128:
        raise ValueError(f"{net} is too long to carry a {marker_bits}-bit marker")
    if not 0 <= marker < (1 << marker_bits):
        raise ValueError(f"marker {marker:#x} does not fit in {marker_bits} bits")
    value = int(net.network_address) | (marker << (128 - new_len))
    return ipaddress.IPv6Network((value, new_len))


def marker_range(prefix: str | ipaddress.IPv6Network, marker: int) -> IPRange:
    """The allocatable range of :func:`marker_subnet`."""
    return ip_range_from_cidr(marker_subnet(prefix, marker))
