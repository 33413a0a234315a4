"""A VNIC document with a redacted MAC: the valid VNIC is described, the bad one skipped.

``rekharoy:3f:d2:b3:0b:0c`` used to become ``ea:3f:d2:b3:0b:0c`` and hand a
NIC with that MAC another VNIC's subnet and router.  Now the entry is
skipped with one warning naming it and the document.  When it is the only
VNIC, the node is still OCI: detection, an explicit hint and ``describe``
all succeed with the host's topology attributes, and only the VNIC facts
are missing (it used to answer ``none``, and exit 3 with the hint).
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_oci.constants import (
    DMI_CHASSIS_ASSET_TAG,
    GPU_MEMORY_FABRIC_ID,
    HPC_ISLAND_ID,
    LOCAL_BLOCK_ID,
    NETWORK_BLOCK_ID,
    RACK_ID,
    SUBNET_CIDR_BLOCK,
    VIRTUAL_ROUTER_IP,
    VNIC_ID,
)
from dranet_cloud_oci.emulator import build_emulator
from dranet_cloud_oci.snapshot import parse_vnics

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.bad_mac import DescribeBadEntry, WithoutUsableNic
from dranet_cloud.toolkit.hwaddr import normalize_mac

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


def test_a_vnic_list_with_no_usable_mac_is_empty_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    assert parse_vnics([{"macAddr": "oci-redacted"}, "junk"], "the list") == []
    assert "the list names no NIC with a usable MAC (2 entries" in caplog.text
    assert parse_vnics(None) == []  # a 404: no document, not a broken one


# Written for this test (no real instance's): a bare-metal GPU node whose
# operator redacted the one VNIC's MAC before pasting the documents; every
# OCID below is made up.
REDACTED = "00:00:17:XX:XX:XX"
REDACTED_DOCUMENTS: dict[str, Any] = {
    "instance": {
        "availabilityDomain": "Uocm:PHX-AD-2",
        "faultDomain": "FAULT-DOMAIN-3",
        "compartmentId": "ocid1.compartment.oc1..aaaaaaaatestcompartmentredactedvnic0001",
        "displayName": "gpu-node-17",
        "hostname": "gpu-node-17",
        "id": "ocid1.instance.oc1.phx.anyhqljtestinstanceredactedvnicaaaaaaaaaaaaaaaaaaa01",
        "region": "phx",
        "canonicalRegionName": "us-phoenix-1",
        "shape": "BM.GPU.A100-v2.8",
        "state": "Running",
    },
    "host": {
        "id": "ocid1.host.oc1.phx.anyhqljtesthostredactedvnicaaaaaaaaaaaaaaaaaaaaaaaaa02",
        "networkBlockId": "ocid1.networkblock.oc1.phx.anyhqljtestblockaaaaaaaaaaaaaaaaa03",
        "rackId": "7d1f0c2a9b8e4f6a",
        "rdmaTopologyData": {
            "customerHPCIslandId": "ocid1.hpcisland.oc1.phx.anyhqljtestislandbbbbbbbbbbbbbb04",
            "customerNetworkBlock": "ocid1.networkblock.oc1.phx.anyhqljtestblockcccccccccccc05",
            "customerLocalBlock": "ocid1.localblock.oc1.phx.anyhqljtestlocaldddddddddddddd06",
            "customerGpuMemoryFabric": "ocid1.gpumemfabric.oc1.phx.anyhqljtestfabriceeeeeeee07",
        },
    },
    "vnics": [
        {
            "vnicId": "ocid1.vnic.oc1.phx.abyhqljtestvnicffffffffffffffffffffffffffffffffff08",
            "privateIp": "10.40.3.17",
            "vlanTag": 0,
            "macAddr": REDACTED,
            "virtualRouterIp": "10.40.3.1",
            "subnetCidrBlock": "10.40.3.0/24",
            "nicIndex": 0,
        }
    ],
}


def test_a_document_whose_only_vnic_mac_is_redacted_still_detects_and_publishes(
    without_usable_nic: WithoutUsableNic, tmp_path: Path
) -> None:
    root = (
        HostRootBuilder(tmp_path / "node")
        .dmi(chassis_asset_tag=DMI_CHASSIS_ASSET_TAG)
        .nic("eth0", "00:00:17:02:a1:5e", pci="0000:1f:00.0", driver="mlx5_core")
        .nic("rdma0", "a0:88:c2:1b:40:10", mtu=4220, pci="0000:0c:00.0", driver="mlx5_core")
        .infiniband("mlx5_0", "0000:0c:00.0")
        .build()
    )
    run = without_usable_nic("oci", build_emulator, REDACTED_DOCUMENTS, REDACTED, root)
    assert run.detected["explicit"] is False and run.hinted["explicit"] is True
    assert run.described["instance"]["shape"] == "BM.GPU.A100-v2.8"
    assert run.described["instance"]["vnics"] == []
    topology = {
        HPC_ISLAND_ID: "anyhqljtestislandbbbbbbbbbbbbbb04",
        NETWORK_BLOCK_ID: "anyhqljtestblockcccccccccccc05",
        LOCAL_BLOCK_ID: "anyhqljtestlocaldddddddddddddd06",
        GPU_MEMORY_FABRIC_ID: "anyhqljtestfabriceeeeeeee07",
        RACK_ID: "7d1f0c2a9b8e4f6a",
    }
    for key, value in topology.items():
        assert run.attribute(key) == {"eth0": value, "rdma0": value}
    for key in (VNIC_ID, SUBNET_CIDR_BLOCK, VIRTUAL_ROUTER_IP):
        assert set(run.attribute(key).values()) == {None}, "no NIC gets the redacted VNIC's facts"
    (warning,) = run.warnings
    assert "vnics[0].macAddr" in warning and "entry skipped" in warning
    assert "/opc/v2/vnics/" in run.stderr and "names no NIC with a usable MAC (1 entry" in (
        run.stderr
    )
