"""`dranet-cloud demo` against every plugin's emulator: the README's main job."""

from __future__ import annotations

import json

import pytest

from dranet_cloud.cli.main import main


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--plugin", "aws"],
        ["--plugin", "aliyun"],
        ["--plugin", "aliyun", "--variant", "bond"],
        ["--plugin", "webhook"],
    ],
    ids=["gce", "aws", "aliyun", "aliyun-bond", "webhook"],
)
def test_demo_passes_its_own_checks(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", *args, "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    failed = [s["step"] for s in report["steps"] if not s["ok"]]
    assert code == 0 and report["ok"], failed
    steps = {s["step"].split(" on ")[0]: s for s in report["steps"]}
    first, retry = steps["claim-a"]["data"]["first"], steps["claim-a"]["data"]["retry"]
    assert first and first == retry
    assert steps["claim-b"]["data"] and not set(first) & set(steps["claim-b"]["data"])


def test_demo_gce_describes_nine_nics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    described = next(s for s in report["steps"] if s["step"].startswith("described"))
    assert len(described["data"]) == 9
    for dev in described["data"]:
        cfg = dev["config"]
        assert cfg["interface"]["mtu"] in (1460, 8244)
        assert cfg["routes"] and cfg["neighbors"]
        assert "gce.dra.net/machineType" in dev["attributes"]


@pytest.mark.parametrize(
    ("plugin", "nics", "configured", "claims"),
    [("azure", 10, {"eth0"}, "no IPVLAN claims to make"), ("OKE", 17, set(), "no claims to make")],
    ids=["azure", "oci"],
)
def test_demo_of_a_cloud_without_subinterface_ranges(
    plugin: str, nics: int, configured: set[str], claims: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Azure and OCI allocate nothing: every NIC gets attributes, no IPVLAN claim is
    prepared; Azure's IB NIC ib0 gets its own address from the host (azure-ipoib)."""
    code = main(["demo", "--plugin", plugin, "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], [s["step"] for s in report["steps"] if not s["ok"]]
    described = next(s for s in report["steps"] if s["step"].startswith("described"))
    assert len(described["data"]) == nics
    assert all(d["attributes"] for d in described["data"])
    assert {d["device"]["name"] for d in described["data"] if d["config"]} == configured
    assert any(s["step"] == claims for s in report["steps"])
    own = [s for s in report["steps"] if "the NIC's own address" in s["step"]]
    if plugin == "azure":
        (step,) = own
        assert step["data"]["first"] == step["data"]["other"] == ["172.16.1.10/16"]
    else:
        assert own == []


def test_unknown_demo_plugin_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--plugin", "acme-cloud"]) == 2
    err = capsys.readouterr().err
    assert "installed: " in err and "gce" in err
    assert "pip install dranet-cloud-acme" not in err  # never a guessed package name
