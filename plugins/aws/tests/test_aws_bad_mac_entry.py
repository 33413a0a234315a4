"""A MAC listing with an entry that is not a MAC: the other ENIs are described.

It used to fail the whole snapshot (a ValueError reported as a bug).  The
entry is skipped with one warning naming it and the listing, and never
fetched (its name would become part of a URL).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_aws.emulator import build_emulator
from dranet_cloud_aws.snapshot import listed_macs

from dranet_cloud.context import SampleHost
from dranet_cloud.testing.cli import attributes_by_name, describe_in_process

BAD = "deadbeef-cafe"


def test_a_listing_entry_that_is_no_mac_skips_only_itself(
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    aws_tree: dict[str, Any],
    aws_sample: SampleHost,
) -> None:
    macs = aws_tree["meta-data"]["network"]["interfaces"]["macs"]
    valid = set(macs)
    macs[BAD] = {"device-number": "7", "interface-id": "eni-0bad"}
    fixture = tmp_path / "tree.json"
    fixture.write_text(json.dumps(aws_tree))
    caplog.set_level(logging.WARNING)
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        data = describe_in_process("aws", emu.env, aws_sample.root)
        fetched = [r.path for r in emu.log if BAD in r.path]
    ids = attributes_by_name(data, "aws.dra.net/interfaceId")
    by_mac = {d["device"].get("mac_address"): d["device"]["name"] for d in data["devices"]}
    assert valid <= set(by_mac)
    assert all(ids[by_mac[mac]] == macs[mac]["interface-id"] for mac in valid)
    assert "eni-0bad" not in ids.values()
    (warning,) = [r.getMessage() for r in caplog.records if BAD in r.getMessage()]
    assert "MAC listing" in warning and "a bug" not in caplog.text
    assert fetched == []


def test_a_listing_with_no_usable_mac_is_an_error_that_says_so() -> None:
    assert listed_macs("0e:5c:1a:2b:3c:01/\nnope/\n", "the listing") == {
        "0e:5c:1a:2b:3c:01": "0e:5c:1a:2b:3c:01"
    }
    for listing in ("aws-nope/\n<html>\n", "", None):
        with pytest.raises(ValueError, match="the listing names no NIC with a usable MAC"):
            listed_macs(listing, "the listing")
