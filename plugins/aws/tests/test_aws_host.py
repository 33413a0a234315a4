"""The issue's "Done when" lines through the host and the command line."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_aws.emulator import build_emulator, imds_tree

from dranet_cloud.cli.main import main
from dranet_cloud.contract.context import SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import open_store
from dranet_cloud.testing import Emulator, HostRootBuilder
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.toolkit.errors import ProfileDenied
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

EXE = [sys.executable, "-m", "dranet_cloud.cli.main"]
TOKEN_HEADER = "X-aws-ec2-metadata-token"
D = "aws.dra.net/"


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = isolated_environ()
    return subprocess.run(
        [*EXE, *args], capture_output=True, text=True, env={**clean, **env}, timeout=60
    )


def describe(emu: Emulator, root: Path, *extra: str) -> dict[str, Any]:
    res = cli("describe", "--host-root", str(root), "-o", "json", *extra, env=emu.env)
    assert res.returncode == 0, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def check_describe(data: dict[str, Any], macs: dict[str, dict[str, Any]]) -> None:
    assert data["provider"] == "aws"
    assert data["instance"]["identity"]["instance_type"] == "p5.48xlarge"
    devices = {d["device"].get("mac_address"): d for d in data["devices"]}
    # The ENIs by MAC, and the EFA functions (no MAC) with instance attributes only.
    assert set(devices) - {None} == set(macs)
    efa = [d for d in data["devices"] if "mac_address" not in d["device"]]
    assert len(efa) == 4 and all(D + "interfaceId" not in d["attributes"] for d in efa)
    tables = set()
    for mac, keys in macs.items():
        entry = devices[mac]
        attrs = entry["attributes"]
        assert attrs[D + "interfaceId"] == {"string": keys["interface-id"]}
        assert attrs[D + "networkCard"] == {"int": keys["network-card"]}
        assert attrs[D + "deviceNumber"] == {"int": keys["device-number"]}
        assert D + "efa" not in attrs, "an ENA netdev never claims to be EFA"
        budget = entry["budget"]
        # A p5 ENA NIC: DRANET's 22 leave 10; a card-1 ENI has 11 (its EFA sibling
        # too), so the lowest-ranked, the region (implied by the zone), is dropped.
        assert budget["dranet"] == 22 and budget["used"] == len(attrs) <= 10
        if keys["network-card"] == 1:
            assert D + "efaPciAddress" in attrs and budget["dropped"] == [D + "region"]
        else:
            assert attrs[D + "region"] == {"string": "us-east-2"} and budget["dropped"] == []
        cfg = entry["config"]
        sources = {r["source"] for r in cfg["rules"]}
        assert {f"{a}/32" for a in keys["local-ipv4s"]} <= sources
        table = {r["table"] for r in cfg["rules"]}
        assert len(table) == 1 and table == {r["table"] for r in cfg["routes"]}
        tables |= table
        router = {r["gateway"] for r in cfg["routes"] if r["destination"] == "0.0.0.0/0"}
        subnet = ipaddress.ip_network(keys["subnet-ipv4-cidr-block"])
        assert router == {str(subnet.network_address + 1)}  # the VPC router
    assert len(tables) == len(macs)


def test_describe_auto_detects_from_dmi_and_imds(
    aws_emulator: Emulator, aws_sample: SampleHost, aws_macs: dict[str, dict[str, Any]]
) -> None:
    check_describe(describe(aws_emulator, aws_sample.root), aws_macs)
    gets = [r for r in aws_emulator.log if r.method == "GET"]
    assert gets and all(TOKEN_HEADER in r.headers for r in gets)
    res = cli("detect", "--host-root", str(aws_sample.root), "-o", "json", env=aws_emulator.env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["provider"] == "aws"


def test_describe_with_tokens_expiring_every_two_requests(
    aws_sample: SampleHost, aws_macs: dict[str, dict[str, Any]]
) -> None:
    with build_emulator(None, "127.0.0.1:0", "expire-tokens-every=2") as emu:
        check_describe(describe(emu, aws_sample.root, "--cloud-provider-hint", "aws"), aws_macs)
        assert any(r.status == 401 for r in emu.log)
        assert all(TOKEN_HEADER in r.headers for r in emu.log if r.method == "GET")


@pytest.fixture
def emulate_process() -> Iterator[dict[str, Any]]:
    """``dranet-cloud emulate aws`` as a real process; yields its ready line."""
    proc = subprocess.Popen(
        [*EXE, "emulate", "aws", "--faults", "expire-tokens-every=2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "emulate printed nothing"
        yield json.loads(line)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_emulate_command_serves_describe(
    emulate_process: dict[str, Any], aws_sample: SampleHost, aws_macs: dict[str, dict[str, Any]]
) -> None:
    env = emulate_process["env"]
    assert env["DRANET_CLOUD_AWS_METADATA_ENDPOINT"] == emulate_process["url"]
    res = cli(
        "describe",
        "--host-root",
        str(aws_sample.root),
        "-o",
        "json",
        "--cloud-provider-hint",
        "aws",
        env=env,
    )
    assert res.returncode == 0, res.stderr
    check_describe(json.loads(res.stdout), aws_macs)


# --- hot-attach -------------------------------------------------------------------

NEW_MAC = "0e:5c:1a:2b:3c:05"
NEW_ENI = {
    "device-number": 3,
    "network-card": 1,
    "interface-id": "eni-0a1b2c3d4e5f60005",
    "local-ipv4s": ["10.0.80.7", "10.0.80.8"],
    "subnet-id": "subnet-0a1b2c3d4e5f61005",
    "subnet-ipv4-cidr-block": "10.0.80.0/20",
    "vpc-id": "vpc-0f1e2d3c4b5a69788",
    "vpc-ipv4-cidr-blocks": ["10.0.0.0/16"],
}


def test_hot_attached_eni_is_found_on_the_next_describe_of_its_mac(
    aws_emulator: Emulator, aws_sample: SampleHost, aws_host: ProviderHost
) -> None:
    # The kernel shows the new ENA NIC first; DRANET then asks about it.
    HostRootBuilder(aws_sample.root).nic("ens9", NEW_MAC, pci="0000:00:09.0").build()
    dev = DeviceIdentifiers(name="ens9", mac_address=NEW_MAC.upper())
    before = aws_host.instance()
    assert before is not None and NEW_MAC not in (before.known_macs() or set())
    imds_tree(aws_emulator).attach_eni(NEW_MAC, NEW_ENI)
    attrs = aws_host.device_attributes(dev)
    assert attrs[D + "interfaceId"].value == "eni-0a1b2c3d4e5f60005"
    assert attrs[D + "networkCard"].value == 1
    cfg = aws_host.device_config(dev)
    assert cfg is not None
    assert {r.source for r in cfg.rules or []} == {"10.0.80.7/32", "10.0.80.8/32"}
    # The new ENI's secondary address serves a claim at once.
    claim = NetworkConfig.model_validate({"profile": "p", "interface": {"type": "IPVLAN"}})
    final = aws_host.network_config(dev, "hot-1", claim)
    assert final.interface.addresses == ["10.0.80.8/32"]


# --- profile get / release through the CLI ---------------------------------------------


def test_profile_get_repeat_release_through_the_cli(
    aws_emulator: Emulator,
    aws_sample: SampleHost,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The CLI's entry point in-process (the describe tests above run real
    # processes); it reads the endpoint from the environment like the daemon.
    for key, value in aws_emulator.env.items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "ipam.db"
    config = tmp_path / "claim.json"
    config.write_text(json.dumps({"profile": "aws-ipvlan", "interface": {"type": "IPVLAN"}}))
    common = [
        "--host-root",
        str(aws_sample.root),
        "--cloud-provider-hint",
        "aws",
        "--ipam-db",
        str(db),
        "-o",
        "json",
    ]

    def run(*args: str) -> tuple[int, Any, str]:
        code = main(list(args) + common)
        out, err = capsys.readouterr()
        return code, json.loads(out) if code == 0 else None, err

    def get(device: str, claim: str) -> dict[str, Any]:
        code, out, err = run(
            "profile", "get", "--device", device, "--claim-uid", claim, "--config", str(config)
        )
        assert code == 0, err
        assert isinstance(out, dict)
        return out

    first = get("ens6", "claim-a")
    v4, v6 = first["interface"]["addresses"]
    assert v4.startswith("10.0.32.") and v6.startswith("2600:1f16:8c2:1a20:7e3f:")
    # The cloud's routing comes along: the rule for the prefix covers the new address.
    assert any(r["source"] == "10.0.32.48/28" for r in first["rules"])
    assert get("ens6", "claim-a") == first
    secondary = get("enp48s0", "claim-b")["interface"]["addresses"]
    assert secondary[0] in {"10.0.48.20/32", "10.0.48.21/32", "10.0.48.22/32", "10.0.48.40/32"}

    code, _, err = run(
        "profile", "get", "--device", "enp49s0", "--claim-uid", "claim-c", "--config", str(config)
    )
    assert code == 4
    assert "eni-0a1b2c3d4e5f60004" in err and "prefix" in err

    for device, claim in (("ens6", "claim-a"), ("enp48s0", "claim-b")):
        code, out, err = run("profile", "release", "--device", device, "--claim-uid", claim)
        assert code == 0, err
        assert out["released"] is True
    store = open_store(str(db))
    try:
        assert store.list() == []
    finally:
        store.close()


def test_dhcp_claim_through_the_host_holds_no_address(aws_host: ProviderHost) -> None:
    # Regression: the profile allocated for a DHCP claim, the host rejected
    # the final config (dhcp and addresses are exclusive) and the addresses
    # stayed held.  Every ENI of the sample is asked, prefix ones included.
    # DRANET rejects DHCP on an IPVLAN child: denied before the profile is asked.
    ipvlan_dhcp = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "dhcp": True}}
    )
    claim = NetworkConfig.model_validate({"profile": "p", "interface": {"dhcp": True}})
    devices = [d for d in aws_host.context.host_root.net_devices() if d.mac is not None]
    assert devices
    for dev in devices:
        with pytest.raises(ProfileDenied, match="dhcp-on-subinterface"):
            aws_host.network_config(dev, "dhcp-0", ipvlan_dhcp)
        final = aws_host.network_config(dev, "dhcp-1", claim)
        assert final.interface.addressing == "DHCP" and not final.interface.addresses
        assert final.interface.dhcp is None  # written as gen2 only
    assert aws_host.context.ipam.list() == []
