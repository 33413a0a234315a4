"""One identity for a NIC: the resolver, host caches, IPAM owners, the
schema-1 migration and ``--ipam-range`` selectors."""

from __future__ import annotations

import copy
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import (
    could_be_ifname,
    decode_dra_name,
    dra_device_name,
    dra_interface_name,
    local_nics,
    resolve_device,
    resolve_nic,
)
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.toolkit.errors import AddressConflict, ConfigError, ProfileDenied
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference, PodReference
from dranet_cloud.wire.models import DeviceAttribute, DeviceIdentifiers, NetworkConfig

from .fakeplugins import ENDPOINT_VAR, FakeCloud, fake_emulator

DATA = Path(__file__).parent / "data"
MAC_A, MAC_B = "42:01:0a:00:00:0a", "42:01:0a:00:00:0b"
PCI_A, PCI_B = "0000:00:05.0", "0000:00:06.0"
V4 = IPRange.parse("10.20.0.0/24")


def nic_owner(root: HostRoot, pool: str, device: DeviceIdentifiers, claim_uid: str) -> Owner:
    """The IPAM owner of a claim on the NIC ``device`` resolves to on ``root``."""
    return Owner.for_nic(pool, resolve_nic(root, device), claim_uid)


def node(root: Path) -> HostRoot:
    """eth1 (PCI NIC A), eth0.100 (not a DNS label), an EFA function with no netdev."""
    (
        HostRootBuilder(root)
        .dmi(sys_vendor="FakeCloud")
        .nic("eth1", MAC_A, mtu=9000, pci=PCI_A, driver="gve")
        .nic("eth0.100", "42:01:0a:00:00:0c", mtu=1500)
        .pci_device("0000:00:07.0", driver="efa")
        .build()
    )
    return HostRoot(root)


def forms(mac: str = MAC_A, pci: str = PCI_A, ifname: str = "eth1") -> list[DeviceIdentifiers]:
    """The same NIC as DRANET may name it: gen2, gen1, MAC only, PCI only."""
    return [
        DeviceIdentifiers(name=ifname, mac_address=mac, pci_address=pci),
        DeviceIdentifiers(name=dra_device_name(ifname, pci) or "", mac_address=mac),
        DeviceIdentifiers(name=ifname),
        DeviceIdentifiers(name=dra_device_name(ifname, pci) or ""),
        DeviceIdentifiers(mac_address=mac),
        DeviceIdentifiers(pci_address=pci),
    ]


# --- names -------------------------------------------------------------------------------


def test_dra_names_round_trip_like_dranet() -> None:
    assert dra_device_name("eth1", PCI_A) == "pci-0000-00-05-0"
    assert dra_device_name("eth1", None) == "eth1"
    # Not a DNS-1123 label: "net-" + lower-case unpadded base32 (DRANET pkg/names).
    assert dra_interface_name("eth0.100") == "net-mv2gqmbogeyda"
    assert dra_interface_name("Eth_1").startswith("net-")
    assert decode_dra_name("pci-0000-8a-00-0") == ("0000:8a:00.0", None)
    assert decode_dra_name("net-mv2gqmbogeyda") == (None, "eth0.100")
    assert decode_dra_name("eth1") == (None, None)
    assert decode_dra_name("net-!!") == (None, None)


# --- the resolver ---------------------------------------------------------------------------


def test_a_resolved_device_answers_for_its_host_root_without_reading_it(tmp_path: Path) -> None:
    """What the host hands a hook: the NIC's identifiers, carrying the NIC.

    Asking again on the same host root reads no file (the tree is gone and
    the answer stays); another host root resolves afresh.
    """
    root = node(tmp_path)
    resolved = resolve_device(root, DeviceIdentifiers(name="pci-0000-00-05-0"))
    assert resolved == DeviceIdentifiers(name="eth1", mac_address=MAC_A, pci_address=PCI_A)
    assert DeviceIdentifiers(name="eth1", mac_address=MAC_A, pci_address=PCI_A) == resolved
    assert resolved.model_dump() == {"mac_address": MAC_A, "pci_address": PCI_A, "name": "eth1"}
    shutil.rmtree(tmp_path / "sys")
    assert resolve_nic(root, resolved) is resolved.nic and resolved.nic.found
    assert resolve_device(root, resolved) is resolved
    assert copy.deepcopy(resolved).resolved_on(root) is resolved.nic
    assert resolved.model_copy(update={"name": "eth9"}).resolved_on(root) is None
    elsewhere = resolve_nic(HostRoot(str(tmp_path)), resolved)
    assert not elsewhere.found and elsewhere.identity == resolved.nic.identity


def test_every_form_resolves_to_the_same_nic(tmp_path: Path) -> None:
    root = node(tmp_path)
    nics = [resolve_nic(root, d) for d in forms()]
    assert {n.identity for n in nics} == {f"mac:{MAC_A}"}
    for nic in nics:
        assert (nic.ifname, nic.mac, nic.pci_address, nic.found) == ("eth1", MAC_A, PCI_A, True)
        assert (nic.mtu, nic.driver, nic.ifindex) == (9000, "gve", 2)
        assert nic.names == ("eth1", "pci-0000-00-05-0")
    odd = resolve_nic(root, DeviceIdentifiers(name="net-mv2gqmbogeyda"))
    assert (odd.ifname, odd.found) == ("eth0.100", True)


@pytest.fixture
def nic_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """caplog, capturing the NIC resolver's warnings (the conflicts it logs)."""
    caplog.set_level(logging.WARNING, logger="dranet_cloud.node.nic")
    return caplog


def test_a_conflict_is_resolved_by_mac_and_logged(
    tmp_path: Path, nic_warnings: pytest.LogCaptureFixture
) -> None:
    root = node(tmp_path)
    nic = resolve_nic(root, DeviceIdentifiers(name="eth0.100", mac_address=MAC_A))
    assert nic.ifname == "eth1"
    assert "answering for eth1" in nic_warnings.text and "eth0.100" in nic_warnings.text
    # A MAC no NIC has, with the PCI function of one: the hardware decides, logged.
    moved = resolve_nic(root, DeviceIdentifiers(mac_address=MAC_B, pci_address=PCI_A))
    assert (moved.ifname, moved.identity) == ("eth1", f"mac:{MAC_A}")
    assert f"no NIC on this node has MAC {MAC_B}" in nic_warnings.text


def test_a_dra_device_name_of_another_nic_is_a_logged_conflict(
    tmp_path: Path, nic_warnings: pytest.LogCaptureFixture
) -> None:
    # gen1 DRANET sends the DRA device name: pci-0000-00-07-0 is the EFA
    # function, not NIC A.  The MAC (or PCI address) decides, and says so.
    root = node(tmp_path)
    nic = resolve_nic(root, DeviceIdentifiers(name="pci-0000-00-07-0", mac_address=MAC_A))
    assert (nic.ifname, nic.identity) == ("eth1", f"mac:{MAC_A}")
    assert "'pci-0000-00-07-0'" in nic_warnings.text and "answering for eth1" in nic_warnings.text
    nic_warnings.clear()
    # The same conflict again (here through the PCI address) is logged once only.
    nic = resolve_nic(root, DeviceIdentifiers(name="pci-0000-00-07-0", pci_address=PCI_A))
    assert nic.ifname == "eth1"
    assert nic_warnings.text == ""


def test_the_halves_of_a_shared_mac_pair_are_two_identities(tmp_path: Path) -> None:
    """Azure's accelerated networking: a VF enslaved to the hv_netvsc NIC, one MAC."""
    mac = "00:0d:3a:4f:2b:1c"
    root = HostRoot(
        HostRootBuilder(tmp_path / "az")
        .vmbus_nic("eth1", mac, "000d3a4f-2b1c-000d-3a4f-2b1c000d3a4f")
        .nic("enP2s2", mac, pci="0002:00:02.0", driver="mlx5_core")
        .enslave("enP2s2", "eth1")
        .build()
    )
    synthetic = resolve_nic(root, DeviceIdentifiers(name="eth1", mac_address=mac))
    vf = resolve_nic(
        root, DeviceIdentifiers(name="enP2s2", mac_address=mac, pci_address="0002:00:02.0")
    )
    mac_only = resolve_nic(root, DeviceIdentifiers(name="", mac_address=mac))
    assert (synthetic.ifname, synthetic.identity) == ("eth1", f"mac:{mac}")
    assert (vf.ifname, vf.identity, vf.mac) == ("enP2s2", "pci:0002:00:02.0", mac)
    assert mac_only.ifname == "eth1"  # the MAC alone names the half enslaved to nothing
    assert not synthetic.keys & vf.keys


def test_a_pci_function_without_netdev_is_found_and_listed(tmp_path: Path) -> None:
    root = node(tmp_path)
    efa = resolve_nic(root, DeviceIdentifiers(name="", pci_address="0000:00:07.0"))
    assert (efa.found, efa.ifname, efa.mac, efa.driver) == (True, None, None, "efa")
    assert efa.identity == "pci:0000:00:07.0"
    assert efa.identifiers().to_wire() == {"pci_address": "0000:00:07.0", "name": ""}
    by_gen1_name = resolve_nic(root, DeviceIdentifiers(name="pci-0000-00-07-0"))
    assert by_gen1_name.identity == efa.identity and by_gen1_name.found
    assert [n.pci_address for n in local_nics(root) if n.ifname is None] == ["0000:00:07.0"]


def test_a_nic_the_node_cannot_see_keeps_the_identity_it_was_sent(tmp_path: Path) -> None:
    root = node(tmp_path)
    gone = resolve_nic(root, DeviceIdentifiers(name="eth1", mac_address=MAC_B))
    # Another NIC carries the name now; a MAC no NIC has is not answered by name.
    assert (gone.found, gone.identity, gone.mtu) == (False, f"mac:{MAC_B}", None)
    moved = resolve_nic(root, DeviceIdentifiers(name="pci-0000-00-09-0"))
    assert (moved.found, moved.identity) == (False, "pci:0000:00:09.0")


def test_a_name_no_interface_can_have_is_never_looked_up(tmp_path: Path) -> None:
    """A request's name becomes a sysfs path only if Linux could have named a NIC so;
    a NUL there made ``open`` raise (a 500 found by the server's fuzzing)."""
    root = node(tmp_path)
    for name in ("\n\x00eth1", "eth1\x00", "eth 1", "eth1:0", "a" * 16, "..", "x/../eth1"):
        nic = resolve_nic(root, DeviceIdentifiers(name=name))
        assert not nic.found, name
    assert resolve_nic(root, DeviceIdentifiers(name="eth1")).found  # the real one still is
    assert could_be_ifname("eth1") and could_be_ifname("é" * 7) and not could_be_ifname("é" * 8)
    assert HostRoot(str(tmp_path)).read_text("/sys/class/net/eth1\x00/address") is None


# --- host caches: two NICs taking turns under one name ------------------------------------


def test_two_nics_taking_turns_under_one_name_never_share_answers(tmp_path: Path) -> None:
    """Fails on e159219, whose caches were keyed by ``name``."""
    root = tmp_path / "root"
    HostRootBuilder(root).dmi(sys_vendor="FakeCloud").nic("eth1", MAC_A).build()
    reg = PluginRegistry(load_entry_points=False)
    reg.register(FakeCloud(), "fakecloud")
    with fake_emulator({MAC_A: 1500, MAC_B: 8896}) as emu:
        host = ProviderHost(
            cloud_provider_hint="fakecloud",
            host_root=str(root),
            registry=reg,
            env={ENDPOINT_VAR: emu.url},
        )
        host.start()

        def mtu(device: DeviceIdentifiers) -> object:
            attrs = host.device_attributes(device)
            config = host.device_config(device)
            assert config is not None
            assert attrs["fake.dra.net/mtu"].int_ == config.interface.mtu
            return config.interface.mtu

        assert mtu(DeviceIdentifiers(name="eth1", mac_address=MAC_A)) == 1500
        assert mtu(DeviceIdentifiers(name="eth1")) == 1500
        # NIC A leaves (moved into a pod), NIC B arrives and is named eth1.
        shutil.rmtree(root)
        HostRootBuilder(root).dmi(sys_vendor="FakeCloud").nic("eth1", MAC_B).build()
        assert mtu(DeviceIdentifiers(name="eth1", mac_address=MAC_B)) == 8896
        assert mtu(DeviceIdentifiers(name="eth1")) == 8896
        assert mtu(DeviceIdentifiers(name="eth1", mac_address=MAC_A)) == 1500


# --- IPAM owners ---------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> IpamStore:
    if request.param == "memory":
        return MemoryStore()
    return SqliteStore(tmp_path / "ipam.db")


def test_an_owner_is_one_whatever_form_names_the_nic(tmp_path: Path, store: IpamStore) -> None:
    root = node(tmp_path / "root")
    owners = [nic_owner(root, "p", d, "claim-1") for d in forms()]
    first = store.allocate(owners[0], [V4])
    for owner in owners[1:]:
        assert store.allocate(owner, [V4]) == first
    assert len(store.list()) == 1
    (alloc,) = store.list()
    assert {"name:eth1", "name:pci-0000-00-05-0", f"pci:{PCI_A}"} <= alloc.owner.keys
    for made, freed in ((2, 5), (4, 3), (5, 1)):
        store.allocate(owners[made], [V4])
        assert store.release(owners[freed]) != []
        assert store.list() == []


def test_a_release_by_name_or_pci_finds_a_nic_that_left_the_node(
    tmp_path: Path, store: IpamStore
) -> None:
    """A passthrough NIC is in the pod at release: the node no longer sees it."""
    root = tmp_path / "root"
    node(root)
    owner = nic_owner(HostRoot(root), "p", DeviceIdentifiers(name="eth1"), "c")
    got = store.allocate(owner, [V4])
    shutil.rmtree(root / "sys/class/net/eth1")
    for device in (DeviceIdentifiers(name="eth1"), DeviceIdentifiers(pci_address=PCI_A)):
        gone = nic_owner(HostRoot(root), "p", device, "c")
        assert gone.device != owner.device
        assert store.allocate(gone, [V4]) == got  # a retry: the same address
    assert store.release(nic_owner(HostRoot(root), "p", DeviceIdentifiers(name="eth1"), "c"))
    assert store.list() == []


def test_two_nics_that_shared_a_name_keep_their_own_addresses(
    tmp_path: Path, store: IpamStore
) -> None:
    root = tmp_path / "root"
    HostRootBuilder(root).nic("eth1", MAC_A, pci=PCI_A).build()
    a = nic_owner(HostRoot(root), "p", DeviceIdentifiers(name="eth1"), "claim")
    got_a = store.allocate(a, [V4])
    shutil.rmtree(root)
    HostRootBuilder(root).nic("eth1", MAC_B, pci=PCI_B).build()
    b = nic_owner(HostRoot(root), "p", DeviceIdentifiers(name="eth1"), "claim")
    got_b = store.allocate(b, [V4])
    assert got_a != got_b
    assert store.release(b) == got_b
    assert [x.address for x in store.list()] == got_a


def test_sqlite_keeps_the_claim_reference(tmp_path: Path) -> None:
    claim = ClaimReference(
        "uid-1", "team-a", "gpu-claim", (PodReference("trainer-0", "pod-uid-0"),)
    )
    with SqliteStore(tmp_path / "ipam.db") as store:
        store.allocate(Owner("p", "mac:" + MAC_A, "uid-1"), [V4], claim=claim)
        # the static address lies outside V4: the dynamic one (a random start) can never be it
        store.reserve(Owner("p", "mac:" + MAC_A, "uid-2"), ["10.21.0.9/24"])
    with SqliteStore(tmp_path / "ipam.db") as store:
        by_uid = {a.owner.claim_uid: a.claim for a in store.list()}
    assert by_uid == {"uid-1": claim, "uid-2": None}


# --- the schema-1 database of e159219 --------------------------------------------------------


def schema1_db(path: Path) -> Path:
    """A file with the rows e159219's SqliteStore wrote (tests/data, dumped as SQL)."""
    conn = sqlite3.connect(path)
    conn.executescript((DATA / "ipam_schema1_e159219.sql").read_text())
    conn.close()
    return path


def _rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT id, family, addr_key, address, pool, device, claim_uid, static, created_at "
            "FROM allocations ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


def test_a_schema1_database_is_migrated_on_first_open_with_nothing_lost(tmp_path: Path) -> None:
    db = schema1_db(tmp_path / "ipam.db")
    before = _rows(db)
    assert len(before) == 8
    with SqliteStore(db) as store:
        listed = store.list()
    assert _rows(db) == before  # every row, every column, untouched
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert sorted(a.address for a in listed) == sorted(str(r[3]) for r in before)
    gen1 = next(a for a in listed if a.owner.claim_uid == "claim-gen1")
    assert "pci:0000:00:05.0" in gen1.owner.keys and gen1.claim is None
    with SqliteStore(db) as store:  # a second open migrates nothing again
        assert len(store.list()) == 8


def test_migrated_rows_are_found_under_every_form(tmp_path: Path) -> None:
    db = schema1_db(tmp_path / "ipam.db")
    root = HostRoot(
        HostRootBuilder(tmp_path / "root")
        .nic("eth1", MAC_A, pci=PCI_A)
        .nic("eth2", MAC_B, pci=PCI_B)
        .build()
    )
    pool = "local-ipam"
    with SqliteStore(db) as store:
        # gen1 allocated under "pci-0000-00-05-0": the gen2 name gets the same address.
        gen2 = nic_owner(root, pool, DeviceIdentifiers(name="eth1"), "claim-gen1")
        assert store.allocate(gen2, [V4, IPRange.parse("fd00:20::/64")]) == [
            "10.20.0.164/32",
            "fd00:20::3dbe:d9c9:146b:1dd3/128",
        ]
        # The leak of e159219 (one NIC, two owners): one release frees both.
        both = nic_owner(root, pool, DeviceIdentifiers(mac_address=MAC_A), "claim-both")
        assert store.release(both) == ["10.20.0.112/32", "10.20.0.235/32"]
        by_pci = nic_owner(root, pool, DeviceIdentifiers(pci_address=PCI_B), "claim-ifname")
        assert store.release(by_pci) == ["10.20.0.24/32"]
        static = nic_owner(root, pool, DeviceIdentifiers(name="pci-0000-00-05-0"), "claim-static")
        assert store.reserve(static, ["10.20.0.77/24"]) == ["10.20.0.77/32"]
        assert len(store.list()) == 5


def test_a_migrated_row_learns_the_names_and_mac_its_nic_is_found_under(tmp_path: Path) -> None:
    # `ipam list` shows every name a NIC was seen under; schema-1 rows found
    # again under the NIC's MAC identity are tied to that MAC from then on, so
    # another NIC that later takes the old name "eth1" does not match them.
    db = schema1_db(tmp_path / "ipam.db")
    root = HostRoot(HostRootBuilder(tmp_path / "root").nic("eth1", MAC_A, pci=PCI_A).build())
    with SqliteStore(db) as store:
        gen2 = nic_owner(root, "local-ipam", DeviceIdentifiers(name="eth1"), "claim-both")
        assert store.allocate(gen2, [V4]) == ["10.20.0.112/32"]
        rows = [a for a in store.list() if a.owner.claim_uid == "claim-both"]
        assert {a.owner.device for a in rows} == {"eth1", "pci-0000-00-05-0"}
        for row in rows:
            assert {"name:eth1", "name:pci-0000-00-05-0", f"mac:{MAC_A}"} <= row.owner.keys
        other = Owner("local-ipam", f"mac:{MAC_B}", "claim-both", frozenset({"name:eth1"}))
        assert store.release(other) == []
        assert store.release(gen2) == ["10.20.0.112/32", "10.20.0.235/32"]


# --- --ipam-range selectors ---------------------------------------------------------------


def test_range_selectors_match_the_nic_under_any_name(tmp_path: Path) -> None:
    root = node(tmp_path)
    cfg = LocalIpamConfig.parse(["10.0.0.0/24", "eth1=10.1.0.0/24", "fd00::/64"])
    for device in forms():
        assert [str(r) for r in cfg.for_device(device, root)] == [
            str(IPRange.parse("10.1.0.0/24")),
            str(IPRange.parse("fd00::/64")),
        ]
    for spec in (f"mac={MAC_A}", f"pci={PCI_A}", "pci-0000-00-05-0", "name=eth1"):
        cfg = LocalIpamConfig.parse(["10.0.0.0/24", f"{spec}=10.2.0.0/24"])
        assert [str(r) for r in cfg.for_device(DeviceIdentifiers(name="eth1"), root)] == [
            str(IPRange.parse("10.2.0.0/24"))
        ], spec
    # The MAC selector wins over the name one.
    cfg = LocalIpamConfig.parse(["eth1=10.1.0.0/24", f"mac={MAC_A.upper()}=10.3.0.0/24"])
    assert str(cfg.for_device(DeviceIdentifiers(name="eth1"), root)[0]) == str(
        IPRange.parse("10.3.0.0/24")
    )
    with pytest.raises(ConfigError, match="PCI address"):
        LocalIpamConfig.parse(["pci=zz=10.0.0.0/24"])
    with pytest.raises(ConfigError, match="already has an IPv4 range"):
        LocalIpamConfig.parse(["pci-0000-00-05-0=10.0.0.0/24", f"pci={PCI_A}=10.1.0.0/24"])


def test_local_ipam_gives_the_same_address_in_every_form(tmp_path: Path) -> None:
    root = node(tmp_path / "root")
    plugin = LocalIpamPlugin(LocalIpamConfig.parse(["10.0.0.0/24", "eth1=10.1.0.0/24"]))
    context = ProviderContext(host_root=root, ipam_factory=lambda: SqliteStore(tmp_path / "db"))
    config = NetworkConfig.model_validate({"profile": "local-ipam", "interface": {}})
    got = set()
    for device in forms():
        result = plugin.profile_config(context, None, device, "claim", config)
        assert result is not None
        got.add(tuple(result.interface.addresses or ()))
    (addresses,) = got
    assert addresses[0].startswith("10.1.0.")
    assert plugin.release_profile_config(context, None, forms()[-1], "claim", None)
    assert context.ipam.list() == []
    assert PLUGIN_NAME == "local-ipam"


def test_local_ipam_never_falls_back_when_a_name_selector_cannot_be_checked(
    tmp_path: Path,
) -> None:
    # The node's files do not show the NIC and DRANET sent its gen1 DRA name:
    # its interface name is unknown, so "eth1=" may be its range; the default
    # would be a silent guess.  Denied, naming the fix, and nothing allocated.
    root = HostRootBuilder(tmp_path / "root").build()
    context = ProviderContext(
        host_root=HostRoot(root), ipam_factory=lambda: SqliteStore(tmp_path / "db")
    )
    config = NetworkConfig.model_validate({"profile": "local-ipam", "interface": {}})
    gen1 = DeviceIdentifiers(name="pci-0000-00-05-0", mac_address=MAC_A, pci_address=PCI_A)
    plugin = LocalIpamPlugin(LocalIpamConfig.parse(["10.0.0.0/24", "eth1=10.1.0.0/24"]))
    with pytest.raises(ProfileDenied, match="eth1=") as denied:
        plugin.profile_config(context, None, gen1, "claim", config)
    assert denied.value.status == 500 and "--host-root" in denied.value.message
    assert context.ipam.list() == []
    # The interface name was sent (gen2), or no name selector exists: no guess.
    gen2 = DeviceIdentifiers(name="eth1", mac_address=MAC_A, pci_address=PCI_A)
    got = plugin.profile_config(context, None, gen2, "claim", config)
    assert got is not None and (got.interface.addresses or [""])[0].startswith("10.1.0.")
    plain = LocalIpamPlugin(LocalIpamConfig.parse(["10.0.0.0/24", f"mac={MAC_B}=10.2.0.0/24"]))
    got = plain.profile_config(context, None, gen1, "other", config)
    assert got is not None and (got.interface.addresses or [""])[0].startswith("10.0.0.")


def test_the_names_of_a_nic_are_forgotten_with_its_last_allocation(tmp_path: Path) -> None:
    root = node(tmp_path / "root")
    db = tmp_path / "ipam.db"
    with SqliteStore(db) as store:
        one = nic_owner(root, "p", DeviceIdentifiers(name="eth1"), "c1")
        two = nic_owner(root, "p", DeviceIdentifiers(mac_address=MAC_A), "c2")
        store.allocate(one, [V4])
        store.allocate(two, [V4])
        store.release(one)
        (left,) = store.list()
        assert "name:eth1" in left.owner.keys  # c2 still holds the NIC's names
        store.release(two)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM device_keys").fetchone()[0] == 0
    conn.close()


def test_a_bond_and_its_ports_are_three_nics(tmp_path: Path) -> None:
    """Ports show the bond's MAC; each keeps its own identity (its permanent MAC)."""
    bond_mac, port0, port1 = "00:16:3e:5d:01:a0", "00:16:3e:5d:01:a1", "00:16:3e:5d:01:a2"
    root = HostRoot(
        HostRootBuilder(tmp_path)
        .nic("bond0", bond_mac, bond_mode="802.3ad")
        .nic("reth0", port0, pci="0000:3b:00.0", slave_of="bond0")
        .nic("reth1", port1, pci="0000:3b:00.1", slave_of="bond0")
        .build()
    )
    bond = resolve_nic(root, DeviceIdentifiers(mac_address=bond_mac))
    assert (bond.ifname, bond.is_lacp_bond, bond.identity) == ("bond0", True, f"mac:{bond_mac}")
    # DRANET sends a port's link MAC, which is the bond's: the name or PCI decides.
    by_name = resolve_nic(root, DeviceIdentifiers(name="reth1", mac_address=bond_mac))
    by_pci = resolve_nic(root, DeviceIdentifiers(mac_address=bond_mac, pci_address="0000:3b:00.1"))
    by_own_mac = resolve_nic(root, DeviceIdentifiers(mac_address=port1))
    assert {n.ifname for n in (by_name, by_pci, by_own_mac)} == {"reth1"}
    assert {n.identity for n in (by_name, by_pci, by_own_mac)} == {f"mac:{port1}"}
    assert (by_name.bond_master, by_name.bond_mode) == ("bond0", None)


def test_a_claim_known_later_is_recorded_on_what_the_uid_holds(store: IpamStore) -> None:
    """gen1 allocated with the UID only; gen2 (after an upgrade) retries with the claim."""
    owner = Owner("p", "mac:" + MAC_A, "uid-1")
    claim = ClaimReference("uid-1", "team-a", "gpu-claim")
    first = store.allocate(owner, [V4])
    store.reserve(owner, ["10.20.0.9/24"])
    assert store.allocate(owner, [V4], claim=claim) == first
    store.reserve(owner, ["10.20.0.9/24"], claim=ClaimReference("uid-1", "other", "ignored"))
    assert [a.claim for a in store.list()] == [claim, claim]


def test_a_name_two_nics_held_for_one_claim_is_never_guessed(store: IpamStore) -> None:
    """A name-only owner that could be either of two NICs allocates and frees nothing."""
    a = Owner("p", f"mac:{MAC_A}", "c", frozenset({"name:eth1", f"pci:{PCI_A}"}))
    b = Owner("p", f"mac:{MAC_B}", "c", frozenset({"name:eth1", f"pci:{PCI_B}"}))
    store.allocate(a, [V4])
    store.allocate(b, [V4])
    weak = Owner("p", "name:eth1", "c", frozenset({"name:eth1"}))
    with pytest.raises(AddressConflict, match="several NICs"):
        store.allocate(weak, [V4])
    assert store.release(weak) == [] and store.held(weak) == []
    assert len(store.list()) == 2
    # One NIC under two strong identities (PCI-only once, MAC later) is no ambiguity.
    c = Owner("p", f"pci:{PCI_A}", "d", frozenset({"name:eth1"}))
    got = store.allocate(c, [V4])
    assert store.allocate(Owner("p", f"mac:{MAC_A}", "d", a.keys), [V4]) == got
    assert store.release(Owner("p", "name:eth1", "d", frozenset({"name:eth1"}))) == got


class _Recorder:
    """An enricher that publishes the driver the resolver finds for the device it gets."""

    def __init__(self) -> None:
        self.seen: list[DeviceIdentifiers] = []

    @hookimpl
    def device_attributes(
        self, context: ProviderContext, instance: object, device: DeviceIdentifiers
    ) -> dict[str, DeviceAttribute]:
        self.seen.append(device)
        driver = resolve_nic(context.host_root, device).driver or "none"
        return {"example.com/driver": DeviceAttribute.of(driver)}


def test_a_pci_only_device_reaches_the_plugins(tmp_path: Path) -> None:
    """An EFA function (no netdev, no MAC) in both generations' spelling."""
    root = node(tmp_path)
    reg = PluginRegistry(load_entry_points=False)
    recorder = _Recorder()
    reg.register(recorder, "recorder")
    host = ProviderHost(cloud_provider_hint="none", host_root=root, registry=reg, env={})
    host.start()
    for device in (
        DeviceIdentifiers(name="", pci_address="0000:00:07.0"),
        DeviceIdentifiers(name="pci-0000-00-07-0"),
    ):
        attrs = host.device_attributes(device)
        assert attrs["example.com/driver"].string == "efa"
    assert recorder.seen == [DeviceIdentifiers(name="", pci_address="0000:00:07.0")]  # cached


def test_names_with_a_trailing_newline_are_not_dra_names() -> None:
    # `$` in a pattern also matches before a final newline: the checks use
    # whole-string matches, so "eth0\n" is not the label "eth0".
    from dranet_cloud.node.nic import dra_interface_name, normalize_pci

    assert dra_interface_name("eth0") == "eth0"
    assert dra_interface_name("eth0\n").startswith("net-")
    assert normalize_pci("0000:00:05.0") == "0000:00:05.0"
