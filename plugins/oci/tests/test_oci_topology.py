"""DRANET's OCID-suffix rule, the topology fallbacks and their messages, and
the per-VNIC attributes within the budget."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_oci.attributes import device_attributes
from dranet_cloud_oci.snapshot import OcidError, ocid_suffix, parse_instance

from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers

D = "oke.dra.net/"


@pytest.mark.parametrize(
    ("value", "suffix"),
    [
        ("", ""),
        ("ocid1.computehpcisland.oc1.iad.anuwcljtabc", "anuwcljtabc"),
        ("ocid1.x.oc1.iad." + "a" * 10 + "b" * 60, "b" * 60),  # at most the last 60
    ],
)
def test_ocid_suffix(value: str, suffix: str) -> None:
    assert ocid_suffix(value) == suffix


@pytest.mark.parametrize("value", ["computehpcisland.oc1.iad.abc", "ocid-without-dot"])
def test_ocid_suffix_refuses(value: str) -> None:
    with pytest.raises(OcidError):
        ocid_suffix(value)


def _docs(host: Any) -> Any:
    return parse_instance(
        {"id": "ocid1.instance.oc1.iad.x", "shape": "BM.GPU.GB200-v3.4"},
        host,
        [{"macAddr": "02:00:17:00:00:01", "vnicId": "ocid1.vnic.oc1.iad.abc"}],
        host_missing=host is None,
    )


def test_a_value_without_ocid_is_an_error_naming_plugin_and_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = {
        "rackId": "rack-7",
        "rdmaTopologyData": {
            "customerHPCIslandId": "not-an-id",
            "customerNetworkBlock": "ocid1.computenetworkblock.oc1.iad.nb1",
            "customerLocalBlock": "ocid1.computelocalblock.oc1.iad.lb1",
        },
    }
    with caplog.at_level(logging.ERROR):
        inst = _docs(host)
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage().startswith("oci: rdmaTopologyData.customerHPCIslandId")
    assert "Fix: the value must be an OCI OCID" in record.getMessage()
    assert (inst.hpc_island_id, inst.network_block_id, inst.local_block_id) == ("", "nb1", "lb1")
    assert inst.rack_id == "rack-7"
    assert "customerHPCIslandId" in inst.topology_note


def test_host_404_says_topology_data_is_not_enabled(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        inst = _docs(None)
    assert (inst.network_block_id, inst.rack_id) == ("", "")
    assert "/opc/v2/host/ answered 404" in inst.topology_note
    assert "enable RDMA topology data (TopologyData) for the tenancy" in caplog.text


def test_without_rdma_topology_data_the_top_level_ids_are_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = {"networkBlockId": "ocid1.computenetworkblock.oc1.iad." + "n" * 60, "rackId": "r1"}
    with caplog.at_level(logging.WARNING):
        inst = _docs(host)
    # DRANET publishes the raw OCID here (over 64 bytes); its suffix fits.
    assert (inst.network_block_id, inst.rack_id, inst.hpc_island_id) == ("n" * 60, "r1", "")
    assert "oci: /opc/v2/host/ has no rdmaTopologyData" in caplog.text


def test_attributes_stay_within_the_budget(tmp_path: Path) -> None:
    host = {
        "rackId": "r1",
        "rdmaTopologyData": {
            k: f"ocid1.x.oc1.iad.{k.lower()}"
            for k in (
                "customerHPCIslandId",
                "customerNetworkBlock",
                "customerLocalBlock",
                "customerGpuMemoryFabric",
            )
        },
    }
    inst = _docs(host)
    root = (
        HostRootBuilder(tmp_path / "n").nic("eth0", "02:00:17:00:00:01", pci="0000:1f:00.0").build()
    )
    by_pci = DeviceIdentifiers(name="", pci_address="0000:1f:00.0")  # found through the host root
    attrs = device_attributes(HostRoot(root), inst, by_pci)
    assert set(attrs) == {
        D + n
        for n in (
            "hpcIslandId",
            "networkBlockId",
            "localBlockId",
            "rackId",
            "gpuMemoryFabricId",
            "vnicId",
            "subnetCidrBlock",
            "virtualRouterIp",
        )
    } - {D + "subnetCidrBlock", D + "virtualRouterIp"}  # empty in this VNIC: omitted
    assert attrs[D + "vnicId"].to_wire() == {"string": "abc"}
    assert len(attrs) + 24 <= 32  # DRANET's own 24 at most, plus ours


def test_aliases_resolve_to_oci() -> None:
    reg = PluginRegistry()
    assert {reg.resolve(n, flag="--cloud-provider-hint") for n in ("OKE", "oracle", "OCI")} == {
        "oci"
    }
    assert reg.resolve("AZURE", flag="--cloud-provider-hint") == "azure"
