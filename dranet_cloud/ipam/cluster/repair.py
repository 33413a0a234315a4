"""Cluster scope: repairing this node's deleted objects off the watch, and the conflicts.

An ``IPAddress`` deleted by someone else (``kubectl delete``, another tool's
clean-up) while its claim is live must come back before another node takes
the address.  The range's watch (:mod:`.range_view`) tells the node at once;
its handler runs on the informer's thread and only enqueues here.
:class:`RepairQueue` runs the re-creates on a thread of its own (never on the
informer's thread or an event loop), at most :data:`MAX_QUEUED` waiting: a
repair lost to a full queue is done by the claim's next retry instead, which
checks its objects before it is answered.

:class:`ConflictBook` keeps what ``/health`` and ``/metrics`` say about it:
the addresses someone else took meanwhile (both claims named), and the
counters of repairs and conflicts.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable

from dranet_cloud.toolkit.logsafe import safe

log = logging.getLogger(__name__)

MAX_QUEUED = 4096
MAX_CONFLICTS = 64  # kept for /health (the oldest goes first)
STOP_TIMEOUT = 5.0


class ConflictBook:
    """Conflicts met (address -> message) and the repair counters; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: OrderedDict[str, tuple[str, str]] = OrderedDict()  # name -> (uid, text)
        self.counters: dict[str, int] = {
            "repairs": 0,
            "conflicts": 0,
            "create_conflicts": 0,
            "repairs_dropped": 0,
        }

    def count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counters[what] = self.counters.get(what, 0) + n

    def report(self, name: str, holder_uid: str, message: str) -> bool:
        """Record a conflict; True the first time this holder of ``name`` is met."""
        with self._lock:
            known = self._open.get(name)
            if known is not None and known[0] == holder_uid:
                return False
            self._open[name] = (holder_uid, message)
            self._open.move_to_end(name)
            while len(self._open) > MAX_CONFLICTS:
                self._open.popitem(last=False)
            self.counters["conflicts"] += 1
            return True

    def clear(self, name: str) -> None:
        """The address is ours again, or its claim released: no longer a conflict."""
        with self._lock:
            self._open.pop(name, None)

    def warnings(self) -> list[str]:
        with self._lock:
            return [text for _uid, text in self._open.values()]


class RepairQueue:
    """Deleted objects to re-create, worked off by one daemon thread.

    ``work(name, uid)`` decides (it reads the journal) and re-creates; it
    is called only on this queue's thread.
    """

    def __init__(self, work: Callable[[str, str], None], *, name: str = "ipam-repair") -> None:
        self._work = work
        self._name = name
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue(MAX_QUEUED)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.dropped = 0
        self.done = 0

    def deleted(self, name: str, uid: str) -> None:
        """The watch saw ``name`` (``uid``) deleted: queue it (quick, any thread)."""
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait((name, uid))
        except queue.Full:
            self.dropped += 1
            log.warning(
                "ipam (cluster scope): %d repairs are waiting; IPAddress %s is checked at "
                "its claim's next retry instead",
                MAX_QUEUED,
                name,
            )

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._work(*item)
            except Exception as exc:  # one bad item must not end the repairs
                log.warning("ipam (cluster scope): repairing %s failed: %s", item[0], safe(exc))
            self.done += 1

    def stop(self) -> None:
        """Stop after the item in progress (bounded wait); what is queued is dropped."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is None:
            return
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        try:
            self._queue.put(None, timeout=STOP_TIMEOUT)
        except queue.Full:
            return
        thread.join(STOP_TIMEOUT)
