"""Property-based tests: no address is ever held twice, none lies outside its range.

The state machine drives a MemoryStore and a SqliteStore with identical calls
and identically seeded random sources; besides the invariants it checks that
both backends reach the same state, so the SQLite queries and the in-memory
structures implement one algorithm.
"""

from __future__ import annotations

import ipaddress
import random
import shutil
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from dranet_cloud.ipam import Allocation, MemoryStore, Owner, SqliteStore
from dranet_cloud.toolkit.errors import AddressConflict, RangeExhausted
from dranet_cloud.toolkit.iprange import IPRange, ip_range_from_cidr

V4_A = ip_range_from_cidr("10.0.0.0/29")  # 10.0.0.1-6
V4_B = IPRange.parse("10.0.0.4-10.0.0.12")  # overlaps A
V6_SMALL = ip_range_from_cidr("2001:db8::/125")  # ::1-::6
V6_HUGE = ip_range_from_cidr("2001:db8:1::/64")
V4_TINY = IPRange.parse("10.0.0.1-10.0.0.2")  # inside A, full after two owners
V6_TINY = IPRange.parse("2001:db8::5-2001:db8::6")
ALL_RANGES = [V4_A, V4_B, V6_SMALL, V6_HUGE, V4_TINY, V6_TINY]
RANGE_SETS = [
    [V4_A],
    [V4_B],
    [V6_SMALL],
    [V6_HUGE],
    [V4_A, V6_SMALL],
    [V6_HUGE, V4_B],
    [V4_A, V6_HUGE],
    [V4_TINY],
    [V4_TINY, V6_SMALL],
    [V6_TINY, V4_A],
]
OWNERS = [Owner(pool, "eth1", f"claim-{i}") for pool in ("p", "q") for i in range(5)]
STATIC_CANDIDATES = [f"10.0.0.{i}" for i in range(0, 14)] + [f"2001:db8::{i}" for i in range(8)]


def _fixed_clock() -> datetime:
    return datetime(2025, 1, 1, tzinfo=timezone.utc)


def _family(address: str) -> int:
    return ipaddress.ip_interface(address).version


def _snapshot(allocs: list[Allocation]) -> list[tuple[Owner, str, bool]]:
    return [(a.owner, a.address, a.static) for a in allocs]


class TwoStores(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1))
    def open_stores(self, seed: int) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ipam-prop-"))
        self.memory = MemoryStore(rng=random.Random(seed), clock=_fixed_clock)
        self.sqlite = SqliteStore(
            self.tmp / "ipam.db", synchronous="OFF", rng=random.Random(seed), clock=_fixed_clock
        )
        # what each owner holds dynamically, per family, as observed from allocate()
        self.dynamic: dict[tuple[Owner, int], str] = {}

    def teardown(self) -> None:
        if hasattr(self, "sqlite"):
            self.sqlite.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _both(self, call: str, *args: object) -> object:
        results: list[object] = []
        for store in (self.memory, self.sqlite):
            try:
                results.append(getattr(store, call)(*args))
            except (AddressConflict, RangeExhausted) as exc:
                results.append(type(exc))
        assert results[0] == results[1], f"{call}{args}: memory {results[0]} sqlite {results[1]}"
        return results[0]

    @rule(who=st.sampled_from(OWNERS), ranges=st.sampled_from(RANGE_SETS))
    def allocate(self, who: Owner, ranges: list[IPRange]) -> None:
        before = {a.address for a in self.memory.held(who)}
        result = self._both("allocate", who, ranges)
        if isinstance(result, type):
            assert result is RangeExhausted
            event("range exhausted")
            assert {a.address for a in self.memory.held(who)} == before  # nothing partial
            return
        assert isinstance(result, list)
        wanted = sorted(ranges, key=lambda r: r.version)
        assert [_family(a) for a in result] == [r.version for r in wanted]
        for address, rng in zip(result, wanted, strict=True):
            if address in before:
                continue  # the owner already held an address of this family
            assert address in rng, f"{address} outside {rng}"
            self.dynamic[(who, rng.version)] = address
        # a repeated call allocates nothing and answers the same
        assert self._both("allocate", who, ranges) == result

    @rule(
        who=st.sampled_from(OWNERS),
        addresses=st.lists(st.sampled_from(STATIC_CANDIDATES), max_size=3),
    )
    def reserve(self, who: Owner, addresses: list[str]) -> None:
        before = _snapshot(self.memory.list())
        result = self._both("reserve", who, addresses)
        if result is AddressConflict:
            event("address conflict")
            assert _snapshot(self.memory.list()) == before

    @rule(who=st.sampled_from(OWNERS))
    def release(self, who: Owner) -> None:
        self._both("release", who)
        assert self.memory.held(who) == []
        for family in (4, 6):
            self.dynamic.pop((who, family), None)

    @rule(live=st.sets(st.sampled_from([o.claim_uid for o in OWNERS])))
    def collect(self, live: set[str]) -> None:
        freed = self._both("collect", live)
        assert isinstance(freed, list)
        assert all(a.owner.claim_uid not in live for a in freed)
        assert all(a.owner.claim_uid in live for a in self.memory.list())
        for key in [k for k in self.dynamic if k[0].claim_uid not in live]:
            del self.dynamic[key]

    @invariant()
    def same_state_in_both_stores(self) -> None:
        assert _snapshot(self.memory.list()) == _snapshot(self.sqlite.list())

    @invariant()
    def no_address_held_twice(self) -> None:
        counts = Counter(a.address for a in self.sqlite.list())
        assert all(n == 1 for n in counts.values()), counts

    @invariant()
    def dynamic_addresses_inside_a_range_one_per_family(self) -> None:
        per_family: Counter[tuple[Owner, int]] = Counter()
        for a in self.sqlite.list():
            if a.static:
                continue
            assert any(a.address in r for r in ALL_RANGES), a
            per_family[(a.owner, _family(a.address))] += 1
            assert self.dynamic.get((a.owner, _family(a.address))) == a.address
        assert all(n == 1 for n in per_family.values())


TwoStores.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_two_stores = TwoStores.TestCase


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from([4, 6]),
    base=st.integers(min_value=0, max_value=2**128 - 1),
    size=st.integers(min_value=1, max_value=2**80),
    count=st.integers(min_value=1, max_value=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_allocations_stay_inside_any_range_and_are_distinct(
    version: int, base: int, size: int, count: int, seed: int
) -> None:
    top = 2**32 - 1 if version == 4 else 2**128 - 1
    start = min(base % (top + 1), top)
    end = min(start + size - 1, top)
    cls = ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address
    rng = IPRange(cls(start), cls(end))
    store = MemoryStore(rng=random.Random(seed))
    got: list[str] = []
    for i in range(count):
        try:
            got.append(store.allocate(Owner("p", "d", str(i)), [rng])[0])
        except RangeExhausted:
            assert len(got) == rng.size  # only when really full
            break
    assert len(set(got)) == len(got)
    assert all(a in rng for a in got)
