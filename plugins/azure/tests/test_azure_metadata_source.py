"""The IMDS emulator, the client's requests, parsing and the fault set."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from dranet_cloud_azure.attributes import ipv4_subnet
from dranet_cloud_azure.detection import confirm, local_evidence
from dranet_cloud_azure.emulator import build_emulator
from dranet_cloud_azure.metadata_source import load_instance
from dranet_cloud_azure.snapshot import parse_instance

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable
from dranet_cloud.toolkit.metadata import MetadataUnavailable

V = "2025-11-11"
H = {"Metadata": "true"}


def test_imds_requires_the_header_and_a_known_api_version(azure_emulator: Emulator) -> None:
    with httpx.Client(base_url=azure_emulator.url) as client:
        bare = client.get("/metadata/instance", params={"api-version": V})
        assert bare.status_code == 400 and "metadata header" in bare.json()["error"]
        assert client.get("/metadata/instance", headers=H).status_code == 400
        old = client.get("/metadata/instance", params={"api-version": "2017-01-01"}, headers=H)
        assert old.status_code == 400 and V in old.json()["newest-versions"]
        fwd = client.get(
            "/metadata/instance",
            params={"api-version": V},
            headers={**H, "X-Forwarded-For": "10.0.0.9"},
        )
        assert fwd.status_code == 400
        assert (
            client.get("/metadata/identity", params={"api-version": V}, headers=H).status_code
            == 404
        )


def test_imds_tree_json_and_text(azure_emulator: Emulator) -> None:
    with httpx.Client(base_url=azure_emulator.url, headers=H) as client:
        whole = client.get("/metadata/instance", params={"api-version": V, "format": "json"})
        assert set(whole.json()) == {"compute", "network"}
        listing = client.get("/metadata/instance", params={"api-version": V, "format": "text"})
        assert listing.text.splitlines() == ["compute/", "network/"]
        mac = client.get(
            "/metadata/instance/network/interface/0/macAddress",
            params={"api-version": V, "format": "text"},
        )
        assert mac.text == "000D3A4F2B1C"
        compute = client.get("/metadata/instance/compute", params={"api-version": V})
        assert compute.json()["vmSize"] == "Standard_ND96isr_H100_v5"
        missing = client.get("/metadata/instance/compute/nope", params={"api-version": V})
        assert missing.status_code == 404


def test_load_sends_one_request_and_parses_the_fixture(
    azure_emulator: Emulator, azure_context: ProviderContext
) -> None:
    inst = load_instance(azure_context, deadline=5.0)
    assert len(azure_emulator.log) == 1
    assert (inst.vm_size, inst.placement_group_id) == (
        "Standard_ND96isr_H100_v5",
        "7b3e0f52-9d41-4c8a-b6e2-1f5a9c0d4e87",
    )
    assert inst.known_macs() == frozenset({"00:0d:3a:4f:2b:1c"})
    (eth0,) = inst.interfaces
    assert (eth0.index, eth0.imds_mac, eth0.ipv4_addresses) == (0, "000D3A4F2B1C", ["10.224.0.37"])
    assert eth0.ipv6_addresses == ["fd5e:9c41:7a2b:10::25"]


@pytest.mark.parametrize("faults", ["status=503,429,500", "drop=2", "unavailable-for=0.4"])
def test_load_rides_out_a_booting_or_throttling_imds(faults: str) -> None:
    with build_emulator(None, "127.0.0.1:0", faults) as emu:
        inst = load_instance(ProviderContext(env=emu.env), deadline=10.0)
    assert inst.vm_size == "Standard_ND96isr_H100_v5"
    assert emu.log[-1].status == 200 and len(emu.log) > 1


@pytest.mark.parametrize("faults", ["malformed", "oversize=2000000"])
def test_a_broken_answer_is_an_error_naming_the_plugin(faults: str) -> None:
    with (
        build_emulator(None, "127.0.0.1:0", faults) as emu,
        pytest.raises(ProviderUnavailable, match="azure"),
    ):
        load_instance(ProviderContext(env=emu.env), deadline=2.0)


def test_delay_beyond_the_deadline_is_unavailable() -> None:
    with (
        build_emulator(None, "127.0.0.1:0", "delay=3") as emu,
        pytest.raises(MetadataUnavailable),
    ):
        options = ProviderOptions(request_timeout=0.2)
        load_instance(ProviderContext(env=emu.env, options=options), deadline=0.5)


def test_confirm_answers_and_refuses(
    azure_emulator: Emulator, azure_context: ProviderContext
) -> None:
    got = confirm(azure_context, 2.0)
    assert got is not None and azure_emulator.url in got
    req = azure_emulator.log[0]
    assert (
        req.query == {"api-version": [V], "format": ["text"]} and req.headers["Metadata"] == "true"
    )
    with build_emulator(None, "127.0.0.1:0", "status=404") as emu:
        assert confirm(ProviderContext(env=emu.env), 2.0) is None  # something answered, not IMDS


def test_local_evidence_reads_only_the_asset_tag(tmp_path: Path) -> None:
    dmi = tmp_path / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "chassis_asset_tag").write_text("7783-7084-3265-9085-8269-3286-77\n")
    assert (
        local_evidence(ProviderContext(host_root=HostRoot(tmp_path)))
        == "DMI chassis_asset_tag=7783-7084-3265-9085-8269-3286-77"
    )
    (dmi / "chassis_asset_tag").write_text("OracleCloud.com\n")
    assert local_evidence(ProviderContext(host_root=HostRoot(tmp_path))) is None


def test_parsing_is_lenient_where_dranet_is(caplog: pytest.LogCaptureFixture) -> None:
    doc: dict[str, Any] = {
        "compute": {"vmSize": "Standard_ND96isr_H100_v5", "placementGroupId": 7},
        "network": {
            "interface": [
                "junk",
                {
                    "macAddress": "00-0D-3A-00-00-01",
                    "ipv4": {"ipAddress": [{"privateIpAddress": "nope"}]},
                },
            ]
        },
    }
    with caplog.at_level(logging.WARNING):
        inst = parse_instance(doc)
    assert inst.placement_group_id == ""  # not a string: absent, as Go would not fill it
    assert [(n.index, n.mac, n.ipv4_addresses) for n in inst.interfaces] == [
        (1, "00:0d:3a:00:00:01", [])
    ]
    assert "network.interface[0] in the IMDS instance document" in caplog.text
    assert "is not an object" in caplog.text
    with pytest.raises(ValueError):
        parse_instance({"network": {}})


@pytest.mark.parametrize(
    "content",
    ["not json", "[]", '{"compute": {}}', '{"compute": {}, "network": {"interface": {}}}'],
)
def test_bad_fixtures_are_config_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="azure emulator"):
        build_emulator(path)


def test_bad_fault_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="explode"):
        build_emulator(None, faults="explode=1")


def test_unix_socket_endpoint(tmp_path: Path) -> None:
    sock = tmp_path / "imds.sock"
    with build_emulator(None, f"unix://{sock}") as emu:
        assert emu.env == {"DRANET_CLOUD_AZURE_METADATA_ENDPOINT": f"unix://{sock}"}
        inst = load_instance(ProviderContext(env=emu.env), deadline=2.0)
        assert inst.vm_id == "3f8a2c61-5b0e-4d97-a1c4-9e7d2b6f0c38"


@pytest.mark.parametrize(
    ("subnets", "expected"),
    [
        ([{"address": "10.224.0.0", "prefix": "16"}, {"address": "10.9.0.0", "prefix": "24"}],
         "10.224.0.0/16"),
        ([{"address": "10.224.0.0", "prefix": ""}], None),
        ([{"address": "", "prefix": "16"}], None),
        ([{"address": "10.224.0.0"}], None),
        ([], None),
    ],
)  # fmt: skip
def test_ipv4_subnet_is_the_first_subnet_and_only_when_complete(
    subnets: list[dict[str, str]], expected: str | None
) -> None:
    """As DRANET PR #335: subnet[0] of the NIC with the MAC, omitted when incomplete."""
    doc = {
        "compute": {},
        "network": {"interface": [{"macAddress": "000D3A4F2B1C", "ipv4": {"subnet": subnets}}]},
    }
    inst = parse_instance(doc)
    assert ipv4_subnet(inst, "00:0d:3a:4f:2b:1c") == expected
    assert ipv4_subnet(inst, "00:0d:3a:4f:2b:1d") is None
    assert ipv4_subnet(inst, None) is None
