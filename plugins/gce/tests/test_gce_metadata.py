"""Loading and confirming against a real HTTP emulator on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.emulator import build_emulator
from dranet_cloud_gce.metadata_source import DEFAULT_ENDPOINT, endpoint_from
from dranet_cloud_gce.snapshot import GceInstance

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.testing import Emulator, Response
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.metadata import MetadataSpoofed


def _ctx(env: dict[str, str]) -> ProviderContext:
    return ProviderContext(env=env, options=ProviderOptions(request_timeout=1.0))


def test_instance_loads_in_one_request(gce_emulator: Emulator) -> None:
    inst = plugin.instance_properties(_ctx(gce_emulator.env), 5.0)
    assert isinstance(inst, GceInstance)
    assert len(inst.nics) == 9
    assert inst.endpoint == gce_emulator.url
    log = gce_emulator.requests()
    assert len(log) == 1
    (req,) = log
    assert req.method == "GET"
    assert req.path == "/computeMetadata/v1/"
    assert req.query == {"recursive": ["true"], "alt": ["json"]}
    assert req.headers["Metadata-Flavor"] == "Google"
    assert req.status == 200


def test_unix_socket_endpoint(tmp_path: Path) -> None:
    sock = tmp_path / "gce.sock"
    with build_emulator(None, f"unix://{sock}", None) as emu:
        assert emu.env == {"DRANET_CLOUD_GCE_METADATA_ENDPOINT": f"unix://{sock}"}
        inst = plugin.instance_properties(_ctx(emu.env), 5.0)
        assert isinstance(inst, GceInstance)
        assert inst.machine_type == "a3-megagpu-8g"
        assert len(emu.requests()) == 1


def test_our_variable_wins_over_google_auths(gce_emulator: Emulator) -> None:
    env = {
        "DRANET_CLOUD_GCE_METADATA_ENDPOINT": gce_emulator.url,
        "GCE_METADATA_HOST": "127.0.0.1:1",
    }
    assert endpoint_from(env).url == gce_emulator.url
    assert plugin.instance_properties(_ctx(env), 5.0) is not None


def test_endpoint_resolution() -> None:
    default = endpoint_from({})
    assert default.url == DEFAULT_ENDPOINT == "http://169.254.169.254"
    assert default.is_default
    host = endpoint_from({"GCE_METADATA_HOST": "127.0.0.1:8080"})
    assert host.url == "http://127.0.0.1:8080"
    assert host.source == "GCE_METADATA_HOST=127.0.0.1:8080"
    sock = endpoint_from({"DRANET_CLOUD_GCE_METADATA_ENDPOINT": "unix:///run/gce.sock"})
    assert sock.uds_path == "/run/gce.sock"


def test_spoofed_server_is_refused_and_the_error_says_so() -> None:
    with build_emulator(None, "127.0.0.1:0", "strip-headers=Metadata-Flavor") as emu:
        with pytest.raises(MetadataSpoofed) as info:
            plugin.instance_properties(_ctx(emu.env), 5.0)
        message = str(info.value)
        assert "Metadata-Flavor: Google" in message
        assert "not the genuine metadata server" in message
        assert f"GCE_METADATA_HOST={emu.host_port}" in message
        # Refused at once, not retried until the deadline.
        assert len(emu.requests()) == 1


def test_spoofed_server_fails_confirmation_with_the_reason() -> None:
    with (
        build_emulator(None, "127.0.0.1:0", "strip-headers=Metadata-Flavor") as emu,
        pytest.raises(MetadataSpoofed, match="Metadata-Flavor"),
    ):
        plugin.confirm_environment(_ctx(emu.env), 1.0)


def test_confirmation_is_one_request(gce_emulator: Emulator) -> None:
    answer = plugin.confirm_environment(_ctx(gce_emulator.env), 1.0)
    assert answer is not None and gce_emulator.url in answer
    assert len(gce_emulator.requests()) == 1


def test_a_flavored_server_that_is_not_gce_is_not_confirmed() -> None:
    def handler(request: object) -> Response:
        return Response.text("latest/\n")

    with Emulator(handler, name="other", headers={"Metadata-Flavor": "Google"}) as emu:
        env = {"GCE_METADATA_HOST": emu.host_port}
        assert plugin.confirm_environment(_ctx(env), 1.0) is None


def test_503_while_booting_is_retried(gce_emulator: Emulator) -> None:
    gce_emulator.faults.load("status=503,503,503")
    inst = plugin.instance_properties(_ctx(gce_emulator.env), 10.0)
    assert isinstance(inst, GceInstance)
    statuses = [r.status for r in gce_emulator.requests()]
    assert statuses == [503, 503, 503, 200]


def test_server_down_past_the_deadline_names_the_endpoint() -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    env = emu.env
    emu.stop()  # nothing listens on that port any more
    with pytest.raises(ProviderUnavailable) as info:
        plugin.instance_properties(_ctx(env), 0.5)
    message = str(info.value)
    assert env["GCE_METADATA_HOST"] in message
    assert "GCE_METADATA_HOST" in message


def test_server_answering_503_past_the_deadline() -> None:
    with build_emulator(None, "127.0.0.1:0", "unavailable-for=30") as emu:
        with pytest.raises(ProviderUnavailable) as info:
            plugin.instance_properties(_ctx(emu.env), 0.5)
        assert f"GCE_METADATA_HOST={emu.host_port}" in str(info.value)
        statuses = [r.status for r in emu.requests()]
        assert len(statuses) > 1 and set(statuses) == {503}  # retried, never served


def test_a_tree_of_the_wrong_shape_is_unavailable_naming_the_endpoint(tmp_path: Path) -> None:
    def handler(request: object) -> Response:
        return Response.json({"something": "else"})

    with Emulator(handler, name="odd", headers={"Metadata-Flavor": "Google"}) as emu:
        env = {"GCE_METADATA_HOST": emu.host_port}
        with pytest.raises(ProviderUnavailable, match=emu.host_port):
            plugin.instance_properties(_ctx(env), 1.0)


def test_malformed_json_is_unavailable() -> None:
    with (
        build_emulator(None, "127.0.0.1:0", "malformed") as emu,
        pytest.raises(ProviderUnavailable, match="not valid JSON"),
    ):
        plugin.instance_properties(_ctx(emu.env), 1.0)


def test_custom_fixture(tmp_path: Path) -> None:
    fixture = tmp_path / "n2.json"
    fixture.write_text(
        json.dumps(
            {
                "instance": {
                    "name": "small",
                    "machineType": "projects/5/machineTypes/n2-standard-4",
                    "zone": "projects/5/zones/europe-west4-b",
                    "networkInterfaces": [
                        {
                            "mac": "42:01:0a:a4:00:05",
                            "ip": "10.164.0.5",
                            "mtu": 1460,
                            "network": "projects/5/networks/default",
                        }
                    ],
                },
                "project": {"projectId": "p", "numericProjectId": 5},
            }
        )
    )
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        inst = plugin.instance_properties(_ctx(emu.env), 2.0)
    assert isinstance(inst, GceInstance)
    assert (inst.name, inst.machine_type, inst.zone) == ("small", "n2-standard-4", "europe-west4-b")
    assert inst.gpu_direct is None and inst.block is None
    assert [n.mac for n in inst.nics] == ["42:01:0a:a4:00:05"]
