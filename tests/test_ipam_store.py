"""Behaviour every IPAM store must share: run against MemoryStore and SqliteStore."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dranet_cloud.ipam import IpamStore, MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.requests import InvalidIpamRequest
from dranet_cloud.toolkit.errors import (
    AddressConflict,
    ConfigError,
    ProfileDenied,
    RangeExhausted,
)
from dranet_cloud.toolkit.iprange import IPRange, ip_range_from_cidr

V4_29 = ip_range_from_cidr("10.0.0.0/29")  # 10.0.0.1 - 10.0.0.6
V6_64 = ip_range_from_cidr("2001:db8::/64")


class FixedOffset:
    """A 'random' source that always starts the search at the same offset."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def randrange(self, stop: int, /) -> int:
        return min(self.offset, stop - 1)


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


StoreFactory = Callable[..., IpamStore]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    opened: list[IpamStore] = []

    def factory(**kwargs: object) -> IpamStore:
        store: IpamStore
        if request.param == "memory":
            store = MemoryStore(**kwargs)  # type: ignore[arg-type]
        else:
            # NORMAL skips the per-commit fsync; durability is not what these
            # tests check (test_ipam_sqlite.py covers the FULL default)
            store = SqliteStore(
                tmp_path / f"ipam{len(opened)}.db",
                synchronous="NORMAL",
                **kwargs,  # type: ignore[arg-type]
            )
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> IpamStore:
    return make_store()


def owner(n: int | str, pool: str = "pool", device: str = "eth1") -> Owner:
    return Owner(pool, device, f"claim-{n}")


def held_addresses(store: IpamStore) -> list[str]:
    return [a.address for a in store.list()]


def test_allocate_returns_one_host_cidr_per_family_ipv4_first(store: IpamStore) -> None:
    got = store.allocate(owner(1), [V6_64, V4_29])
    assert len(got) == 2
    v4, v6 = (ipaddress.ip_interface(a) for a in got)
    assert (v4.version, v4.network.prefixlen) == (4, 32)
    assert (v6.version, v6.network.prefixlen) == (6, 128)
    assert v4.ip in V4_29
    assert v6.ip in V6_64
    assert sorted(held_addresses(store)) == sorted(got)


def test_allocate_is_idempotent_per_owner(store: IpamStore) -> None:
    first = store.allocate(owner(1), [V4_29, V6_64])
    for _ in range(5):
        assert store.allocate(owner(1), [V4_29, V6_64]) == first
    assert len(store.list()) == 2


def test_second_call_with_other_ranges_returns_what_the_owner_holds(store: IpamStore) -> None:
    first_v4 = store.allocate(owner(1), [V4_29])
    other_v4 = ip_range_from_cidr("192.168.0.0/24")
    both = store.allocate(owner(1), [other_v4, V6_64])
    assert both[0] == first_v4[0]
    assert ipaddress.ip_interface(both[1]).ip in V6_64
    # and the IPv6 address is now held, so asking for IPv6 alone returns it
    assert store.allocate(owner(1), [V6_64]) == [both[1]]
    assert len(store.list()) == 2


def test_owners_differ_by_pool_device_and_claim(store: IpamStore) -> None:
    owners = [
        Owner("a", "eth1", "c"),
        Owner("b", "eth1", "c"),
        Owner("a", "eth2", "c"),
        Owner("a", "eth1", "d"),
    ]
    got = [store.allocate(o, [V4_29])[0] for o in owners]
    assert len(set(got)) == 4


def test_two_ranges_of_one_family_are_refused(store: IpamStore) -> None:
    with pytest.raises(InvalidIpamRequest, match="two IPv4 ranges") as info:
        store.allocate(owner(1), [V4_29, ip_range_from_cidr("10.1.0.0/24")])
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ConfigError)
    assert store.list() == []


def test_small_range_exhausts_cleanly_without_partial_allocation(store: IpamStore) -> None:
    got = {store.allocate(owner(i), [V4_29, V6_64])[0] for i in range(6)}
    assert got == {f"10.0.0.{i}/32" for i in range(1, 7)}  # network and broadcast never
    with pytest.raises(RangeExhausted, match=r"10\.0\.0\.1-10\.0\.0\.6") as info:
        store.allocate(owner("late"), [V4_29, V6_64])
    assert isinstance(info.value, ProfileDenied)
    assert info.value.status == 409
    # the IPv6 half of the failed request was not kept
    assert [a for a in store.list() if a.owner == owner("late")] == []
    assert len(store.list()) == 12
    # freeing one address makes exactly that one available again
    freed = store.release(owner(3))
    late = store.allocate(owner("late"), [V4_29, V6_64])
    assert late[0] == freed[0]


def test_search_wraps_around_to_the_start_of_the_range(make_store: StoreFactory) -> None:
    store = make_store(rng=FixedOffset(4))  # start at 10.0.0.5
    assert store.allocate(owner(1), [V4_29]) == ["10.0.0.5/32"]
    assert store.allocate(owner(2), [V4_29]) == ["10.0.0.6/32"]
    assert store.allocate(owner(3), [V4_29]) == ["10.0.0.1/32"]  # wrapped
    assert store.allocate(owner(4), [V4_29]) == ["10.0.0.2/32"]


def test_search_skips_an_occupied_run(make_store: StoreFactory) -> None:
    rng = FixedOffset(1000)
    store = make_store(rng=rng)
    big = ip_range_from_cidr("10.8.0.0/16")
    got = [store.allocate(owner(i), [big])[0] for i in range(50)]
    base = int(big.start) + 1000
    assert got == [f"{ipaddress.ip_address(base + i)}/32" for i in range(50)]
    store.release(owner(10))
    assert store.allocate(owner("new"), [big]) == [got[10]]


def test_ipv6_range_of_2_to_48_addresses(store: IpamStore) -> None:
    rng = ip_range_from_cidr("2001:db8:0:0:c0de::/80")
    assert rng.size == 2**48 - 2
    got = [store.allocate(owner(i), [rng])[0] for i in range(300)]
    assert len(set(got)) == 300
    assert all(ipaddress.ip_interface(a).ip in rng for a in got)
    # spread: random starts land all over the range, not in one run
    values = sorted(int(ipaddress.ip_interface(a).ip) - int(rng.start) for a in got)
    assert values[-1] - values[0] > rng.size // 2


def test_whole_ipv6_space_and_its_top_end(make_store: StoreFactory) -> None:
    everything = ip_range_from_cidr("::/0")
    top = ip_range_from_cidr("ffff:ffff:ffff:ffff::/64")
    store = make_store(rng=FixedOffset(2**64))  # beyond the /64: clamped to its last address
    a = store.allocate(owner(1), [top])
    assert a == ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128"]
    b = store.allocate(owner(2), [top])
    assert b == ["ffff:ffff:ffff:ffff::1/128"]  # wrapped to the first usable address
    c = store.allocate(owner(3), [everything])
    assert ipaddress.ip_interface(c[0]).ip in everything


def test_reserve_accepts_plain_and_cidr_forms(store: IpamStore) -> None:
    got = store.reserve(owner(1), ["10.0.0.5/24", "2001:db8::7", "10.0.0.5"])
    assert got == ["10.0.0.5/32", "2001:db8::7/128"]
    allocs = store.list()
    assert {a.address for a in allocs} == {"10.0.0.5/32", "2001:db8::7/128"}
    assert all(a.static for a in allocs)


def test_reserving_again_for_the_same_owner_is_fine(store: IpamStore) -> None:
    store.reserve(owner(1), ["10.0.0.5"])
    assert store.reserve(owner(1), ["10.0.0.5/24"]) == ["10.0.0.5/32"]
    assert len(store.list()) == 1


def test_reserve_conflict_names_the_holder_and_keeps_nothing(store: IpamStore) -> None:
    store.reserve(owner("holder"), ["10.0.0.5"])
    with pytest.raises(AddressConflict, match=r"10\.0\.0\.5.*pool/eth1/claim-holder") as info:
        store.reserve(owner("other"), ["10.0.0.9", "10.0.0.5/24"])
    assert info.value.status == 409
    assert held_addresses(store) == ["10.0.0.5/32"]  # 10.0.0.9 was not kept


def test_reserve_conflicts_with_a_dynamic_allocation(store: IpamStore) -> None:
    [addr] = store.allocate(owner(1), [V4_29])
    with pytest.raises(AddressConflict):
        store.reserve(owner(2), [addr])
    # the holder itself may reserve what it was given
    assert store.reserve(owner(1), [addr]) == [addr]


def test_reserve_rejects_garbage(store: IpamStore) -> None:
    with pytest.raises(InvalidIpamRequest, match="not an IP address"):
        store.reserve(owner(1), ["10.0.0.5", "eth0"])
    with pytest.raises(InvalidIpamRequest):
        store.reserve(owner(1), "10.0.0.5")
    assert store.list() == []


def test_allocation_never_hands_out_a_reserved_address(store: IpamStore) -> None:
    store.reserve(owner("static"), [f"10.0.0.{i}" for i in (1, 2, 3, 5, 6)])
    assert store.allocate(owner(1), [V4_29]) == ["10.0.0.4/32"]
    with pytest.raises(RangeExhausted):
        store.allocate(owner(2), [V4_29])


def test_owner_with_static_address_gets_it_back_from_allocate(store: IpamStore) -> None:
    store.reserve(owner(1), ["10.0.0.3/24"])
    got = store.allocate(owner(1), [V4_29, V6_64])
    assert got[0] == "10.0.0.3/32"
    assert ipaddress.ip_interface(got[1]).ip in V6_64


def test_release_frees_everything_and_is_idempotent(store: IpamStore) -> None:
    got = store.allocate(owner(1), [V4_29, V6_64])
    store.reserve(owner(1), ["10.9.9.9"])
    store.allocate(owner(2), [V4_29])
    assert sorted(store.release(owner(1))) == sorted([*got, "10.9.9.9/32"])
    assert store.release(owner(1)) == []
    assert store.release(owner("never")) == []
    assert [a.owner for a in store.list()] == [owner(2)]


def test_created_at_is_recorded(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    store.allocate(owner(1), [V4_29])
    clock.now += timedelta(hours=1)
    store.reserve(owner(2), ["10.9.9.9"])
    times = {a.owner: a.created_at for a in store.list()}
    assert times == {
        owner(1): datetime(2025, 1, 1, tzinfo=timezone.utc),
        owner(2): datetime(2025, 1, 1, 1, tzinfo=timezone.utc),
    }


def test_collect_frees_exactly_the_owners_not_live(store: IpamStore) -> None:
    owners = [owner(i, device=f"eth{i % 2}") for i in range(10)]
    for o in owners:
        store.allocate(o, [V6_64])
    store.reserve(owner(3), ["10.9.9.9"])
    live = {f"claim-{i}" for i in (1, 3, 4, 8)}
    freed = store.collect(live_claims=live)
    assert {a.owner.claim_uid for a in freed} == {f"claim-{i}" for i in (0, 2, 5, 6, 7, 9)}
    assert {a.owner.claim_uid for a in store.list()} == live
    assert len(store.list()) == 5  # four IPv6 plus claim-3's static address
    assert store.collect(live_claims=live) == []


def test_collect_by_age_and_by_both(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    store.allocate(owner("old-dead"), [V4_29])
    store.allocate(owner("old-live"), [V4_29])
    clock.now += timedelta(hours=3)
    store.allocate(owner("new-dead"), [V4_29])
    store.allocate(owner("new-live"), [V4_29])
    clock.now += timedelta(minutes=1)
    live = ["claim-old-live", "claim-new-live"]
    # both criteria: only what is dead AND older than an hour
    freed = store.collect(live_claims=live, older_than=timedelta(hours=1))
    assert [a.owner for a in freed] == [owner("old-dead")]
    # age alone ignores liveness
    freed = store.collect(older_than=timedelta(hours=1))
    assert [a.owner for a in freed] == [owner("old-live")]
    assert {a.owner for a in store.list()} == {owner("new-dead"), owner("new-live")}


def test_collect_without_criteria_is_refused(store: IpamStore) -> None:
    store.allocate(owner(1), [V4_29])
    with pytest.raises(InvalidIpamRequest, match="refusing"):
        store.collect()
    assert len(store.list()) == 1
    # an empty live list is a real answer: nothing is live
    assert len(store.collect(live_claims=[])) == 1


def test_list_is_ordered_by_owner_then_address(store: IpamStore) -> None:
    for i in random.Random(7).sample(range(20), 20):
        store.allocate(owner(f"{i:02d}"), [V4_29 if i < 6 else V6_64])
    allocs = store.list()
    assert [a.owner for a in allocs] == sorted(a.owner for a in allocs)


def test_explicit_range_bounds_are_respected(store: IpamStore) -> None:
    rng = IPRange.parse("10.1.2.250-10.1.3.2")
    got = {store.allocate(owner(i), [rng])[0] for i in range(rng.size)}
    assert got == {f"{ipaddress.ip_address(int(rng.start) + i)}/32" for i in range(rng.size)}
    with pytest.raises(RangeExhausted):
        store.allocate(owner("x"), [rng])


def test_low_ipv6_values_stay_ipv6(store: IpamStore) -> None:
    # integers below 2^32 must not turn into IPv4 addresses
    rng = IPRange.parse("::1-::6")
    got = {store.allocate(owner(i), [rng])[0] for i in range(6)}
    assert got == {f"::{i}/128" for i in range(1, 7)}
    assert ip_range_from_cidr("::/125") == rng
