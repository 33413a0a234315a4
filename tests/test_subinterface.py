"""The shared subinterface profile rules, with a real MemoryStore."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.ipam import IpamStore, MemoryStore, Owner
from dranet_cloud.node.nic import described_nic
from dranet_cloud.providers.subinterface import release_subinterface, subinterface_profile
from dranet_cloud.toolkit.errors import AddressConflict, ProfileDenied, RangeExhausted
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference, PodReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

DEV = DeviceIdentifiers(name="eth1", mac_address="02:00:00:00:00:01")
POOL = "testcloud"
V4 = IPRange.parse("10.9.0.0/29")  # 10.9.0.1 - 10.9.0.6
V6 = IPRange.parse("2001:db8::/125")
REF = ClaimReference("c1", "team-a", "nic", (PodReference("trainer-0", "p1"),))


def cfg(**interface: object) -> NetworkConfig:
    return NetworkConfig.model_validate({"profile": "p", "interface": interface})


@pytest.fixture
def ctx() -> ProviderContext:
    return ProviderContext(env={}, ipam_factory=MemoryStore)


class Ranges:
    """A ``ranges`` callable that counts its calls."""

    def __init__(self, *ranges: IPRange) -> None:
        self.ranges = list(ranges)
        self.calls = 0

    def __call__(self) -> list[IPRange]:
        self.calls += 1
        return self.ranges


def run(
    ctx: ProviderContext, config: NetworkConfig, uid: str = "c1", **kwargs: object
) -> NetworkConfig | None:
    """subinterface_profile for DEV in POOL, from V4 and V6 unless the test says otherwise."""
    kwargs.setdefault("ranges", Ranges(V4, V6))
    return subinterface_profile(
        ctx,
        pool=POOL,
        device=DEV,
        claim_uid=uid,
        config=config,
        **kwargs,  # type: ignore[arg-type]
    )


def addresses(result: NetworkConfig | None) -> list[str]:
    assert result is not None and result.interface.addresses is not None
    return result.interface.addresses


def test_claims_that_need_no_addresses_get_none_and_never_read_ranges(
    ctx: ProviderContext,
) -> None:
    ranges = Ranges(V4)
    for config in (
        NetworkConfig.model_validate({"profile": "p"}),
        cfg(type="Passthrough"),
        cfg(type="IPVLAN", addressing="Unnumbered"),
        cfg(type="ipvlan", unnumbered=True),  # gen1 spelling
        cfg(type="IPVLAN", addressing="DHCP"),
        cfg(type="IPVLAN", dhcp=True),  # deprecated spelling
        cfg(dhcp=True),
    ):
        assert run(ctx, config, ranges=ranges) is None
    assert ranges.calls == 0
    assert ctx.ipam.list() == []


def test_without_require_ipvlan_any_type_is_addressed(ctx: ProviderContext) -> None:
    got = addresses(run(ctx, cfg(type="Passthrough"), require_ipvlan=False))
    assert len(got) == 2
    assert run(ctx, cfg(dhcp=True), require_ipvlan=False) is None
    unnumbered = cfg(type="IPVLAN", addressing="Unnumbered")
    assert run(ctx, unnumbered, require_ipvlan=False, uid="c2") is None
    assert len(ctx.ipam.list()) == 2


def test_allocation_is_owned_by_pool_device_claim_and_retries_are_free(
    ctx: ProviderContext,
) -> None:
    first = addresses(run(ctx, cfg(type="IPVLAN")))
    again = addresses(run(ctx, cfg(type="IPVLAN")))
    other = addresses(run(ctx, cfg(type="IPVLAN"), uid="c2"))
    assert first == again and set(first).isdisjoint(other)
    assert first[0] in V4 and first[1] in V6
    owners = {a.owner for a in ctx.ipam.list()}
    assert owners == {
        Owner(POOL, described_nic(DEV).identity, "c1"),
        Owner(POOL, described_nic(DEV).identity, "c2"),
    }
    assert len(ctx.ipam.list()) == 4


def test_static_addresses_are_checked_reserved_and_echoed_as_written(
    ctx: ProviderContext,
) -> None:
    seen: list[list[str]] = []
    ranges = Ranges(V4)

    def check(addrs: Sequence[str]) -> None:
        seen.append(list(addrs))

    config = cfg(type="IPVLAN", addresses=["10.9.0.3/24", "2001:db8::5/64"])
    result = run(ctx, config, ranges=ranges, check_static=check)
    assert addresses(result) == ["10.9.0.3/24", "2001:db8::5/64"]
    assert seen == [["10.9.0.3/24", "2001:db8::5/64"]]
    assert ranges.calls == 0
    held = sorted((a.address, a.static) for a in ctx.ipam.list())
    assert held == [("10.9.0.3/32", True), ("2001:db8::5/128", True)]
    # The same claim again is no conflict with itself; another claim is.
    assert addresses(run(ctx, config)) == ["10.9.0.3/24", "2001:db8::5/64"]
    with pytest.raises(AddressConflict) as err:
        run(ctx, cfg(type="IPVLAN", addresses=["10.9.0.3/32"]), uid="c2")
    assert err.value.status == 409
    # A pool allocation never hands out the reserved address.
    dynamic = addresses(run(ctx, cfg(type="IPVLAN"), uid="c3", ranges=Ranges(V4)))
    assert dynamic[0] != "10.9.0.3/32"


def test_a_refused_static_address_is_not_reserved(ctx: ProviderContext) -> None:
    def refuse(addrs: Sequence[str]) -> None:
        raise ProfileDenied(f"{POOL}: {addrs[0]} is not ours", status=400)

    with pytest.raises(ProfileDenied, match=r"10\.9\.0\.3/24 is not ours"):
        run(ctx, cfg(type="IPVLAN", addresses=["10.9.0.3/24"]), check_static=refuse)
    assert ctx.ipam.list() == []


def test_missing_ranges_are_a_400_and_hold_nothing(ctx: ProviderContext) -> None:
    def missing() -> list[IPRange]:
        raise ProfileDenied("testcloud: NIC eth1 has no alias range in metadata", status=400)

    with pytest.raises(ProfileDenied) as err:
        run(ctx, cfg(type="IPVLAN"), ranges=missing)
    assert err.value.status == 400 and "eth1" in str(err.value)
    with pytest.raises(ProfileDenied) as empty:
        run(ctx, cfg(type="IPVLAN"), ranges=Ranges())
    assert empty.value.status == 400
    assert "testcloud" in empty.value.message and "eth1" in empty.value.message
    assert ctx.ipam.list() == []


def test_exhaustion_is_a_409(ctx: ProviderContext) -> None:
    tiny = IPRange.parse("10.9.0.1-10.9.0.1")
    addresses(run(ctx, cfg(type="IPVLAN"), ranges=Ranges(tiny)))
    with pytest.raises(RangeExhausted) as err:
        run(ctx, cfg(type="IPVLAN"), uid="c2", ranges=Ranges(tiny))
    assert err.value.status == 409


def test_a_custom_allocator_gets_the_store_and_owner(ctx: ProviderContext) -> None:
    calls: list[Owner] = []

    def allocate(store: IpamStore, owner: Owner, claim: ClaimReference | None) -> list[str]:
        calls.append(owner)
        assert claim == REF
        return store.allocate(owner, [V6], claim=claim)

    got = addresses(run(ctx, cfg(type="IPVLAN"), claim=REF, allocate=allocate, ranges=None))
    assert calls == [Owner(POOL, described_nic(DEV).identity, "c1")]
    assert len(got) == 1 and got[0] in V6
    assert [a.address for a in ctx.ipam.held(calls[0])] == got


def test_neither_ranges_nor_allocate_is_a_programming_error(ctx: ProviderContext) -> None:
    with pytest.raises(TypeError, match="testcloud"):
        subinterface_profile(ctx, pool=POOL, device=DEV, claim_uid="c1", config=cfg())


def test_release_frees_by_owner_only_and_is_idempotent(ctx: ProviderContext) -> None:
    run(ctx, cfg(type="IPVLAN"))
    kept = addresses(run(ctx, cfg(type="IPVLAN"), uid="c2"))
    assert release_subinterface(ctx, pool=POOL, device=DEV, claim_uid="c1") is True
    assert sorted(a.address for a in ctx.ipam.list()) == sorted(kept)
    assert release_subinterface(ctx, pool=POOL, device=DEV, claim_uid="c1") is True
    assert release_subinterface(ctx, pool="other", device=DEV, claim_uid="c2") is True
    assert sorted(a.address for a in ctx.ipam.list()) == sorted(kept)


def test_the_claim_reference_is_recorded_with_allocations_and_reservations(
    ctx: ProviderContext,
) -> None:
    """gen2 DRANET's namespace/name/pods reach the IPAM, for leak reclaiming."""
    run(ctx, cfg(type="IPVLAN"), claim=REF)
    static = ClaimReference("c2", "team-a", "static")
    run(ctx, cfg(type="IPVLAN", addresses=["10.9.1.6/24"]), uid="c2", claim=static)
    by_claim = {a.owner.claim_uid: a.claim for a in ctx.ipam.list()}
    assert by_claim == {"c1": REF, "c2": static}
