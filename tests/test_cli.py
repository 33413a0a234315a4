"""The command line as operators use it: real processes, exit codes, JSON."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dranet_cloud.cli.main import main
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.environ import isolated_environ

EXE = [sys.executable, "-m", "dranet_cloud.cli.main"]


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = isolated_environ(**(env or {}))
    return subprocess.run(
        [*EXE, *args], capture_output=True, text=True, env=full_env, timeout=timeout, input=stdin
    )


@pytest.fixture()
def bare_metal(tmp_path: Path) -> Path:
    return (
        HostRootBuilder(tmp_path / "bm")
        .dmi(sys_vendor="Supermicro", product_name="X13")
        .nic("eno1", "3c:ec:ef:00:00:01")
        .build()
    )


def test_plugins_lists_all_four_with_roles() -> None:
    res = run("plugins", "-o", "json")
    assert res.returncode == 0, res.stderr
    plugins = {p["name"]: p for p in json.loads(res.stdout)}
    assert {"gce", "aws", "aliyun", "webhook"} <= set(plugins)
    for name in ("gce", "aws", "aliyun", "webhook"):
        assert plugins[name]["distribution"] == f"dranet-cloud-{name}"
        assert "cloud" in plugins[name]["roles"] and "profile" in plugins[name]["roles"]
    table = run("plugins")
    assert "DISTRIBUTION" in table.stdout and "dranet-cloud-gce" in table.stdout


def test_detect_bare_metal_is_none(bare_metal: Path) -> None:
    res = run("detect", "--host-root", str(bare_metal), "-o", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["provider"] == "none" and data["explicit"] is False
    assert "no local evidence" in data["evidence"]
    # How long it took is a figure for benchmarks/detection.py, not an assertion:
    # only its shape is checked here (the socket guard proves no network I/O).
    assert isinstance(data["elapsed_ms"], float) and data["elapsed_ms"] >= 0


def test_unknown_hint_exits_2_listing_plugins(bare_metal: Path) -> None:
    res = run("detect", "--cloud-provider-hint", "acme-cloud", "--host-root", str(bare_metal))
    assert res.returncode == 2
    for name in ("gce", "aws", "aliyun", "webhook"):
        assert name in res.stderr


def test_bad_flags_exit_2() -> None:
    assert (
        run(
            "describe", "--device", "name=eth0,colour=blue", "--cloud-provider-hint", "none"
        ).returncode
        == 2
    )
    assert run("nonsense").returncode == 2
    assert (
        run(
            "profile",
            "get",
            "--cloud-provider-hint",
            "none",
            "--device",
            "eth0",
            "--claim-uid",
            "c",
            "--config",
            "/nonexistent.json",
            "--ipam-memory",
        ).returncode
        == 2
    )


def test_describe_without_provider_lists_nics(
    bare_metal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["describe", "--host-root", str(bare_metal), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["provider"] == "none" and out["instance"] is None
    assert out["devices"] == [
        {
            "device": {"mac_address": "3c:ec:ef:00:00:01", "name": "eno1"},
            "attributes": {},
            "config": None,
            # A netdev without a PCI link: DRANET's 14 link attributes and rdma.
            # Each is one value: 48 - 15 values are left for providers.
            "budget": {
                "dranet": 15,
                "providers": 17,
                "dranet_values": 15,
                "provider_values": 33,
                "source": "sysfs",
                "dropped": [],
                "used": 0,
                "values_used": 0,
            },
        }
    ]


def test_profile_without_provider_is_denied(
    bare_metal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["profile", "get", "--host-root", str(bare_metal), "--device", "eno1"]
    argv += ["--claim-uid", "c1", "--ipam-memory"]
    code = main(argv)
    assert code == 0  # no profile in the (empty) user config: nothing to ask
    config = json.dumps({"profile": "x", "interface": {"type": "IPVLAN"}})
    res = run(*argv, "--config", "-", stdin=config)
    assert res.returncode == 4
    assert "no profile provider" in res.stderr


def test_bare_metal_start_does_no_network_io_with_all_plugins(bare_metal: Path) -> None:
    from dranet_cloud.host.provider_host import ProviderHost
    from dranet_cloud.testing.conformance import record_connections

    with record_connections() as attempts:
        det = ProviderHost(host_root=str(bare_metal), env={}).start()
    assert det.provider == "none"
    assert attempts == []


def test_invalid_config_message_is_readable(bare_metal: Path) -> None:
    res = run("profile", "get", "--host-root", str(bare_metal), "--device", "eno1",
              "--claim-uid", "c1", "--ipam-memory", "--config", "-",
              stdin='{"interface": {"mtu": "big"}}')  # fmt: skip
    assert res.returncode == 2
    assert "interface.mtu" in res.stderr
    assert "errors.pydantic.dev" not in res.stderr


def test_emulate_unknown_plugin_does_not_offer_none() -> None:
    res = run("emulate", "acme-cloud")
    assert res.returncode == 2
    assert "'none'" not in res.stderr and "gce" in res.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1e400"])
@pytest.mark.parametrize("flag", ["--metadata-deadline", "--probe-timeout"])
def test_deadline_flags_refuse_nan_inf_and_negative(flag: str, value: str) -> None:
    from dranet_cloud.cli.common import seconds

    with pytest.raises(argparse.ArgumentTypeError):
        seconds(value)
    res = run("detect", "--cloud-provider-hint", "none", flag, value)
    assert res.returncode == 2 and flag in res.stderr


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_serve_timeouts_refuse_nan_inf_and_negative(value: str) -> None:
    for flag in ("--request-timeout", "--idle-timeout"):
        res = run("serve", flag, value, "--cloud-provider-hint", "none")
        assert res.returncode == 2 and flag in res.stderr
    res = run("serve", "--shutdown-timeout", "-5", "--cloud-provider-hint", "none")
    assert res.returncode == 2


@pytest.mark.parametrize(
    "command",
    [["detect"], ["describe"], ["profile", "get", "--device", "eth1", "--claim-uid", "u1"]],
    ids=["detect", "describe", "profile-get"],
)
def test_kubeconfig_flag_on_every_command_that_reads_the_api(
    command: list[str], bare_metal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plugin that reads the Node object (CKS) talks to the API from these commands too."""
    missing = tmp_path / "no-such-kubeconfig"
    argv = [*command, "--cloud-provider-hint", "cks", "--host-root", str(bare_metal)]
    code = main([*argv, "--node-name", "n1", "--kubeconfig", str(missing)])
    err = capsys.readouterr().err
    assert code == 2 and f"no kubeconfig file at {missing} (--kubeconfig)" in err, err


def test_provider_hint_help_names_no_fixed_list_of_clouds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The core names no cloud: the hint's help points at `dranet-cloud plugins`, so a
    plugin installed later (cks, azure, oci, a vendor's) is not missing from it."""
    from dranet_cloud.cli.main import main

    with pytest.raises(SystemExit):
        main(["describe", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    hint = out[out.index("--cloud-provider-hint NAME cloud") :][:300]
    assert "dranet-cloud plugins" in hint
    assert "gce" not in hint.lower()


def test_a_bad_attribute_floor_variable_is_a_usage_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """DRANET_CLOUD_DRANET_ATTRIBUTE_FLOOR=abc crashed building the parser (a traceback,
    exit 1) before any flag was read; a typo in a DaemonSet env must exit 2 naming it."""
    from dranet_cloud.cli.main import main

    monkeypatch.setenv("DRANET_CLOUD_DRANET_ATTRIBUTE_FLOOR", "abc")
    with pytest.raises(SystemExit) as exc:
        main(["describe", "--cloud-provider-hint", "none", "--host-root", str(tmp_path)])
    assert exc.value.code == 2
    assert "DRANET_CLOUD_DRANET_ATTRIBUTE_FLOOR" in capsys.readouterr().err
