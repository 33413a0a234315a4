"""A range's view in cluster scope: one watch over the blocks this node uses.

Listing every ``IPAddress`` of a range costs the API server the whole range
for each node, so a node watches only its part of it.  Each object this
project creates carries :data:`~.api.BLOCK_LABEL`
(``<range id>.<block index>``, 64 addresses a block), and a node's view of a
range is ONE :class:`~dranet_cloud.kube.informer.Informer` with the label
selector ``block in (...)`` over the blocks it uses: the block of its home
address, the blocks of its journal's rows and of its own objects, and the
block it is allocating from.  Moving on to a new block widens the selector
(:meth:`~dranet_cloud.kube.informer.Informer.widen`: the informer lists the
new block alone, from the watch cache, and watches on from where it was).

What the informer stores feeds the :class:`~.journal.RangeView` the
candidate search merges with the journal; a DELETED event of an object is
handed to ``on_deleted`` (the allocator's repair queue: never repaired on
the informer's thread).  Objects without a block label are not seen here;
the 409s teach the view those (see :class:`~.journal.RangeView`).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from dranet_cloud.ipam.cluster.api import (
    BLOCK_SIZE,
    NODE_ANNOTATION,
    NODE_LABEL,
    block_index,
    block_selector,
    range_id,
)
from dranet_cloud.ipam.cluster.journal import RangeView
from dranet_cloud.kube.informer import Informer
from dranet_cloud.toolkit.logsafe import safe

log = logging.getLogger(__name__)

# Watching more blocks than this in one range means the node is not filling its
# own stretch any more; the selector still works, but say so once.
MANY_BLOCKS = 256

InformerFactory = Callable[..., "Informer"]


class RangeWatch:
    """The informer of one range's watched blocks, feeding ``view``.

    ``make_informer(label_selector=..., name=..., on_event=...)`` builds
    the (not yet started) informer; ``initial_jitter`` is passed on so that
    a thousand nodes starting at once do not list at once.  ``node`` is this
    sidecar's node: the objects naming it are kept apart as they arrive
    (:meth:`own_objects`), so that the collector's run judges its node's ten
    objects, not the hundreds its neighbours hold in the same blocks.
    """

    def __init__(
        self,
        view: RangeView,
        make_informer: InformerFactory,
        *,
        on_deleted: Callable[[str, str], None],
        initial_jitter: float = 0.0,
        node: str | None = None,
    ) -> None:
        self.view = view
        self.node = node
        # name -> object, for the watched objects that name ``node`` (kept by _event;
        # a relist hands its differences to _event too, so this follows the store).
        self._own: dict[str, dict[str, Any]] = {}
        self.range = view.range
        self.id = range_id(view.range)
        self._make = make_informer
        self._on_deleted = on_deleted
        self._jitter = initial_jitter
        self._lock = threading.Lock()
        self.lock = self._lock  # readers of ``blocks`` outside this class hold it too
        self.blocks: set[int] = set()
        # Block -> the number of the informer's selector change that added it: the
        # block is in the store once the informer has listed that change.
        self._since: dict[int, int] = {}
        self._informer: Informer | None = None
        self._stopped = False
        self._warned_many = False

    # -- which blocks ---------------------------------------------------------------

    def block_of(self, value: int) -> int:
        return block_index(self.range, value)

    def watch(self, blocks: Iterable[int]) -> bool:
        """Add ``blocks`` to the watched ones; True when the selector changed."""
        with self._lock:
            if self._stopped:
                return False
            new = {b for b in blocks if 0 <= b * BLOCK_SIZE < self.range.size} - self.blocks
            if not new:
                return False
            self.blocks |= new
            selector = block_selector(self.range, self.blocks)
            informer = self._informer
            if informer is None:
                ticket = 0  # the constructor's selector
                self._informer = self._make(
                    label_selector=selector,
                    name=f"ipaddresses of {self.range}",
                    on_event=self._event,
                    initial_jitter=self._jitter,
                )
                self._informer.start()
            else:
                ticket = informer.widen(selector, block_selector(self.range, new))
            for b in new:
                self._since[b] = ticket
            if len(self.blocks) > MANY_BLOCKS and not self._warned_many:
                self._warned_many = True
                log.warning(
                    "ipam (cluster scope): this node watches %d blocks of range %s; its "
                    "neighbours fill the range around it (a larger range spreads them out)",
                    len(self.blocks),
                    self.range,
                )
        log.debug(
            "ipam (cluster scope): watching blocks %s of %s (id %s)",
            ",".join(f"{b:x}" for b in sorted(new)),
            self.range,
            self.id,
        )
        return True

    def covers(self, value: int) -> bool:
        """Whether the view knows the objects of ``value``'s block (listed and watched)."""
        block = self.block_of(value)
        with self._lock:
            informer = self._informer
            since = self._since.get(block)
        if informer is None or since is None or not informer.synced:
            return False
        return informer.listed >= since

    def synced_all(self) -> bool:
        """Whether every watched block is in the store (a list completed after it was added)."""
        with self._lock:
            informer = self._informer
            since = max(self._since.values(), default=0)
        return informer is not None and informer.synced and informer.listed >= since

    def wait_covered(self, value: int, timeout: float) -> bool:
        """Wait (bounded) until :meth:`covers` ``value``; False on the deadline."""
        until = time.monotonic() + max(0.0, timeout)
        while True:
            if self.covers(value):
                return True
            left = until - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(0.02, left))

    # -- what the watch says ---------------------------------------------------------

    def lookup(self, name: str) -> dict[str, Any] | None:
        """The watched object named ``name`` (only meaningful when :meth:`covers` it)."""
        informer = self._informer
        return None if informer is None else informer.get(name)

    def objects(self) -> list[dict[str, Any]]:
        informer = self._informer
        return [] if informer is None else informer.items()

    def own_objects(self) -> list[dict[str, Any]]:
        """The watched objects that name this watch's ``node`` (annotation, else label)."""
        with self._lock:
            return list(self._own.values())

    def _names_node(self, meta: dict[str, Any]) -> bool:
        notes, labels = meta.get("annotations"), meta.get("labels")
        named = notes.get(NODE_ANNOTATION) if isinstance(notes, dict) else None
        if not named and isinstance(labels, dict):
            named = labels.get(NODE_LABEL)
        return self.node is not None and named == self.node

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        # On the informer's thread: quick, no API call, no journal write.
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return
        name, uid = meta.get("name"), meta.get("uid")
        if not isinstance(name, str):
            return
        try:
            addr = ipaddress.ip_address(name)
        except ValueError:
            return
        value = int(addr)
        if addr.version != self.range.version or not self.view.lo <= value <= self.view.hi:
            return
        own = kind != "DELETED" and self._names_node(meta)
        with self._lock:
            if own:
                self._own[name] = obj
            else:
                self._own.pop(name, None)
        if kind == "DELETED":
            self.view.discard(value)
            if isinstance(uid, str) and uid:
                try:
                    self._on_deleted(name, uid)
                except Exception as exc:  # never let a handler kill the watch
                    log.warning(
                        "ipam (cluster scope): cannot queue the repair of %s: %s", name, safe(exc)
                    )
        else:
            self.view.add(value)

    # -- /health and /metrics --------------------------------------------------------

    def state(self) -> dict[str, Any]:
        informer = self._informer
        doc: dict[str, Any] = {"range": str(self.range), "blocks": len(self.blocks)}
        if informer is None:
            doc.update(synced=False, last_error=None)
            return doc
        stats = informer.stats
        doc.update(
            synced=informer.synced,
            last_error=informer.last_error,
            lists=stats.lists,
            list_objects=stats.list_objects,
            watches=stats.watches,
            events=stats.events,
            relists=stats.relists,
            widenings=stats.widenings,
            errors=stats.errors,
        )
        return doc

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            informer, self._informer = self._informer, None
        if informer is not None:
            informer.stop()
