"""A MAC listing with an entry that is not a MAC: the other ENIs are described.

It used to fail the whole snapshot (a ValueError reported as a bug).  The
entry is skipped with one warning naming it and the listing, and never
fetched (its name would become part of a URL).
"""

from __future__ import annotations

from typing import Any

from dranet_cloud_aws.emulator import build_emulator
from dranet_cloud_aws.snapshot import listed_macs

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry, WithoutUsableNic

BAD = "deadbeef-cafe"


def test_a_listing_entry_that_is_no_mac_skips_only_itself(
    describe_bad_entry: DescribeBadEntry, aws_tree: dict[str, Any], aws_sample: SampleHost
) -> None:
    macs = aws_tree["meta-data"]["network"]["interfaces"]["macs"]
    valid = set(macs)
    macs[BAD] = {"device-number": "7", "interface-id": "eni-0bad"}
    run = describe_bad_entry("aws", build_emulator, aws_tree, BAD, aws_sample.root)
    ids = run.attribute("aws.dra.net/interfaceId")
    by_mac = {mac: name for name, mac in run.macs.items()}
    assert valid <= set(by_mac)
    assert all(ids[by_mac[mac]] == macs[mac]["interface-id"] for mac in valid)
    assert "eni-0bad" not in ids.values()
    assert "MAC listing" in run.warning and "a bug" not in run.logged
    assert run.fetched == []


def test_a_listing_with_no_usable_mac_still_starts_with_the_instance_facts(
    without_usable_nic: WithoutUsableNic, aws_tree: dict[str, Any], aws_sample: SampleHost
) -> None:
    interfaces = aws_tree["meta-data"]["network"]["interfaces"]
    interfaces["macs"] = {BAD: next(iter(interfaces["macs"].values()))}
    instance_type = aws_tree["dynamic"]["instance-identity"]["document"]["instanceType"]
    run = without_usable_nic("aws", build_emulator, aws_tree, BAD, aws_sample.root)
    assert set(run.attribute("aws.dra.net/instanceType").values()) == {instance_type}
    assert set(run.attribute("aws.dra.net/interfaceId").values()) == {None}
    assert run.described["instance"]["enis"] == {}
    assert "MAC listing" in run.warnings[0] and "names no NIC with a usable MAC" in run.stderr
    assert listed_macs("0e:5c:1a:2b:3c:01/\nnope/\n", "the listing") == {
        "0e:5c:1a:2b:3c:01": "0e:5c:1a:2b:3c:01"
    }
    for listing in ("aws-nope/\n<html>\n", "", None):
        assert listed_macs(listing, "the listing") == {}
