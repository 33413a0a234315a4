"""The issue's "Done when" lines, through the ``dranet-cloud`` CLI as operators run it.

``cli_process`` runs the command in a fresh process capped at 10 s (the bound
the issue sets for a failing explicit webhook); ``cli`` runs the same
``main()`` in this process, to keep the suite fast.  The peer is the example
webhook, as a separate process (the script in ``examples/``) or in a thread.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

IPVLAN = json.dumps({"profile": "ipam", "interface": {"type": "IPVLAN"}})


def listen_arg(transport: str, short_dir: Path) -> str:
    return f"unix://{short_dir}/cli.sock" if transport == "unix" else "127.0.0.1:0"


def test_describe_prints_the_webhooks_attributes_and_config(
    cli: Any,
    cli_process: Any,
    example_process: Any,
    sample_root: Path,
    transport: str,
    short_dir: Path,
) -> None:
    url = example_process("--listen", listen_arg(transport, short_dir), "--mtu", "9100")
    run = cli_process if transport == "unix" else cli  # one of them in its own process
    result = run(
        "describe", "--cloud-provider-hint", "webhook", "--webhook-url", url,
        "--host-root", str(sample_root), "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["provider"] == "webhook"
    assert data["instance"]["capabilities"] == {"cloudProvider": True, "profileProvider": True}
    by_name = {d["device"]["name"]: d for d in data["devices"]}
    assert set(by_name) == {"eth0", "eth1", "eth2"}
    eth1 = by_name["eth1"]
    assert eth1["attributes"]["example.com/rack"] == {"string": "rack-7"}
    assert eth1["attributes"]["example.com/nicName"] == {"string": "eth1"}
    assert eth1["config"] == {"interface": {"mtu": 9100}}

    table = cli(
        "describe", "--cloud-provider-hint", "webhook", "--webhook-url", url,
        "--host-root", str(sample_root),
    )  # fmt: skip
    assert table.code == 0 and "9100" in table.stdout and "rack=rack-7" in table.stdout


def test_profile_get_prints_the_webhooks_addresses(
    cli: Any,
    cli_process: Any,
    example_process: Any,
    sample_root: Path,
    transport: str,
    short_dir: Path,
) -> None:
    url = example_process("--listen", listen_arg(transport, short_dir))
    args = (
        "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", url, "--host-root", str(sample_root), "--device", "eth1",
        "--claim-uid", "claim-7", "--config", "-", "--ipam-memory", "-o", "json",
    )  # fmt: skip
    run = cli_process if transport == "tcp" else cli  # one of them in its own process
    result = run(*args, stdin=IPVLAN)
    assert result.code == 0, result.stderr
    final = result.json()
    assert final["interface"]["addresses"] == ["10.99.0.2/32", "fd00:99::2/128"]
    assert final["interface"]["type"] == "IPVLAN" and final["profile"] == "ipam"
    # A kubelet retry (a new process) gets the same addresses from the webhook.
    assert cli(*args, stdin=IPVLAN).json() == final
    released = cli(
        "profile", "release", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", url, "--host-root", str(sample_root), "--device", "eth1",
        "--claim-uid", "claim-7", "--ipam-memory", "-o", "json",
    )  # fmt: skip
    assert released.code == 0 and released.json()["released"] is True


@pytest.mark.parametrize(
    ("switch", "command", "says"),
    [
        ("--health-down", "describe", "answered HTTP 503 instead of 200"),
        ("--health-not-json", "describe", "body is not JSON"),
        ("--no-cloud", "describe", "requested explicitly for the cloud role"),
        ("--no-profile", "profile", "requested explicitly for the profile role"),
    ],
)
def test_explicit_webhook_that_cannot_serve_exits_3_saying_which(
    cli: Any,
    cli_process: Any,
    serve: Any,
    example_process: Any,
    sample_root: Path,
    switch: str,
    command: str,
    says: str,
) -> None:
    if switch == "--health-down":
        url = example_process("--listen", "127.0.0.1:0", switch)
    else:
        url = serve(
            health="not-json" if switch == "--health-not-json" else "ok",
            cloud=switch != "--no-cloud",
            profile=switch != "--no-profile",
        ).url
    if command == "describe":
        args = ["describe", "--cloud-provider-hint", "webhook"]
    else:
        args = [
            "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
            "--device", "eth1", "--claim-uid", "c", "--ipam-memory",
        ]  # fmt: skip
    # Default settings; a /health that keeps failing is waited for longest, so
    # that case runs in its own process under the 10 s bound.
    run = cli_process if switch == "--health-down" else cli
    result = run(*args, "--webhook-url", url, "--host-root", str(sample_root))
    assert result.code == 3, result.stderr
    assert says in result.stderr and url in result.stderr


def test_explicit_webhook_unreachable_exits_3(cli: Any, sample_root: Path, short_dir: Path) -> None:
    url = f"unix://{short_dir}/nobody.sock"
    result = cli(
        "describe", "--cloud-provider-hint", "webhook", "--webhook-url", url,
        "--host-root", str(sample_root), "--set", "webhook.health_wait=0.5",
    )  # fmt: skip
    assert result.code == 3
    assert "unreachable (no such unix socket)" in result.stderr and url in result.stderr


def test_bad_url_exits_2_naming_the_accepted_forms(cli: Any, sample_root: Path) -> None:
    result = cli(
        "describe", "--cloud-provider-hint", "webhook", "--webhook-url", "tcp://127.0.0.1:1",
        "--host-root", str(sample_root),
    )  # fmt: skip
    assert result.code == 2
    assert "unix:///path/to.sock" in result.stderr and "https://" in result.stderr


@pytest.mark.parametrize("state", ["not-listening", "health-down", "health-not-json"])
def test_auto_detection_with_a_broken_webhook_exits_0_provider_none(
    cli: Any,
    cli_process: Any,
    serve: Any,
    sample_root: Path,
    short_dir: Path,
    state: str,
) -> None:
    if state == "not-listening":
        url = f"unix://{short_dir}/gone.sock"
    else:
        url = serve(health=state.removeprefix("health-")).url
    # One case end to end in its own process; the others in this process.
    run = cli_process if state == "not-listening" else cli
    detect = run("detect", "--webhook-url", url, "--host-root", str(sample_root), "-o", "json")
    assert detect.code == 0, detect.stderr
    assert detect.json()["provider"] == "none"
    described = cli("describe", "--webhook-url", url, "--host-root", str(sample_root), "-o", "json")
    assert described.code == 0, described.stderr
    assert described.json()["provider"] == "none"


def test_409_exits_4_with_the_servers_message(
    cli: Any, serve: Any, sample_root: Path, transport: str
) -> None:
    server = serve(transport)
    base = (
        "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", server.url, "--host-root", str(sample_root), "--config", "-",
        "--ipam-memory", "-o", "json",
    )  # fmt: skip
    wanted = json.dumps(
        {"profile": "ipam", "interface": {"type": "IPVLAN", "addresses": ["10.99.0.77/32"]}}
    )
    first = cli(*base, "--device", "eth1", "--claim-uid", "claim-a", stdin=wanted)
    assert first.code == 0, first.stderr
    assert first.json()["interface"]["addresses"] == ["10.99.0.77/32"]
    clash = cli(*base, "--device", "eth2", "--claim-uid", "claim-b", stdin=wanted)
    assert clash.code == 4
    assert "HTTP 409" in clash.stderr
    assert "static address 10.99.0.77/32 is already used by claim claim-a on mac:" in clash.stderr


@pytest.mark.parametrize(("status", "code"), [(409, 4), (400, 4), (500, 5), (503, 5)])
def test_forced_status_exit_codes(
    cli: Any, serve: Any, sample_root: Path, status: int, code: int
) -> None:
    url = serve(status_profile=status).url
    result = cli(
        "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", url, "--host-root", str(sample_root), "--device", "eth1",
        "--claim-uid", "c", "--config", "-", "--ipam-memory", stdin=IPVLAN,
    )  # fmt: skip
    assert result.code == code, result.stderr
    assert f"GetProfileConfig forced to answer {status} for claim c" in result.stderr


def test_slow_webhook_exits_5(cli: Any, serve: Any, sample_root: Path) -> None:
    url = serve(slow=2.0).url
    result = cli(
        "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", url, "--host-root", str(sample_root), "--device", "eth1",
        "--claim-uid", "c", "--config", "-", "--ipam-memory", "--set", "webhook.timeout=0.3",
        stdin=IPVLAN,
    )  # fmt: skip
    assert result.code == 5 and "timed out after 0.3 s" in result.stderr


def test_hyphenated_attribute_is_dropped_with_a_warning(
    cli: Any, example_process: Any, sample_root: Path, transport: str, short_dir: Path
) -> None:
    url = example_process("--listen", listen_arg(transport, short_dir), "--hyphen-attr")
    result = cli(
        "describe", "--cloud-provider-hint", "webhook", "--webhook-url", url,
        "--host-root", str(sample_root), "--device", "eth1", "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    attrs = result.json()["devices"][0]["attributes"]
    assert "dra.net/webhook-attr" not in attrs
    assert attrs["example.com/rack"] == {"string": "rack-7"}
    assert attrs["example.com/linkSpeedGbps"] == {"int": 200}
    assert "WARNING" in result.stderr and "dra.net/webhook-attr" in result.stderr


def test_emulate_webhook_points_the_plugin_at_itself(
    cli: Any, background: Any, sample_root: Path, short_dir: Path
) -> None:
    ready = background(
        sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "webhook",
        "--listen", f"unix://{short_dir}/emu.sock", "--faults", "path=/GetDeviceConfig;status=500",
    )  # fmt: skip
    assert ready["url"] == f"unix://{short_dir}/emu.sock"
    assert ready["env"] == {"DRANET_CLOUD_WEBHOOK_URL": ready["url"]}
    # No --webhook-url: the variable the emulator handed out is enough.
    result = cli(
        "describe", "--cloud-provider-hint", "webhook", "--host-root", str(sample_root),
        "--device", "eth1", "--device", "eth2", "-o", "json", env=ready["env"],
    )  # fmt: skip
    assert result.code == 0, result.stderr
    eth1, eth2 = result.json()["devices"]
    assert eth1["attributes"]["example.com/nicName"] == {"string": "eth1"}
    # The injected 500 cost eth1 its device config (logged), not the whole describe.
    assert eth1["config"] is None and "HTTP 500" in result.stderr
    assert eth2["config"] == {"interface": {"mtu": 8896}}


def test_gce_cloud_and_webhook_profiles_mix(
    cli: Any, serve: Any, gce_node: tuple[dict[str, str], Path, str], transport: str
) -> None:
    env, root, nic = gce_node
    server = serve(transport)
    flags = (
        "--cloud-provider-hint", "gce", "--profile-provider", "webhook",
        "--webhook-url", server.url, "--host-root", str(root),
    )  # fmt: skip
    described = cli("describe", *flags, "--device", nic, "-o", "json", env=env)
    assert described.code == 0, described.stderr
    data = described.json()
    assert data["provider"] == "gce"
    device = data["devices"][0]
    assert any(k.startswith("gce.dra.net/") for k in device["attributes"])
    gce_mtu = device["config"]["interface"]["mtu"]

    result = cli(
        "profile", "get", *flags, "--device", nic, "--claim-uid", "mixed", "--config", "-",
        "--ipam-memory", "-o", "json", env=env, stdin=IPVLAN,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    final = result.json()
    assert final["interface"]["addresses"] == ["10.99.0.2/32", "fd00:99::2/128"]
    assert final["interface"]["mtu"] == gce_mtu
    calls = server.webhook.calls
    assert calls["/GetProfileConfig"] == 1
    assert calls["/GetDeviceAttributes"] == 0 and calls["/GetDeviceConfig"] == 0


def test_explicit_profile_webhook_without_profile_role_fails_even_when_auto_detected(
    cli: Any, serve: Any, sample_root: Path
) -> None:
    # No cloud hint: auto-detection picks the webhook for the cloud role (its
    # URL is the evidence); the explicit profile role must still be checked.
    url = serve(health="ok", cloud=True, profile=False).url
    result = cli("detect", "--profile-provider", "webhook", "--webhook-url", url,
                 "--host-root", str(sample_root))  # fmt: skip
    assert result.code == 3, result.stdout + result.stderr
    assert "requested explicitly for the profile role" in result.stderr and url in result.stderr


def test_profile_get_with_a_kubectl_claim_sends_claim_and_claim_uid(
    cli: Any, serve: Any, sample_root: Path, tmp_path: Path
) -> None:
    """``--claim -`` (``kubectl get resourceclaim -o json | ...``) reaches the peer as
    a gen2 ``claim`` beside the gen1 ``claim_uid``; a gen1-spelled config goes out gen2."""
    from dranet_cloud.testing.dranet_wire import go_shape_problems, resource_claim

    server = serve()
    claim = resource_claim("uid-k", namespace="ml", name="nic", pods=(("job-0", "pod-k"),))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"profile": "ipam", "interface": {"type": "ipvlan"}}))
    result = cli(
        "profile", "get", "--cloud-provider-hint", "none", "--profile-provider", "webhook",
        "--webhook-url", server.url, "--host-root", str(sample_root), "--device", "eth1",
        "--claim", "-", "--config", str(config), "--ipam-memory", "-o", "json",
        stdin=json.dumps(claim),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert go_shape_problems(result.json()) == []
    (sent,) = [body for path, body in server.webhook.requests if path == "/GetProfileConfig"]
    assert sent["claim_uid"] == "uid-k"
    assert sent["claim"]["metadata"] == {"uid": "uid-k", "namespace": "ml", "name": "nic"}
    assert sent["claim"]["status"]["reservedFor"] == [
        {"resource": "pods", "name": "job-0", "uid": "pod-k"}
    ]
    assert sent["config"]["interface"]["type"] == "IPVLAN"
    assert go_shape_problems(sent["config"]) == []
