"""An IMDS document with a NIC whose macAddress does not parse: the rest is used.

The bad entry is skipped with one warning naming it and the document; the
good NIC keeps its table number (its position in the list).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from dranet_cloud_azure.emulator import build_emulator
from dranet_cloud_azure.sample import ETH0
from dranet_cloud_azure.snapshot import parse_instance

from dranet_cloud.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry

BAD = "000D3AZZ2B1D"


def test_one_unparsable_mac_skips_only_its_entry(
    describe_bad_entry: DescribeBadEntry, azure_document: dict[str, Any], azure_sample: SampleHost
) -> None:
    interfaces = azure_document["network"]["interface"]
    extra = copy.deepcopy(interfaces[0])
    extra["macAddress"] = BAD
    interfaces.append(extra)
    run = describe_bad_entry("azure", build_emulator, azure_document, BAD, azure_sample.root)
    devices = {d["device"]["name"]: d for d in run.data["devices"]}
    assert {r["table"] for r in devices[ETH0]["config"]["routes"]} == {100}
    subnet = devices[ETH0]["attributes"]["azure.dra.net/ipv4Subnet"]["string"]
    first = interfaces[0]["ipv4"]["subnet"][0]
    assert subnet == f"{first['address']}/{first['prefix']}"
    assert "network.interface[1]" in run.warning and "IMDS instance document" in run.warning


def test_a_document_with_no_usable_mac_is_an_error_that_says_so(
    azure_document: dict[str, Any],
) -> None:
    for i, nic in enumerate(azure_document["network"]["interface"]):
        nic["macAddress"] = f"azure-redacted-{i}"
    with pytest.raises(ValueError, match="names no NIC with a usable MAC"):
        parse_instance(azure_document)
