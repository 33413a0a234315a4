"""The IMDS v2 emulator, the client's requests, detection and the fault set."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from dranet_cloud_oci.detection import confirm, local_evidence
from dranet_cloud_oci.emulator import build_emulator
from dranet_cloud_oci.metadata_source import load_instance

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable

AUTH = {"Authorization": "Bearer Oracle"}


def test_imds_v2_requires_the_header_and_refuses_proxies(oci_emulator: Emulator) -> None:
    with httpx.Client(base_url=oci_emulator.url) as client:
        assert client.get("/opc/v2/instance/").status_code == 401
        wrong = client.get("/opc/v2/instance/", headers={"Authorization": "Bearer Other"})
        assert wrong.status_code == 401
        proxied = client.get("/opc/v2/host/", headers={**AUTH, "X-Forwarded-For": "10.0.0.9"})
        assert proxied.status_code == 403
        assert client.get("/opc/v1/instance/", headers=AUTH).status_code == 404


def test_imds_v2_documents_and_leaves(oci_emulator: Emulator) -> None:
    with httpx.Client(base_url=oci_emulator.url, headers=AUTH) as client:
        assert client.get("/opc/v2/instance/").json()["shape"] == "BM.GPU.H100.8"
        assert client.get("/opc/v2/instance/shape").text == "BM.GPU.H100.8"
        assert client.get("/opc/v2/host").json()["rackId"].startswith("f1925307")
        vnics = client.get("/opc/v2/vnics/").json()
        assert [v["macAddr"] for v in vnics] == ["04:3F:72:D0:1A:20"]
        assert client.get("/opc/v2/nope/").status_code == 404


def test_load_is_one_round_of_three_requests(
    oci_emulator: Emulator, oci_context: ProviderContext
) -> None:
    inst = load_instance(oci_context, deadline=5.0)
    assert sorted(r.path for r in oci_emulator.log) == [
        "/opc/v2/host/",
        "/opc/v2/instance/",
        "/opc/v2/vnics/",
    ]
    assert inst.known_macs() == frozenset({"04:3f:72:d0:1a:20"})
    assert (inst.shape, inst.region) == ("BM.GPU.H100.8", "us-ashburn-1")


def test_a_fixture_without_host_or_vnics_is_served_as_404(tmp_path: Path) -> None:
    fixture = tmp_path / "vm.json"
    fixture.write_text(
        '{"instance": {"id": "ocid1.instance.oc1.iad.vm1", "shape": "VM.Standard3.Flex"}}'
    )
    with build_emulator(fixture) as emu:
        inst = load_instance(ProviderContext(env=emu.env), deadline=2.0)
    assert inst.vnics == [] and "answered 404" in inst.topology_note


@pytest.mark.parametrize("faults", ["status=503,500,429", "drop=2", "unavailable-for=0.4"])
def test_load_rides_out_a_booting_imds(faults: str) -> None:
    with build_emulator(None, "127.0.0.1:0", faults) as emu:
        inst = load_instance(ProviderContext(env=emu.env), deadline=10.0)
    assert inst.hpc_island_id and len(emu.log) > 3


@pytest.mark.parametrize("faults", ["malformed", "oversize=2000000", "status=401"])
def test_a_broken_answer_is_an_error_naming_the_plugin(faults: str) -> None:
    with (
        build_emulator(None, "127.0.0.1:0", faults) as emu,
        pytest.raises(ProviderUnavailable, match="oci"),
    ):
        load_instance(ProviderContext(env=emu.env), deadline=2.0)


def test_confirm_answers_and_refuses(
    oci_emulator: Emulator, oci_context: ProviderContext, tmp_path: Path
) -> None:
    got = confirm(oci_context, 2.0)
    assert got is not None and oci_emulator.url in got
    assert oci_emulator.log[0].headers["Authorization"] == "Bearer Oracle"
    with build_emulator(None, "127.0.0.1:0", "status=404") as emu:
        assert confirm(ProviderContext(env=emu.env), 2.0) is None
    fixture = tmp_path / "other.json"
    fixture.write_text('{"instance": {"id": "i-0123456789abcdef0"}}')
    with build_emulator(fixture) as emu:
        assert confirm(ProviderContext(env=emu.env), 2.0) is None  # answers, but no instance OCID


def test_local_evidence_reads_only_the_asset_tag(tmp_path: Path) -> None:
    dmi = tmp_path / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "chassis_asset_tag").write_text("OracleCloud.com\n")
    evidence = local_evidence(ProviderContext(host_root=HostRoot(tmp_path)))
    assert evidence == "DMI chassis_asset_tag=OracleCloud.com"
    (dmi / "chassis_asset_tag").write_text("7783-7084-3265-9085-8269-3286-77\n")
    assert local_evidence(ProviderContext(host_root=HostRoot(tmp_path))) is None


@pytest.mark.parametrize(
    "content", ["not json", "[]", '{"host": {}}', '{"instance": {}, "vnics": {}}']
)
def test_bad_fixtures_are_config_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="oci emulator"):
        build_emulator(path)


def test_bad_fault_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="explode"):
        build_emulator(None, faults="explode=1")
