"""Local evidence from DMI, and the sample host that matches the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.emulator import load_fixture

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder


def _evidence(root: Path) -> str | None:
    return plugin.local_evidence(ProviderContext(host_root=HostRoot(root), env={}))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"product_name": "Google Compute Engine"}, "product_name"),
        ({"product_name": "Something New", "bios_vendor": "Google"}, "bios_vendor"),
        ({"product_serial": "GoogleCloud-ABCDEF0123"}, "product_serial"),
        ({"sys_vendor": "Amazon EC2", "product_name": "c5.large"}, None),
        ({"product_name": "Alibaba Cloud ECS"}, None),
        ({"product_serial": "googlecloud-lowercase"}, None),
        ({}, None),
    ],
)
def test_dmi_evidence(tmp_path: Path, fields: dict[str, str], expected: str | None) -> None:
    root = HostRootBuilder(tmp_path).dmi(**fields).build()
    evidence = _evidence(root)
    if expected is None:
        assert evidence is None
    else:
        assert evidence is not None and expected in evidence


def test_no_dmi_at_all(tmp_path: Path) -> None:
    assert _evidence(tmp_path) is None


def test_sample_host_matches_the_fixture(tmp_path: Path) -> None:
    sample = plugin.sample_host(tmp_path / "root", None)
    assert sample is not None
    assert sample.claim_device == "eth0"
    root = HostRoot(sample.root)
    assert _evidence(sample.root) is not None
    devices = root.net_devices()
    fixture_macs = [n["mac"] for n in load_fixture(None)["instance"]["networkInterfaces"]]
    assert [d.name for d in devices] == [f"eth{i}" for i in range(9)]
    assert [d.mac for d in devices] == fixture_macs
    pcis = [d.pci_address for d in devices]
    assert all(pcis) and len(set(pcis)) == 9
    assert {root.pci_driver(p) for p in pcis if p} == {"gve"}
    assert root.read_text("/sys/class/net/eth3/mtu") == "8244"


def test_sample_host_variants(tmp_path: Path) -> None:
    assert plugin.sample_host(tmp_path / "a", "a3-megagpu-8g") is not None
    assert plugin.sample_host(tmp_path / "b", "no-such-variant") is None
