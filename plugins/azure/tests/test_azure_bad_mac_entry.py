"""An IMDS document with a NIC whose macAddress does not parse: the rest is used.

The bad entry is skipped with one warning naming it and the document; the
good NIC keeps its table number (its position in the list).
"""

from __future__ import annotations

import copy
from typing import Any

from dranet_cloud_azure.emulator import build_emulator
from dranet_cloud_azure.sample import ETH0
from dranet_cloud_azure.snapshot import parse_instance

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing.bad_mac import DescribeBadEntry, WithoutUsableNic

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


def test_a_document_with_no_usable_mac_still_starts_with_the_vm_facts(
    without_usable_nic: WithoutUsableNic, azure_document: dict[str, Any], azure_sample: SampleHost
) -> None:
    interfaces = azure_document["network"]["interface"]
    azure_document["network"]["interface"] = [{**interfaces[0], "macAddress": BAD}]
    vm_size = azure_document["compute"]["vmSize"]
    run = without_usable_nic("azure", build_emulator, azure_document, BAD, azure_sample.root)
    assert set(run.attribute("azure.dra.net/vmSize").values()) == {vm_size}
    assert set(run.attribute("azure.dra.net/ipv4Subnet").values()) == {None}
    assert run.described["instance"]["interfaces"] == []
    assert "network.interface[0]" in run.warnings[0]
    assert "names no NIC with a usable MAC (1 entry" in run.stderr
    for i, nic in enumerate(interfaces):
        nic["macAddress"] = f"azure-redacted-{i}"
    azure_document["network"]["interface"] = interfaces
    assert parse_instance(azure_document).interfaces == []
