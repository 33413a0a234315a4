"""The node's own Kubernetes Node object, for plugins whose facts live there.

Some environments have no metadata server: CoreWeave CKS publishes a node's
fabric, rack and InfiniBand neighbours as labels on its Node object.  This is
the core's one way to read it, on the same bounded client as leak reclaiming
(:class:`dranet_cloud.kube.KubeClient`).

* The node's name comes from ``--node-name``, else ``NODE_NAME`` (the
  downward-API convention: ``env: [{name: NODE_NAME, valueFrom: {fieldRef:
  {fieldPath: spec.nodeName}}}]``).
* The API from ``--kubeconfig``, else ``KUBECONFIG`` in the host's
  environment, else the pod's service account (RBAC: ``get`` on ``nodes``).
* Nothing is read until a plugin asks (:meth:`NodeSource.get`): a node
  whose plugins never ask needs neither a name nor API access.  A plugin asks
  from ``instance_properties`` with ``fresh=True``, so the object is read
  once at start and again on each refresh, and served from memory between.
* A read retries transient failures (5xx, timeouts, refused connections)
  until its deadline; a missing node, a missing name or bad credentials fail
  at once, naming the fix.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from dranet_cloud.kube.client import KUBECONFIG_ENV, KubeClient, KubeError, KubeNotFound
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable

log = logging.getLogger(__name__)

NODE_NAME_ENV = "NODE_NAME"
_RETRY_FIRST = 0.2
_RETRY_MAX = 2.0


class NodeSource:
    """Reads and caches the Node named by ``node_name`` or ``NODE_NAME``."""

    def __init__(
        self,
        *,
        node_name: str | None,
        kubeconfig: str | None,
        env: Mapping[str, str],
    ) -> None:
        self._node_name = (node_name or env.get(NODE_NAME_ENV) or "").strip() or None
        self._kubeconfig = kubeconfig or env.get(KUBECONFIG_ENV) or None
        self._cached: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def node_name(self) -> str | None:
        return self._node_name

    def configured(self) -> bool:
        """Whether a node name is known (no I/O): the precondition of any read."""
        return self._node_name is not None

    def describe(self) -> str:
        via = self._kubeconfig or "the service account"
        return f"Node {self._node_name or '(unnamed)'} via {via}"

    def get(self, deadline: float, *, fresh: bool = False) -> dict[str, Any]:
        """The Node as Kubernetes JSON; read from the API when ``fresh`` or never read.

        Raises :class:`ConfigError` when there is no node name or API
        configuration, :class:`ProviderUnavailable` (a ``KubeError``) when
        the API gave no usable answer before ``deadline`` seconds.
        """
        with self._lock:
            if self._cached is not None and not fresh:
                return self._cached
        doc = self._read(deadline)
        with self._lock:
            self._cached = doc
        return doc

    def labels(self, deadline: float, *, fresh: bool = False) -> dict[str, str]:
        meta = self.get(deadline, fresh=fresh).get("metadata") or {}
        raw = meta.get("labels") or {}
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    def _read(self, deadline: float) -> dict[str, Any]:
        name = self._node_name
        if name is None:
            raise ConfigError(
                "kubernetes: the node's name is unknown: set NODE_NAME from the downward API "
                "(fieldRef spec.nodeName) in the DaemonSet, or pass --node-name"
            )
        until = time.monotonic() + deadline
        pause = _RETRY_FIRST
        with KubeClient(self._kubeconfig, timeout=max(deadline, 0.1)) as client:
            while True:
                left = until - time.monotonic()
                try:
                    return client.get_node(name, deadline=max(left, 0.05))
                except KubeNotFound as exc:
                    raise ProviderUnavailable(
                        f"kubernetes: there is no Node {name!r} ({exc}); NODE_NAME or "
                        "--node-name must be this node's Kubernetes name"
                    ) from exc
                except KubeError as exc:
                    if exc.status in (400, 401, 403) or until - time.monotonic() <= pause:
                        raise
                    log.info("kubernetes: reading Node %s failed, retrying: %s", name, exc)
                    time.sleep(pause)
                    pause = min(pause * 2, _RETRY_MAX)
