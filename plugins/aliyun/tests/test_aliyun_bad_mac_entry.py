"""A NIC listing with an entry that is not a MAC: the other NICs are described.

``zz:00:16:3e:2c:8a:10`` passed the old check (twelve hex digits in it);
now it is skipped with one warning naming it and the listing, and never
fetched.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from dranet_cloud_aliyun.attributes import INSTANCE_TYPE, NETWORK_INTERFACE_ID
from dranet_cloud_aliyun.emulator import build_emulator, default_tree

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry, WithoutUsableNic
from dranet_cloud.testing.cli import describe_in_process
from dranet_cloud.toolkit.errors import DranetCloudError

BAD = "zz:00:16:3e:2c:8a:10"


def test_a_listing_entry_that_is_no_mac_skips_only_itself(
    describe_bad_entry: DescribeBadEntry, erdma_sample: SampleHost
) -> None:
    tree = copy.deepcopy(default_tree())
    macs = tree["meta-data"]["network"]["interfaces"]["macs"]
    valid = dict(macs)
    macs[BAD] = {**copy.deepcopy(next(iter(valid.values()))), "network-interface-id": "eni-bad"}
    run = describe_bad_entry("aliyun", build_emulator, tree, BAD, erdma_sample.root)
    ids = run.attribute(NETWORK_INTERFACE_ID)
    by_mac = {mac: name for name, mac in run.macs.items()}
    assert all(ids[by_mac[mac]] == nic["network-interface-id"] for mac, nic in valid.items())
    assert "eni-bad" not in ids.values()
    assert "NIC listing" in run.warning and "entry skipped" in run.warning
    assert run.fetched == []


def test_a_listing_with_no_usable_mac_still_starts_with_the_instance_facts(
    without_usable_nic: WithoutUsableNic, erdma_sample: SampleHost
) -> None:
    tree = copy.deepcopy(default_tree())
    interfaces = tree["meta-data"]["network"]["interfaces"]
    interfaces["macs"] = {BAD: next(iter(interfaces["macs"].values()))}
    run = without_usable_nic("aliyun", build_emulator, tree, BAD, erdma_sample.root)
    instance_type = tree["meta-data"]["instance"]["instance-type"]
    assert set(run.attribute(INSTANCE_TYPE).values()) == {instance_type}
    assert set(run.attribute(NETWORK_INTERFACE_ID).values()) == {None}
    assert run.described["instance"]["nics"] == {}
    assert "NIC listing" in run.warnings[0] and "names no NIC with a usable MAC" in run.stderr


def test_an_instance_without_an_instance_id_fails_the_start_saying_so(
    tmp_path: Path, erdma_sample: SampleHost
) -> None:
    tree = copy.deepcopy(default_tree())
    del tree["meta-data"]["instance-id"]
    fixture = tmp_path / "tree.json"
    fixture.write_text(json.dumps(tree))
    with (
        build_emulator(fixture, "127.0.0.1:0", None) as emu,
        pytest.raises(DranetCloudError, match="has no instance id at") as err,
    ):
        describe_in_process("aliyun", emu.env, erdma_sample.root)
    assert err.value.exit_code == 3
