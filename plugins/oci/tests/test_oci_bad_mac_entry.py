"""A VNIC document with a redacted MAC: the valid VNIC is described, the bad one skipped.

``rekharoy:3f:d2:b3:0b:0c`` used to become ``ea:3f:d2:b3:0b:0c`` and hand a
NIC with that MAC another VNIC's subnet and router.  Now the entry is
skipped with one warning naming it and the document.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from dranet_cloud_oci.constants import SUBNET_CIDR_BLOCK, VIRTUAL_ROUTER_IP
from dranet_cloud_oci.emulator import build_emulator
from dranet_cloud_oci.snapshot import parse_vnics

from dranet_cloud.context import SampleHost
from dranet_cloud.hwaddr import normalize_mac
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.bad_mac import DescribeBadEntry

BAD = "rekharoy:3f:d2:b3:0b:0c"


def test_a_redacted_mac_gives_no_nic_its_vnic(
    describe_bad_entry: DescribeBadEntry, oci_documents: dict[str, Any], oci_sample: SampleHost
) -> None:
    good = oci_documents["vnics"][0]
    redacted = copy.deepcopy(good)
    redacted.update(macAddr=BAD, subnetCidrBlock="10.9.9.0/24", virtualRouterIp="10.9.9.1")
    oci_documents["vnics"].append(redacted)
    # A NIC whose MAC is what the old parser made of the redacted string.
    HostRootBuilder(oci_sample.root).nic("ens9", "ea:3f:d2:b3:0b:0c", pci="0000:e1:00.0").build()
    run = describe_bad_entry("oci", build_emulator, oci_documents, BAD, oci_sample.root)
    subnets = run.attribute(SUBNET_CIDR_BLOCK)
    routers = run.attribute(VIRTUAL_ROUTER_IP)
    (owner,) = [name for name, mac in run.macs.items() if mac == normalize_mac(good["macAddr"])]
    assert subnets[owner] == good["subnetCidrBlock"] and routers[owner] == good["virtualRouterIp"]
    assert subnets["ens9"] is None and routers["ens9"] is None
    assert "10.9.9.0/24" not in subnets.values()
    assert "vnics[1].macAddr" in run.warning and "/opc/v2/vnics/" in run.warning


def test_a_vnic_list_with_no_usable_mac_is_an_error_that_says_so() -> None:
    with pytest.raises(ValueError, match="names no NIC with a usable MAC"):
        parse_vnics([{"macAddr": "oci-redacted"}, "junk"])
    assert parse_vnics(None) == []  # a 404: no document, not a broken one
