"""The profile role: IPVLAN addresses from delegated prefixes or secondary IPs."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest
from dranet_cloud_aws.profile import address_runs, profile_config, release_profile_config
from dranet_cloud_aws.snapshot import AwsInstance

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.ipam import MemoryStore, Owner
from dranet_cloud.node.nic import described_nic
from dranet_cloud.toolkit.errors import AddressConflict, ProfileDenied, RangeExhausted
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

PREFIX_ENI = DeviceIdentifiers(name="ens6", mac_address="0e:5c:1a:2b:3c:02")
SECONDARY_ENI = DeviceIdentifiers(name="enp48s0", mac_address="0e:5c:1a:2b:3c:03")
BARE_ENI = DeviceIdentifiers(name="enp49s0", mac_address="0e:5c:1a:2b:3c:04")
IPVLAN = NetworkConfig.model_validate({"profile": "p", "interface": {"type": "IPVLAN"}})


@pytest.fixture
def ctx() -> ProviderContext:
    return ProviderContext(env={}, ipam_factory=MemoryStore)


def _addresses(cfg: NetworkConfig | None) -> list[str]:
    assert cfg is not None
    return list(cfg.interface.addresses or [])


def _in(addr: str, *cidrs: str) -> bool:
    ip = ipaddress.ip_interface(addr).ip
    return any(ip in ipaddress.ip_network(c) for c in cidrs)


def test_prefix_allocation_one_address_per_family(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    got = _addresses(profile_config(ctx, aws_instance, PREFIX_ENI, "claim-1", IPVLAN))
    assert len(got) == 2
    v4, v6 = got
    assert v4.endswith("/32") and _in(v4, "10.0.32.48/28", "10.0.32.96/28")
    assert v6.endswith("/128") and _in(v6, "2600:1f16:8c2:1a20:7e3f::/80")
    owners = {a.owner for a in ctx.ipam.list()}
    assert owners == {Owner("aws", described_nic(PREFIX_ENI).identity, "claim-1")}


def test_repeat_is_identical_and_allocates_nothing(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    first = profile_config(ctx, aws_instance, PREFIX_ENI, "claim-1", IPVLAN)
    held = ctx.ipam.list()
    again = profile_config(ctx, aws_instance, PREFIX_ENI, "claim-1", IPVLAN)
    assert first is not None and again is not None
    assert first.to_wire() == again.to_wire()
    assert ctx.ipam.list() == held


def test_prefixes_are_used_whole_and_in_turn(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    # Two /28 prefixes: 32 IPv4 addresses, network and broadcast included.
    got = {
        _addresses(profile_config(ctx, aws_instance, PREFIX_ENI, f"c{i}", IPVLAN))[0]
        for i in range(32)
    }
    assert len(got) == 32
    assert "10.0.32.48/32" in got and "10.0.32.111/32" in got
    with pytest.raises(RangeExhausted, match="eni-0a1b2c3d4e5f60002"):
        profile_config(ctx, aws_instance, PREFIX_ENI, "c-too-many", IPVLAN)
    # The failed claim left nothing behind (not even an IPv6 address).
    assert not [a for a in ctx.ipam.list() if a.owner.claim_uid == "c-too-many"]


def test_secondary_ips_never_the_primary(
    ctx: ProviderContext, aws_instance: AwsInstance, aws_macs: dict[str, dict[str, Any]]
) -> None:
    keys = aws_macs["0e:5c:1a:2b:3c:03"]
    primary, secondaries = keys["local-ipv4s"][0], keys["local-ipv4s"][1:]
    got = [
        _addresses(profile_config(ctx, aws_instance, SECONDARY_ENI, f"c{i}", IPVLAN))
        for i in range(len(secondaries))
    ]
    assert all(len(a) == 1 for a in got)  # this ENI has no IPv6 prefix
    assert sorted(a[0] for a in got) == sorted(f"{s}/32" for s in secondaries)
    assert f"{primary}/32" not in {a[0] for a in got}
    with pytest.raises(RangeExhausted) as err:
        profile_config(ctx, aws_instance, SECONDARY_ENI, "one-more", IPVLAN)
    assert err.value.status == 409 and "eni-0a1b2c3d4e5f60003" in str(err.value)


def test_release_frees_and_is_idempotent(ctx: ProviderContext, aws_instance: AwsInstance) -> None:
    got = _addresses(profile_config(ctx, aws_instance, SECONDARY_ENI, "c1", IPVLAN))
    assert release_profile_config(ctx, SECONDARY_ENI, "c1") is True
    assert ctx.ipam.list() == []
    assert release_profile_config(ctx, SECONDARY_ENI, "c1") is True
    # The freed address can be handed out again: fill the ENI and find it there.
    refill = {
        _addresses(profile_config(ctx, aws_instance, SECONDARY_ENI, f"n{i}", IPVLAN))[0]
        for i in range(4)
    }
    assert got[0] in refill


def test_eni_without_prefix_or_secondary_is_denied_naming_it(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    with pytest.raises(ProfileDenied) as err:
        profile_config(ctx, aws_instance, BARE_ENI, "c1", IPVLAN)
    assert err.value.status == 400
    msg = str(err.value)
    assert "eni-0a1b2c3d4e5f60004" in msg and "assign a prefix" in msg
    assert ctx.ipam.list() == []


def test_unknown_nic_is_denied(ctx: ProviderContext, aws_instance: AwsInstance) -> None:
    dev = DeviceIdentifiers(name="ens99", mac_address="0e:99:99:99:99:99")
    with pytest.raises(ProfileDenied, match="ens99"):
        profile_config(ctx, aws_instance, dev, "c1", IPVLAN)


def test_not_ipvlan_or_unnumbered_allocates_nothing(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    plain = NetworkConfig.model_validate({"profile": "p"})
    assert profile_config(ctx, aws_instance, PREFIX_ENI, "c1", plain) is None
    unnumbered = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "addressing": "Unnumbered"}}
    )
    assert profile_config(ctx, aws_instance, PREFIX_ENI, "c1", unnumbered) is None
    assert ctx.ipam.list() == []


def test_static_addresses_are_reserved_and_conflict(
    ctx: ProviderContext, aws_instance: AwsInstance
) -> None:
    static = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "addresses": ["10.0.32.50/28"]}}
    )
    got = profile_config(ctx, aws_instance, PREFIX_ENI, "c1", static)
    assert _addresses(got) == ["10.0.32.50/28"]
    assert [(a.address, a.static) for a in ctx.ipam.list()] == [("10.0.32.50/32", True)]
    with pytest.raises(AddressConflict):
        profile_config(ctx, aws_instance, PREFIX_ENI, "c2", static)
    # Dynamic allocations step around the reserved address.
    dynamic = {
        _addresses(profile_config(ctx, aws_instance, PREFIX_ENI, f"d{i}", IPVLAN))[0]
        for i in range(31)
    }
    assert "10.0.32.50/32" not in dynamic


@pytest.mark.parametrize(
    ("address", "why"),
    [("10.0.32.10/32", "primary"), ("10.0.99.9/32", "not assigned")],
)
def test_static_address_must_belong_to_the_eni(
    ctx: ProviderContext, aws_instance: AwsInstance, address: str, why: str
) -> None:
    static = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "addresses": [address]}}
    )
    with pytest.raises(ProfileDenied, match=why):
        profile_config(ctx, aws_instance, PREFIX_ENI, "c1", static)
    assert ctx.ipam.list() == []


def test_ipv6_prefix_only_eni(
    ctx: ProviderContext,
    aws_tree: dict[str, Any],
    aws_macs: dict[str, dict[str, Any]],
    make_instance: Callable[[dict[str, Any]], AwsInstance],
) -> None:
    aws_macs["0e:5c:1a:2b:3c:04"]["ipv6-prefix"] = ["2600:1f16:8c2:1a40:1::/80"]
    inst = make_instance(aws_tree)
    got = _addresses(profile_config(ctx, inst, BARE_ENI, "c1", IPVLAN))
    assert len(got) == 1 and _in(got[0], "2600:1f16:8c2:1a40:1::/80")


def test_address_runs_merge_consecutive_addresses() -> None:
    runs = address_runs(["10.0.0.7", "10.0.0.5", "10.0.0.6", "10.0.0.9", "10.0.0.9"])
    assert [str(r) for r in runs] == ["10.0.0.5-10.0.0.7", "10.0.0.9-10.0.0.9"]


def test_dhcp_claim_allocates_nothing(ctx: ProviderContext, aws_instance: AwsInstance) -> None:
    # Regression: a DHCP claim used to get prefix addresses the host then
    # rejected (dhcp and addresses are exclusive), leaving them held.
    dhcp = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "dhcp": True}}
    )
    for dev in (PREFIX_ENI, SECONDARY_ENI, BARE_ENI):
        assert profile_config(ctx, aws_instance, dev, "c1", dhcp) is None
    assert ctx.ipam.list() == []


def test_no_metadata_denies_only_claims_that_need_addresses(ctx: ProviderContext) -> None:
    dhcp = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "dhcp": True}}
    )
    assert profile_config(ctx, None, PREFIX_ENI, "c1", dhcp) is None
    with pytest.raises(ProfileDenied, match="no EC2 instance metadata") as err:
        profile_config(ctx, None, PREFIX_ENI, "c1", IPVLAN)
    assert err.value.status == 400
    assert ctx.ipam.list() == []
