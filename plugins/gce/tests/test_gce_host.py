"""The plugin behind the ProviderHost: detection, start-up, the precedence chain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dranet_cloud_gce.emulator import build_emulator

from dranet_cloud.contract.context import ProviderOptions, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ProviderInitError
from dranet_cloud.wire.models import NetworkConfig

RECURSIVE = {"recursive": ["true"], "alt": ["json"]}


@pytest.fixture
def make_host(gce_sample: SampleHost) -> Iterator[list[ProviderHost]]:
    hosts: list[ProviderHost] = []
    yield hosts
    for h in hosts:
        h.close()


def _host(
    hosts: list[ProviderHost],
    gce_sample: SampleHost,
    env: dict[str, str],
    hint: str = "",
    deadline: float = 15.0,
) -> ProviderHost:
    host = ProviderHost(
        cloud_provider_hint=hint,
        host_root=str(gce_sample.root),
        env=env,
        options=ProviderOptions(metadata_deadline=deadline, probe_timeout=1.0),
        ipam=MemoryStore(),
    )
    hosts.append(host)
    return host


@pytest.fixture
def gce_host(
    make_host: list[ProviderHost], gce_sample: SampleHost, gce_emulator: Emulator
) -> ProviderHost:
    """A host on the sample node, started against the emulator with the gce hint."""
    host = _host(make_host, gce_sample, gce_emulator.env, hint="gce")
    host.start()
    return host


def _instance_loads(emu: Emulator) -> int:
    return sum(1 for r in emu.requests("/computeMetadata/v1/") if r.query == RECURSIVE)


def test_auto_detection_confirms_then_loads_once(
    make_host: list[ProviderHost], gce_sample: SampleHost, gce_emulator: Emulator
) -> None:
    host = _host(make_host, gce_sample, gce_emulator.env)
    result = host.start()
    assert result.provider == "gce" and not result.explicit
    assert "product_name=Google Compute Engine" in result.evidence
    assert gce_emulator.url in result.evidence
    assert host.cloud == "gce" and host.profile == "gce"
    # One confirmation probe and one request for the whole instance.
    assert len(gce_emulator.requests()) == 2
    assert _instance_loads(gce_emulator) == 1


def test_describe_every_nic(gce_host: ProviderHost, gce_emulator: Emulator) -> None:
    host = gce_host
    devices = host.context.host_root.net_devices()
    assert len(devices) == 9
    for dev in devices:
        attrs = host.device_attributes(dev)
        assert attrs["gce.dra.net/machineType"].value == "a3-megagpu-8g"
        assert "gce.dra.net/networkName" in attrs
        config = host.device_config(dev)
        assert config is not None and config.routes and config.neighbors
        assert config.interface.mtu == (1460 if dev.name == "eth0" else 8244)
        gateway = config.neighbors[0].destination
        assert config.routes[0].destination == f"{gateway}/32"
        assert config.routes[0].scope == 253
    # Explicit hint: no probe, one request in total.
    assert len(gce_emulator.requests()) == 1
    assert _instance_loads(gce_emulator) == 1


def test_start_up_rides_out_a_booting_metadata_server(
    make_host: list[ProviderHost], gce_sample: SampleHost
) -> None:
    # The Done-when scenario as written: 503 for the first 3 seconds.
    with build_emulator(None, "127.0.0.1:0", "unavailable-for=3") as emu:
        host = _host(make_host, gce_sample, emu.env, hint="gce", deadline=15.0)
        result = host.start()
        assert result.provider == "gce" and host.cloud == "gce"
        statuses = [r.status for r in emu.requests()]
        assert statuses[-1] == 200
        assert set(statuses[:-1]) == {503} and len(statuses) > 1
        assert _instance_loads(emu) == len(statuses)  # only the one request, retried


def test_explicit_hint_with_the_server_down_fails_start_up(
    make_host: list[ProviderHost], gce_sample: SampleHost
) -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    env = emu.env
    emu.stop()
    host = _host(make_host, gce_sample, env, hint="gce", deadline=0.5)
    with pytest.raises(ProviderInitError) as info:
        host.start()
    assert info.value.exit_code == 3
    assert env["GCE_METADATA_HOST"] in str(info.value)


def test_auto_detected_but_down_runs_without_a_provider(
    make_host: list[ProviderHost], gce_sample: SampleHost
) -> None:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    env = emu.env
    emu.stop()
    host = _host(make_host, gce_sample, env, deadline=0.5)
    result = host.start()
    assert result.provider == "none" and host.cloud is None
    assert "gce" in result.failures and env["GCE_METADATA_HOST"] in result.failures["gce"]


def test_spoofed_server_is_refused_at_start_up(
    make_host: list[ProviderHost], gce_sample: SampleHost
) -> None:
    with build_emulator(None, "127.0.0.1:0", "strip-headers=Metadata-Flavor") as emu:
        explicit = _host(make_host, gce_sample, emu.env, hint="gce")
        with pytest.raises(ProviderInitError, match="not the genuine metadata server"):
            explicit.start()
        auto = _host(make_host, gce_sample, emu.env)
        result = auto.start()
        assert result.provider == "none"
        assert "Metadata-Flavor: Google" in result.failures["gce"]


def test_precedence_chain_with_an_ipvlan_profile(gce_host: ProviderHost) -> None:
    host = gce_host
    eth0 = next(d for d in host.context.host_root.net_devices() if d.name == "eth0")
    user = NetworkConfig.model_validate(
        {"profile": "gce-subinterface", "interface": {"type": "IPVLAN", "name": "net0"}}
    )
    first = host.network_config(eth0, "claim-a", user)
    again = host.network_config(eth0, "claim-a", user)
    other = host.network_config(eth0, "claim-b", user)
    assert first.to_wire() == again.to_wire()
    assert first.interface.name == "net0"  # the user's intent survives
    assert first.interface.mtu == 1460  # the cloud's baseline is merged in
    assert first.interface.addresses and len(first.interface.addresses) == 2
    assert other.interface.addresses
    assert not set(first.interface.addresses) & set(other.interface.addresses)
    assert host.release(eth0, "claim-a") and host.release(eth0, "claim-b")
    assert host.context.ipam.list() == []


def test_hot_attached_nic_triggers_one_refresh(
    make_host: list[ProviderHost], gce_sample: SampleHost, tmp_path: Path
) -> None:
    import json

    from dranet_cloud_gce.emulator import load_fixture

    from dranet_cloud.wire.models import DeviceIdentifiers

    tree = load_fixture(None)
    nics = tree["instance"]["networkInterfaces"]
    extra = dict(nics[1], mac="42:01:c0:a8:09:02", ip="192.168.9.2", gateway="192.168.9.1")
    short = dict(tree, instance=dict(tree["instance"], networkInterfaces=nics[:2]))
    fixture = tmp_path / "before.json"
    fixture.write_text(json.dumps(short))
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        host = _host(make_host, gce_sample, emu.env, hint="gce")
        host.start()
        # The NIC appears in the metadata after start-up.
        emu.handler.tree["instance"]["networkInterfaces"] = [*nics[:2], extra]  # type: ignore[attr-defined]
        new = DeviceIdentifiers(name="eth9", mac_address="42:01:c0:a8:09:02")
        config = host.device_config(new)
        assert config is not None and config.neighbors
        assert config.neighbors[0].destination == "192.168.9.1"
        assert _instance_loads(emu) == 2


def test_static_address_comes_back_once_as_written_in_the_final_config(
    gce_host: ProviderHost,
) -> None:
    # Regression: the profile used to answer the reserved host CIDR
    # (10.24.3.7/32), the merge kept both, and the pod got the address twice.
    host = gce_host
    eth0 = next(d for d in host.context.host_root.net_devices() if d.name == "eth0")
    user = NetworkConfig.model_validate(
        {"profile": "gce", "interface": {"type": "IPVLAN", "addresses": ["10.24.3.7/24"]}}
    )
    final = host.network_config(eth0, "claim-s", user)
    assert final.interface.addresses == ["10.24.3.7/24"]
    held = host.context.ipam.list()
    assert [(a.address, a.static) for a in held] == [("10.24.3.7/32", True)]
    assert host.release(eth0, "claim-s", final)
    assert host.context.ipam.list() == []
