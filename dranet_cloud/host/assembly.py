"""A :class:`ProviderHost` built from a typed configuration: the one way to build one.

The CLI translates its flags into a :class:`HostConfig` (``cli/common.py``);
the test kit writes one directly.  Both get the host ``serve`` runs: the
installed plugins, each ``--set`` checked, ``local-ipam`` routed its profile
when ranges are given, and the node's IPAM store opened when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dranet_cloud.contract.context import ProviderOptions
from dranet_cloud.contract.settings import check_settings
from dranet_cloud.host.attribute_limits import value_count
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import PROFILE_FROM_CLOUD, ProviderHost
from dranet_cloud.ipam import IpamStore, open_store, resolve_db_path
from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam
from dranet_cloud.node.nic import local_nics
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.wire.models import DeviceIdentifiers


@dataclass(frozen=True)
class IpamConfig:
    """Node-local IPAM: local-ipam's ranges and the store, opened when a claim needs it."""

    ranges: tuple[str, ...] = ()  # local-ipam's [SELECTOR=]RANGE specs; none: no local-ipam
    profile: str = PLUGIN_NAME  # the profile whose claims local-ipam serves
    allow_static_outside_ranges: bool = False
    db: str | None = None  # None: $DRANET_CLOUD_IPAM_DB, else the default path
    memory: bool = False  # a MemoryStore the operator asked for (lost at exit)
    create: bool = False  # make the missing directory, replace a file no store can trust
    cluster: tuple[str, str | None] | None = None  # cluster scope: (node name, kubeconfig)
    watch: bool = False  # cluster scope: the ranges' views are watches (serve)
    watch_jitter_s: float = 0.0
    node_claims: Any = None  # serve's view of this node's pods: names gen1 UIDs too


@dataclass(frozen=True)
class HostConfig:
    """DRANET's three knobs, the node, the plugins' options and the IPAM store."""

    cloud_provider_hint: str = ""
    profile_provider: str = PROFILE_FROM_CLOUD
    host_root: str | None = None  # None: $DRANET_CLOUD_HOST_ROOT, else /
    probe_metadata: bool = False
    options: ProviderOptions = field(default_factory=ProviderOptions)
    env: Mapping[str, str] | None = None  # None: the process environment
    load_entry_points: bool = True  # False: no installed plugin (a test of local-ipam alone)
    disabled_plugins: tuple[str, ...] = ()  # entry-point names pluggy is told to block
    ipam: IpamConfig | None = None  # None: an in-memory store, opened if a plugin asks


def build_host(
    config: HostConfig, *, start: bool = True, check_selectors: bool = True
) -> ProviderHost:
    """The host ``config`` describes (started unless ``start`` is False).

    ``check_selectors``: warn now about range selectors that match no NIC;
    ``serve`` leaves it to its server, after its first log line.
    """
    registry = PluginRegistry(
        load_entry_points=config.load_entry_points, blocked=config.disabled_plugins
    )
    check_settings(registry, config.options.settings)
    routes: dict[str, str] = {}
    local_ipam, ipam = None, config.ipam
    if ipam is not None and ipam.ranges:
        local_ipam = LocalIpamPlugin(
            LocalIpamConfig.parse(ipam.ranges),
            allow_static_outside_ranges=ipam.allow_static_outside_ranges,
        )
        registry.register(local_ipam, PLUGIN_NAME, distribution="dranet-cloud (built-in)")
        routes[ipam.profile] = PLUGIN_NAME
    host = ProviderHost(
        cloud_provider_hint=config.cloud_provider_hint,
        profile_provider=config.profile_provider,
        host_root=config.host_root,
        probe_metadata=config.probe_metadata,
        options=config.options,
        env=config.env,
        ipam_factory=None if ipam is None else ipam_factory(ipam),
        registry=registry,
        profile_routes=routes,
    )
    if local_ipam is not None and check_selectors:  # said before any claim
        local_ipam.selectors.check(host.context.host_root)
    if start:
        host.start()
    return host


def ipam_factory(ipam: IpamConfig) -> Callable[[], IpamStore]:
    """A lazy opener for the node's IPAM store.

    A missing parent directory is refused unless ``create``: a typo in the
    path would otherwise start a fresh, empty database next to the real one
    and hand out addresses the real one holds.
    """

    def opener() -> IpamStore:
        path = resolve_db_path(ipam.db)
        if not ipam.memory:
            parent = Path(path).parent
            if not parent.is_dir():
                if not ipam.create:
                    raise ConfigError(
                        f"--ipam-db {path}: the directory {parent} does not "
                        "exist; fix the path (a typo would split the node's IPAM state), or pass "
                        "--ipam-db-create to create it"
                    )
                try:
                    parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ConfigError(
                        f"--ipam-db-create: cannot create {parent} ({exc}); pick a writable "
                        "--ipam-db PATH"
                    ) from None
        if ipam.cluster is None:
            return open_store(ipam.db, memory=ipam.memory, create=ipam.create)
        node, kubeconfig = ipam.cluster
        store = open_cluster_ipam(
            path,
            node=node,
            kubeconfig=kubeconfig,
            create=ipam.create,
            watch=ipam.watch,
            initial_jitter=ipam.watch_jitter_s,
            claims=ipam.node_claims,
        )
        if ipam.watch:  # each range's view, started now
            store.start(LocalIpamConfig.parse(ipam.ranges).all_ranges())
        return store

    return opener


def describe_document(
    host: ProviderHost, devices: list[DeviceIdentifiers] | None = None
) -> dict[str, Any]:
    """What ``describe -o json`` prints for ``devices`` (default: every local NIC)."""
    if devices is None:
        devices = [nic.identifiers() for nic in local_nics(host.context.host_root)]
    out: dict[str, Any] = {
        "provider": host.cloud or "none",
        "instance": inst.summary() if (inst := host.instance()) is not None else None,
        "devices": [],
    }
    for dev in devices:
        config = host.device_config(dev)
        attributes = host.device_attributes(dev)
        out["devices"].append(
            {
                "device": dev.to_wire(),
                "attributes": {k: v.to_wire() for k, v in attributes.items()},
                "config": config.to_wire() if config is not None else None,
                "budget": {
                    **host.attribute_budget(dev),
                    "used": len(attributes),
                    "values_used": sum(value_count(a) for a in attributes.values()),
                },
            }
        )
    return out
