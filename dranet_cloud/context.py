"""What the host hands to every hook: where the node's files are, options,
the node-local IPAM store, and the environment to read overrides from.

Plugins read endpoint overrides from ``context.env`` (not ``os.environ``
directly) so tests and the CLI can point one host at an emulator without
touching the process environment.

Nothing here imports pydantic: auto-detection builds a context on every
``dranet-cloud detect`` and node start.  :class:`InstanceSnapshot` moved to
:mod:`dranet_cloud.snapshot` and is still importable from here (loaded on
first access).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

from .hostroot import HostRoot
from .records import FieldRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from .ipam import IpamStore
    from .kube.node import NodeSource
    from .snapshot import InstanceSnapshot as InstanceSnapshot


class ProviderOptions(FieldRecord):
    """Knobs shared by all plugins; plugin-specific ones go in ``settings``.

    ``settings`` keys are ``<plugin>.<name>`` (``aws.allow_imdsv1``,
    ``webhook.ca_bundle``); values are strings as they come from flags or
    environment.

    A plain class rather than a dataclass: every ``dranet-cloud detect``
    builds one, and importing :mod:`dataclasses` (with :mod:`inspect`) costs
    more than a bare-metal node's whole detection.  Equality and repr are by
    field, as a dataclass's would be.
    """

    _FIELDS = (
        "webhook_url",
        "metadata_deadline",
        "probe_timeout",
        "detect_deadline",
        "request_timeout",
        "dranet_attribute_floor",
        "node_name",
        "kubeconfig",
        "settings",
    )

    def __init__(
        self,
        webhook_url: str | None = None,
        metadata_deadline: float = 15.0,
        probe_timeout: float = 1.0,
        detect_deadline: float = 3.0,
        request_timeout: float = 2.0,
        dranet_attribute_floor: int = 0,
        node_name: str | None = None,
        kubeconfig: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.webhook_url = webhook_url
        self.metadata_deadline = metadata_deadline
        self.probe_timeout = probe_timeout
        self.detect_deadline = detect_deadline
        self.request_timeout = request_timeout
        # The fewest attributes DRANET is assumed to publish per device (see
        # dranet_cloud.budget); 0 = exactly what its sysfs count says.
        self.dranet_attribute_floor = dranet_attribute_floor
        # The node's Kubernetes name (--node-name; else NODE_NAME) and API config
        # (--kubeconfig; else KUBECONFIG, else the service account), for plugins
        # that read their facts from the Node object (context.node).
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.settings: dict[str, str] = {} if settings is None else settings

    def setting(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)


class ProviderContext:
    """Everything a hook may use besides its own arguments.

    A plain class for the reason :class:`ProviderOptions` is one; contexts
    compare by identity (the dataclass they replace held a lock of their own,
    so two were never equal either).
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
                    from .ipam import MemoryStore

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
            from .kube.node import NodeSource

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


def __getattr__(name: str) -> Any:
    """Load ``InstanceSnapshot`` (pydantic) only when someone asks for it."""
    if name == "InstanceSnapshot":
        from .snapshot import InstanceSnapshot

        return InstanceSnapshot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
