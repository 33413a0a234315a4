"""The issue's Done-when lines, through the ``dranet-cloud`` command."""

from __future__ import annotations

import ipaddress
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from dranet_cloud_gce.emulator import build_emulator

from dranet_cloud.cli.main import main
from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.dranet_wire import go_shape_problems
from dranet_cloud.testing.environ import isolated_environ

RECURSIVE = {"recursive": ["true"], "alt": ["json"]}
CLAIM = {"profile": "gce-subinterface", "interface": {"type": "IPVLAN"}}


@pytest.fixture
def point_at(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Put an emulator's variables in the environment the CLI reads."""
    for var in ("GCE_METADATA_HOST", "DRANET_CLOUD_GCE_METADATA_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)

    def apply(env: dict[str, str]) -> None:
        for key, value in env.items():
            monkeypatch.setenv(key, value)

    return apply


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def gce_emulator_cli(gce_emulator: Emulator, point_at: Any) -> Emulator:
    """The GCE emulator, with the CLI's environment pointed at it."""
    point_at(gce_emulator.env)
    return gce_emulator


def test_describe_shows_every_nic_with_its_config(
    capsys: pytest.CaptureFixture[str],
    gce_sample: SampleHost,
    gce_emulator_cli: Emulator,
) -> None:
    code, out, err = _run(capsys, "describe", "--host-root", str(gce_sample.root), "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["provider"] == "gce"
    assert data["instance"]["machine_type"] == "a3-megagpu-8g"
    devices = data["devices"]
    assert [d["device"]["name"] for d in devices] == [f"eth{i}" for i in range(9)]
    for d in devices:
        attrs, config = d["attributes"], d["config"]
        assert attrs["gce.dra.net/machineType"] == {"string": "a3-megagpu-8g"}
        assert attrs["gce.dra.net/gpuDirect"] == {"string": "GPUDirect-TCPXO"}
        assert "int" in attrs["gce.dra.net/networkProjectNumber"]
        assert config["interface"]["mtu"] == (1460 if d["device"]["name"] == "eth0" else 8244)
        (neighbor,) = config["neighbors"]
        gateway = neighbor["destination"]
        octets = ipaddress.IPv4Address(gateway).packed
        assert neighbor["hardwareAddr"] == "42:01:" + ":".join(f"{b:02x}" for b in octets)
        assert {"destination": f"{gateway}/32", "scope": 253} in config["routes"]
        assert go_shape_problems(config) == []  # gen2, Go's omit-empty shape
    # Auto-detection: one confirmation probe, and a single request loads the instance.
    loads = [r for r in gce_emulator_cli.requests() if r.query == RECURSIVE]
    assert len(loads) == 1
    assert len(gce_emulator_cli.requests()) == 2


def test_describe_table(
    capsys: pytest.CaptureFixture[str],
    gce_sample: SampleHost,
    gce_emulator_cli: Emulator,
) -> None:
    code, out, _ = _run(
        capsys, "describe", "--cloud-provider-hint", "gce", "--host-root", str(gce_sample.root)
    )
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("eth")]
    assert len(rows) == 9
    assert all("8244" in row for row in rows[1:])


def test_explicit_hint_with_the_server_down_exits_3_naming_the_endpoint(
    capsys: pytest.CaptureFixture[str], gce_sample: SampleHost, point_at: Any
) -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    env = emu.env
    emu.stop()
    point_at(env)
    code, _, err = _run(
        capsys,
        "describe",
        "--cloud-provider-hint",
        "gce",
        "--metadata-deadline",
        "0.5",
        "--host-root",
        str(gce_sample.root),
    )
    assert code == 3
    assert f"GCE_METADATA_HOST={env['GCE_METADATA_HOST']}" in err


def test_spoofed_server_exits_3_saying_so(
    capsys: pytest.CaptureFixture[str], gce_sample: SampleHost, point_at: Any
) -> None:
    with build_emulator(None, "127.0.0.1:0", "strip-headers=Metadata-Flavor") as emu:
        point_at(emu.env)
        code, _, err = _run(
            capsys, "detect", "--cloud-provider-hint", "gce", "--host-root", str(gce_sample.root)
        )
    assert code == 3
    assert "Metadata-Flavor: Google" in err and "not the genuine metadata server" in err


def test_profile_get_twice_then_release_visible_in_ipam_list(
    capsys: pytest.CaptureFixture[str],
    gce_sample: SampleHost,
    gce_emulator_cli: Emulator,
    tmp_path: Path,
) -> None:
    db = tmp_path / "ipam.db"
    claim = tmp_path / "claim.json"
    claim.write_text(json.dumps(CLAIM))
    common = [
        "--cloud-provider-hint",
        "gce",
        "--host-root",
        str(gce_sample.root),
        "--ipam-db",
        str(db),
        "--device",
        "eth0",
        "--config",
        str(claim),
        "-o",
        "json",
    ]

    def get(uid: str) -> list[str]:
        code, out, err = _run(capsys, "profile", "get", "--claim-uid", uid, *common)
        assert code == 0, err
        addresses: list[str] = json.loads(out)["interface"]["addresses"]
        return addresses

    def ipam_list() -> list[dict[str, Any]]:
        code, out, err = _run(capsys, "ipam", "list", "--ipam-db", str(db), "-o", "json")
        assert code == 0, err
        listed: list[dict[str, Any]] = json.loads(out)
        return listed

    a1, a2, b = get("claim-a"), get("claim-a"), get("claim-b")
    assert a1 == a2
    assert not set(a1) & set(b)
    v4_pool = ipaddress.ip_network("10.24.3.0/24")
    v6_pool = ipaddress.ip_network("2600:1900:4000:318:c0de::/80")  # the /64 became a /80
    for v4, v6 in (a1, b):
        assert ipaddress.ip_interface(v4).ip in v4_pool
        assert ipaddress.ip_interface(v6).ip in v6_pool
    held = ipam_list()
    assert sorted(x["address"] for x in held) == sorted(a1 + b)
    assert {(x["pool"], x["device"]) for x in held} == {("gce", "mac:42:01:0a:80:00:46")}
    assert all("eth0" in x["names"] for x in held)

    code, out, err = _run(capsys, "profile", "release", "--claim-uid", "claim-a", *common)
    assert code == 0, err
    assert json.loads(out)["released"] is True
    after = ipam_list()
    assert sorted(x["address"] for x in after) == sorted(b)
    assert {x["claim_uid"] for x in after} == {"claim-b"}


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "demo", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True
    described = next(s for s in report["steps"] if s["step"].startswith("described"))
    assert len(described["data"]) == 9


def test_emulate_command_serves_a_fixture(tmp_path: Path) -> None:
    fixture = tmp_path / "tree.json"
    fixture.write_text(
        json.dumps(
            {
                "instance": {
                    "name": "from-file",
                    "networkInterfaces": [{"mac": "42:01:0a:00:00:02", "ip": "10.0.0.2"}],
                },
                "project": {"projectId": "p"},
            }
        )
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dranet_cloud.cli.main",
            "emulate",
            "gce",
            "--fixture",
            str(fixture),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=isolated_environ(),
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        host = ready["env"]["GCE_METADATA_HOST"]
        assert ready["url"] == f"http://{host}"
        with httpx.Client(trust_env=False) as client:
            name = client.get(
                f"{ready['url']}/computeMetadata/v1/instance/name",
                headers={"Metadata-Flavor": "Google"},
            )
        assert name.text == "from-file"
        assert name.headers["Metadata-Flavor"] == "Google"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert proc.returncode == 0
