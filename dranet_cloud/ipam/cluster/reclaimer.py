"""One reclaimer for what no node owns: the IPAddress objects of nodes that vanished.

A node reclaims its own objects (its journal's releases, its own orphans:
:meth:`~.allocator.ClusterIpam.cluster_reclaim`).  A node that was deleted,
reinstalled or lost its disk cannot, and if every node swept every other
node's objects, each would list the whole project cluster-wide on every run.
So one sidecar at a time does it: the holder of the ``coordination.k8s.io/v1``
Lease :data:`LEASE_NAME` (:class:`~dranet_cloud.kube.lease.LeaseElector`,
client-go's timings: lease 15 s, renew 10 s, retry 2 s).  Only the holder:

* watches Nodes (one metadata-only :class:`~dranet_cloud.kube.informer.Informer`);
* on taking the lease, lists this project's objects once (the managed-by
  label) and keeps those whose node (label, else annotation) has no Node;
* on a Node's DELETED event, lists that node's objects by its label;
* every ``interval``, deletes (UID precondition) a kept object only when its
  node has been absent for at least the grace period, a GET of the Node
  still answers 404, and its claim is proven gone (GET of the parentRef's
  namespace/name: 404 or another UID; :mod:`.reclaim`); otherwise
  it is kept and checked again.

A node whose Node object exists is never swept by another.  Losing the lease
stops the work and drops what was kept: the next holder finds it again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dranet_cloud.ipam.cluster.api import MANAGED_BY, MANAGED_BY_LABEL, NODE_LABEL
from dranet_cloud.ipam.cluster.reclaim import list_managed, node_of, sweep_ip_addresses
from dranet_cloud.ipam.node.reclaim import ClaimSource
from dranet_cloud.kube import KubeError, KubeNotFound
from dranet_cloud.kube.client import KubeClient
from dranet_cloud.kube.informer import NODES, Informer
from dranet_cloud.kube.lease import LeaseElector
from dranet_cloud.toolkit.logsafe import safe

log = logging.getLogger(__name__)

LEASE_NAME = "dranet-cloud-ipam-reclaimer"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
DEFAULT_LEASE_NAMESPACE = "kube-system"
DEFAULT_INTERVAL = 30.0
MAX_KEPT = 100_000  # objects of vanished nodes kept for a later check
MAX_PENDING_NODES = 1024


def lease_namespace(flag: str | None, environ: Any = None) -> str:
    """``--lease-namespace``, else the pod's namespace (POD_NAMESPACE), else kube-system."""
    env = os.environ if environ is None else environ
    return flag or env.get(POD_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE


@dataclass
class _Kept:
    obj: Any
    node: str
    absent_since: float  # time.monotonic() when this holder first saw the node absent


@dataclass
class ReclaimerStats:
    """Counters for /metrics and the benchmarks (never reset)."""

    terms: int = 0  # times this sidecar took the lease
    lists: int = 0  # lists of objects (once per term, once per deleted node)
    sweeps: int = 0  # checks of the kept objects
    deleted: int = 0
    kept: int = 0  # objects waiting for their grace or proof, at the last sweep
    failures: int = 0
    errors: list[str] = field(default_factory=list)


class Reclaimer:
    """The Lease candidate on this node, and the reclaiming it does while it holds it."""

    def __init__(
        self,
        client: KubeClient,
        source: ClaimSource,
        *,
        identity: str,
        namespace: str,
        grace: timedelta,
        interval: float = DEFAULT_INTERVAL,
        name: str = LEASE_NAME,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        candidate_poll: float | None = None,
        node_jitter: float = 0.0,
        make_node_informer: Callable[..., Informer] | None = None,
    ) -> None:
        self.client = client
        self.source = source
        self.identity = identity
        self.grace = grace
        self.interval = interval
        self.stats = ReclaimerStats()
        self._make_nodes = make_node_informer or self._node_informer
        self._node_jitter = node_jitter
        self._lock = threading.Lock()
        self._kept: dict[str, _Kept] = {}
        self._pending_nodes: list[str] = []
        self._nodes: Informer | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._term = 0  # bumped at each start and stop of holding
        self._thread: threading.Thread | None = None
        self.elector: LeaseElector = LeaseElector(
            client,
            namespace=namespace,
            name=name,
            identity=identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            on_started=self._started,
            on_stopped=self._stopped,
            candidate_poll=candidate_poll,
            candidates=self._candidate_count,
        )

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> Reclaimer:
        self._thread = threading.Thread(target=self._run, name="ipam-reclaimer", daemon=True)
        self._thread.start()
        self.elector.start()
        return self

    def stop(self) -> None:
        """Give the lease back (a successor need not wait it out) and stop (bounded)."""
        self._stop.set()
        self._wake.set()
        self.elector.stop()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None
        self._drop_nodes()

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader

    def state(self) -> dict[str, Any]:
        """What /health shows: who holds the lease, and this node's part."""
        with self._lock:
            kept = len(self._kept)
        return {
            "lease": f"{self.elector.namespace}/{self.elector.name}",
            "holder": self.elector.holder,
            "held_here": self.elector.is_leader,
            "kept": kept,
            "last_error": self.elector.last_error,
        }

    # -- the elector's callbacks (its thread: quick) ---------------------------------

    def _started(self) -> None:
        with self._lock:
            self._term += 1
            self._kept.clear()
            self._pending_nodes.clear()
        self.stats.terms += 1
        log.info(
            "ipam reclaimer: %s holds the lease; reclaiming vanished nodes' objects", self.identity
        )
        self._wake.set()

    def _stopped(self) -> None:
        with self._lock:
            self._term += 1
            self._kept.clear()
            self._pending_nodes.clear()
        log.info("ipam reclaimer: %s no longer holds the lease", self.identity)
        self._wake.set()

    def _node_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind != "DELETED":
            return
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            return
        with self._lock:
            if len(self._pending_nodes) < MAX_PENDING_NODES and name not in self._pending_nodes:
                self._pending_nodes.append(name)
        self._wake.set()

    # -- the work (its own thread) ---------------------------------------------------

    def _candidate_count(self) -> int:
        """How many sidecars may compete for the lease: one per Node the holder sees
        (written into the Lease so that candidates space their polls by it)."""
        nodes = self._nodes
        return len(nodes.keys()) if nodes is not None and nodes.synced else 0

    def _node_informer(self, **kwargs: Any) -> Informer:
        return Informer(self.client, NODES, **kwargs)

    def _drop_nodes(self) -> None:
        nodes, self._nodes = self._nodes, None
        if nodes is not None:
            nodes.stop()

    def _run(self) -> None:
        term_seen = 0
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                term = self._term
            try:
                if not self.elector.is_leader:
                    self._drop_nodes()
                    term_seen = term
                    continue
                if term != term_seen or self._nodes is None:
                    term_seen = term
                    self._take_over(term)
                self._list_deleted_nodes(term)
                self._sweep(term)
            except Exception as exc:  # never end the loop: the next wake tries again
                self.stats.failures += 1
                log.warning("ipam reclaimer: %s: %s", type(exc).__name__, safe(exc))

    def _take_over(self, term: int) -> None:
        """A new term: watch Nodes, then one list of the project's objects."""
        self._drop_nodes()
        self._nodes = self._make_nodes(
            metadata_only=True,
            name="nodes (ipam reclaimer)",
            on_event=self._node_event,
            initial_jitter=self._node_jitter,
        ).start()
        if not self._nodes.wait_synced(60.0):
            raise RuntimeError(f"the watch of Nodes did not sync ({self._nodes.last_error})")
        self.stats.lists += 1
        objects = list_managed(self.client, f"{MANAGED_BY_LABEL}={MANAGED_BY}", cached=True)
        self._keep_absent(objects, term)

    def _list_deleted_nodes(self, term: int) -> None:
        with self._lock:
            names, self._pending_nodes = self._pending_nodes, []
        for name in names:
            self.stats.lists += 1
            self._keep_absent(list_managed(self.client, f"{NODE_LABEL}={name}", cached=True), term)

    def _keep_absent(self, objects: list[Any], term: int) -> None:
        nodes = self._nodes
        if nodes is None:
            return
        present = set(nodes.keys())
        now = time.monotonic()
        with self._lock:
            if term != self._term:
                return
            for obj in objects:
                node = node_of(obj)
                if node is None or node in present or node == self.identity:
                    continue
                if obj.name not in self._kept and len(self._kept) < MAX_KEPT:
                    self._kept[obj.name] = _Kept(obj, node, now)

    def _sweep(self, term: int) -> None:
        """Delete the kept objects whose node stayed absent and whose claim is gone."""
        nodes = self._nodes
        if nodes is None:
            return
        present = set(nodes.keys())
        grace = self.grace.total_seconds()
        now = time.monotonic()
        with self._lock:
            if term != self._term:
                return
            for name in [n for n, k in self._kept.items() if k.node in present]:
                del self._kept[name]  # the node is back (or never left): its own
            ready = [k for k in self._kept.values() if now - k.absent_since >= grace]
            self.stats.kept = len(self._kept)
        if not ready:
            return
        self.stats.sweeps += 1
        gone_nodes: dict[str, bool] = {}
        for node in {k.node for k in ready}:
            try:
                self.client.get_node(node, deadline=10.0)
                gone_nodes[node] = False
            except KubeNotFound:
                gone_nodes[node] = True
            except KubeError as exc:
                log.info("ipam reclaimer: cannot read Node %s (%s); kept", node, safe(exc))
                gone_nodes[node] = False
        objects = [k.obj for k in ready if gone_nodes.get(k.node)]
        if not objects or not self.elector.is_leader:
            return
        result = sweep_ip_addresses(self.client, self.source, grace=self.grace, objects=objects)
        with self._lock:
            for name in result.deleted:
                self._kept.pop(name, None)
            self.stats.kept = len(self._kept)
        self.stats.deleted += len(result.deleted)
        if result.deleted or result.failed:
            log.info("ipam reclaimer: %s (vanished nodes)", result.summary())
