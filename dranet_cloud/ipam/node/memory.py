"""An IPAM store that lives in process memory: for tests and ephemeral hosts.

It follows exactly the rules of the SQLite store (same checks, same use of the
random generator, same ordering) but forgets everything when the process ends,
so a daemon must only use it when the operator asked for it explicitly.
"""

from __future__ import annotations

import bisect
import ipaddress
import logging
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from dranet_cloud.ipam.base import Allocation, Owner, pick_identities
from dranet_cloud.ipam.node.pool_counts import AllocationTally
from dranet_cloud.ipam.requests import (
    RandomSource,
    held_elsewhere,
    host_cidr,
    ordered_ranges,
    parse_static,
    require_collect_bounds,
    take_free,
    warn_outside,
)
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_Key = tuple[int, int]  # (family, integer address)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _key_of(alloc: Allocation) -> _Key:
    addr = ipaddress.ip_interface(alloc.address).ip
    return addr.version, int(addr)


def _holder_order(alloc: Allocation) -> tuple[bool, int, int]:
    """Dynamic allocations before static ones, then by family and address."""
    family, value = _key_of(alloc)
    return alloc.static, family, value


class MemoryStore:
    """In-memory :class:`~dranet_cloud.ipam.base.IpamStore`; thread-safe, not shared by processes.

    ``rng`` and ``clock`` exist so tests can pin the random start and the time.
    """

    def __init__(self, *, rng: RandomSource | None = None, clock: Clock | None = None) -> None:
        self._random: RandomSource = rng if rng is not None else random.SystemRandom()
        self._clock: Clock = clock if clock is not None else utc_now
        self._lock = threading.Lock()
        self._by_key: dict[_Key, Allocation] = {}
        self._sorted: dict[int, list[int]] = {4: [], 6: []}
        self._by_owner: dict[Owner, dict[_Key, None]] = {}
        # (pool, claim UID) -> identities holding rows; identity -> recorded keys
        self._by_claim: dict[tuple[str, str], set[str]] = {}
        self._keys: dict[str, set[str]] = {}
        self._owners_of: dict[str, int] = {}  # identity -> owners (claims) holding rows
        self._meta: dict[str, str] = {}  # facts about the store (the cluster of its claims)
        self.tally = AllocationTally()  # held addresses per pool and range (metrics)

    # -- helpers (call with the lock held) ---------------------------------

    def _scan(self, family: int) -> Callable[[int, int], Iterator[int]]:
        values = self._sorted[family]

        def scan(lo: int, hi: int) -> Iterator[int]:
            i = bisect.bisect_left(values, lo)
            while i < len(values) and values[i] <= hi:
                yield values[i]
                i += 1

        return scan

    def _identities(self, owner: Owner, *, strict: bool = True) -> tuple[Owner, list[Owner]]:
        """The owner new rows go under, and every owner holding this NIC's rows."""
        devices = self._by_claim.get((owner.pool, owner.claim_uid), set())
        held = {d: frozenset(self._keys.get(d, ())) for d in devices}
        target, found = pick_identities(owner, held, strict=strict)
        main = Owner(owner.pool, target, owner.claim_uid, owner.all_keys)
        return main, [Owner(owner.pool, d, owner.claim_uid) for d in found]

    def _held(self, owners: Iterable[Owner]) -> list[Allocation]:
        out = [self._by_key[k] for o in owners for k in self._by_owner.get(o, {})]
        return sorted(out, key=_holder_order)

    def _fill_claim(self, held: Iterable[Allocation], claim: ClaimReference | None) -> None:
        """Record the claim's namespace/name on allocations made when only its UID was known."""
        if claim is None or (claim.namespace is None and claim.name is None and not claim.pods):
            return
        for alloc in held:
            if alloc.claim is None:
                self._by_key[_key_of(alloc)] = replace(alloc, claim=claim)

    def _record(self, owner: Owner) -> None:
        if owner in self._by_owner:  # keys live only as long as rows do
            self._keys.setdefault(owner.device, set()).update(owner.all_keys)

    def _add(self, alloc: Allocation) -> None:
        key = _key_of(alloc)
        self.tally.apply([(alloc.owner.pool, key[0], key[1], 1)])
        self._by_key[key] = alloc
        bisect.insort(self._sorted[key[0]], key[1])
        owner = alloc.owner
        if owner not in self._by_owner:
            self._owners_of[owner.device] = self._owners_of.get(owner.device, 0) + 1
        self._by_owner.setdefault(owner, {})[key] = None
        self._by_claim.setdefault((owner.pool, owner.claim_uid), set()).add(owner.device)

    def _remove(self, alloc: Allocation) -> None:
        key = _key_of(alloc)
        self.tally.apply([(alloc.owner.pool, key[0], key[1], -1)])
        del self._by_key[key]
        values = self._sorted[key[0]]
        del values[bisect.bisect_left(values, key[1])]
        owner = alloc.owner
        keys = self._by_owner[owner]
        del keys[key]
        if not keys:
            del self._by_owner[owner]
            devices = self._by_claim[(owner.pool, owner.claim_uid)]
            devices.discard(owner.device)
            if not devices:
                del self._by_claim[(owner.pool, owner.claim_uid)]
            self._owners_of[owner.device] -= 1
            if not self._owners_of[owner.device]:
                del self._owners_of[owner.device]
                self._keys.pop(owner.device, None)

    def _with_keys(self, alloc: Allocation) -> Allocation:
        recorded = frozenset(self._keys.get(alloc.owner.device, ()))
        return replace(alloc, owner=replace(alloc.owner, keys=recorded))

    def _count_in(self, rng: IPRange) -> int:
        values = self._sorted[rng.version]
        return bisect.bisect_right(values, int(rng.end)) - bisect.bisect_left(
            values, int(rng.start)
        )

    # -- the tally (metrics) -----------------------------------------------------

    def watch_ranges(self, ranges: Sequence[IPRange]) -> None:
        """Count the addresses held in each of ``ranges`` in the tally from now on."""
        with self._lock:
            self.tally.watch(ranges, self._count_in)

    def recount_if_changed(self) -> bool:
        """Nothing outside this process writes a memory store."""
        return False

    # -- the store API -----------------------------------------------------

    def allocate(
        self, owner: Owner, ranges: Sequence[IPRange], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = ordered_ranges(owner, ranges)
        with self._lock:
            main, owners = self._identities(owner)
            held = self._held(owners)
            result: list[str] = []
            new: list[Allocation] = []
            now = self._clock()
            for rng in wanted:
                existing = next((a for a in held if _key_of(a)[0] == rng.version), None)
                if existing is not None:
                    if existing.address not in rng:
                        warn_outside(log, owner, existing.address, rng)
                    result.append(existing.address)
                    continue
                occupied = self._scan(rng.version)
                alloc, _free = take_free(rng, self._random, occupied, owner, main, now, claim)
                new.append(alloc)
                result.append(alloc.address)
            for alloc in new:
                self._add(alloc)
            self._record(main)
            self._fill_claim(held, claim)
            return result

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = parse_static(owner, addresses)
        with self._lock:
            main, owners = self._identities(owner)
            new: list[Allocation] = []
            now = self._clock()
            for addr in wanted:
                holder = self._by_key.get((addr.version, int(addr)))
                if holder is None:
                    new.append(Allocation(main, host_cidr(addr), True, now, claim))
                elif holder.owner not in owners:
                    raise held_elsewhere(addr, owner, holder)
            for alloc in new:
                self._add(alloc)
            self._record(main)
            self._fill_claim(self._held(owners), claim)
            return [host_cidr(a) for a in wanted]

    def release(self, owner: Owner) -> list[str]:
        with self._lock:
            held = sorted(self._held(self._identities(owner, strict=False)[1]), key=_key_of)
            for alloc in held:
                self._remove(alloc)
            return [a.address for a in held]

    def collect(
        self, live_claims: Iterable[str] | None = None, older_than: timedelta | None = None
    ) -> list[Allocation]:
        require_collect_bounds(live_claims, older_than)
        live = None if live_claims is None else set(live_claims)
        with self._lock:
            cutoff = None if older_than is None else self._clock() - older_than
            victims = [
                a
                for a in self._by_key.values()
                if (live is None or a.owner.claim_uid not in live)
                and (cutoff is None or a.created_at <= cutoff)
            ]
            for alloc in victims:
                self._remove(alloc)
        return sorted(victims, key=_list_order)

    def held(self, owner: Owner) -> list[Allocation]:
        """What ``owner`` holds: dynamic allocations first, then by family and address."""
        with self._lock:
            owners = self._identities(owner, strict=False)[1]
            return [self._with_keys(a) for a in self._held(owners)]

    def list(self) -> list[Allocation]:
        with self._lock:
            return sorted((self._with_keys(a) for a in self._by_key.values()), key=_list_order)

    def record_claim_names(self, names: Mapping[str, tuple[str, str]]) -> int:
        """Record the namespace/name of claims whose allocations know only the UID."""
        changed = 0
        with self._lock:
            for key, alloc in list(self._by_key.items()):
                found = names.get(alloc.owner.claim_uid)
                old = alloc.claim
                if found is None or (old is not None and (old.namespace or old.name)):
                    continue
                pods = old.pods if old is not None else ()
                claim = ClaimReference(alloc.owner.claim_uid, found[0], found[1], pods)
                self._by_key[key] = replace(alloc, claim=claim)
                changed += 1
        return changed

    def get_meta(self, key: str) -> str | None:
        """A fact recorded about the store (``cluster_uid``), ``None`` when never recorded."""
        with self._lock:
            return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._meta[key] = value

    def close(self) -> None:
        """Nothing to release; present for the protocol."""


def _list_order(alloc: Allocation) -> tuple[Owner, int, int]:
    family, value = _key_of(alloc)
    return alloc.owner, family, value
