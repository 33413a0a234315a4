"""Periodic IPAM garbage collection inside ``dranet-cloud serve``.

DRANET never retries a failed release (teardown must not block), so a
provider must reclaim leaks itself.  The server can only judge by age, and,
when a sidecar keeps a file of live claim UIDs up to date, by liveness too;
with both only allocations that are not live *and* old are freed, the same
rule as ``dranet-cloud ipam gc``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from ..errors import ConfigError
from ..ipam.base import Allocation, IpamStore

log = logging.getLogger(__name__)


def read_claims_file(path: str) -> list[str]:
    """Claim UIDs, one a line; blank lines and ``#`` comments ignored."""
    claims = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            claims.append(entry)
    return claims


class PeriodicCollector:
    """A daemon thread calling ``store.collect`` every ``interval`` seconds."""

    def __init__(
        self,
        store: Callable[[], IpamStore],
        *,
        interval: float,
        older_than: timedelta | None = None,
        live_claims_file: str | None = None,
    ) -> None:
        if interval <= 0:
            raise ConfigError(f"--gc-interval must be positive, got {interval:g} s")
        if older_than is None and live_claims_file is None:
            raise ConfigError(
                "--gc-interval needs --gc-older-than DURATION, --gc-live-claims FILE or both; "
                "refusing to collect every allocation"
            )
        self.store = store
        self.interval = interval
        self.older_than = older_than
        self.live_claims_file = live_claims_file
        self.runs = 0
        self.freed_total = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def collect_once(self) -> list[Allocation] | None:
        """One collection; ``None`` when it was skipped (live list unreadable, store error)."""
        live: list[str] | None = None
        if self.live_claims_file is not None:
            try:
                live = read_claims_file(self.live_claims_file)
            except (OSError, UnicodeDecodeError) as exc:
                # An unreadable list must never read as "no claim is live".
                log.warning(
                    "ipam gc skipped: cannot read the live claims file %s (%s)",
                    self.live_claims_file,
                    exc,
                )
                return None
        try:
            freed = self.store().collect(live_claims=live, older_than=self.older_than)
        except Exception as exc:
            log.warning("ipam gc failed, will retry in %g s: %s", self.interval, exc)
            return None
        self.runs += 1
        self.freed_total += len(freed)
        for alloc in freed:
            log.info("ipam gc freed %s held by %s", alloc.address, alloc.owner)
        return freed

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.collect_once()

    def start(self) -> PeriodicCollector:
        self._thread = threading.Thread(target=self._loop, name="ipam-gc", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for a collection in progress (the store is closed after this)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
