"""Periodic IPAM garbage collection inside ``dranet-cloud serve``.

DRANET never retries a failed release (teardown must not block), so a
provider must reclaim leaks itself.  Every ``interval`` the collector asks a
:class:`~dranet_cloud.ipam.node.reclaim.ClaimSource` which claims are proven gone
(the Kubernetes API with ``--gc-kubernetes``, or a complete live-claims file)
and frees only their allocations older than the grace period; a run whose
evidence fails frees nothing and logs why.  A source with a view to keep
(:class:`~dranet_cloud.ipam.node_claims.NodeClaims`: a watch of this node's
pods) is started with the collector, so its first list is done, jittered,
before the first run.  Freeing by age alone exists only
behind ``--gc-unsafe-free-by-age``: a claim that lives longer than the
duration loses its address to the next pod.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import (
    DEFAULT_GRACE,
    ClaimSource,
    NothingProven,
    ReclaimResult,
    RunCutShort,
    reclaim,
)
from dranet_cloud.ipam.node.reclaim import describe_claim as _describe_claim
from dranet_cloud.toolkit.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass
class CollectorSettings:
    """What ``serve --gc-*`` asked for: exactly one of ``source`` and ``unsafe_free_by_age``."""

    interval: float
    source: ClaimSource | None = None
    grace: timedelta = DEFAULT_GRACE
    unsafe_free_by_age: timedelta | None = None


class PeriodicCollector:
    """A daemon thread reclaiming leaked allocations every ``interval`` seconds."""

    def __init__(self, store: Callable[[], IpamStore], settings: CollectorSettings) -> None:
        if settings.interval <= 0:
            raise ConfigError(f"--gc-interval must be positive, got {settings.interval:g} s")
        if (settings.source is None) == (settings.unsafe_free_by_age is None):
            raise ConfigError(
                "--gc-interval needs --gc-kubernetes (or, air-gapped, --gc-live-claims FILE); "
                "refusing to collect without proof that claims are gone"
            )
        self.store = store
        self.settings = settings
        self.interval = settings.interval
        self.runs = 0
        self.failed_runs = 0
        self.freed_total = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def collect_once(self) -> ReclaimResult | None:
        """One collection; ``None`` when it freed nothing because nothing was proven."""
        settings = self.settings
        try:
            if settings.source is None:
                assert settings.unsafe_free_by_age is not None
                freed = self.store().collect(older_than=settings.unsafe_free_by_age)
                result = ReclaimResult("age alone (--gc-unsafe-free-by-age)", False, len(freed))
                result.freed = freed
            else:
                store = self.store()
                result = reclaim(store, settings.source, grace=settings.grace)
                self._cluster_reclaim(store, settings.source)
        except RunCutShort as exc:
            self.failed_runs += 1
            self._count(exc.result)
            log.warning("ipam gc stopped part-way, will go on in %g s: %s", self.interval, exc)
            return None
        except NothingProven as exc:
            self.failed_runs += 1
            log.warning("ipam gc freed nothing, will retry in %g s: %s", self.interval, exc)
            return None
        except Exception as exc:
            self.failed_runs += 1
            log.warning(
                "ipam gc freed nothing, will retry in %g s: %s: %s",
                self.interval,
                type(exc).__name__,
                exc,
            )
            return None
        self.runs += 1
        self._count(result)
        if result.freed or result.kept_recent or result.changed:
            log.info("%s", result.summary())
        else:
            log.debug("%s", result.summary())
        return result

    def _count(self, result: ReclaimResult) -> None:
        """Count and log what a run freed (a run cut short included)."""
        self.freed_total += len(result.freed)
        for alloc in result.freed:
            log.info(
                "ipam gc freed %s held by %s (claim %s is gone)",
                alloc.address,
                alloc.owner,
                _describe_claim(alloc),
            )

    def _cluster_reclaim(self, store: IpamStore, source: ClaimSource) -> None:
        """In cluster scope: failed releases again, and other nodes' leaked objects."""
        extra = getattr(store, "cluster_reclaim", None)
        if not callable(extra):
            return
        done = extra(source, grace=self.settings.grace)
        if done.retried_releases:
            log.info(
                "ipam gc deleted the objects of %d failed release(s)", len(done.retried_releases)
            )
        if done.sweep is not None and (done.sweep.deleted or done.sweep.failed):
            log.info("%s", done.sweep.summary())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.collect_once()

    def start(self) -> PeriodicCollector:
        begin = getattr(self.settings.source, "start", None)
        if callable(begin):
            begin()
        self._thread = threading.Thread(target=self._loop, name="ipam-gc", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for a collection in progress (the store is closed after this)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        end = getattr(self.settings.source, "stop", None)
        if callable(end):
            end()
