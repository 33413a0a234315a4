"""`dranet-cloud demo --plugin cks`: the main job against the Kubernetes API
emulator serving the sample CKS Node, and `--plugin aws --variant trn2`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dranet_cloud.cli.main import main


def demo(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["demo", *args, "-o", "json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    failed = [s["step"] for s in report["steps"] if not s["ok"]]
    assert code == 0 and report["ok"], failed
    return report


def described(report: dict[str, Any]) -> list[dict[str, Any]]:
    step = next(s for s in report["steps"] if s["step"].startswith("described"))
    data: list[dict[str, Any]] = step["data"]
    return data


def test_demo_cks(capsys: pytest.CaptureFixture[str]) -> None:
    report = demo(capsys, "--plugin", "CKS")
    detected = next(s for s in report["steps"] if s["step"] == "detected the environment")
    assert detected["data"]["provider"] == "cks"
    devices = described(report)
    switches = {
        d["device"]["name"] or d["device"]["pci_address"]: d["attributes"].get(
            "coreweave.dra.net/leafSwitch"
        )
        for d in devices
    }
    assert switches.pop("enp6s0f0np0") is None  # the frontend NIC is off the fabric
    assert len(switches) == 8 and all(
        v and v["string"].startswith("L41.2.") for v in switches.values()
    )
    assert all(d["config"] is None for d in devices)


def test_demo_aws_trn2_efa_groups(capsys: pytest.CaptureFixture[str]) -> None:
    devices = described(demo(capsys, "--plugin", "aws", "--variant", "trn2"))
    efa = [d for d in devices if not d["device"].get("mac_address")]
    assert len(efa) == 16
    for d in efa:
        groups = {k for k in d["attributes"] if k.startswith("resource.aws.com/")}
        assert len(groups) == 4
        assert d["attributes"]["resource.aws.com/devicegroup1_id"] == {
            "string": d["device"]["pci_address"]
        }
