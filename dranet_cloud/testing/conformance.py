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

The checks are the promises the host and DRANET rely on: roles backed by
hooks, the host's own detection choosing the plugin on its sample node
against its emulator (local evidence, then ``confirm_environment``), no
network I/O without local evidence, a snapshot whose ``known_macs()`` lists
the sample node's NICs, attributes within the Kubernetes limits, device
configs DRANET accepts (its validation rules, routes and neighbors included,
and an MTU the kernel takes), profile calls idempotent per claim and releases
idempotent.  Every failure names the plugin, the device and the field, what
was expected and what came (:mod:`.conformance_checks` words them).  Install
``dranet-cloud[testing]`` for pytest.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.contract.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.host.attribute_budget import dranet_attributes, dranet_devices, locate
from dranet_cloud.host.attribute_limits import MAX_ATTRIBUTE_VALUES, MAX_ATTRIBUTES, value_count
from dranet_cloud.host.host_paths import required_host_paths
from dranet_cloud.host.merge import merge_network_config
from dranet_cloud.host.plugin_manager import ENTRY_POINT_GROUP, ROLE_HOOKS, PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.host.validation import ConfigInvalid, validate_network_config
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing.conformance_checks import (
    attribute_problem,
    config_problems,
    detection_problem,
    known_macs_problem,
    mtu_problem,
)
from dranet_cloud.testing.dranet_wire import go_shape_problems
from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.sample_requests import (
    answers_in_process,
    compare,
    copy_host_paths,
    sample_requests,
)
from dranet_cloud.toolkit.errors import DranetCloudError, ProfileDenied
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig, parse_user_config


@dataclass
class ConformanceEnvironment:
    """What a plugin needs to run: variables pointing at its emulator, a host root."""

    env: dict[str, str]
    host_root: Path
    claim_device: str | None = None
    options: ProviderOptions = field(default_factory=ProviderOptions)
    # (NIC, profile) when the plugin's profile gives a NIC its own address.
    own_address_claim: tuple[str, str] | None = None
    # The running emulator, whose request log explains a failed detection.
    emulator: Emulator | None = None


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


# The hooks a cloud plugin must implement besides instance_properties (which
# makes it one); docs/plugin-api.md lists the same, and device_config is
# required only while ``has_device_config`` is True.
CLOUD_REQUIRED = ("local_evidence", "device_attributes")


class PluginConformance:
    plugin_name: str = ""
    sample_variant: str | None = None
    # False for a cloud whose facts carry no device config (CKS and OCI, as in
    # DRANET): then device_config may be left out, and where it is implemented
    # every device's config must be None.
    has_device_config: bool = True
    profile_request: dict[str, Any] = {"profile": "conformance", "interface": {"type": "IPVLAN"}}

    def _says(self, problem: str) -> str:
        """A failure message: the plugin, then why."""
        return f"plugin {self.plugin_name}: {problem}"

    # --- environment ---------------------------------------------------------

    def load_registry(self) -> PluginRegistry:
        """The installed plugins, loaded as ``dranet-cloud serve`` loads them.

        A plugin the host refuses (a misspelt ``@hookimpl``: pluggy alone would
        register it silently and never call it) or cannot import fails here,
        saying why.
        """
        reg = PluginRegistry(strict=False)
        problem = reg.load_errors.get(self.plugin_name)
        assert problem is None, self._says(
            f"the host's load path refuses it (`dranet-cloud plugins` and `serve` stop on "
            f"it too): {problem}"
        )
        assert self.plugin_name in reg.names(), self._says(
            f"not loaded from the {ENTRY_POINT_GROUP!r} entry-point group (loaded: "
            f"{', '.join(reg.names()) or 'none'}); install its distribution (`pip install -e .` "
            "in the plugin's directory), and see the warning logged if it failed to import"
        )
        return reg

    @pytest.fixture()
    def registry(self) -> PluginRegistry:
        return self.load_registry()

    def environment(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> Iterator[ConformanceEnvironment]:
        """Start the plugin's emulator and write its sample host; override if needed."""
        sample = registry.call(
            self.plugin_name, "sample_host", dest=tmp_path / "host", variant=self.sample_variant
        )
        assert sample is not None, self._says(
            f"the sample_host hook returned nothing for variant {self.sample_variant!r}; "
            "implement it (write a fake node with dranet_cloud.testing.HostRootBuilder) or "
            "override environment()"
        )
        roles = registry.roles(self.plugin_name)
        if not registry.implements(self.plugin_name, "emulator"):
            assert not {"cloud", "profile"} & set(roles), self._says(
                f"roles {roles} but no emulator hook; implement it "
                "(dranet_cloud.testing.Emulator) or override environment()"
            )
            yield ConformanceEnvironment({}, sample.root, sample.claim_device)
            return
        emu = registry.call(
            self.plugin_name, "emulator", fixture=sample.fixture, listen="127.0.0.1:0", faults=None
        )
        assert emu is not None, self._says("the emulator hook returned nothing; build one")
        emu.start()
        try:
            yield ConformanceEnvironment(
                dict(emu.env),
                sample.root,
                sample.claim_device,
                own_address_claim=sample.own_address_claim,
                emulator=emu,
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

    def test_loads_through_the_hosts_load_path(self) -> None:
        """Every other check needs the plugin loaded; this one says so once, as a
        failure of its own (the others then error in the ``registry`` fixture)."""
        reg = self.load_registry()
        assert reg.roles(self.plugin_name), self._says("it loads, but with no role")

    def test_roles_are_backed_by_hooks(self, registry: PluginRegistry) -> None:
        roles = registry.roles(self.plugin_name)
        assert roles, self._says(
            "it implements no role's hooks (cloud: instance_properties; profile: "
            "profile_config and release_profile_config; enricher: device_attributes)"
        )
        for role in roles:
            for hook in ROLE_HOOKS.get(role, ("device_attributes",)):
                assert registry.implements(self.plugin_name, hook), self._says(
                    f"role {role} needs hook {hook}, which it does not implement"
                )
        if "cloud" in roles:
            # What docs/plugin-api.md ("What a cloud plugin must implement") lists.
            for hook in CLOUD_REQUIRED:
                assert registry.implements(self.plugin_name, hook), self._says(
                    f"the cloud role needs hook {hook}, which it does not implement"
                )
            if self.has_device_config:
                assert registry.implements(self.plugin_name, "device_config"), self._says(
                    "it implements no device_config hook, and the suite expects one "
                    "(has_device_config = True, the default); a cloud with no claim-independent "
                    "baseline per NIC sets has_device_config = False in the test class"
                )

    def test_no_network_without_local_evidence(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> None:
        empty = tmp_path / "bare-metal"
        (empty / "sys/class/dmi/id").mkdir(parents=True)
        (empty / "sys/class/dmi/id/sys_vendor").write_text("Supermicro\n")
        context = ProviderContext(host_root=HostRoot(empty), env={})
        with record_connections() as attempts:
            evidence = registry.call(self.plugin_name, "local_evidence", context=context)
        assert evidence is None, self._says(
            f"local_evidence took a bare-metal node (DMI sys_vendor=Supermicro) for its "
            f"cloud: expected None, got {evidence!r}"
        )
        assert attempts == [], self._says(
            f"local_evidence connected to {attempts}; it may read only the node's files "
            "(DMI, sysfs through context.host_root) and context.env, never the network"
        )

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
        assert evidence, self._says(
            f"local_evidence does not recognise its own sample host: expected a description "
            f"of the evidence its sample_host writes, got {evidence!r}"
        )
        assert attempts == [], self._says(f"local_evidence connected to {attempts}")

    def test_detected_end_to_end_on_its_sample_node(
        self, registry: PluginRegistry, conformance_env: ConformanceEnvironment
    ) -> None:
        """The host's own auto-detection, every installed plugin taking part, on the
        sample node with the plugin pointed at its running emulator (through the
        emulator's override variables) must choose this plugin: local evidence,
        then ``confirm_environment`` against the emulator.  A ``confirm`` that
        asks the wrong path answers ``none`` here, as it would on every node."""
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin is detected")
        emu = conformance_env.emulator
        seen = emu.request_count if emu is not None else 0
        host = ProviderHost(
            host_root=str(conformance_env.host_root),
            env=conformance_env.env,
            options=conformance_env.options,
            registry=registry,
            ipam=MemoryStore(),
        )
        try:
            result = host.start()
        finally:
            host.close()
        answered = emu.requests()[seen:] if emu is not None else []
        problem = detection_problem(self.plugin_name, result, answered)
        assert problem is None, self._says(problem or "")

    def test_snapshot_knows_the_sample_nodes_nics(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """``known_macs()`` is how the host tells a hot-plugged NIC from a known one."""
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin loads a snapshot")
        inst = started_host.instance(self.plugin_name)
        assert inst is not None, self._says("instance_properties gave the host no snapshot")
        macs = [d.mac for d in started_host.context.host_root.net_devices() if d.mac]
        problem = known_macs_problem(inst.known_macs(), macs)
        assert problem is None, self._says(problem or "")

    def test_attributes_within_kubernetes_limits(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        devices = started_host.context.host_root.net_devices()
        assert devices, self._says("its sample host has no NICs")
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
            assert len(raw) <= MAX_ATTRIBUTES, self._says(
                f"device {dev.label()}: device_attributes returned {len(raw)} attributes; "
                f"a device carries at most {MAX_ATTRIBUTES}, DRANET's own included"
            )
            values = sum(value_count(a) for a in raw.values())
            assert values <= MAX_ATTRIBUTE_VALUES, self._says(
                f"device {dev.label()}: device_attributes returned {values} attribute values "
                f"(a list counts each); a device carries at most {MAX_ATTRIBUTE_VALUES}, "
                "DRANET's own included"
            )
            problems = [attribute_problem(dev.label(), n, a) for n, a in raw.items()]
            bad = [p for p in problems if p is not None]
            assert not bad, self._says("; ".join(bad))
            seen_any |= bool(raw)
        assert seen_any, self._says(
            "no NIC of its sample host got any attribute from device_attributes "
            f"(asked for {', '.join(d.label() for d in devices)})"
        )
        if "enricher" in registry.roles(self.plugin_name):
            # Added on top of whatever cloud is active, here none: the host publishes them.
            published = {name for dev in devices for name in started_host.device_attributes(dev)}
            assert published, self._says(
                "the host published none of the enricher's attributes (all dropped: see "
                "the warnings logged)"
            )

    def test_no_device_exceeds_the_limit_with_dranets_own(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """Every device DRANET would publish on the sample host, PCI-only ones
        included, stays within 32 attributes and 48 attribute values (a list
        counting each) once DRANET's own are counted: a device over either
        gets the node's whole ResourceSlice rejected."""
        root = started_host.context.host_root
        devices = dranet_devices(root)
        assert devices, self._says("its sample host has no devices")
        for dev in devices:
            attrs = started_host.device_attributes(dev)
            budget = started_host.attribute_budget(dev)
            nic = locate(root, dev)
            own = dranet_attributes(root, nic) if nic is not None else []
            clash = sorted(set(attrs) & set(own))
            assert not clash, self._says(
                f"device {dev.label()}: attributes {', '.join(clash)} are DRANET's own; use "
                "the plugin's own domain"
            )
            total = len(attrs) + budget["dranet"]
            assert total <= MAX_ATTRIBUTES, self._says(
                f"{dev.label()}: {len(attrs)} provider + {budget['dranet']} DRANET attributes "
                f"= {total} > {MAX_ATTRIBUTES}"
            )
            values = sum(value_count(a) for a in attrs.values()) + budget["dranet_values"]
            assert values <= MAX_ATTRIBUTE_VALUES, self._says(
                f"{dev.label()}: {values - budget['dranet_values']} provider + "
                f"{budget['dranet_values']} DRANET attribute values = {values} > "
                f"{MAX_ATTRIBUTE_VALUES} (a list attribute counts each of its values)"
            )

    def test_device_configs_validate(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """Every device config passes DRANET's rules (``pkg/apis/validation.go``:
        the interface, routes, rules and neighbors), carries an MTU the kernel
        takes (:data:`.conformance_checks.MAX_MTU`) and is gen2 in Go's shape."""
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin gives device configs")
        devices = started_host.context.host_root.net_devices()
        configs = [(d, started_host.device_config(d)) for d in devices]
        present = [(d, c) for d, c in configs if c is not None]
        if not self.has_device_config:
            assert present == [], self._says(
                "the suite was told the cloud has no device config (has_device_config = False) "
                f"but device_config answered for {', '.join(d.label() for d, _ in present)}"
            )
            return
        assert present, self._says(
            "no NIC of its sample host got a device config (device_config returned None for "
            f"{', '.join(d.label() for d in devices)}); set has_device_config = False in the "
            "test class when the cloud has none"
        )
        for dev, cfg in present:
            assert isinstance(cfg, NetworkConfig), self._says(
                f"device {dev.label()}: device_config returned a {type(cfg).__name__}, "
                "expected a dranet_cloud.wire.models.NetworkConfig"
            )
            problems = config_problems(cfg)
            assert not problems, self._says(
                f"device {dev.label()}: DRANET would refuse its device config "
                f"{cfg.to_wire()}: " + "; ".join(problems)
            )

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
        assert conformance_env.claim_device, self._says(
            "a profile plugin's sample_host names a claim_device (a NIC that can carry an "
            "IPVLAN claim); its SampleHost has none"
        )
        dev = self._nic(started_host, conformance_env.claim_device)
        user = NetworkConfig.model_validate(self.profile_request)
        first = started_host.network_config(dev, "conformance-claim-1", user)
        again = started_host.network_config(dev, "conformance-claim-1", user)
        assert first.to_wire() == again.to_wire(), self._says(
            f"device {dev.label()}: a retried claim got a different answer: first "
            f"{first.to_wire()}, then {again.to_wire()}"
        )
        other = started_host.network_config(dev, "conformance-claim-2", user)
        shared = set(first.interface.addresses or []) & set(other.interface.addresses or [])
        assert not shared, self._says(
            f"device {dev.label()}: two claims got the same addresses {sorted(shared)}"
        )
        for uid, config in (("1", first), ("1", first), ("2", other)):
            assert started_host.release(dev, f"conformance-claim-{uid}", config), self._says(
                f"device {dev.label()}: release of claim conformance-claim-{uid} failed "
                "(a second release of a released claim must succeed too)"
            )
        store = started_host.context.ipam
        left = [a for a in store.list() if a.owner.claim_uid.startswith("conformance-claim")]
        assert left == [], self._says(f"release left allocations behind: {left}")

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
        assert sample is not None, self._says("the sample_host hook returned nothing")
        emu = registry.call(
            self.plugin_name,
            "emulator",
            fixture=sample.fixture,
            listen="127.0.0.1:0",
            faults="html",
        )
        assert emu is not None, self._says("the emulator hook returned nothing")
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
        assert info.value.exit_code == 3, self._says(
            f"a web page in place of metadata: expected exit code 3, got "
            f"{info.value.exit_code}: {info.value}"
        )
        assert served, self._says("the emulator never answered with the portal's page")
        assert emu.url in str(info.value), self._says(
            f"the error does not name the endpoint {emu.url}: {info.value}"
        )

    def test_reads_only_the_node_directories_it_declares(
        self, registry: PluginRegistry, tmp_path: Path
    ) -> None:
        """The sample node cut down to the plugin's ``host_paths`` (and the core's
        ``/sys``) answers every sample request, and gives the same local
        evidence, as the whole node: a deployment mounts exactly those
        directories, so a file read elsewhere would fail there."""
        if "cloud" not in registry.roles(self.plugin_name):
            pytest.skip("only a cloud plugin is served on its own sample node")
        with contextmanager(self.environment)(registry, tmp_path / "whole") as conformance_env:
            declared = required_host_paths(registry, [self.plugin_name])
            paths = sorted({p for ps in declared.values() for p in ps})
            cut = copy_host_paths(conformance_env.host_root, tmp_path / "cut", paths)
            sample = SampleHost(
                conformance_env.host_root,
                "",
                conformance_env.claim_device,
                conformance_env.own_address_claim,
            )
            requests = sample_requests(registry, self.plugin_name, sample)
            answer = {
                root: answers_in_process(
                    registry, self.plugin_name, root, conformance_env.env, requests, detect=False
                )
                for root in (conformance_env.host_root, cut)
            }
            evidence = {
                root: registry.call(
                    self.plugin_name,
                    "local_evidence",
                    context=ProviderContext(host_root=HostRoot(root), env=conformance_env.env),
                )
                for root in (conformance_env.host_root, cut)
            }
        problems = compare(requests, answer[conformance_env.host_root], answer[cut])
        if evidence[cut] != evidence[conformance_env.host_root]:
            problems.append(
                f"local evidence: {evidence[cut]!r}; the whole node gives "
                f"{evidence[conformance_env.host_root]!r}"
            )
        assert not problems, self._says(
            f"on its sample node holding only {', '.join(paths)} (its host_paths hook and the "
            "core's), answers differ from the whole node's; declare every node directory a "
            "hook reads in host_paths:\n" + "\n".join(problems)
        )

    def _nic(self, host: ProviderHost, name: str) -> DeviceIdentifiers:
        found = [d for d in host.context.host_root.net_devices() if d.name == name]
        assert found, self._says(f"its SampleHost names NIC {name}, which its sample node lacks")
        return found[0]

    def _check_own_address_claims(self, host: ProviderHost, nic: str, profile: str) -> None:
        """A profile that gives the NIC its own address: every claim gets that one."""
        dev = self._nic(host, nic)
        user = NetworkConfig.model_validate({"profile": profile})
        first = host.network_config(dev, "conformance-claim-1", user)
        assert first.interface.addresses, self._says(
            f"device {nic}: profile {profile} answered no address"
        )
        again = host.network_config(dev, "conformance-claim-1", user)
        other = host.network_config(dev, "conformance-claim-2", user)
        assert first.to_wire() == again.to_wire() == other.to_wire(), self._says(
            f"device {nic}: profile {profile} gives the NIC its own address, so every claim "
            f"gets the same answer; got {first.to_wire()}, {again.to_wire()}, {other.to_wire()}"
        )
        assert host.release(dev, "conformance-claim-1", first), self._says("release failed")
        assert host.release(dev, "conformance-claim-1", first), self._says(
            "a second release of a released claim failed"
        )

    def test_final_merged_configs_validate(
        self, registry: PluginRegistry, started_host: ProviderHost
    ) -> None:
        """What DRANET (PRs #317/#326) validates is the *final* config:
        ``merge(merge(user, device_config), profile_answer)``.  For every NIC of
        the sample host and two users (no claim config; :attr:`profile_request`,
        an IPVLAN claim), the device config merged with the user's and with
        the profile's answer must pass DRANET's rules (and carry an MTU the
        kernel takes), and every emitted config must be gen2 in Go's shape.  A
        profile may deny a NIC it has nothing for (no range): that is a denial,
        not an invalid config.
        """
        host = started_host
        users = [NetworkConfig(), parse_user_config(self.profile_request)]
        checked = 0
        for i, dev in enumerate(host.context.host_root.net_devices()):
            base = host.device_config(dev)
            if base is not None:
                shape = go_shape_problems(base.to_wire(), f"{dev.label()} device config")
                assert shape == [], self._says("; ".join(shape))
            for j, user in enumerate(users):
                merged = self._dranet_accepts(
                    merge_network_config(user, base), f"{dev.label()}: device config + claim {j}"
                )
                if not merged.profile or not host.capabilities().profile_provider:
                    continue
                uid = f"conformance-final-{i}-{j}"
                try:
                    answer = host.profile_config(dev, uid, merged)
                except ProfileDenied as exc:
                    assert "is invalid" not in exc.message, self._says(
                        f"{dev.label()}: {exc.message}"
                    )
                    continue
                if answer is not None:
                    shape = go_shape_problems(answer.to_wire(), f"{dev.label()} answer")
                    assert shape == [], self._says("; ".join(shape))
                final = self._dranet_accepts(
                    merge_network_config(merged, answer), f"{dev.label()}: final config, claim {j}"
                )
                shape = go_shape_problems(final.to_wire(), f"{dev.label()} final")
                assert shape == [], self._says("; ".join(shape))
                assert host.release(dev, uid, final), self._says(
                    f"{dev.label()}: release of claim {uid} failed"
                )
                checked += 1
        if "profile" in registry.roles(self.plugin_name):
            assert checked, self._says(
                "no NIC of its sample host got a profile answer to check (every claim was "
                "denied, or no device config names a profile)"
            )

    def _dranet_accepts(self, config: NetworkConfig, what: str) -> NetworkConfig:
        """``config`` defaulted as DRANET defaults it; fails naming ``what`` when DRANET
        would refuse it (its rules, or an MTU the kernel does not take)."""
        try:
            defaulted = validate_network_config(config)
        except ConfigInvalid as exc:
            pytest.fail(self._says(f"{what} is invalid: {exc}"))
        mtu = mtu_problem(defaulted.interface.mtu)
        assert mtu is None, self._says(f"{what}: {mtu}")
        return defaulted
