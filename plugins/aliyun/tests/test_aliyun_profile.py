"""The profile role: IPVLAN children addressed from the eflo /124.

The Done-when checks ("profile get returns an address inside
<prefix>:0:f:0:c00/124, the same again for the same claim, another for a
second claim; release frees") run through the CLI with a SQLite IPAM shared
by separate invocations, and through ProviderHost.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from dranet_cloud_aliyun import plugin
from dranet_cloud_aliyun.eflo import eflo_block, eflo_range, nic_prefix

from dranet_cloud.cli.main import main as cli_main
from dranet_cloud.contract.context import ProviderContext, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore, SqliteStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator, HostRootBuilder
from dranet_cloud.toolkit.errors import AddressConflict, ProfileDenied, RangeExhausted
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

BOND_BLOCK = ipaddress.IPv6Network("2408:4005:3cf:7e20:0:f:0:c00/124")
BOND = DeviceIdentifiers(name="bond0", mac_address="00:16:3e:5d:01:a0")
IPVLAN = NetworkConfig.model_validate({"interface": {"type": "IPVLAN"}})


def _addr(config: NetworkConfig) -> ipaddress.IPv6Address:
    addresses = config.interface.addresses or []
    assert len(addresses) == 1, addresses
    iface = ipaddress.ip_interface(addresses[0])
    assert iface.network.prefixlen == 128
    assert isinstance(iface.ip, ipaddress.IPv6Address)
    return iface.ip


# --- the block ---------------------------------------------------------------------


def test_eflo_block_is_host_part_f_c00() -> None:
    assert eflo_block("2408:4005:3cf:7e20::/64") == BOND_BLOCK
    # Any address of the /64 names the same block.
    assert eflo_block("2408:4005:3cf:7e20:1234::1/64") == BOND_BLOCK
    # A shorter prefix: the block of its first /64.
    assert str(eflo_block("2408:4005:3cf:7e00::/56")) == "2408:4005:3cf:7e00:0:f:0:c00/124"
    with pytest.raises(ValueError, match="narrower"):
        eflo_block("2408:4005:3cf:7e20::/80")


def test_eflo_range_hands_out_all_sixteen() -> None:
    rng = eflo_range("2408:4005:3cf:7e20::/64")
    assert rng.size == 16
    assert str(rng.start) == "2408:4005:3cf:7e20:0:f:0:c00"
    assert str(rng.end) == "2408:4005:3cf:7e20:0:f:0:c0f"


def test_nic_prefix_wants_a_global_64(tmp_path: Path) -> None:
    root = (
        HostRootBuilder(tmp_path)
        .nic("bond0", "00:16:3e:00:00:01", bond_mode="802.3ad")
        .nic("bond1", "00:16:3e:00:00:02", bond_mode="802.3ad")
        .inet6("fe80::1", 64, "bond0", scope=0x20)
        .inet6("2408:4005:3cf:7e30::9", 128, "bond0")  # a DHCPv6 /128 says nothing of the /64
        .inet6("2408:4005:3cf:7e31::9", 64, "bond0")
        .inet6("fe80::2", 64, "bond1", scope=0x20)
        .build()
    )
    hr = HostRoot(root)
    assert str(nic_prefix(hr, "bond0")) == "2408:4005:3cf:7e31::/64"
    assert nic_prefix(hr, "bond1") is None
    assert nic_prefix(hr, "eth9") is None


# --- through the CLI (Done when) --------------------------------------------------------


def _cli_profile(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code = cli_main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert isinstance(data, dict)
    return data


@pytest.mark.usefixtures("ecs_environ")
def test_profile_get_and_release_through_the_cli(
    bond_sample: SampleHost,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "ipam.db"
    common = ["--cloud-provider-hint", "aliyun", "--host-root", str(bond_sample.root),
              "--ipam-db", str(db), "--device", "bond0", "-o", "json"]  # fmt: skip

    def get(claim: str) -> dict[str, object]:
        return _cli_profile(["profile", "get", *common, "--claim-uid", claim], capsys)

    first = get("claim-1")
    iface = first["interface"]
    assert isinstance(iface, dict)
    assert iface["type"] == "IPVLAN"
    (addr1,) = iface["addresses"]
    assert ipaddress.ip_interface(addr1).ip in BOND_BLOCK
    assert get("claim-1")["interface"] == iface  # a retry: same answer, nothing new
    (addr2,) = get("claim-2")["interface"]["addresses"]  # type: ignore[index]
    assert ipaddress.ip_interface(addr2).ip in BOND_BLOCK
    assert addr2 != addr1

    store = SqliteStore(str(db))
    try:
        held = {a.owner.claim_uid: a.address for a in store.list()}
    finally:
        store.close()
    assert held == {"claim-1": addr1, "claim-2": addr2}

    released = _cli_profile(["profile", "release", *common, "--claim-uid", "claim-1"], capsys)
    assert released["released"] is True
    store = SqliteStore(str(db))
    try:
        held = {a.owner.claim_uid: a.address for a in store.list()}
    finally:
        store.close()
    assert held == {"claim-2": addr2}


# --- through the host ----------------------------------------------------------------


@pytest.fixture
def bond_host(
    ecs_emulator: Emulator,
    bond_sample: SampleHost,
    started_host: Callable[[Path, dict[str, str]], ProviderHost],
) -> ProviderHost:
    return started_host(bond_sample.root, ecs_emulator.env)


def test_release_frees_the_address_for_the_next_claim(bond_host: ProviderHost) -> None:
    given = {f"c{i}": _addr(bond_host.network_config(BOND, f"c{i}")) for i in range(16)}
    assert set(given.values()) == set(BOND_BLOCK)  # all 16, both ends included
    with pytest.raises(RangeExhausted):
        bond_host.network_config(BOND, "c16")
    assert bond_host.release(BOND, "c7")
    assert _addr(bond_host.network_config(BOND, "c16")) == given["c7"]
    assert bond_host.release(BOND, "c7")  # again: already released is success
    assert bond_host.release(BOND, "never-seen")


def test_bond_answer_carries_policy_routing_like_dranets_provider(
    bond_host: ProviderHost, bond_sample: SampleHost
) -> None:
    """The parent's IPv6 routes in its own table and a /128 source rule per address
    (DRANET PR #312), and the final config passes DRANET's validation."""
    final = bond_host.network_config(BOND, "routed-1")
    assert final.profile == "alibaba-eflo-subinterface"
    ifindex = int((bond_sample.root / "sys/class/net/bond0/ifindex").read_text())
    table = 256 + ifindex
    addr = _addr(final)
    assert [r.to_wire() for r in final.routes or []] == [
        {"destination": "2408:4005:3cf:7e20::/64", "scope": 253, "table": table},
        {"destination": "::/0", "gateway": "fe80::1", "table": table},
    ]
    assert [r.to_wire() for r in final.rules or []] == [
        {"priority": table, "source": f"{addr}/128", "table": table}
    ]
    # Routing the user (or cloud) decided is left alone; the old profile name still works.
    user = NetworkConfig.model_validate(
        {
            "profile": "alibaba.dra.net/eflo",
            "interface": {"vrf": {"name": "blue"}},
        }
    )
    vrf = bond_host.network_config(BOND, "routed-2", user)
    assert vrf.interface.addresses and not vrf.routes and not vrf.rules


def test_static_addresses_are_reserved(bond_host: ProviderHost) -> None:
    static = str(BOND_BLOCK[5]) + "/128"
    user = NetworkConfig.model_validate({"interface": {"addresses": [static]}})
    final = bond_host.network_config(BOND, "static-1", user)
    assert final.interface.addresses == [static]
    assert final.interface.type == "IPVLAN"
    # Same claim again: same answer; another claim asking for it: 409.
    assert bond_host.network_config(BOND, "static-1", user).interface.addresses == [static]
    with pytest.raises(AddressConflict) as denied:
        bond_host.network_config(BOND, "static-2", user)
    assert denied.value.status == 409
    # Pool allocations never hand it out.
    dynamic = {_addr(bond_host.network_config(BOND, f"d{i}")) for i in range(15)}
    assert BOND_BLOCK[5] not in dynamic
    assert len(dynamic) == 15


def test_unnumbered_claim_allocates_nothing(bond_host: ProviderHost) -> None:
    user = NetworkConfig.model_validate(
        {"interface": {"type": "IPVLAN", "addressing": "Unnumbered"}}
    )
    final = bond_host.network_config(BOND, "bare", user)
    assert final.interface.addresses is None
    assert bond_host.context.ipam.list() == []


def test_passthrough_claim_gets_nothing_from_the_profile(erdma_context: ProviderContext) -> None:
    eth1 = DeviceIdentifiers(name="eth1", mac_address="00:16:3e:2c:8a:11")
    config = NetworkConfig.model_validate({"profile": "x", "interface": {"mtu": 8500}})
    assert (
        plugin.profile_config(context=erdma_context, device=eth1, claim_uid="p", config=config)
        is None
    )
    assert erdma_context.ipam.list() == []


def test_ipvlan_claim_on_an_erdma_nic_uses_its_own_64(erdma_context: ProviderContext) -> None:
    eth1 = DeviceIdentifiers(name="eth1", mac_address="00:16:3e:2c:8a:11")
    result = plugin.profile_config(
        context=erdma_context, device=eth1, claim_uid="e1", config=IPVLAN
    )
    assert result is not None
    assert _addr(result) in ipaddress.IPv6Network("2408:4005:3cf:7e11:0:f:0:c00/124")


def test_bond_without_a_global_64_is_denied(tmp_path: Path) -> None:
    root = (
        HostRootBuilder(tmp_path)
        .nic("bond0", "00:16:3e:5d:01:a0", bond_mode="802.3ad")
        .inet6("fe80::216:3eff:fe5d:1a0", 64, "bond0", scope=0x20)
        .build()
    )
    context = ProviderContext(host_root=HostRoot(root), ipam_factory=MemoryStore)
    with pytest.raises(ProfileDenied) as denied:
        plugin.profile_config(context=context, device=BOND, claim_uid="c", config=IPVLAN)
    message = str(denied.value)
    assert "LACP bond bond0" in message
    assert "no global IPv6 /64" in message
    assert "0:f:0:c00/124" in message
    assert context.ipam.list() == []
