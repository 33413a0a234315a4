"""A conformance suite any plugin runs against its own emulator.

Subclass :class:`PluginConformance` in a test module of the plugin::

    from dranet_cloud.testing.conformance import PluginConformance

    class TestGceConformance(PluginConformance):
        plugin_name = "gce"

The suite adapts to the roles the plugin's hooks give it.  Every plugin
ships a ``sample_host``; a cloud or profile plugin also ships an ``emulator``
(a plugin without them, such as a webhook, overrides
:meth:`PluginConformance.environment`).  An **enricher** (only
``device_attributes``) needs nothing but the sample host: it is checked
without a cloud plugin, its attributes must fit the Kubernetes limits and
reach the host's answer, and the cloud-only checks (evidence, device configs)
and profile checks are skipped with the reason.

The checks are the promises the host relies on: roles backed by hooks, no
network I/O without local evidence, attributes within the Kubernetes limits,
configs that validate, profile calls idempotent per claim and releases
idempotent.  Install ``dranet-cloud[testing]`` for pytest.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..attributes import MAX_ATTRIBUTES, attribute_name_problem, attribute_value_problem
from ..budget import dranet_attributes, dranet_devices, locate
from ..context import ProviderContext, ProviderOptions
from ..errors import DranetCloudError, ProfileDenied
from ..host import ProviderHost
from ..hostroot import HostRoot
from ..ipam import MemoryStore
from ..merge import merge_network_config
from ..models import NetworkConfig, parse_user_config
from ..plugins import ROLE_HOOKS, PluginRegistry
from ..validation import ConfigInvalid, validate_network_config
from .dranet_wire import go_shape_problems


@dataclass
class ConformanceEnvironment:
    """What a plugin needs to run: variables pointing at its emulator, a host root."""

    env: dict[str, str]
    host_root: Path
    claim_device: str | None = None
    options: ProviderOptions = field(default_factory=ProviderOptions)
    # (NIC, profile) when the plugin's profile gives a NIC its own address.
    own_address_claim: tuple[str, str] | None = None


@contextmanager
def record_connections() -> Iterator[list[Any]]:
    """Record every socket connect attempted inside the block (and refuse it)."""
    attempts: list[Any] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def spy(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        raise OSError("conformance: network I/O during local detection")

    socket.socket.connect = spy  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = spy  # type: ignore[method-assign,assignment]
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]


class PluginConformance:
    plugin_name: str = ""
    sample_variant: str | None = None
    # False for a cloud whose facts carry no device config (CKS and OCI, as in
    # DRANET): then every device's config must be None.
    has_device_config: bool = True
    profile_request: dict[str, Any] = {"profile": "conformance", "interface": {"type": "IPVLAN"}}

    # --- environment ---------------------------------------------------------

    @pytest.fixture()
    def registry(self) -> PluginRegistry:
        reg = PluginRegistry()
        assert self.plugin_name in reg.names(), (
            f"plugin {self.plugin_name!r} is not installed in the dranet_cloud entry-point group"
        )
        return reg

    def environment(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> Iterator[ConformanceEnvironment]:
        """Start the plugin's emulator and write its sample host; override if needed."""
        sample = registry.call(
            self.plugin_name, "sample_host", dest=tmp_path / "host", variant=self.sample_variant
        )
        assert sample is not None, (
            f"plugin {self.plugin_name}: the sample_host hook returned nothing; implement it "
            "(write a fake node with dranet_cloud.testing.HostRootBuilder) or override "
            "environment()"
        )
        roles = registry.roles(self.plugin_name)
        if not registry.implements(self.plugin_name, "emulator"):
            assert not {"cloud", "profile"} & set(roles), (
                f"plugin {self.plugin_name} has roles {roles} but no emulator hook; implement "
                "it (dranet_cloud.testing.Emulator) or override environment()"
            )
            yield ConformanceEnvironment({}, sample.root, sample.claim_device)
            return
        emu = registry.call(
            self.plugin_name, "emulator", fixture=sample.fixture, listen="127.0.0.1:0", faults=None
        )
        assert emu is not None, "the plugin's emulator hook returned nothing"
        emu.start()
        try:
            yield ConformanceEnvironment(
                dict(emu.env),
                sample.root,
                sample.claim_device,
                own_address_claim=sample.own_address_claim,
            )
        finally:
            emu.stop()

    @pytest.fixture()
    def conformance_env(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> Iterator[ConformanceEnvironment]:
        yield from self.environment(registry, tmp_path)

    @pytest.fixture()
    def started_host(
        self, registry: PluginRegistry, conformance_env: ConformanceEnvironment
    ) -> Iterator[ProviderHost]:
        host = ProviderHost(
            cloud_provider_hint=self.plugin_name
            if "cloud" in registry.roles(self.plugin_name)
            else "none",
            profile_provider=self.plugin_name
            if "profile" in registry.roles(self.plugin_name)
            else "none",
            host_root=str(conformance_env.host_root),
            env=conformance_env.env,
            options=conformance_env.options,
            registry=registry,
            ipam=MemoryStore(),
        )
        host.start()
        yield host
        host.close()

    # --- checks --------------------------------------------------------------

    def test_roles_are_backed_by_hooks(self, registry: PluginRegistry) -> None:
        roles = registry.roles(self.plugin_name)
        assert roles, "the plugin implements no role's hooks"
        for role in roles:
            for hook in ROLE_HOOKS.get(role, ("device_attributes",)):
                assert registry.implements(self.plugin_name, hook), f"role {role} needs {hook}"
        if "cloud" in roles:
            for hook in ("device_attributes", "device_config", "local_evidence"):
                assert registry.implements(self.plugin_name, hook), f"cloud role needs {hook}"

    def test_no_network_without_local_evidence(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> None:
        empty = tmp_path / "bare-metal"
        (empty / "sys/class/dmi/id").mkdir(parents=True)
        (empty / "sys/class/dmi/id/sys_vendor").write_text("Supermicro\n")
        context = ProviderContext(host_root=HostRoot(empty), env={})
        with record_connections() as attempts:
            evidence = registry.call(self.plugin_name, "local_evidence", context=context)
        assert evidence is None, f"a bare-metal node was taken as evidence: {evidence!r}"
        assert attempts == [], f"local evidence touched the network: {attempts}"

    def test_sample_host_is_evidence(
        self, registry: PluginRegistry, conformance_env: ConformanceEnvironment
    ) -> None:
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin recognises its environment")
        context = ProviderContext(
            host_root=HostRoot(conformance_env.host_root),
            env=conformance_env.env,
            options=conformance_env.options,
        )
        with record_connections() as attempts:
            evidence = registry.call(self.plugin_name, "local_evidence", context=context)
        assert evidence, "the plugin's own sample host is not recognised"
        assert attempts == []

    def test_attributes_within_kubernetes_limits(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        devices = started_host.context.host_root.net_devices()
        assert devices, "the sample host has no NICs"
        inst = started_host.instance(self.plugin_name)
        seen_any = False
        for dev in devices:
            raw = (
                registry.call(
                    self.plugin_name,
                    "device_attributes",
                    context=started_host.context,
                    instance=inst,
                    device=dev,
                )
                or {}
            )
            assert len(raw) <= MAX_ATTRIBUTES
            for name, attr in raw.items():
                assert attribute_name_problem(name) is None, (dev.name, name)
                assert attribute_value_problem(attr) is None, (dev.name, name, attr)
            seen_any |= bool(raw)
        assert seen_any, "no NIC of the sample host got any attribute"
        if "enricher" in registry.roles(self.plugin_name):
            # Added on top of whatever cloud is active, here none: the host publishes them.
            published = {name for dev in devices for name in started_host.device_attributes(dev)}
            assert published, "the host published none of the enricher's attributes"

    def test_no_device_exceeds_the_limit_with_dranets_own(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """Every device DRANET would publish on the sample host, PCI-only ones
        included, stays within 32 attributes once DRANET's own are counted: a
        device over it gets the node's whole ResourceSlice rejected."""
        root = started_host.context.host_root
        devices = dranet_devices(root)
        assert devices, "the sample host has no devices"
        for dev in devices:
            attrs = started_host.device_attributes(dev)
            budget = started_host.attribute_budget(dev)
            nic = locate(root, dev)
            own = dranet_attributes(root, nic) if nic is not None else []
            assert not set(attrs) & set(own), f"{dev.label()}: a plugin overrides DRANET's own"
            total = len(attrs) + budget["dranet"]
            assert total <= MAX_ATTRIBUTES, (
                f"{dev.label()}: {len(attrs)} provider + {budget['dranet']} DRANET attributes "
                f"= {total} > {MAX_ATTRIBUTES}"
            )

    def test_device_configs_validate(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin gives device configs")
        configs = [
            started_host.device_config(d) for d in started_host.context.host_root.net_devices()
        ]
        present = [c for c in configs if c is not None]
        if not self.has_device_config:
            assert present == [], "the plugin declares no device config but returned one"
            return
        assert present, "no NIC of the sample host got a device config"
        for cfg in present:
            assert isinstance(cfg, NetworkConfig)
            validate_network_config(cfg)

    def test_profile_idempotent_and_release_idempotent(
        self,
        registry: PluginRegistry,
        started_host: ProviderHost,
        conformance_env: ConformanceEnvironment,
    ) -> None:
        if "profile" not in registry.roles(self.plugin_name):
            pytest.skip("the plugin has no profile role")
        if conformance_env.own_address_claim is not None:
            self._check_own_address_claims(started_host, *conformance_env.own_address_claim)
            return
        assert conformance_env.claim_device, "a profile plugin's sample names a claim device"
        dev = next(
            d
            for d in started_host.context.host_root.net_devices()
            if d.name == conformance_env.claim_device
        )
        user = NetworkConfig.model_validate(self.profile_request)
        first = started_host.network_config(dev, "conformance-claim-1", user)
        again = started_host.network_config(dev, "conformance-claim-1", user)
        assert first.to_wire() == again.to_wire(), "a retried claim got a different answer"
        other = started_host.network_config(dev, "conformance-claim-2", user)
        mine = set(first.interface.addresses or [])
        assert not mine & set(other.interface.addresses or []), "two claims share an address"
        assert started_host.release(dev, "conformance-claim-1", first)
        assert started_host.release(dev, "conformance-claim-1", first), "second release failed"
        assert started_host.release(dev, "conformance-claim-2", other)
        store = started_host.context.ipam
        left = [a for a in store.list() if a.owner.claim_uid.startswith("conformance-claim")]
        assert left == [], f"release left allocations behind: {left}"

    def test_a_web_page_in_place_of_metadata_fails_an_explicit_start(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> None:
        """A captive portal answering every request with HTML (the emulator's
        ``html`` fault) must stop an explicitly requested cloud plugin (exit 3),
        naming the endpoint, instead of publishing the page as facts."""
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin reads a metadata server at start")
        if not registry.implements(self.plugin_name, "emulator"):
            pytest.skip("the plugin has no emulator to put a portal in front of")
        sample = registry.call(
            self.plugin_name, "sample_host", dest=tmp_path / "host", variant=self.sample_variant
        )
        assert sample is not None
        emu = registry.call(
            self.plugin_name,
            "emulator",
            fixture=sample.fixture,
            listen="127.0.0.1:0",
            faults="html",
        )
        assert emu is not None
        with emu:
            host = ProviderHost(
                cloud_provider_hint=self.plugin_name,
                host_root=str(sample.root),
                env=dict(emu.env),
                options=ProviderOptions(metadata_deadline=2.0),
                registry=registry,
                ipam=MemoryStore(),
            )
            try:
                with pytest.raises(DranetCloudError) as info:
                    host.start()
            finally:
                host.close()
            served = [r for r in emu.log if r.fault == "html"]
        assert info.value.exit_code == 3, info.value
        assert served, "the emulator never answered with the portal's page"
        assert emu.url in str(info.value), f"the error does not name the endpoint: {info.value}"

    @staticmethod
    def _check_own_address_claims(host: ProviderHost, nic: str, profile: str) -> None:
        """A profile that gives the NIC its own address: every claim gets that one."""
        dev = next(d for d in host.context.host_root.net_devices() if d.name == nic)
        user = NetworkConfig.model_validate({"profile": profile})
        first = host.network_config(dev, "conformance-claim-1", user)
        assert first.interface.addresses, f"{nic}: profile {profile} answered no address"
        again = host.network_config(dev, "conformance-claim-1", user)
        other = host.network_config(dev, "conformance-claim-2", user)
        assert first.to_wire() == again.to_wire() == other.to_wire()
        assert host.release(dev, "conformance-claim-1", first)
        assert host.release(dev, "conformance-claim-1", first), "second release failed"

    def test_final_merged_configs_validate(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """What DRANET (PRs #317/#326) validates is the *final* config:
        ``merge(merge(user, device_config), profile_answer)``.  For every NIC of
        the sample host and two users (no claim config; :attr:`profile_request`,
        an IPVLAN claim), the device config merged with the user's and with
        the profile's answer must pass DRANET's rules, and every emitted
        config must be gen2 in Go's shape.  A profile may deny a NIC it has
        nothing for (no range): that is a denial, not an invalid config.
        """
        host = started_host
        users = [NetworkConfig(), parse_user_config(self.profile_request)]
        checked = 0
        for i, dev in enumerate(host.context.host_root.net_devices()):
            base = host.device_config(dev)
            if base is not None:
                assert go_shape_problems(base.to_wire(), f"{dev.label()} device config") == []
            for j, user in enumerate(users):
                merged = merge_network_config(user, base)
                try:
                    merged = validate_network_config(merged)
                except ConfigInvalid as exc:
                    pytest.fail(f"{dev.label()}: device config + claim {j} is invalid: {exc}")
                if not merged.profile or not host.capabilities().profile_provider:
                    continue
                uid = f"conformance-final-{i}-{j}"
                try:
                    answer = host.profile_config(dev, uid, merged)
                except ProfileDenied as exc:
                    assert "is invalid" not in exc.message, f"{dev.label()}: {exc.message}"
                    continue
                if answer is not None:
                    assert go_shape_problems(answer.to_wire(), f"{dev.label()} answer") == []
                final = merge_network_config(merged, answer)
                try:
                    final = validate_network_config(final)
                except ConfigInvalid as exc:
                    pytest.fail(f"{dev.label()}: final config with claim {j} is invalid: {exc}")
                assert go_shape_problems(final.to_wire(), f"{dev.label()} final") == []
                assert host.release(dev, uid, final)
                checked += 1
        if "profile" in registry.roles(self.plugin_name):
            assert checked, "no NIC of the sample host got a profile answer to check"
