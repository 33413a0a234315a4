"""A metadata tree with one NIC whose MAC does not parse: the others are described.

The bad entry is skipped with one warning naming it and the tree (not once
per reload), and no NIC gets a MAC the metadata did not publish.
"""

from __future__ import annotations

from typing import Any

from dranet_cloud_gce.attributes import ATTR_MACHINE_TYPE, ATTR_NETWORK_NAME
from dranet_cloud_gce.emulator import build_emulator
from dranet_cloud_gce.snapshot import parse_instance

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry, WithoutUsableNic

BAD = "rekharoy:3f:d2:b3:0b:0c"


def test_one_unparsable_mac_skips_only_its_entry(
    describe_bad_entry: DescribeBadEntry, gce_tree: dict[str, Any], gce_sample: SampleHost
) -> None:
    nics = gce_tree["instance"]["networkInterfaces"]
    lost = nics[1]["mac"]
    nics[1]["mac"] = BAD
    run = describe_bad_entry("gce", build_emulator, gce_tree, BAD, gce_sample.root)
    names = run.attribute(ATTR_NETWORK_NAME)
    macs = run.macs
    valid = {n["mac"] for n in nics if n["mac"] != BAD}
    described = {name for name, mac in macs.items() if mac in valid}
    assert len(described) == len(valid) == len(nics) - 1
    assert all(names[name] for name in described)
    assert [names[name] for name, mac in macs.items() if mac == lost] == [None]
    assert "instance/network-interfaces/1/mac" in run.warning and "metadata tree" in run.warning


def test_a_tree_with_no_usable_mac_still_starts_with_the_instance_facts(
    without_usable_nic: WithoutUsableNic, gce_tree: dict[str, Any], gce_sample: SampleHost
) -> None:
    nics = gce_tree["instance"]["networkInterfaces"]
    gce_tree["instance"]["networkInterfaces"] = [{**nics[0], "mac": BAD}]
    run = without_usable_nic("gce", build_emulator, gce_tree, BAD, gce_sample.root)
    assert set(run.attribute(ATTR_MACHINE_TYPE).values()) == {"a3-megagpu-8g"}
    assert set(run.attribute(ATTR_NETWORK_NAME).values()) == {None}
    assert run.described["instance"]["nics"] == []
    assert "instance/network-interfaces/0/mac" in run.warnings[0]
    assert "names no NIC with a usable MAC (1 entry" in run.stderr
    for i, nic in enumerate(nics):
        nic["mac"] = f"gce-redacted-{i}"
    assert parse_instance(gce_tree, endpoint="http://127.0.0.1:9").nics == []
