"""Prometheus metrics for ``dranet-cloud serve`` (``GET /metrics``).

What an operator needs to see before DRANET's claims start failing:

* ``dranet_cloud_requests_total{path,status}`` and
  ``dranet_cloud_request_duration_seconds{path}``: every BYODP call (paths
  outside the protocol are counted as ``other``, so a scanner cannot grow the
  label set);
* ``dranet_cloud_ipam_pool_size|used|free{range}`` for each local-ipam range
  and ``dranet_cloud_ipam_allocations{pool}`` for every pool in the store,
  computed when scraped (a scrape reads the store once; requests pay nothing);
* ``dranet_cloud_gc_runs_total`` and ``dranet_cloud_gc_freed_total`` from the
  periodic collector;
* ``dranet_cloud_plugin_errors_total{plugin,hook,error}``: every exception a
  plugin raised (metadata server unreachable, webhook down, denials), seen
  through pluggy's hook-call monitoring, so no plugin needs code for it.

The metrics live in their own :class:`CollectorRegistry` (nothing global, two
servers in one test process do not collide).  The hook point into the server
is :meth:`ServerMetrics.wrap`, an ASGI wrapper around whatever application
serves the protocol, which also answers ``/metrics`` itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from .app import ByodpApp

if TYPE_CHECKING:
    from ..host import ProviderHost
    from ..iprange import IPRange
    from .collector import PeriodicCollector

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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


def local_ipam_ranges(host: ProviderHost) -> list[IPRange]:
    """The ranges of the built-in local-ipam provider, if the host has it."""
    from ..local_ipam import PLUGIN_NAME

    plugin = host.registry.pm.get_plugin(PLUGIN_NAME)
    config = getattr(plugin, "config", None)
    if config is None:
        return []
    found: list[IPRange] = list(getattr(config, "ranges", []) or [])
    for extra in (getattr(config, "device_ranges", {}) or {}).values():
        found.extend(extra)
    return list(dict.fromkeys(found))


class _StateCollector(Collector):
    """Gauges read at scrape time: IPAM pools and the garbage collector's totals."""

    def __init__(self, host: ProviderHost, gc: Callable[[], PeriodicCollector | None]) -> None:
        self.host = host
        self.gc = gc

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

    def _ipam(self) -> Iterator[Metric]:
        ranges = local_ipam_ranges(self.host)
        has_store = self.host.context._ipam is not None
        if not ranges and not has_store:
            return  # never open a store just to be scraped
        try:
            allocations = self.host.context.ipam.list()
        except Exception as exc:  # a scrape must not fail because the store is busy
            log.warning("metrics: cannot read the IPAM store: %s", exc)
            return
        size = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_size", "addresses in a local-ipam range", labels=["range"]
        )
        used = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_used", "addresses of a local-ipam range held", labels=["range"]
        )
        free = GaugeMetricFamily(
            "dranet_cloud_ipam_pool_free", "addresses of a local-ipam range free", labels=["range"]
        )
        for rng in ranges:
            held = sum(1 for a in allocations if a.address in rng)
            size.add_metric([str(rng)], rng.size)
            used.add_metric([str(rng)], held)
            free.add_metric([str(rng)], max(rng.size - held, 0))
        per_pool: dict[str, int] = {}
        for alloc in allocations:
            per_pool[alloc.owner.pool] = per_pool.get(alloc.owner.pool, 0) + 1
        pools = GaugeMetricFamily(
            "dranet_cloud_ipam_allocations",
            "addresses held in the node's IPAM store, per pool (plugin or profile)",
            labels=["pool"],
        )
        for pool, count in sorted(per_pool.items()):
            pools.add_metric([pool], count)
        yield from (size, used, free, pools)


class ServerMetrics:
    """The server's metrics and the ASGI wrapper that records and exposes them."""

    def __init__(
        self, host: ProviderHost, gc: Callable[[], PeriodicCollector | None] = lambda: None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
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
        self.registry.register(_StateCollector(host, gc))
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
