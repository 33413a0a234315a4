"""Prometheus metrics for ``dranet-cloud serve`` (``GET /metrics``).

What an operator needs to see before DRANET's claims start failing:

* ``dranet_cloud_requests_total{path,status}`` and
  ``dranet_cloud_request_duration_seconds{path}``: every BYODP call (paths
  outside the protocol are counted as ``other``, so a scanner cannot grow the
  label set);
* ``dranet_cloud_ipam_pool_size|used|free{range}`` for each local-ipam range
  and ``dranet_cloud_ipam_allocations{pool}`` for every pool in the store,
  from the counters the store keeps as its commits land
  (:mod:`dranet_cloud.ipam.node.pool_counts`): a scrape never reads the store, never
  waits for its lock, and costs the same at 30 allocations or 30,000.  When
  another process changed the file (``ipam gc`` by hand), a thread off the
  event loop recounts it, at most every :data:`RECOUNT_INTERVAL` seconds;
* ``dranet_cloud_gc_runs_total`` and ``dranet_cloud_gc_freed_total`` from the
  periodic collector;
* ``dranet_cloud_claims_unseen_nic_total``: claims for a NIC (MAC) the node
  does not show, still answered (the host warns once per NIC);
* ``dranet_cloud_plugin_errors_total{plugin,hook,error}``: every exception a
  plugin raised (metadata server unreachable, webhook down, denials), seen
  through pluggy's hook-call monitoring, so no plugin needs code for it;
* ``dranet_cloud_server_connections``, ``dranet_cloud_server_buffered_bytes``
  and ``dranet_cloud_server_connections_closed_total{reason}``: the byte and
  connection bounds of :mod:`.protocol` at work;
* ``dranet_cloud_kubernetes_api_ok`` and
  ``dranet_cloud_kubernetes_api_failed_checks_total`` (registered by
  :mod:`.api_health` in cluster scope and with ``--gc-kubernetes``);
* ``dranet_cloud_build_info{version,python,implementation} 1`` and the
  ``process_*`` series (CPU, resident memory, open files, start time).

No ``*_created`` series: they double the exposition and nobody here reads them.

The metrics live in their own :class:`CollectorRegistry` (nothing global, two
servers in one test process do not collide).  The hook point into the server
is :meth:`ServerMetrics.wrap`, an ASGI wrapper around whatever application
serves the protocol, which also answers ``/metrics`` itself.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from dranet_cloud import __version__
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamPlugin
from dranet_cloud.server.app import ByodpApp
from dranet_cloud.server.collector import PeriodicCollector
from dranet_cloud.server.middleware import ASGIApp, Message, Receive, Scope, Send
from dranet_cloud.server.protocol import ConnectionLimits
from dranet_cloud.toolkit.iprange import IPRange

log = logging.getLogger(__name__)


METRICS_PATH = "/metrics"
KNOWN_PATHS = frozenset(
    {
        "/health",
        "/GetDeviceAttributes",
        "/GetDeviceConfig",
        "/GetProfileConfig",
        "/ReleaseProfileConfig",
        METRICS_PATH,
    }
)
# Unix-socket round trips take well under a millisecond; metadata calls can take seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# How often a scrape may start a recount off the loop (see the module docstring).
RECOUNT_INTERVAL = 5.0

disable_created_metrics()  # type: ignore[no-untyped-call]  # process-wide in prometheus-client; the server is the only user


def local_ipam_ranges(host: ProviderHost) -> list[IPRange]:
    """The ranges of the built-in local-ipam provider, if the host has it."""
    plugin = host.registry.get_plugin(PLUGIN_NAME)
    return plugin.config.all_ranges() if isinstance(plugin, LocalIpamPlugin) else []


class _StateCollector(Collector):
    """Values read at scrape time from counters kept elsewhere; nothing here waits."""

    def __init__(
        self,
        host: ProviderHost,
        gc: Callable[[], PeriodicCollector | None],
        limits: Callable[[], ConnectionLimits | None],
    ) -> None:
        self.host = host
        self.gc = gc
        self.limits = limits
        self.ranges = local_ipam_ranges(host)
        self._recounted = 0.0
        self._recounting = False
        self._watched: object = None  # the store whose tally watches self.ranges

    def collect(self) -> Iterator[Metric]:
        yield from self._ipam()
        collector = self.gc()
        runs = CounterMetricFamily(
            "dranet_cloud_gc_runs", "IPAM garbage collections that completed"
        )
        freed = CounterMetricFamily(
            "dranet_cloud_gc_freed", "allocations freed by the IPAM garbage collector"
        )
        runs.add_metric([], collector.runs if collector is not None else 0)
        freed.add_metric([], collector.freed_total if collector is not None else 0)
        yield runs
        yield freed
        unseen = CounterMetricFamily(
            "dranet_cloud_claims_unseen_nic",
            "claims answered for a NIC this node does not show (a Passthrough NIC in its pod, "
            "or a claim meant for another node)",
        )
        unseen.add_metric([], getattr(self.host, "unseen_nic_claims", 0))
        yield unseen
        yield from self._server()

        info = GaugeMetricFamily(
            "dranet_cloud_build_info",
            "the running dranet-cloud release and interpreter (always 1)",
            labels=["version", "python", "implementation"],
        )
        info.add_metric(
            [__version__, platform.python_version(), platform.python_implementation()], 1
        )
        yield info

    def _server(self) -> Iterator[Metric]:
        limits = self.limits()
        if limits is None:
            return
        conns = GaugeMetricFamily("dranet_cloud_server_connections", "open client connections")
        conns.add_metric([], len(limits.open))
        held = GaugeMetricFamily(
            "dranet_cloud_server_buffered_bytes",
            f"request and answer bytes the connections hold (ceiling {limits.buffer_budget})",
        )
        held.add_metric([], max(limits.buffered, 0))
        closed = CounterMetricFamily(
            "dranet_cloud_server_connections_closed",
            "connections the server closed to keep its bounds, by reason",
            labels=["reason"],
        )
        for reason, count in (
            ("evicted_idle", limits.evicted),
            ("refused_at_cap", limits.refused),
            ("request_timeout", limits.timed_out),
            ("answers_unread", limits.stalled),
            ("over_buffer_ceiling", limits.shed),
            ("request_too_large", limits.rejected),
        ):
            closed.add_metric([reason], count)
        yield from (conns, held, closed)

    def _store(self) -> Any:
        store = self.host.context.ipam_if_open
        return store if getattr(store, "tally", None) is not None else None

    def refresh(self) -> None:
        """Watch the ranges and recount after an outside change; may wait (not on the loop)."""
        try:
            store = self._store()
            if store is None:
                return
            if self._watched is not store:
                store.watch_ranges(self.ranges)
                self._watched = store
            store.recount_if_changed()
        except Exception as exc:  # the next scrape tries again
            log.warning("metrics: cannot count the IPAM store: %s", exc)
        finally:
            self._recounting = False

    def _refresh_later(self) -> None:
        now = time.monotonic()
        if self._recounting or now - self._recounted < RECOUNT_INTERVAL:
            return
        self._recounting, self._recounted = True, now
        threading.Thread(target=self.refresh, name="metrics-recount", daemon=True).start()

    def _ipam(self) -> Iterator[Metric]:
        store = self._store()
        if store is None:
            return  # never open a store just to be scraped
        self._refresh_later()
        tally = store.tally
        counted = tally.ranges() if self._watched is store else {}
        size = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_size", "addresses in a local-ipam range", labels=["range"]
        )
        used = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_used", "addresses of a local-ipam range held", labels=["range"]
        )
        free = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_free", "addresses of a local-ipam range free", labels=["range"]
        )
        for rng in self.ranges:
            size.add_metric([str(rng)], rng.size)
            held = counted.get(rng)
            if held is not None:  # unknown until the first count has run
                used.add_metric([str(rng)], held)
                free.add_metric([str(rng)], max(rng.size - held, 0))
        pools = GaugeMetricFamily(
            "dranet_cloud_ipam_allocations",
            "addresses held in the node's IPAM store, per pool (plugin or profile)",
            labels=["pool"],
        )
        for pool, count in sorted(tally.pools().items()):
            pools.add_metric([pool], count)
        yield from (size, used, free, pools)
        yield from _store_health(store)
        yield from _cluster_scope(store)


# Cluster scope's counters (ipam/cluster.py ``cluster_stats``): what each means.
_CLUSTER_COUNTERS = {
    "repairs": "IPAddress objects deleted by someone else and re-created for their live claim",
    "conflicts": "addresses whose object was deleted and then taken by another claim",
    "create_conflicts": "creates answered 409 (the address was held elsewhere)",
    "repairs_dropped": "repairs dropped by a full queue (the claim's retry repairs instead)",
    "informer_lists": "lists made by the range views' informers (from the watch cache)",
    "informer_list_objects": "objects those lists served",
    "informer_watches": "watch streams the range views opened",
    "informer_events": "watch events the range views received",
    "informer_relists": "relists of the range views (410 Gone)",
    "informer_widenings": "lists of a new block alone, when a range view takes one on",
    "informer_errors": "failed lists and watches of the range views",
}
_RECLAIMER_COUNTERS = {
    "terms": "times this sidecar took the reclaimer lease",
    "lists": "lists of IPAddress objects made by the reclaimer",
    "sweeps": "checks of vanished nodes' objects made by the reclaimer",
    "deleted": "vanished nodes' objects the reclaimer deleted",
}


def _cluster_scope(store: Any) -> Iterator[Metric]:
    """``dranet_cloud_ipam_cluster_*_total``, the reclaimer's counters and whether this
    node holds its lease (cluster scope only; counters read, nothing called)."""
    probe = getattr(store, "cluster_stats", None)
    if not callable(probe):
        return
    stats = probe()
    for key, text in _CLUSTER_COUNTERS.items():
        metric = CounterMetricFamily(f"dranet_cloud_ipam_cluster_{key}", text)
        metric.add_metric([], stats.get(key, 0))
        yield metric
    reclaimer = getattr(store, "reclaimer", None)
    if reclaimer is None:
        return
    for key, text in _RECLAIMER_COUNTERS.items():
        metric = CounterMetricFamily(f"dranet_cloud_ipam_reclaimer_{key}", text)
        metric.add_metric([], getattr(reclaimer.stats, key, 0))
        yield metric
    leader = GaugeMetricFamily(
        "dranet_cloud_ipam_reclaimer_leader", "1 when this sidecar holds the reclaimer lease"
    )
    leader.add_metric([], 1 if reclaimer.is_leader else 0)
    yield leader


def _store_health(store: Any) -> Iterator[Metric]:
    """``dranet_cloud_ipam_store_healthy`` (0: ``/health`` is 503) and
    ``dranet_cloud_ipam_store_degraded`` (1: serving, with a warning such as a
    read-only directory); a few ``stat`` calls, nothing that waits."""
    probe = getattr(store, "health", None)
    if not callable(probe):
        return
    state = probe()
    healthy = GaugeMetricFamily(
        "dranet_cloud_ipam_store_healthy",
        "1 when the IPAM store can serve claims, 0 when /health answers 503",
    )
    healthy.add_metric([], 1 if state.ok else 0)
    degraded = GaugeMetricFamily(
        "dranet_cloud_ipam_store_degraded",
        "1 when the store serves claims with a warning (/health's warnings list)",
    )
    degraded.add_metric([], 1 if state.ok and state.warnings else 0)
    yield from (healthy, degraded)


class ServerMetrics:
    """The server's metrics and the ASGI wrapper that records and exposes them."""

    def __init__(
        self,
        host: ProviderHost,
        gc: Callable[[], PeriodicCollector | None] = lambda: None,
        limits: Callable[[], ConnectionLimits | None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        self.requests = Counter(
            "dranet_cloud_requests",
            "BYODP requests answered, by path and HTTP status",
            ["path", "status"],
            registry=self.registry,
        )
        self._children: dict[tuple[str, int], tuple[Any, Any]] = {}
        self.latency = Histogram(
            "dranet_cloud_request_duration_seconds",
            "time to answer a BYODP request, by path",
            ["path"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.plugin_errors = Counter(
            "dranet_cloud_plugin_errors",
            "exceptions raised by a plugin hook (metadata unreachable, webhook down, denials)",
            ["plugin", "hook", "error"],
            registry=self.registry,
        )
        self.state = _StateCollector(host, gc, limits)
        self.state.refresh()  # the ranges' first count, before the loop runs
        self.registry.register(self.state)
        self._watch_plugins(host)

    def _watch_plugins(self, host: ProviderHost) -> None:
        def failed(plugin: str, hook: str, exc: BaseException) -> None:
            self.plugin_errors.labels(plugin, hook, type(exc).__name__).inc()

        host.registry.error_observers.append(failed)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        """Count and time one finished request (a :class:`ByodpApp` observer)."""
        key = (path if path in KNOWN_PATHS else "other", status)
        children = self._children.get(key)
        if children is None:
            label = key[0]
            children = (self.requests.labels(label, str(status)), self.latency.labels(label))
            if len(self._children) < 256:  # paths and statuses are few; stay bounded anyway
                self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """``app`` with every HTTP request counted and timed, and ``/metrics`` answered.

        The BYODP router reports its own requests (:meth:`observe`), which
        spares every claim a wrapped ``send``; everything else it hands on
        (documentation, unknown paths) is timed here.
        """
        router = app if isinstance(app, ByodpApp) else None
        if router is not None:
            router.observers.append(self.observe)

        async def metrics_app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope.get("type") != "http":
                await app(scope, receive, send)
                return
            path = scope.get("path", "")
            if router is not None and router.handles(scope.get("method", ""), path):
                await app(scope, receive, send)
                return
            method = scope.get("method", "")
            start = time.perf_counter()
            status = 500
            if path == METRICS_PATH and scope.get("method") in ("GET", "HEAD"):
                status = 200
                body = self.exposition()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [
                            (b"content-type", CONTENT_TYPE_LATEST.encode()),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
            else:

                async def recording_send(message: Message) -> None:
                    nonlocal status
                    if message.get("type") == "http.response.start":
                        status = int(message.get("status", 500))
                    await send(message)

                try:
                    await app(scope, receive, recording_send)
                finally:
                    self.observe(method, path, status, time.perf_counter() - start)
                return
            self.observe(method, path, status, time.perf_counter() - start)

        return metrics_app
