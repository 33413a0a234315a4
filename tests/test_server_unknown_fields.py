"""An unknown top-level field in a BYODP request, through the real server.

A vendor sent ``{"device": {...}}`` to ``/GetDeviceAttributes`` (whose body is
the DeviceIdentifiers itself) and got 200 ``{}`` with only a DEBUG line.  The
answer stays what it was; the server now says so at WARNING, once per field
name, with the name escaped and cut short.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.server import app as app_module
from dranet_cloud.server.runner import ServeOptions, WebhookServer
from dranet_cloud.toolkit.logsafe import WarnOnce

from .fakeplugins import FakeCloud, dmi_root, fake_emulator
from .test_server_app import client_for

MAC1 = "42:01:0a:00:00:02"
DEVICE = {"mac_address": MAC1, "name": "eth1"}


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    """A server with the cloud role (a fake cloud) and the profile role (local-ipam).

    The once-per-name memory is per process; each test starts from a fresh one.
    """
    monkeypatch.setattr(app_module, "_unknown_field_warning", WarnOnce(app_module.log, 256))
    reg = PluginRegistry(load_entry_points=False)
    reg.register(FakeCloud(), "fakecloud")
    reg.register(LocalIpamPlugin(LocalIpamConfig.parse(["10.20.0.0/24"])), PLUGIN_NAME)
    with fake_emulator({MAC1: 8244}) as emu:
        host = ProviderHost(
            cloud_provider_hint="fakecloud",
            profile_provider="none",
            host_root=str(dmi_root(tmp_path, "FakeCloud", {"eth1": MAC1})),
            registry=reg,
            env=emu.env,
            ipam=MemoryStore(),
            profile_routes={"local-ipam": PLUGIN_NAME},
        )
        host.start()
        opts = ServeOptions(listen=f"unix://{tmp_path}/hook.sock")
        with WebhookServer(host, opts) as server, client_for(server) as http:
            yield http


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == app_module.log.name and r.levelno == logging.WARNING
    ]


def test_a_wrapped_device_is_answered_as_before_and_warned_once(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=app_module.log.name)
    plain = client.post("/GetDeviceAttributes", json=DEVICE)
    assert plain.status_code == 200 and plain.json() == {"fake.dra.net/mtu": {"int": 8244}}
    assert warnings_of(caplog) == [], "a correct body must not warn"

    for _ in range(3):
        wrapped = client.post("/GetDeviceAttributes", json={"device": DEVICE})
        # Behaviour kept: the unknown field is ignored, so no NIC is named: 200 {}.
        assert wrapped.status_code == 200 and wrapped.json() == {}
    config = client.post("/GetDeviceConfig", json={"device": DEVICE})
    assert config.status_code == 200 and config.json() == {"interface": {}}
    assert warnings_of(caplog) == [
        "POST /GetDeviceAttributes: ignoring the unknown top-level field device; this "
        "endpoint's body has the fields mac_address, name, pci_address (the request is "
        "answered without it; logged once per field name)"
    ]


def test_profile_endpoints_warn_about_theirs_and_accept_both_generations(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=app_module.log.name)
    config = {"profile": "local-ipam", "interface": {"type": "IPVLAN"}}
    gen1 = {"device": DEVICE, "claim_uid": "c1", "config": config}
    gen2 = {"device": DEVICE, "claim": {"metadata": {"uid": "c2"}}, "config": config}
    for body in (gen1, gen2):
        assert client.post("/GetProfileConfig", json=body).status_code == 200
    release = {"device": DEVICE, "claim_uid": "c1", "config": None}
    assert client.post("/ReleaseProfileConfig", json=release).status_code == 200
    assert warnings_of(caplog) == [], "DRANET's own fields, either generation, never warn"

    typo = {**gen1, "claim_uid": "c3", "claimUID": "c3"}
    answer = client.post("/GetProfileConfig", json=typo)
    assert answer.status_code == 200 and answer.json()["interface"]["addresses"]
    lines = warnings_of(caplog)
    assert len(lines) == 1 and "POST /GetProfileConfig" in lines[0], lines
    assert "field claimUID;" in lines[0] and "claim, claim_uid, config, device" in lines[0]


def test_hostile_names_are_escaped_cut_short_and_bounded_per_request(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=app_module.log.name)
    forged = "x\n2026-12-04 WARNING forged line" + "y" * 5000
    body = {**DEVICE, forged: 1, **{f"extra{i}": i for i in range(500)}}
    answer = client.post("/GetDeviceAttributes", json=body)
    assert answer.status_code == 200 and answer.json() == {"fake.dra.net/mtu": {"int": 8244}}
    lines = warnings_of(caplog)
    assert len(lines) == app_module._UNKNOWN_FIELDS_REPORTED, len(lines)
    first = lines[0]
    assert "\n" not in first and "x\\n2026-12-04 WARNING forged line" in first
    assert "...(+" in first and len(first) < 400, first
    # The same names again: nothing new; a new name: one line.
    client.post("/GetDeviceAttributes", json=body)
    client.post("/GetDeviceAttributes", json={**DEVICE, "macAddress": MAC1})
    assert len(warnings_of(caplog)) == app_module._UNKNOWN_FIELDS_REPORTED + 1
