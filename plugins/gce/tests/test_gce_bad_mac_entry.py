"""A metadata tree with one NIC whose MAC does not parse: the others are described.

The bad entry is skipped with one warning naming it and the tree (not once
per reload), and no NIC gets a MAC the metadata did not publish.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_gce.attributes import ATTR_NETWORK_NAME
from dranet_cloud_gce.emulator import build_emulator
from dranet_cloud_gce.instance import parse_instance

from dranet_cloud.context import SampleHost
from dranet_cloud.testing.cli import attributes_by_name, describe_in_process

BAD = "rekharoy:3f:d2:b3:0b:0c"


def test_one_unparsable_mac_skips_only_its_entry(
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    gce_tree: dict[str, Any],
    gce_sample: SampleHost,
) -> None:
    nics = gce_tree["instance"]["networkInterfaces"]
    lost = nics[1]["mac"]
    nics[1]["mac"] = BAD
    fixture = tmp_path / "tree.json"
    fixture.write_text(json.dumps(gce_tree))
    caplog.set_level(logging.WARNING)
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        data = describe_in_process("gce", emu.env, gce_sample.root)
    names = attributes_by_name(data, ATTR_NETWORK_NAME)
    macs = {d["device"]["name"]: d["device"].get("mac_address") for d in data["devices"]}
    valid = {n["mac"] for n in nics if n["mac"] != BAD}
    described = {name for name, mac in macs.items() if mac in valid}
    assert len(described) == len(valid) == len(nics) - 1
    assert all(names[name] for name in described)
    assert [names[name] for name, mac in macs.items() if mac == lost] == [None]
    (warning,) = [r.getMessage() for r in caplog.records if BAD in r.getMessage()]
    assert "instance/network-interfaces/1/mac" in warning and "metadata tree" in warning


def test_a_tree_with_no_usable_mac_is_an_error_that_says_so(gce_tree: dict[str, Any]) -> None:
    for i, nic in enumerate(gce_tree["instance"]["networkInterfaces"]):
        nic["mac"] = f"gce-redacted-{i}"
    with pytest.raises(ValueError, match="names no NIC with a usable MAC"):
        parse_instance(gce_tree, endpoint="http://127.0.0.1:9")
