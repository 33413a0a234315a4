"""Checking and normalising what callers hand to a store, shared by every backend.

Both stores must reject the same inputs with the same errors and consume the
random generator in the same order, so that a seeded memory store and a seeded
SQLite store given the same calls end in the same state (the property tests
rely on that).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Protocol

from dranet_cloud.ipam.base import Allocation, Owner
from dranet_cloud.ipam.freesearch import first_free
from dranet_cloud.toolkit.errors import AddressConflict, ConfigError, RangeExhausted
from dranet_cloud.toolkit.iprange import IPAddress, IPRange, address_of
from dranet_cloud.wire.claims import ClaimReference


class InvalidIpamRequest(ConfigError, ValueError):
    """A caller asked for something the IPAM cannot mean (two IPv4 ranges, a bad address).

    It is a ``ConfigError`` (the CLI exits 2) and a ``ValueError`` (it is a
    programming or configuration mistake, not a state conflict).
    """


def held_elsewhere(addr: object, owner: object, holder: Allocation) -> AddressConflict:
    """The refusal of a static address another owner holds (both node stores)."""
    return AddressConflict(
        f"ipam: {addr} requested by {owner} is already held by {holder.owner} "
        f"(since {holder.created_at.isoformat()}); pick another address or "
        "release the holder's claim"
    )


def warn_outside(log: logging.Logger, owner: object, address: str, rng: IPRange) -> None:
    """A retry keeps its address even when the range changed: one address per claim."""
    log.warning(
        "ipam: %s keeps %s although it is outside the range %s it asked for", owner, address, rng
    )


def require_collect_bounds(live_claims: object, older_than: object) -> None:
    """Refuse a ``collect`` given neither live claims nor a minimum age: it would free all."""
    if live_claims is None and older_than is None:
        raise InvalidIpamRequest(
            "ipam: collect needs live claims, a minimum age or both; "
            "refusing to free every allocation"
        )


class RandomSource(Protocol):
    """What a store needs from a random generator: ``random.Random`` fits."""

    def randrange(self, stop: int, /) -> int: ...


def ordered_ranges(owner: object, ranges: Sequence[IPRange]) -> list[IPRange]:
    """``ranges`` sorted IPv4 first, refusing a second range of one family.

    One address per family per owner is the contract, so two ranges of the
    same family leave no way to pick; the caller must merge or choose.
    """
    by_family: dict[int, IPRange] = {}
    for rng in ranges:
        if not isinstance(rng, IPRange):
            raise InvalidIpamRequest(
                f"ipam: allocate for {owner} got {rng!r}; pass IPRange objects "
                "(build them with ip_range_from_cidr or IPRange.parse)"
            )
        if rng.version in by_family:
            raise InvalidIpamRequest(
                f"ipam: allocate for {owner} got two IPv{rng.version} ranges "
                f"({by_family[rng.version]} and {rng}); pass at most one range per family"
            )
        by_family[rng.version] = rng
    return [by_family[v] for v in sorted(by_family)]


def host_cidr(addr: IPAddress) -> str:
    """The host CIDR form stores hand out: ``10.0.0.5/32``, ``2001:db8::5/128``."""
    return f"{addr}/{addr.max_prefixlen}"


def parse_static(owner: object, addresses: Sequence[str]) -> list[IPAddress]:
    """Addresses a user asked for, as IP addresses, duplicates dropped, order kept.

    Users write interface addresses (``10.0.0.5/24``) as often as bare ones;
    only the address part is reserved, the prefix length belongs to the
    interface configuration.
    """
    if isinstance(addresses, str):
        raise InvalidIpamRequest(
            f"ipam: reserve for {owner} got the string {addresses!r}; pass a list of addresses"
        )
    seen: dict[IPAddress, None] = {}
    for text in addresses:
        try:
            raw = text.strip()
            addr = ipaddress.ip_interface(raw).ip if "/" in raw else ipaddress.ip_address(raw)
        except (ValueError, AttributeError) as exc:
            raise InvalidIpamRequest(
                f"ipam: reserve for {owner}: {text!r} is not an IP address or CIDR "
                "(expected forms: 10.0.0.5, 10.0.0.5/24, 2001:db8::5/64)"
            ) from exc
        if addr.is_unspecified or (
            "/" in raw and ipaddress.ip_interface(raw).network.prefixlen == 0
        ):
            raise InvalidIpamRequest(
                f"ipam: reserve for {owner}: {text!r} is not a host address (an unspecified "
                "address or a /0 names no interface); ask for the address the pod should have"
            )
        seen.setdefault(addr, None)
    return list(seen)


def start_offset(rng: IPRange, random: RandomSource) -> int:
    """The integer address a search starts from: uniform over the range.

    A random start spreads allocations so that a restarted node, or two pools
    sharing a range, rarely walk over the same occupied run.
    """
    return int(rng.start) + random.randrange(rng.size)


def take_free(
    rng: IPRange,
    random: RandomSource,
    occupied: Callable[[int, int], Iterator[int]],
    owner: Owner,
    main: Owner,
    now: datetime,
    claim: ClaimReference | None,
) -> tuple[Allocation, int]:
    """A new dynamic allocation for ``main`` in ``rng``, and its address as an integer.

    The first free address from a random start (:func:`start_offset`, then
    :func:`~.freesearch.first_free` over the store's ``occupied`` addresses);
    :class:`RangeExhausted` naming ``owner`` when the range is full.  Both
    stores take addresses through here, so they consume the random generator
    alike and word a full range alike.
    """
    begin = start_offset(rng, random)
    free = first_free(int(rng.start), int(rng.end), begin, occupied)
    if free is None:
        raise RangeExhausted(
            f"ipam: no free address left in IPv{rng.version} range {rng} for "
            f"{owner} ({rng.size} of {rng.size} held); free addresses with "
            "`dranet-cloud ipam gc` or configure a larger range"
        )
    return Allocation(main, host_cidr(address_of(rng.version, free)), False, now, claim), free
