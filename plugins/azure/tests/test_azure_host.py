"""The issue's "Done when" lines for Azure, through the command line.

``describe`` against the emulator must give DRANET's four attributes with
DRANET's values and the routing DRANET derives, every config must pass
DRANET's validation, an explicit ``AZURE`` hint with IMDS down must exit 3
within its deadline, and auto-detection on a non-Azure node must not touch
the network.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from dranet_cloud_azure.emulator import build_emulator
from dranet_cloud_azure.sample import ETH0, IB_NICS, VF

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.host.validation import validate_network_config
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.cli import describe_json, emulate_process, run_cli
from dranet_cloud.wire.models import NetworkConfig

D = "azure.dra.net/"

DRANET_ATTRIBUTES = {
    D + "vmSize": {"string": "Standard_ND96isr_H100_v5"},
    D + "placementGroupId": {"string": "7b3e0f52-9d41-4c8a-b6e2-1f5a9c0d4e87"},
    D + "interconnectGroupId": {"string": "ig-eastus2-h100-0c7f3a91"},
    D + "interconnectSubgroupId": {"string": "isg-0c7f3a91-03"},
}
# What DRANET's GetDeviceConfig returns for the fixture's NIC (index 0),
# given the host's IPv6 default route via fe80::1234:5678:9abc on eth0.
DRANET_ETH0_CONFIG = {
    "interface": {},
    "rules": [
        {"source": "10.224.0.0/16", "table": 100},
        {"source": "fd5e:9c41:7a2b:10::25/128", "table": 100},
    ],
    "routes": [
        {"destination": "0.0.0.0/0", "gateway": "10.224.0.1", "table": 100},
        {"destination": "::/0", "gateway": "fe80::1234:5678:9abc", "table": 100},
    ],
}


def describe(emu: Emulator, root: Path, *extra: str) -> dict[str, Any]:
    return describe_json(emu.env, root, *extra)


def test_describe_gives_dranets_attributes_and_routing(
    azure_emulator: Emulator, azure_sample: SampleHost
) -> None:
    data = describe(azure_emulator, azure_sample.root, "--cloud-provider-hint", "AZURE")
    assert data["provider"] == "azure"
    devices = {d["device"]["name"]: d for d in data["devices"]}
    assert set(devices) == {ETH0, VF} | {name for name, *_ in IB_NICS}
    for entry in devices.values():
        attrs = entry["attributes"]
        assert {k: v for k, v in attrs.items() if k in DRANET_ATTRIBUTES} == DRANET_ATTRIBUTES
    # The pair: the synthetic NIC carries the routing, its VF none.
    assert devices[ETH0]["attributes"][D + "acceleratedNetworking"] == {"bool": True}
    assert devices[VF]["attributes"][D + "acceleratedNetworkingVf"] == {"bool": True}
    assert devices[ETH0]["config"] == DRANET_ETH0_CONFIG
    # DRANET PR #335: the IMDS NIC's first IPv4 subnet, on both halves of its MAC.
    assert devices[ETH0]["attributes"][D + "ipv4Subnet"] == {"string": "10.224.0.0/16"}
    assert devices[VF]["attributes"][D + "ipv4Subnet"] == {"string": "10.224.0.0/16"}
    assert devices[VF]["config"] is None
    for name, *_ in IB_NICS:  # InfiniBand: VM-wide facts only, not IMDS NICs
        assert devices[name]["attributes"] == DRANET_ATTRIBUTES
        assert devices[name]["config"] is None
    validate_network_config(NetworkConfig.model_validate(devices[ETH0]["config"]))
    gets = [r for r in azure_emulator.log if r.method == "GET"]
    assert gets and all(r.headers.get("Metadata") == "true" for r in gets)
    assert all(r.query.get("api-version") == ["2025-11-11"] for r in gets)


def test_auto_detection_and_the_ib_function_without_a_netdev(
    azure_emulator: Emulator, azure_sample: SampleHost
) -> None:
    """DRANET publishes Azure's IB VFs by PCI address only (no MAC, no name)."""
    data = describe(azure_emulator, azure_sample.root, "--device", "name=,pci=0103:00:00.0")
    assert data["provider"] == "azure"
    (entry,) = data["devices"]
    assert entry["attributes"] == DRANET_ATTRIBUTES
    assert entry["config"] is None


def test_explicit_hint_with_imds_down_exits_3_within_the_deadline(
    azure_sample: SampleHost,
) -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    url = emu.url
    emu.stop()  # nothing listens on this loopback port any more
    env = {"DRANET_CLOUD_AZURE_METADATA_ENDPOINT": url}
    started = time.monotonic()
    res = run_cli(
        "describe",
        "--host-root",
        str(azure_sample.root),
        "--cloud-provider-hint",
        "AZURE",
        "--metadata-deadline",
        "1",
        env=env,
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert res.returncode == 3, res.stderr
    assert "DRANET_CLOUD_AZURE_METADATA_ENDPOINT" in res.stderr and url in res.stderr
    print(f"AZURE hint, IMDS down, --metadata-deadline 1: exit 3 after {elapsed:.2f} s")


def test_auto_detection_on_a_non_azure_node_does_no_network_io(
    azure_emulator: Emulator, tmp_path: Path
) -> None:
    root = tmp_path / "bare-metal"
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/chassis_asset_tag").write_text("Default string\n")
    (root / "sys/class/dmi/id/sys_vendor").write_text("Supermicro\n")
    res = run_cli("detect", "--host-root", str(root), "-o", "json", env=azure_emulator.env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["provider"] == "none"
    assert azure_emulator.log == []  # the emulator was reachable, and never asked


def test_emulate_command_with_an_operators_fixture(
    azure_document: dict[str, Any], azure_sample: SampleHost, tmp_path: Path
) -> None:
    azure_document["compute"]["vmSize"] = "Standard_ND96amsr_A100_v4"
    azure_document["compute"]["interconnectGroupId"] = ""
    fixture = tmp_path / "node.json"
    fixture.write_text(json.dumps(azure_document))
    with emulate_process("azure", "--fixture", str(fixture)) as ready:
        assert ready["env"] == {"DRANET_CLOUD_AZURE_METADATA_ENDPOINT": ready["url"]}
        data = describe_json(
            ready["env"], azure_sample.root, "--device", f"name={ETH0},mac=00:0d:3a:4f:2b:1c"
        )
    attrs = data["devices"][0]["attributes"]
    assert attrs[D + "vmSize"] == {"string": "Standard_ND96amsr_A100_v4"}
    assert D + "interconnectGroupId" not in attrs  # empty in IMDS: omitted, as DRANET
