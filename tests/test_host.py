"""ProviderHost: detection paths, explicit vs auto failures, routing, mixing,
the precedence chain, caching and hot-attach refresh."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.toolkit.errors import ConfigError, ProfileDenied, ProviderInitError
from dranet_cloud.wire.models import DeviceIdentifiers, InterfaceConfig, NetworkConfig

from .fakeplugins import ENDPOINT_VAR, FakeCloud, FakeEnricher, FakeProfile, dmi_root, fake_emulator

MAC1, MAC2 = "42:01:0a:00:00:02", "42:01:0a:00:00:03"


def registry(*extra: tuple[str, object]) -> tuple[PluginRegistry, FakeCloud]:
    reg = PluginRegistry(load_entry_points=False)
    cloud = FakeCloud()
    reg.register(cloud, "fakecloud")
    for name, plugin in extra:
        reg.register(plugin, name)
    return reg, cloud


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_roles_derived_from_hooks() -> None:
    reg, _ = registry(("fakeprofile", FakeProfile()), ("enricher", FakeEnricher()))
    assert reg.roles("fakecloud") == ("cloud",)
    assert reg.roles("fakeprofile") == ("profile",)
    assert reg.roles("enricher") == ("enricher",)


def test_no_evidence_means_none_and_no_load(tmp_path: Path) -> None:
    reg, cloud = registry()
    host = ProviderHost(
        host_root=str(dmi_root(tmp_path, "Supermicro")),
        registry=reg,
        env={ENDPOINT_VAR: "http://127.0.0.1:9"},
    )
    det = host.start()
    assert det.provider == "none" and not det.explicit
    assert cloud.loads == 0
    assert host.capabilities().to_wire() == {"cloudProvider": False, "profileProvider": False}


def test_evidence_and_confirmation(tmp_path: Path) -> None:
    reg, cloud = registry()
    with fake_emulator({MAC1: 8244}) as emu:
        host = ProviderHost(
            host_root=str(dmi_root(tmp_path, "FakeCloud")), registry=reg, env=emu.env
        )
        det = host.start()
    assert det.provider == "fakecloud"
    assert "DMI sys_vendor=FakeCloud" in det.evidence
    assert cloud.loads == 1
    assert [r.path for r in emu.log] == ["/ping", "/meta"]


def test_evidence_but_server_down_auto_is_none(tmp_path: Path) -> None:
    reg, _ = registry()
    host = ProviderHost(
        host_root=str(dmi_root(tmp_path, "FakeCloud")),
        registry=reg,
        env={ENDPOINT_VAR: f"http://127.0.0.1:{free_port()}"},
    )
    det = host.start()
    assert det.provider == "none"
    assert "fakecloud" in det.failures


def test_explicit_server_down_raises_naming_endpoint(tmp_path: Path) -> None:
    reg, _ = registry()
    port = free_port()
    host = ProviderHost(
        cloud_provider_hint="FAKECLOUD",
        registry=reg,
        host_root=str(dmi_root(tmp_path, "Supermicro")),
        env={ENDPOINT_VAR: f"http://127.0.0.1:{port}"},
    )
    host.context.options.metadata_deadline = 0.5
    with pytest.raises(ProviderInitError) as err:
        host.start()
    msg = str(err.value)
    assert "fakecloud" in msg and f"127.0.0.1:{port}" in msg and ENDPOINT_VAR in msg


def test_unknown_hint_lists_installed(tmp_path: Path) -> None:
    reg, _ = registry(("fakeprofile", FakeProfile()))
    host = ProviderHost(cloud_provider_hint="azure", registry=reg)
    with pytest.raises(ConfigError) as err:
        host.start()
    assert "fakecloud" in str(err.value) and "fakeprofile" in str(err.value)
    assert "dranet-cloud-azure" not in str(err.value)  # never a guessed package name


def test_hint_typo_suggests_the_installed_name() -> None:
    reg, _ = registry(("fakeprofile", FakeProfile()))
    host = ProviderHost(cloud_provider_hint="fakeclod", registry=reg)
    with pytest.raises(ConfigError) as err:
        host.start()
    assert "did you mean 'fakecloud'?" in str(err.value)


def test_none_hint_and_profile_role_checks(tmp_path: Path) -> None:
    reg, _ = registry(("fakeprofile", FakeProfile()))
    host = ProviderHost(cloud_provider_hint="NONE", registry=reg)
    assert host.start().provider == "none"
    with pytest.raises(ConfigError):
        ProviderHost(cloud_provider_hint="fakeprofile", registry=reg).start()
    with pytest.raises(ConfigError):
        ProviderHost(cloud_provider_hint="none", profile_provider="fakecloud", registry=reg).start()


def started(tmp_path: Path, emu_env: dict[str, str], **kw: object) -> ProviderHost:
    reg, _ = registry(("fakeprofile", FakeProfile()), ("enricher", FakeEnricher()))
    host = ProviderHost(
        host_root=str(dmi_root(tmp_path, "FakeCloud", {"eth1": MAC1})),
        registry=reg,
        env=emu_env,
        ipam=MemoryStore(),
        **kw,
    )  # type: ignore[arg-type]
    host.start()
    return host


def profile_host(tmp_path: Path) -> tuple[ProviderHost, MemoryStore]:
    """A started host with the fake profile, and the IPAM store it allocates from, to read."""
    store = MemoryStore()
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="fakeprofile")
    host.context._ipam = store
    return host, store


def test_attributes_validated_and_enriched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with fake_emulator({MAC1: 8244}) as emu, caplog.at_level(logging.WARNING):
        host = started(tmp_path, emu.env)
        attrs = host.device_attributes(DeviceIdentifiers(name="eth1", mac_address=MAC1))
    assert {k: v.value for k, v in attrs.items()} == {
        "fake.dra.net/mtu": 8244,
        "vendor.example.com/firmware": "2.1.0",
    }
    assert "fake.dra.net/bad-name" in caplog.text and "fake.dra.net/long" in caplog.text


def test_mixing_cloud_and_profile_plugins(tmp_path: Path) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="fakeprofile")
        dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
        user = NetworkConfig.model_validate({"profile": "p", "interface": {"name": "net0"}})
        final = host.network_config(dev, "claim-1", user)
        again = host.network_config(dev, "claim-1", user)
    assert host.cloud == "fakecloud" and host.profile == "fakeprofile"
    assert final.interface.mtu == 8244 and final.interface.name == "net0"
    assert final.routes and final.routes[0].table == 100
    assert final.interface.addresses and final.interface.addresses == again.interface.addresses
    assert final.interface.addresses[0].startswith("10.99.0.")


def test_no_profile_means_no_profile_call(tmp_path: Path) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="none")
        dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
        plain = host.network_config(dev, "c", NetworkConfig.model_validate({"interface": {}}))
        assert plain.interface.addresses is None and plain.interface.mtu == 8244
        with pytest.raises(ProfileDenied) as err:
            host.network_config(dev, "c", NetworkConfig(profile="p"))
    assert err.value.status == 404 and "no profile provider" in str(err.value)


def test_denial_and_invalid_final_config(tmp_path: Path) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="fakeprofile")
        dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
        with pytest.raises(ProfileDenied) as err:
            host.network_config(dev, "c", NetworkConfig(profile="forbidden"))
        assert err.value.status == 409
        user = NetworkConfig.model_validate({"profile": "p", "interface": {"dhcp": True}})
        with pytest.raises(ProfileDenied) as err2:
            host.network_config(dev, "c2", user)
    assert "mutually exclusive" in str(err2.value)


def test_release_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="fakeprofile")
    dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
    with caplog.at_level(logging.ERROR):
        assert host.release(dev, "explode") is False
    assert "backend gone" in caplog.text and "explode" in caplog.text
    assert host.release(dev, "never-allocated") is True


def test_device_config_cached_and_hot_attach_refresh(tmp_path: Path) -> None:
    nics = {MAC1: 8244}
    with fake_emulator(nics) as emu:
        host = started(tmp_path, emu.env)
        dev1 = DeviceIdentifiers(name="eth1", mac_address=MAC1)
        assert host.device_config(dev1) is not None
        assert host.device_config(dev1) is not None
        loads = [r.path for r in emu.log].count("/meta")
        assert loads == 1, "device config must be cached"
        nics[MAC2] = 1500  # the cloud attaches a NIC while the node runs
        dev2 = DeviceIdentifiers(name="eth2", mac_address=MAC2.upper())
        cfg = host.device_config(dev2)
        assert cfg is not None and cfg.interface.mtu == 1500
        # a second unknown MAC right away does not hammer the metadata server
        host.device_config(DeviceIdentifiers(name="eth3", mac_address="42:01:0a:00:00:09"))
        assert [r.path for r in emu.log].count("/meta") == 2


def test_profile_call_without_profile_name_is_a_400(tmp_path: Path) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env, profile_provider="fakeprofile")
    with pytest.raises(ProfileDenied) as err:
        host.profile_config(DeviceIdentifiers(name=""), "c1", NetworkConfig())
    assert err.value.status == 400
    assert "config.profile is empty" in str(err.value) and "(unnamed)" in str(err.value)


def test_profile_call_checks_first_and_asks_the_plugin_only_when_called(
    tmp_path: Path,
) -> None:
    host, store = profile_host(tmp_path)
    dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
    bad = NetworkConfig.model_validate({"profile": "p", "interface": {"addresses": ["10.0.0.1"]}})
    with pytest.raises(ProfileDenied, match="addresses-cidr"):
        host.profile_call(dev, "c1", bad)
    call = host.profile_call(dev, "c1", NetworkConfig(profile="p"))
    assert store.list() == []  # checked, not yet asked
    result = call()
    assert result is not None and result.interface.addresses == [a.address for a in store.list()]
    assert host.profile_config(dev, "c1", NetworkConfig(profile="p")) == result  # same claim


def test_unconfirmed_evidence_is_a_warning_naming_plugin_and_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reg, _ = registry()
    port = free_port()
    host = ProviderHost(
        host_root=str(dmi_root(tmp_path, "FakeCloud")),
        registry=reg,
        env={ENDPOINT_VAR: f"http://127.0.0.1:{port}"},
    )
    with caplog.at_level(logging.WARNING):
        det = host.start()
    assert det.provider == "none"
    assert "fakecloud" in det.evidence and f"127.0.0.1:{port}" in det.evidence
    assert any(
        r.levelno == logging.WARNING and "fakecloud" in r.getMessage() for r in caplog.records
    )


def test_invalid_claim_allocates_nothing(tmp_path: Path) -> None:
    host, store = profile_host(tmp_path)
    dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
    # Built without validation, as a caller embedding the host might pass it.
    user = NetworkConfig.model_construct(
        profile="p",
        interface=InterfaceConfig.model_construct(dhcp=True, addresses=["10.0.0.1/24"]),
    )
    with pytest.raises(ProfileDenied, match="mutually exclusive"):
        host.network_config(dev, "c1", user)
    assert store.list() == []


def test_profile_answer_that_breaks_the_config_is_released(tmp_path: Path) -> None:
    host, store = profile_host(tmp_path)
    dev = DeviceIdentifiers(name="eth1", mac_address=MAC1)
    # Valid on its own; the fake profile then adds addresses, which an
    # unnumbered subinterface cannot carry.
    user = NetworkConfig.model_validate(
        {"profile": "p", "interface": {"type": "IPVLAN", "addressing": "Unnumbered"}}
    )
    with pytest.raises(ProfileDenied, match="unnumbered"):
        host.network_config(dev, "c1", user)
    assert store.list() == [], "the denied claim's allocation was not released"


def test_unknown_mac_backs_off_after_a_refresh(tmp_path: Path) -> None:
    with fake_emulator({MAC1: 8244}) as emu:
        host = started(tmp_path, emu.env)
        host.refresh_interval = 0.0  # only the per-MAC back-off limits reloads
        bridge = DeviceIdentifiers(name="br0", mac_address="02:00:00:00:00:01")
        for _ in range(3):
            assert host.device_config(bridge) is None
        loads = [r.path for r in emu.log].count("/meta")
    assert loads == 2, "a MAC still unknown after one reload must not reload again at once"


def test_aliases_come_from_plugins() -> None:
    class Aliased:
        @hookimpl
        def provider_aliases(self) -> list[str]:
            return ["ACME-Cloud"]

        @hookimpl
        def instance_properties(self, context: object, deadline: float) -> None:
            return None

    reg, _ = registry(("acme", Aliased()))
    assert reg.resolve("acme-cloud", flag="--cloud-provider-hint") == "acme"
    assert reg.resolve("FAKECLOUD", flag="--cloud-provider-hint") == "fakecloud"
