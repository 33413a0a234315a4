"""Parsing the recursive metadata tree into the GCE snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from dranet_cloud_gce.machines import gpudirect_for
from dranet_cloud_gce.snapshot import parse_instance, parse_network, split_topology

from dranet_cloud.wire.models import DeviceIdentifiers


def test_default_fixture_instance_fields(gce_tree: dict[str, Any]) -> None:
    inst = parse_instance(gce_tree, endpoint="http://127.0.0.1:9")
    assert inst.provider == "gce"
    assert inst.endpoint == "http://127.0.0.1:9"
    assert inst.name == gce_tree["instance"]["name"]
    assert inst.machine_type == "a3-megagpu-8g"
    assert inst.zone == "us-central1-a"
    assert inst.project_id == gce_tree["project"]["projectId"]
    assert inst.project_number == gce_tree["project"]["numericProjectId"]
    assert inst.gpu_direct == "GPUDirect-TCPXO"
    block, sub_block, host = (
        gce_tree["instance"]["attributes"]["physical_host"].strip("/").split("/")
    )
    assert (inst.block, inst.sub_block, inst.host) == (block, sub_block, host)


def test_every_nic_is_parsed(gce_tree: dict[str, Any]) -> None:
    inst = parse_instance(gce_tree)
    raw = gce_tree["instance"]["networkInterfaces"]
    assert len(inst.nics) == len(raw) == 9
    primary = inst.nics[0]
    assert primary.ip == raw[0]["ip"]
    assert primary.gateway == raw[0]["gateway"]
    assert primary.subnetmask == raw[0]["subnetmask"]
    assert primary.mtu == raw[0]["mtu"]
    assert primary.ip_aliases == raw[0]["ipAliases"]
    assert primary.ipv6_ranges == ["2600:1900:4000:318::/64"]
    assert primary.network_name == "default"
    for nic, entry in zip(inst.nics[1:], raw[1:], strict=True):
        assert nic.mtu == 8244
        assert nic.ip_aliases == []
        assert nic.ipv6_ranges == []
        assert nic.network_name == entry["network"].rsplit("/", 1)[1]
        assert nic.network_project_number == gce_tree["project"]["numericProjectId"]
    # One VPC per GPU NIC.
    assert len({n.network_name for n in inst.nics[1:]}) == 8
    assert inst.known_macs() == frozenset(n["mac"] for n in raw)


def test_macs_are_compared_normalized(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["networkInterfaces"][1]["mac"] = "42-01-C0-A8-01-02"
    inst = parse_instance(gce_tree)
    assert inst.nics[1].mac == "42:01:c0:a8:01:02"
    found = inst.nic_for(DeviceIdentifiers(name="eth1", mac_address="42:01:C0:A8:01:02"))
    assert found is not None and found.index == 1
    assert inst.nic_for(DeviceIdentifiers(name="eth1")) is None
    assert inst.nic_for(DeviceIdentifiers(name="x", mac_address="42:01:c0:a8:09:09")) is None


@pytest.mark.parametrize("key", ["ipv6s", "ipv6"])
def test_both_ipv6_spellings_are_accepted(gce_tree: dict[str, Any], key: str) -> None:
    nic = gce_tree["instance"]["networkInterfaces"][2]
    nic[key] = ["2600:1900:4000:9a2:0:0:0:0/96"]
    inst = parse_instance(gce_tree)
    assert inst.nics[2].ipv6_ranges == ["2600:1900:4000:9a2::/96"]


def test_ipv6_without_prefix_is_the_vm_96(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["networkInterfaces"][3]["ipv6s"] = ["2600:1900:4000:9a2:0:5:0:0"]
    inst = parse_instance(gce_tree)
    assert inst.nics[3].ipv6_ranges == ["2600:1900:4000:9a2:0:5::/96"]


def test_bad_entries_are_skipped_not_fatal(gce_tree: dict[str, Any]) -> None:
    nics = gce_tree["instance"]["networkInterfaces"]
    nics[4]["mac"] = "not-a-mac"
    nics[5]["ipAliases"] = ["10.9.0.0/24", "garbage", "fd00::/64"]
    nics[5]["mtu"] = "oops"
    nics.append("not an object")
    nics.append(dict(nics[0]))  # duplicate MAC: the first entry wins
    inst = parse_instance(gce_tree)
    assert [n.index for n in inst.nics] == [0, 1, 2, 3, 5, 6, 7, 8]
    nic5 = next(n for n in inst.nics if n.index == 5)
    assert nic5.ip_aliases == ["10.9.0.0/24"]
    assert nic5.mtu is None


def test_alias_without_prefix_is_a_single_address(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["networkInterfaces"][1]["ipAliases"] = ["192.168.1.9"]
    assert parse_instance(gce_tree).nics[1].ip_aliases == ["192.168.1.9/32"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/b/s/h", ("b", "s", "h")),
        ("b/s/h/", ("b", "s", "h")),
        ("/b/s", None),
        ("/b//h", None),
        ("", None),
        (None, None),
    ],
)
def test_topology(value: str | None, expected: tuple[str, str, str] | None) -> None:
    assert split_topology(value) == expected


def test_malformed_topology_gives_no_topology(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["attributes"]["physical_host"] = "/only-two/parts"
    inst = parse_instance(gce_tree)
    assert inst.physical_host == "/only-two/parts"
    assert (inst.block, inst.sub_block, inst.host) == (None, None, None)


def test_missing_topology(gce_tree: dict[str, Any]) -> None:
    del gce_tree["instance"]["attributes"]["physical_host"]
    inst = parse_instance(gce_tree)
    assert inst.block is None and inst.physical_host is None


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        ("projects/628944397724/networks/default", (628944397724, "default")),
        ("projects/111/networks/shared-vpc-gpu-1", (111, "shared-vpc-gpu-1")),
        ("projects/my-host-project/networks/vpc", (None, "vpc")),
        ("networks/vpc", (None, "vpc")),
        (None, (None, None)),
    ],
)
def test_network_parsing(network: str | None, expected: tuple[int | None, str | None]) -> None:
    assert parse_network(network) == expected


@pytest.mark.parametrize(
    ("machine_type", "protocol"),
    [
        ("a3-highgpu-1g", "GPUDirect-TCPX"),
        ("a3-highgpu-2g", "GPUDirect-TCPX"),
        ("a3-highgpu-4g", "GPUDirect-TCPX"),
        ("a3-highgpu-8g", "GPUDirect-TCPX"),
        ("a3-edgegpu-8g", "GPUDirect-TCPX"),
        ("a3-megagpu-8g", "GPUDirect-TCPXO"),
        ("a3-ultragpu-8g", "GPUDirect-RDMA"),
        ("a4-highgpu-8g", "GPUDirect-RDMA"),
        ("n2-standard-8", None),
        (None, None),
    ],
)
def test_gpudirect_by_machine_type(machine_type: str | None, protocol: str | None) -> None:
    assert gpudirect_for(machine_type) == protocol


def test_machine_type_base_name_drives_gpudirect(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["machineType"] = "projects/1/machineTypes/a4-highgpu-8g"
    inst = parse_instance(gce_tree)
    assert inst.machine_type == "a4-highgpu-8g"
    assert inst.gpu_direct == "GPUDirect-RDMA"


@pytest.mark.parametrize("bad", [None, [], "text", {"project": {}}, {"instance": []}])
def test_not_a_metadata_tree(bad: Any) -> None:
    with pytest.raises(ValueError, match="instance"):
        parse_instance(bad)


def test_snapshot_summary_is_json(gce_instance: Any) -> None:
    summary = gce_instance.summary()
    assert summary["machine_type"] == "a3-megagpu-8g"
    assert len(summary["nics"]) == 9
    assert summary["nics"][0]["ip_aliases"] == ["10.24.3.0/24"]
