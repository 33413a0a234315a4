"""A metadata tree with one NIC whose MAC does not parse: the others are described.

The bad entry is skipped with one warning naming it and the tree (not once
per reload), and no NIC gets a MAC the metadata did not publish.
"""

from __future__ import annotations

from typing import Any

import pytest
from dranet_cloud_gce.attributes import ATTR_NETWORK_NAME
from dranet_cloud_gce.emulator import build_emulator
from dranet_cloud_gce.snapshot import parse_instance

from dranet_cloud.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry

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


def test_a_tree_with_no_usable_mac_is_an_error_that_says_so(gce_tree: dict[str, Any]) -> None:
    for i, nic in enumerate(gce_tree["instance"]["networkInterfaces"]):
        nic["mac"] = f"gce-redacted-{i}"
    with pytest.raises(ValueError, match="names no NIC with a usable MAC"):
        parse_instance(gce_tree, endpoint="http://127.0.0.1:9")
