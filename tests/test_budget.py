"""The attribute budget: DRANET's own count from sysfs, ranking, the host's two
caps (32 attributes, 48 attribute values with a list counting each), drops
logged once, ``describe`` showing it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dranet_cloud.cli.main import main
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.attribute_budget import (
    DRANET_MAX,
    AttributeBudget,
    DeviceBudget,
    dranet_attributes,
    locate,
    rank,
)
from dranet_cloud.host.attribute_limits import (
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES,
    attribute_value_problem,
    value_count,
)
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

GVNIC = ("eth0", "42:01:0a:00:00:02", "0000:00:04.0")
MLX = ("eth1", "0c:42:a1:00:00:01", "0000:17:00.0")
VF = ("eth2", "0c:42:a1:00:00:02", "0000:17:00.2")
EFA_PCI = "0000:c9:00.0"


def node(tmp_path: Path) -> HostRoot:
    b = HostRootBuilder(tmp_path / "root")
    b.nic(GVNIC[0], GVNIC[1], pci=GVNIC[2], driver="gve")
    b.file(f"/sys/bus/pci/devices/{GVNIC[2]}/numa_node", "-1\n")
    b.nic(MLX[0], MLX[1], pci=MLX[2], driver="mlx5_core")
    b.file(f"/sys/bus/pci/devices/{MLX[2]}/numa_node", "0\n")
    b.file(f"/sys/bus/pci/devices/{MLX[2]}/sriov_totalvfs", "8\n")
    b.infiniband("mlx5_0", MLX[2])
    b.link(f"/sys/bus/pci/devices/{MLX[2]}/infiniband/mlx5_0", "/sys/class/infiniband/mlx5_0")
    b.nic(VF[0], VF[1], pci=VF[2], driver="mlx5_core")
    b.link(f"/sys/bus/pci/devices/{VF[2]}/physfn", f"/sys/bus/pci/devices/{MLX[2]}")
    b.nic("veth1", "ee:ee:ee:00:00:01")
    b.pci_device(EFA_PCI, driver="efa")
    b.infiniband("rdmap201s0", EFA_PCI)
    return HostRoot(b.build())


def count(root: HostRoot, device: DeviceIdentifiers) -> int:
    return AttributeBudget().for_device(root, device).dranet


def test_dranet_count_follows_sysfs(tmp_path: Path) -> None:
    root = node(tmp_path)
    # 10 link + 4 run-time + 5 PCI + 1 rdma; numa_node -1 publishes no NUMA attributes.
    assert count(root, DeviceIdentifiers(name="eth0", mac_address=GVNIC[1])) == 20
    mlx = DeviceIdentifiers(name="eth1", mac_address=MLX[1])
    names = dranet_attributes(root, locate(root, mlx))  # type: ignore[arg-type]
    assert "dra.net/sriovVfs" in names and "dra.net/rdmaDevice" in names
    assert "resource.kubernetes.io/numaNode" in names and "dra.net/numaNode" in names
    assert count(root, mlx) == 24
    vf = DeviceIdentifiers(name="eth2", mac_address=VF[1])
    assert "dra.net/isSriovVf" in dranet_attributes(root, locate(root, vf))  # type: ignore[arg-type]
    # A virtual netdev: link attributes and rdma only.
    assert count(root, DeviceIdentifiers(name="veth1", mac_address="ee:ee:ee:00:00:01")) == 15
    # An EFA function with no netdev: PCI (NUMA unreadable counts as present) + rdma + device.
    assert count(root, DeviceIdentifiers(name="", pci_address=EFA_PCI)) == 9
    # Nothing on the node: DRANET's maximum.
    assert count(root, DeviceIdentifiers(name="ghost", mac_address="02:00:00:00:00:09")) == 25
    assert DRANET_MAX == 25


def test_device_found_by_mac_not_by_name(tmp_path: Path) -> None:
    root = node(tmp_path)
    # The name says eth0 (gVNIC) but the MAC is the Mellanox PF's: the MAC wins.
    assert count(root, DeviceIdentifiers(name="eth0", mac_address=MLX[1])) == 24
    # A netdev that moved into a pod keeps its link attributes in DRANET's count.
    moved = DeviceIdentifiers(name="net1", mac_address="02:11:22:33:44:55", pci_address=MLX[2])
    assert count(root, moved) == 24


def test_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = node(tmp_path)
    budget = AttributeBudget.with_floor(22)
    efa = budget.for_device(root, DeviceIdentifiers(name="", pci_address=EFA_PCI))
    assert (efa.dranet, efa.providers) == (22, 10)
    assert "--dranet-attribute-floor 22" in efa.source
    mlx = budget.for_device(root, DeviceIdentifiers(name="eth1", mac_address=MLX[1]))
    assert (mlx.dranet, mlx.providers) == (24, 8), "a floor never raises the providers' budget"
    for bad in (-1, 33):
        with pytest.raises(ConfigError, match="--dranet-attribute-floor"):
            AttributeBudget.with_floor(bad)
    args = ["describe", "--host-root", str(root.root), "--cloud-provider-hint", "none", "-o"]
    assert main([*args, "json", "--dranet-attribute-floor", "30", "--device", "eth0"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["devices"]
    assert entry["budget"]["dranet"] == 30 and entry["budget"]["providers"] == 2
    assert main([*args, "json", "--dranet-attribute-floor", "40"]) == 2


def attrs(*names: str) -> AttributeMap:
    return {n: DeviceAttribute.of(i) for i, n in enumerate(names)}


def test_rank_by_names_domains_then_returned_order() -> None:
    got = rank(
        attrs("a.io/x", "a.io/y", "b.io/g1", "a.io/z", "b.io/g2"),
        ["a.io/z", "b.io/", "a.io/x"],
    )
    assert list(got) == ["a.io/z", "b.io/g1", "b.io/g2", "a.io/x", "a.io/y"]
    assert list(rank(attrs("q/b", "q/a"), None)) == ["q/b", "q/a"]


class Chatty:
    """An enricher that returns 30 attributes, its ranking declared by hook."""

    names = [f"chatty.example.com/a{i}" for i in range(30)]

    @hookimpl
    def device_attributes(
        self, context: object, instance: object, device: DeviceIdentifiers
    ) -> AttributeMap:
        return attrs(*self.names)

    @hookimpl
    def attribute_ranking(self) -> list[str]:
        return list(reversed(self.names))


class Second:
    """A second enricher: it gets only what the first left."""

    @hookimpl
    def device_attributes(
        self, context: object, instance: object, device: DeviceIdentifiers
    ) -> AttributeMap:
        return attrs("second.example.com/only")


def budget_host(tmp_path: Path, first: object | None = None, name: str = "chatty") -> ProviderHost:
    """A started host on node() whose enrichers are ``first`` (Chatty by default), then Second."""
    reg = PluginRegistry(load_entry_points=False)
    reg.register(Chatty() if first is None else first, name)
    reg.register(Second(), "second")
    host = ProviderHost(
        cloud_provider_hint="none", host_root=str(node(tmp_path).root), registry=reg, env={}
    )
    host.start()
    return host


def test_host_caps_keeps_best_ranked_and_logs_each_drop_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host = budget_host(tmp_path)
    mlx = DeviceIdentifiers(name="eth1", mac_address=MLX[1])
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.attribute_budget"):
        got = host.device_attributes(mlx)
        host._attr_cache.clear()  # a republication: same drops, no new log lines
        again = host.device_attributes(mlx)
    assert got == again
    assert len(got) == 8 and len(got) + 24 == MAX_ATTRIBUTES
    assert list(got) == [f"chatty.example.com/a{i}" for i in range(29, 21, -1)]
    drops = [r for r in caplog.records if "over the attribute budget" in r.getMessage()]
    assert len(drops) == 22 + 1  # 22 of chatty's, the second enricher's one
    first = drops[0].getMessage()
    assert "plugin chatty" in first and "chatty.example.com/a21" in first
    assert "24 of 32" in first and "8 left for providers" in first
    assert any("plugin second" in r.getMessage() for r in drops)
    report = host.attribute_budget(mlx)
    assert report["dranet"] == 24 and report["providers"] == 8
    assert "second.example.com/only" in report["dropped"]
    # Another NIC that arrives under the same name is another device: drops are
    # recorded by the resolved identity, never by the name alone.
    stranger = DeviceIdentifiers(name="eth1", mac_address="02:00:00:00:00:99")
    assert host.attribute_budget(stranger)["dropped"] == []
    assert host.attribute_budget(stranger)["dranet"] == DRANET_MAX


def test_describe_shows_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = node(tmp_path)
    code = main(["describe", "--host-root", str(root.root), "--cloud-provider-hint", "none",
                 "-o", "json"])  # fmt: skip
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    by_name = {d["device"]["name"]: d["budget"] for d in data["devices"]}
    assert by_name["eth1"] == {
        "dranet": 24, "providers": 8, "dranet_values": 24, "provider_values": 24,
        "source": "sysfs", "dropped": [], "used": 0, "values_used": 0,
    }  # fmt: skip
    assert by_name["eth0"]["dranet"] == 20
    main(["describe", "--host-root", str(root.root), "--cloud-provider-hint", "none"])
    table = capsys.readouterr().out
    assert "BUDGET" in table and "0/8+24" in table and "VALUES" in table
    assert "0/24+24" in table


def test_conformance_check_fails_a_host_without_the_budget(tmp_path: Path) -> None:
    """The conformance check can fail: with the cap lifted, the chatty enricher
    pushes the gVNIC (20 of DRANET's own) past 32."""
    from dranet_cloud.testing.conformance import PluginConformance

    host = budget_host(tmp_path)
    suite = PluginConformance()
    suite.plugin_name = "chatty"
    suite.test_no_device_exceeds_the_limit_with_dranets_own(host.registry, host)  # holds
    host.budget = AttributeBudget(limit=64, value_limit=1000)  # before the budget
    host._attr_cache.clear()
    with pytest.raises(AssertionError, match=r"eth0/.* = 51 > 32"):
        suite.test_no_device_exceeds_the_limit_with_dranets_own(host.registry, host)


def strings(n: int) -> DeviceAttribute:
    return DeviceAttribute(strings=[f"v{i}" for i in range(n)])


def test_a_list_counts_each_value_and_an_empty_list_is_refused() -> None:
    assert value_count(DeviceAttribute.of("x")) == 1 and value_count(DeviceAttribute.of(3)) == 1
    assert value_count(strings(5)) == 5
    assert value_count(DeviceAttribute(ints=[1, 2])) == 2
    assert value_count(DeviceAttribute(bools=[True])) == 1
    assert value_count(DeviceAttribute(versions=["1.0.0", "2.0.0", "3.0.0"])) == 3
    assert "empty" in (attribute_value_problem(DeviceAttribute(ints=[])) or "")
    assert MAX_ATTRIBUTE_VALUES == 48


def test_fit_keeps_both_caps_dropping_the_lowest_ranked_that_do_not_fit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # DRANET's own 24 (scalars): 8 attributes and 24 values left for providers.
    budget = DeviceBudget(24, 8, "sysfs", key="mac:0c:42:a1:00:00:01", dranet_values=24,
                          provider_values=24)  # fmt: skip
    device = DeviceIdentifiers(name="eth1", mac_address=MLX[1])
    offered = {
        "x.io/big": strings(20),
        "x.io/mid": DeviceAttribute(ints=list(range(10))),
        **{f"x.io/s{i}": DeviceAttribute.of(i) for i in range(10)},
    }
    fitter = AttributeBudget()
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.attribute_budget"):
        # Values bind: big takes 20 of 24; mid (10) does not fit, four scalars do.
        kept = fitter.fit("x", device, offered, None, budget.providers, budget)
        assert list(kept) == ["x.io/big", "x.io/s0", "x.io/s1", "x.io/s2", "x.io/s3"]
        assert sum(value_count(a) for a in kept.values()) + budget.dranet_values == 48
        fitter.fit("x", device, offered, None, budget.providers, budget)  # a republication
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 + 6, "mid and s4-s9, each logged once"
    mid = next(m for m in messages if "'x.io/mid'" in m)
    assert "its values (10) do not fit the attribute-value budget" in mid
    assert "at most 48 values" in mid and "24 are DRANET's own" in mid
    assert "24 left for providers" in mid
    assert fitter.dropped(budget)[-1] == "x.io/s9"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.attribute_budget"):
        # Ranked first, mid fits; big no longer does; then the 8-attribute cap binds.
        ranked = AttributeBudget().fit("x", device, offered, ["x.io/mid"], 8, budget)
    assert list(ranked) == ["x.io/mid", *(f"x.io/s{i}" for i in range(7))]
    assert sum(value_count(a) for a in ranked.values()) == 17
    messages = [r.getMessage() for r in caplog.records]
    assert ["x.io/big" in m for m in messages if "attribute-value budget" in m] == [True]
    assert len([m for m in messages if "over the attribute budget" in m]) == 3  # s7-s9


class Lister:
    """An enricher with two long lists and ten scalars, the lists ranked first."""

    @hookimpl
    def device_attributes(
        self, context: object, instance: object, device: DeviceIdentifiers
    ) -> AttributeMap:
        return {
            "lists.example.com/big": strings(20),
            "lists.example.com/mid": DeviceAttribute(ints=list(range(10))),
            **{f"lists.example.com/s{i}": DeviceAttribute.of(i) for i in range(10)},
        }


def lister_host(tmp_path: Path) -> ProviderHost:
    return budget_host(tmp_path, Lister(), "lister")


def test_the_host_keeps_every_device_within_both_caps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = lister_host(tmp_path)
    mlx = DeviceIdentifiers(name="eth1", mac_address=MLX[1])
    got = host.device_attributes(mlx)
    report = host.attribute_budget(mlx)
    assert (report["dranet_values"], report["provider_values"]) == (24, 24)
    values = sum(value_count(a) for a in got.values())
    assert values + report["dranet_values"] == MAX_ATTRIBUTE_VALUES
    assert len(got) + report["dranet"] <= MAX_ATTRIBUTES
    # The second enricher gets nothing: the first left no value.
    assert "lists.example.com/mid" in report["dropped"]
    assert "second.example.com/only" in report["dropped"]
    # The gVNIC (20 of DRANET's own): 12 attributes and 28 values; the values bind first.
    eth0 = DeviceIdentifiers(name="eth0", mac_address=GVNIC[1])
    small = host.device_attributes(eth0)
    assert sum(value_count(a) for a in small.values()) == 28 and len(small) == 9
    host.close()
    root = str(node(tmp_path).root)
    args = ["describe", "--host-root", root, "--cloud-provider-hint", "none", "-o", "json"]
    assert main([*args, "--device", "eth1"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["devices"]
    assert entry["budget"]["values_used"] == 0 and entry["budget"]["provider_values"] == 24


def test_conformance_check_fails_a_host_without_the_value_cap(tmp_path: Path) -> None:
    """With only the 32-attribute cap, the lists push the gVNIC past 48 values."""
    from dranet_cloud.testing.conformance import PluginConformance

    host = lister_host(tmp_path)
    suite = PluginConformance()
    suite.plugin_name = "lister"
    suite.test_no_device_exceeds_the_limit_with_dranets_own(host.registry, host)  # holds
    host.budget = AttributeBudget(value_limit=1000)  # the 32-attribute cap alone
    host._attr_cache.clear()
    with pytest.raises(AssertionError, match=r"DRANET attribute values = \d+ > 48"):
        suite.test_no_device_exceeds_the_limit_with_dranets_own(host.registry, host)
