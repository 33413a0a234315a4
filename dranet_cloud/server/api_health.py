"""The Kubernetes API that ``serve`` depends on: checked at start, re-checked until it answers.

In cluster scope every new address is an ``IPAddress`` object, and with
``--gc-kubernetes`` every collection asks the API; a kubeconfig pointing at
nothing, or credentials the API refuses, would otherwise start a sidecar
that looks healthy while every new claim gets 500.  So at start one GET of
the ``kube-system`` Namespace (a deadline of :data:`START_DEADLINE`) tells:

* it answers: the store's cluster is checked (:mod:`..ipam.cluster_identity`):
  recorded when the store has none, a start refused in cluster scope when it
  is another (exit 2), an ERROR and a ``/health`` warning with
  ``--gc-kubernetes`` alone;
* it does not answer (unreachable, a timeout, 401 or 403): an ERROR log
  naming the kubeconfig, its context and the fix, a warning in ``/health``,
  ``dranet_cloud_kubernetes_api_ok 0`` on ``/metrics``, and a daemon thread
  asking again with a jittered back-off of :data:`BACKOFF` seconds until it
  answers; then the warning goes and an INFO line says so.

``/health`` stays 200 meanwhile (docs/byodp-server.md, "The Kubernetes API
at start-up", says why: DRANET asks only at its own start, and a failing
profile provider stops it).  Until the identity is confirmed, the cluster
scope's creates and deletes wait for it (:class:`GatedApi`): a claim's
worker thread checks once more itself, so a claim never reserves an address
in a cluster nobody has compared with the journal.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.cluster.identity import check_cluster
from dranet_cloud.ipam.node.reclaim import ClusterMismatch, api_where
from dranet_cloud.kube import KubeError
from dranet_cloud.kube.ipaddress import IPAddressObject
from dranet_cloud.toolkit.logsafe import safe

__all__ = ["BACKOFF", "START_DEADLINE", "ApiCheck", "ApiHealth", "GatedApi"]

log = logging.getLogger(__name__)

START_DEADLINE = 3.0  # seconds for the check at start (DRANET's own call budget is 10 s)
BACKOFF = (0.5, 30.0)  # first and longest wait between re-checks, jittered


@dataclass(frozen=True)
class ApiCheck:
    """What ``serve`` asked for: the API is needed by cluster scope and/or ``--gc-kubernetes``."""

    cluster_scope: bool
    gc_kubernetes: bool
    adopt: bool = False

    @property
    def what(self) -> str:
        return "--ipam-scope cluster" if self.cluster_scope else "--gc-kubernetes"


class IdentityUnconfirmed(KubeError):
    """A create or delete refused before it was sent: the API's cluster is not confirmed."""

    @property
    def transient(self) -> bool:
        return False  # nothing was sent: the caller may forget its intent


def _fix(exc: KubeError, what: str) -> str:
    status = exc.status
    if status == 401:
        return (
            "the API refused the credentials (401): renew the kubeconfig's token or "
            "certificate, or the pod's service account token"
        )
    if status == 403:
        return (
            "the API forbids it (403): grant get on the kube-system Namespace (and the verbs "
            f"{what} needs) to this identity, as deploy/sidecar/rbac.yaml does"
        )
    return (
        "check that the kubeconfig's server is this node's API server and reachable from the "
        "node (in a pod: KUBERNETES_SERVICE_HOST and the service account), or pass the right "
        "--kubeconfig"
    )


class ApiHealth:
    """The API's state for ``serve``: start-up check, background re-checks, warnings, gauge.

    ``client`` is a :class:`~dranet_cloud.kube.KubeClient` (anything with
    ``cluster_uid``, ``source`` and ``context_name``).  ``warnings()`` is
    read on the event loop and only reads an attribute.
    """

    def __init__(
        self,
        store: IpamStore,
        client: Any,
        check: ApiCheck,
        *,
        start_deadline: float = START_DEADLINE,
        backoff: tuple[float, float] = BACKOFF,
    ) -> None:
        self.store = store
        self.client = client
        self.check = check
        self.start_deadline = start_deadline
        self.backoff = backoff
        self.ok = False
        self.mismatch = False
        self.problem: str | None = "the Kubernetes API was not checked yet"
        self.failures = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_server(cls, store: IpamStore, check: ApiCheck, gc_source: Any) -> ApiHealth:
        """The API of the store (cluster scope) or of the collector's claim source."""
        client = getattr(store, "api", None) if check.cluster_scope else None
        if client is None:
            client = getattr(gc_source, "client", None)
        if client is None:
            raise ValueError("serve: no Kubernetes client to check")
        health = cls(store, client, check)
        if check.cluster_scope and hasattr(store, "api"):
            # Creates and deletes wait for the identity (ClusterIpam.api is public).
            setattr(store, "api", GatedApi(client, health))  # noqa: B010
        return health

    # --- what /health and /metrics read --------------------------------------------------

    def warnings(self) -> Sequence[str]:
        problem = self.problem
        return () if problem is None else (problem,)

    def metrics(self) -> Collector:
        return _ApiGauge(self)

    # --- checks ------------------------------------------------------------------------------

    def check_at_start(self) -> None:
        """One check with a short deadline; raises :class:`ClusterMismatch` in cluster scope."""
        try:
            self._check(self.start_deadline, at_start=True)
        except ClusterMismatch:
            if self.check.cluster_scope:
                raise
        except KubeError:
            pass  # logged and kept as the warning; the thread asks again

    def start(self) -> ApiHealth:
        """Re-check in a daemon thread until the API answers (nothing to do when it did)."""
        if self.ok or self.mismatch or self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._loop, name="kube-api-check", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.client_timeout() + 1.0)

    def client_timeout(self) -> float:
        return float(getattr(self.client, "timeout", 5.0))

    def require(self, deadline: float | None) -> None:
        """For a cluster-scope create or delete (a worker thread): the identity, confirmed."""
        if self.ok:
            return
        if not self.mismatch:
            wait = self.start_deadline if deadline is None else max(deadline, 0.1)
            with contextlib.suppress(KubeError, ClusterMismatch):  # kept as self.problem
                self._check(wait, at_start=False)
            if self.ok:
                return
        raise IdentityUnconfirmed(
            f"ipam (cluster scope): nothing was reserved: {self.problem or 'the API is unchecked'}"
        )

    def _loop(self) -> None:
        low, high = self.backoff
        delay = low
        while not self.ok and not self.mismatch:
            if self._stop.wait(random.uniform(delay / 2, delay)):
                return
            try:
                self._check(self.client_timeout(), at_start=False)
            except ClusterMismatch:
                return  # logged; nothing a re-check can change
            except KubeError:
                delay = min(delay * 2, high)

    def _check(self, deadline: float, *, at_start: bool) -> None:
        """One GET of the cluster's identity under the lock (one check at a time)."""
        if not self._lock.acquire(timeout=deadline):
            raise KubeError("another check of the Kubernetes API is still running")
        try:
            if self.ok or self.mismatch:
                return
            try:
                found = check_cluster(
                    self.store,
                    self.client,
                    what=self.check.what,
                    adopt=self.check.adopt,  # the first check that answers (once)
                    deadline=deadline,
                )
            except ClusterMismatch as exc:
                self.mismatch = True
                self.problem = self._mismatch(exc)
                log.error("%s", self.problem)
                raise
            except KubeError as exc:
                self._failed(exc, at_start=at_start)
                raise
            was_failing = self.failures > 0
            self.ok, self.problem = True, None
            if was_failing:
                log.info(
                    "serve (%s): the Kubernetes API (%s) answers again after %d failed "
                    "check(s); it is cluster %s, the IPAM store's; the /health warning is cleared",
                    self.check.what,
                    api_where(self.client),
                    self.failures,
                    found.uid,
                )
            else:
                log.info(
                    "serve (%s): the Kubernetes API (%s) answers: cluster %s, the IPAM store's",
                    self.check.what,
                    api_where(self.client),
                    found.uid,
                )
        finally:
            self._lock.release()

    def _mismatch(self, exc: ClusterMismatch) -> str:
        if self.check.cluster_scope:
            return f"{exc}; refusing cluster-scope allocations until then"
        return (
            f"{exc}; until then every --gc-kubernetes collection frees nothing (claims are "
            "still served)"
        )

    def _failed(self, exc: KubeError, *, at_start: bool) -> None:
        self.failures += 1
        unauthorized = exc.status in (401, 403)
        needs = [
            "new claims in cluster scope get 500 (the kubelet retries them)"
            if self.check.cluster_scope
            else "",
            "leak reclaiming frees nothing" if self.check.gc_kubernetes else "",
        ]
        problem = (
            f"the Kubernetes API is {'refusing this client' if unauthorized else 'unreachable'} "
            f"({api_where(self.client)}): "
            f"{safe(exc, 500)}; {' and '.join(n for n in needs if n)} until it answers; fix: "
            f"{_fix(exc, self.check.what)}; re-checked in the background"
        )
        first = self.problem is None or self.failures == 1
        changed = problem != self.problem
        self.problem = problem
        if at_start or first:
            log.error("serve (%s): %s", self.check.what, problem)
        elif changed:
            log.warning("serve (%s): still failing: %s", self.check.what, problem)


class _ApiGauge(Collector):
    """``dranet_cloud_kubernetes_api_ok``: 1 once the API answered and is the store's cluster."""

    def __init__(self, health: ApiHealth) -> None:
        self.health = health

    def collect(self) -> Iterator[Metric]:
        ok = GaugeMetricFamily(
            "dranet_cloud_kubernetes_api_ok",
            "1 when the Kubernetes API serve depends on (cluster scope, --gc-kubernetes) "
            "answered and is the IPAM store's cluster; 0 while /health warns about it",
        )
        ok.add_metric([], 1 if self.health.ok else 0)
        failed = CounterMetricFamily(
            "dranet_cloud_kubernetes_api_failed_checks",
            "checks of the Kubernetes API that failed since start",
        )
        failed.add_metric([], self.health.failures)
        yield from (ok, failed)


class GatedApi:
    """The cluster scope's API calls, with creates and deletes held until the identity is
    confirmed (:meth:`ApiHealth.require`); reads go straight through."""

    def __init__(self, inner: Any, health: ApiHealth) -> None:
        self.inner = inner
        self.health = health

    def create_ip_address(self, *args: Any, deadline: float | None = None) -> IPAddressObject:
        self.health.require(deadline)
        obj: IPAddressObject = self.inner.create_ip_address(*args, deadline=deadline)
        return obj

    def delete_ip_address(self, *args: Any, deadline: float | None = None) -> Any:
        self.health.require(deadline)
        return self.inner.delete_ip_address(*args, deadline=deadline)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # reads, and anything else the store may ask
