"""The issue's "Done when" lines for OCI, through the command line.

``describe`` against the emulator must give DRANET's topology attributes
with DRANET's names and values (OCID suffixes) for the fixture and the
VNIC facts on the primary VNIC's NIC, no device config (DRANET's OKE
provider has none), an explicit ``OKE`` hint with IMDS down must exit 3
within its deadline, and auto-detection on a non-OCI node must not touch
the network.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_oci.emulator import build_emulator
from dranet_cloud_oci.sample import ETH0, RDMA_NICS

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.cli import describe_json, emulate_process, run_cli

D = "oke.dra.net/"

# What DRANET's OKE provider publishes for the fixture: the suffix after the
# last "." of each rdmaTopologyData OCID, rackId as is; an H100 host has no
# GPU memory fabric, so gpuMemoryFabricId is absent.
DRANET_ATTRIBUTES = {
    D + "hpcIslandId": {"string": "anuwcljtehxy22qoys6pnyk24gikwxbibxfypmbxjflzvgz7lbq52aesqifi"},
    D + "networkBlockId": {
        "string": "anuwcljtlmq3qmzkrkrcsx2lbwbe4ziqd7o2pzleop2a72b2ii5eqvxffykg"
    },
    D + "localBlockId": {"string": "anuwcljtjifyvncs3aq66nfljtcctrcgbexxdokcppspvoncuqrcwh5i56wm"},
    D + "rackId": {"string": "f192530702815e7ac4886dc657b3e6e8b0e28eb235503dba6d3786a2c141a293"},
}
VNIC_ATTRIBUTES = {
    D + "vnicId": {"string": "abuwcljtxj3qvabvt5iu5buqp5zw3l6n3qdvsj3m4rgvgt6xyki4uz7qkpt2"},
    D + "subnetCidrBlock": {"string": "10.0.10.0/24"},
    D + "virtualRouterIp": {"string": "10.0.10.1"},
}


def describe(emu: Emulator, root: Path, *extra: str) -> dict[str, Any]:
    return describe_json(emu.env, root, *extra)


@pytest.mark.parametrize("hint", ["OKE", ""])
def test_describe_gives_dranets_attributes(
    oci_emulator: Emulator, oci_sample: SampleHost, hint: str
) -> None:
    extra = ("--cloud-provider-hint", hint) if hint else ()
    data = describe(oci_emulator, oci_sample.root, *extra)
    assert data["provider"] == "oci"
    devices = {d["device"]["name"]: d for d in data["devices"]}
    assert set(devices) == {ETH0[0]} | {name for name, *_ in RDMA_NICS}
    assert len(RDMA_NICS) == 16
    assert devices[ETH0[0]]["attributes"] == {**DRANET_ATTRIBUTES, **VNIC_ATTRIBUTES}
    for name, *_ in RDMA_NICS:
        assert devices[name]["attributes"] == DRANET_ATTRIBUTES
    assert all(d["config"] is None for d in devices.values())
    assert data["instance"]["shape"] == "BM.GPU.H100.8"
    assert data["instance"]["topology_note"] == ""
    gets = [r for r in oci_emulator.log if r.method == "GET"]
    assert gets and all(r.headers.get("Authorization") == "Bearer Oracle" for r in gets)


def test_a_gb200_host_gets_all_five(
    oci_documents: dict[str, Any], oci_sample: SampleHost, tmp_path: Path
) -> None:
    fabric = (
        "ocid1.computegpumemoryfabric.oc1.iad.anuwcljtvuvfileey4da6hzozexw67jnm5opd7eli7qmoudr3"
    )
    oci_documents["host"]["rdmaTopologyData"]["customerGpuMemoryFabric"] = fabric
    fixture = tmp_path / "gb200.json"
    fixture.write_text(json.dumps(oci_documents))
    with build_emulator(fixture) as emu:
        data = describe(emu, oci_sample.root, "--device", "rdma3")
    attrs = data["devices"][0]["attributes"]
    suffix = "anuwcljtvuvfileey4da6hzozexw67jnm5opd7eli7qmoudr3"
    assert attrs == {**DRANET_ATTRIBUTES, D + "gpuMemoryFabricId": {"string": suffix}}


def test_explicit_oke_hint_with_imds_down_exits_3_within_the_deadline(
    oci_sample: SampleHost,
) -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    url = emu.url
    emu.stop()  # nothing listens on this loopback port any more
    started = time.monotonic()
    res = run_cli(
        "describe",
        "--host-root",
        str(oci_sample.root),
        "--cloud-provider-hint",
        "OKE",
        "--metadata-deadline",
        "1",
        env={"DRANET_CLOUD_OCI_METADATA_ENDPOINT": url},
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert res.returncode == 3, res.stderr
    assert "DRANET_CLOUD_OCI_METADATA_ENDPOINT" in res.stderr and url in res.stderr
    print(f"OKE hint, IMDS down, --metadata-deadline 1: exit 3 after {elapsed:.2f} s")


def test_auto_detection_on_a_non_oci_node_does_no_network_io(
    oci_emulator: Emulator, tmp_path: Path
) -> None:
    root = tmp_path / "bare-metal"
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/chassis_asset_tag").write_text("To Be Filled By O.E.M.\n")
    res = run_cli("detect", "--host-root", str(root), "-o", "json", env=oci_emulator.env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["provider"] == "none"
    assert oci_emulator.log == []


def test_emulate_command_serves_an_operators_fixture_without_topology(
    oci_documents: dict[str, Any], oci_sample: SampleHost, tmp_path: Path
) -> None:
    """A tenancy without topology data: DRANET's fallback, and the message saying so."""
    del oci_documents["host"]["rdmaTopologyData"]
    fixture = tmp_path / "node.json"
    fixture.write_text(json.dumps(oci_documents))
    with emulate_process("oci", "--fixture", str(fixture)) as ready:
        assert ready["env"] == {"DRANET_CLOUD_OCI_METADATA_ENDPOINT": ready["url"]}
        res = run_cli(
            "describe",
            "--host-root",
            str(oci_sample.root),
            "-o",
            "json",
            "--device",
            "rdma0",
            env=ready["env"],
        )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["devices"][0]["attributes"] == {
        D + "networkBlockId": DRANET_ATTRIBUTES[D + "networkBlockId"],
        D + "rackId": DRANET_ATTRIBUTES[D + "rackId"],
    }
    assert "topology data is not enabled for the tenancy" in data["instance"]["topology_note"]
    assert "topology data is not enabled for the tenancy" in res.stderr
