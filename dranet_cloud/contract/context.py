"""What the host hands to every hook: where the node's files are, options,
the node-local IPAM store, and the environment to read overrides from.

Plugins read endpoint overrides from ``context.env`` (not ``os.environ``
directly) so tests and the CLI can point one host at an emulator without
touching the process environment.  :class:`InstanceSnapshot` lives in
:mod:`dranet_cloud.contract.snapshot` and is importable from here too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from dranet_cloud.contract.snapshot import InstanceSnapshot
from dranet_cloud.ipam import IpamStore, MemoryStore
from dranet_cloud.kube.node import NodeSource
from dranet_cloud.node.hostroot import HostRoot

__all__ = [
    "InstanceSnapshot",
    "ProviderContext",
    "ProviderOptions",
    "SampleHost",
]


@dataclass
class ProviderOptions:
    """Knobs shared by all plugins; plugin-specific ones go in ``settings``.

    ``settings`` keys are ``<plugin>.<name>`` (``aws.allow_imdsv1``,
    ``webhook.ca_bundle``); values are strings as they come from flags or
    environment.
    """

    webhook_url: str | None = None
    metadata_deadline: float = 15.0
    probe_timeout: float = 1.0
    detect_deadline: float = 3.0
    request_timeout: float = 2.0
    # The fewest attributes DRANET is assumed to publish per device (see
    # dranet_cloud.host.attribute_budget); 0 = exactly what its sysfs count says.
    dranet_attribute_floor: int = 0
    # The node's Kubernetes name (--node-name; else NODE_NAME) and API config
    # (--kubeconfig; else KUBECONFIG, else the service account), for plugins
    # that read their facts from the Node object (context.node).
    node_name: str | None = None
    kubeconfig: str | None = None
    settings: dict[str, str] = field(default_factory=dict)

    def setting(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)


class ProviderContext:
    """Everything a hook may use besides its own arguments.

    Contexts compare by identity: each holds a lock of its own.
    """

    def __init__(
        self,
        host_root: HostRoot | None = None,
        options: ProviderOptions | None = None,
        env: Mapping[str, str] | None = None,
        ipam_factory: Callable[[], IpamStore] | None = None,
        explicit_roles: dict[str, frozenset[str]] | None = None,
    ) -> None:
        self.host_root = HostRoot() if host_root is None else host_root
        self.options = ProviderOptions() if options is None else options
        self.env: Mapping[str, str] = dict(os.environ) if env is None else env
        self.ipam_factory = ipam_factory
        # plugin name -> roles the operator asked of it by name.  The host refuses
        # an explicit role a plugin does not serve; plugins may also be stricter.
        self.explicit_roles: dict[str, frozenset[str]] = (
            {} if explicit_roles is None else explicit_roles
        )
        self._ipam: IpamStore | None = None
        self._ipam_lock = threading.Lock()
        self._node: NodeSource | None = None

    def __repr__(self) -> str:
        return (
            f"ProviderContext(host_root={self.host_root!r}, options={self.options!r}, "
            f"env={self.env!r}, ipam_factory={self.ipam_factory!r}, "
            f"explicit_roles={self.explicit_roles!r})"
        )

    @property
    def ipam_if_open(self) -> IpamStore | None:
        """The store if something already opened it; never opens one (health checks)."""
        return self._ipam

    @property
    def ipam(self) -> IpamStore:
        """The node's IPAM store, opened on first use (only profile roles need it).

        Opened under a lock: two first requests racing in a server must share
        one store, or two in-memory pools could hand out the same address.
        """
        store = self._ipam
        if store is not None:
            return store
        with self._ipam_lock:
            if self._ipam is None:
                if self.ipam_factory is None:
                    self._ipam = MemoryStore()
                else:
                    self._ipam = self.ipam_factory()
            return self._ipam

    @property
    def node(self) -> NodeSource:
        """This node's Kubernetes Node object (see :mod:`dranet_cloud.kube.node`).

        Nothing is read until a plugin calls ``context.node.get(deadline,
        fresh=...)``: plugins that never ask need neither a node name nor API
        access.
        """
        if self._node is None:
            with self._ipam_lock:
                if self._node is None:
                    self._node = NodeSource(
                        node_name=self.options.node_name,
                        kubeconfig=self.options.kubeconfig,
                        env=self.env,
                    )
        return self._node


class SampleHost(NamedTuple):
    """A fake host root a plugin ships for demos and tests."""

    root: Path
    description: str
    claim_device: str | None = None  # a NIC that can carry an IPVLAN claim
    # (NIC, profile) for a profile that gives the NIC an address of its own
    # (Azure's InfiniBand NICs): the same address for every claim of it.
    own_address_claim: tuple[str, str] | None = None
    # Every NIC that profile serves on this node (Azure: ib0-ib7), for tests
    # that send each claim DRANET could send; empty: the one NIC above.
    own_address_nics: tuple[str, ...] = ()
    # The emulator fixture this node matches, when it is not the plugin's
    # default one (a variant that is another instance type).
    fixture: Path | None = None
