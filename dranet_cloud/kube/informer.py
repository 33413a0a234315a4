"""One informer: a local copy of a set of Kubernetes objects, kept by LIST once then WATCH.

Why: the sidecar runs on every node of clusters of thousands.  Re-reading a
collection every few seconds costs the API server nodes x collection size;
listing once and then watching costs one list and afterwards only the events
of the objects asked for, whatever the size of the cluster.  This is
client-go's informer pattern, kept small:

* **LIST** with ``resourceVersion=0``: from the API server's watch cache, not
  etcd, which is what a thousand nodes starting at once must ask for
  (``initial_jitter`` spreads their starts too).
* **WATCH** from the list's resourceVersion with ``allowWatchBookmarks=true``
  and ``timeoutSeconds`` jittered between 1x and 2x ``watch_timeout`` (so the
  streams of many nodes do not end together); a BOOKMARK only moves the
  resourceVersion.
* **Resume, not relist**: a stream that ends (its timeout, a cut connection,
  a read timeout, a line over ``max_event_bytes``) is watched again from the
  last resourceVersion seen: no list, no event lost.
* **Relist only on 410 Gone** (an ERROR event or HTTP 410) or a selector
  change; the differences from the old store reach ``on_event`` as
  DELETED/ADDED/MODIFIED, so a handler never misses what happened while no
  stream was open.
* **Widen without relisting** (:meth:`Informer.widen`): a selector that only
  adds objects (a range view taking on a block) lists just the added part
  (``resourceVersionMatch=NotOlderThan`` at the informer's resourceVersion)
  and watches the union on from there: no event of the old part is lost, a
  handler sees history, never a state older than the store, and a new block
  costs the API that block only.
* **Bounds**: errors back off exponentially with jitter; every read waits at
  most :data:`WATCH_READ_TIMEOUT` (longer than the minute between bookmarks),
  a stream ends by its ``timeoutSeconds`` plus :data:`WATCH_DEADLINE_MARGIN`,
  a line is capped; :meth:`Informer.stop` shuts the socket down from the
  caller's thread, so it returns in bounded time.

:class:`InformerStats` says what this node asked of the API server
(benchmarks, ``/metrics``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from dranet_cloud.kube.client import KubeClient, KubeError
from dranet_cloud.kube.stream import LineStream, LineTooLong
from dranet_cloud.toolkit.logsafe import safe

__all__ = [
    "IPADDRESSES",
    "LEASES",
    "NODES",
    "PODS",
    "RESOURCE_CLAIMS",
    "WATCH_DEADLINE_MARGIN",
    "WATCH_READ_TIMEOUT",
    "Informer",
    "InformerStats",
    "Resource",
]

log = logging.getLogger(__name__)

# A socket read of a watch waits at most this long: above the API server's
# bookmark interval (about a minute), so a quiet but healthy stream is never
# cut, while a dead connection is noticed within a minute and a half.
WATCH_READ_TIMEOUT = 90.0
# A stream asked to end at timeoutSeconds is abandoned this much later.
WATCH_DEADLINE_MARGIN = 30.0
# A list (every page and restart) ends by this deadline, or the client's timeout if longer
# (the API's own SLO for a cluster-scoped LIST is 30 s).
LIST_DEADLINE = 30.0
JOIN_TIMEOUT = 5.0  # stop() waits this long for the thread


@dataclass(frozen=True)
class Resource:
    """What an informer watches: an API group, version and collection."""

    group: str  # "" for core
    version: str  # "v1"
    plural: str  # "pods"
    namespaced: bool
    kind: str  # "Pod"

    def path(self, namespace: str | None = None) -> str:
        """The collection's URL path, in ``namespace`` or across all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    @property
    def qualified(self) -> str:
        """``plural.group`` as RBAC rules and kubectl name it (``pods`` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", True, "Pod")
NODES = Resource("", "v1", "nodes", False, "Node")
IPADDRESSES = Resource("networking.k8s.io", "v1", "ipaddresses", False, "IPAddress")
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", True, "ResourceClaim")
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")


@dataclass
class InformerStats:
    """What this informer asked of the API server (read by benchmarks and ``/metrics``)."""

    lists: int = 0  # LIST calls that completed (each counts its pages as one)
    list_objects: int = 0  # objects those lists returned
    watches: int = 0  # WATCH requests sent
    events: int = 0  # ADDED/MODIFIED/DELETED events received on streams
    bookmarks: int = 0
    relists: int = 0  # lists after 410 Gone (or a selector change)
    widenings: int = 0  # lists of only what a widened selector added (counted in lists too)
    errors: int = 0  # failed lists and watches, cut streams, refused lines


class _Gone(Exception):
    """The watched resourceVersion left the server's window (410): list again."""


class Informer:
    """A store of the objects of one resource matching the selectors, kept current.

    ``on_event(type, obj)`` runs on the informer's thread after the store is
    updated, for ADDED/MODIFIED/DELETED: every object of the first list as
    ADDED, each stream event, and the differences a relist finds.  Handlers
    must be quick (enqueue the work elsewhere); one that raises is logged and
    the informer goes on.  The store holds the API's JSON dicts as received;
    callers must not modify them.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        metadata_only: bool = False,
        name: str = "",
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        watch_timeout: float = 300.0,
        backoff: tuple[float, float] = (0.5, 30.0),
        initial_jitter: float = 0.0,
        max_event_bytes: int = 4 << 20,
    ) -> None:
        if watch_timeout < 1:
            raise ValueError(f"informer: watch_timeout must be at least 1 s, got {watch_timeout}")
        if not 0 < backoff[0] <= backoff[1]:
            raise ValueError(f"informer: backoff must be 0 < min <= max, got {backoff}")
        self.client = client
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only
        self.name = name or resource.plural
        self.on_event = on_event
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.initial_jitter = initial_jitter
        self.max_event_bytes = max_event_bytes
        self.resource_version: str = ""
        self.stats = InformerStats()
        self.last_error: str | None = None
        self._store: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._relist = False  # set_selectors asked for a new list
        # Selector changes are numbered: ``_ticket`` is the newest, ``_listed`` the newest
        # whose objects are all in the store (-1 before the first list); ``_more`` holds
        # the added selectors of widenings not listed yet.
        self._ticket = 0
        self._listed = -1
        self._more: list[str] = []
        self._stream: LineStream | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Informer({self._describe()})"

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> Informer:
        """Start the daemon thread (LIST, then WATCH, resumed and relisted as needed)."""
        if self._thread is not None:
            raise RuntimeError(f"informer {self.name}: already started")
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the stream and join the thread (at most :data:`JOIN_TIMEOUT` seconds)."""
        self._stopping.set()
        self._abort_stream()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning(
                    "kubernetes: informer %s did not stop within %g s (a list still in "
                    "flight ends by its deadline; the thread is a daemon)",
                    self.name,
                    JOIN_TIMEOUT,
                )

    def __enter__(self) -> Informer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_synced(self, timeout: float) -> bool:
        """True once the first LIST is stored (False if ``timeout`` seconds pass first)."""
        return self._synced.wait(timeout)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    # --- the store -------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The object stored under ``"namespace/name"`` (namespaced) or ``"name"``."""
        with self._lock:
            return self._store.get(key)

    def items(self) -> list[dict[str, Any]]:
        """A snapshot of the store (a new list; the dicts are shared, do not modify them)."""
        with self._lock:
            return list(self._store.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._store)

    @property
    def listed(self) -> int:
        """The newest selector change (as :meth:`set_selectors` and :meth:`widen` number
        them; 0 is the constructor's) whose objects are all in the store; -1 before the
        first list."""
        return self._listed

    def set_selectors(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> int:
        """Watch with new selectors: the informer lists again and reports the differences.

        Returns the change's number: the store holds its objects once
        :attr:`listed` reaches it.
        """
        with self._lock:
            changed = False
            if label_selector is not None and label_selector != self.label_selector:
                self.label_selector, changed = label_selector, True
            if field_selector is not None and field_selector != self.field_selector:
                self.field_selector, changed = field_selector, True
            if changed:
                self._ticket += 1
                self._relist = True
                self._more.clear()
            ticket = self._ticket
        if changed:
            self._abort_stream()
        return ticket

    def widen(self, label_selector: str, added: str) -> int:
        """Watch with ``label_selector``: the current one or ``added``, nothing less.

        The caller vouches that every object matching ``label_selector`` matches
        the current selector or ``added``; the informer then lists only
        ``added`` and watches on from where it stands (see the module's
        docstring).  Returns the change's number, as :meth:`set_selectors` does.
        """
        with self._lock:
            if label_selector == self.label_selector:
                return self._ticket
            self.label_selector = label_selector
            self._ticket += 1
            if not self._relist:
                self._more.append(added)
            ticket = self._ticket
        self._abort_stream()
        return ticket

    # --- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        if self.initial_jitter > 0 and self._stopping.wait(
            random.uniform(0.0, self.initial_jitter)
        ):
            return
        failures = 0
        must_list = True
        more: list[str] = []
        while not self._stopping.is_set():
            try:
                with self._lock:
                    relist, self._relist = self._relist, False
                    more, self._more = self._more, []
                    upto = self._ticket
                if must_list or relist:
                    must_list = True
                    self._list(upto)
                    must_list = False
                    failures = 0
                elif more:
                    self._list_more(more, upto)
                    failures = 0
                more = []
                started = time.monotonic()
                delivered = self._watch()
                if delivered:
                    failures = 0
                elif time.monotonic() - started < self.backoff[0] and not self._relist:
                    # A stream that ended at once with nothing in it: do not spin.
                    self._pause(failures)
                    failures += 1
            except _Gone:
                must_list = True
                log.info(
                    "kubernetes: informer %s: resourceVersion %s is too old (410); listing again",
                    self.name,
                    safe(self.resource_version, 40),
                )
                # Many nodes see a 410 together (an API server restart): spread the relists.
                self._stopping.wait(random.uniform(0.0, self.backoff[0]))
            except LineTooLong as exc:
                head = safe(exc.head.decode("utf-8", "replace"), 200)
                self._failed(f"{exc} ({self.client.source}); it began {head}")
                self._pause(failures)
                failures += 1
            except KubeError as exc:
                if self._stopping.is_set():
                    break
                if exc.status == 410:
                    must_list = True
                elif more and not must_list:
                    self._requeue(more)  # a failed widening is listed again after the pause
                self._failed(str(exc))
                self._pause(failures)
                failures += 1
            except Exception as exc:  # a bug here must not end the informer
                if self._stopping.is_set():
                    break
                log.exception("kubernetes: informer %s failed unexpectedly", self.name)
                if more and not must_list:
                    self._requeue(more)
                self._failed(f"kubernetes: informer {self.name}: {type(exc).__name__}: {exc}")
                self._pause(failures)
                failures += 1

    def _requeue(self, more: list[str]) -> None:
        with self._lock:
            if not self._relist:
                self._more[:0] = more

    def _pause(self, failures: int) -> None:
        low, high = self.backoff
        delay = min(high, low * 2 ** min(failures, 20))
        self._stopping.wait(delay * random.uniform(0.5, 1.0))

    def _failed(self, message: str) -> None:
        self.last_error = safe(message, 600)
        self.stats.errors += 1  # after last_error: a reader that sees the count sees the text
        if not self._stopping.is_set():
            log.warning("%s", self.last_error)

    def _describe(self) -> str:
        parts = [self.resource.qualified]
        if self.namespace:
            parts.append(f"in namespace {self.namespace}")
        if self.label_selector:
            parts.append(f"labelSelector={safe(self.label_selector, 120)}")
        if self.field_selector:
            parts.append(f"fieldSelector={safe(self.field_selector, 120)}")
        return " ".join(parts)

    def _selectors(self) -> dict[str, str]:
        with self._lock:
            found = {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}
        return {k: v for k, v in found.items() if v}

    def _key(self, obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise ValueError(f"a {self.resource.kind} without metadata.name")
        name: str = meta["name"]
        if self.resource.namespaced:
            return f"{meta.get('namespace') or ''}/{name}"
        return name

    def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(kind, obj)
        except Exception:
            log.exception(
                "kubernetes: informer %s: the %s handler failed for %s",
                self.name,
                kind,
                safe(self._key(obj), 120),
            )

    # --- LIST ------------------------------------------------------------------------

    def _list(self, upto: int) -> None:
        selectors = self._selectors()
        relist = self._synced.is_set()
        items, rv = self.client.list_objects(
            self.resource.path(self.namespace),
            label_selector=selectors.get("labelSelector", ""),
            field_selector=selectors.get("fieldSelector", ""),
            resource_version="0",
            metadata_only=self.metadata_only,
            deadline=max(LIST_DEADLINE, self.client.timeout),
            what=f"list {self._describe()}",
            needs=f"list and watch on {self.resource.qualified}",
        )
        fresh = {self._key(obj): obj for obj in items}
        with self._lock:
            old, self._store = self._store, fresh
            self.resource_version = rv
        self.stats.lists += 1
        self.stats.list_objects += len(items)
        if relist:
            self.stats.relists += 1
        log.debug(
            "kubernetes: informer %s listed %d objects at resourceVersion %s",
            self.name,
            len(items),
            safe(rv, 40),
        )
        # What changed while no stream was open, as events (the first list: all ADDED).
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj)
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self._emit("ADDED", obj)
            elif _rv_of(before) != _rv_of(obj):
                self._emit("MODIFIED", obj)
        self._listed = max(self._listed, upto)
        self._synced.set()  # after the handlers saw the list: their state is complete too

    def _list_more(self, more: list[str], upto: int) -> None:
        """List what widenings added, from where the informer stands, into the store."""
        field = self._selectors().get("fieldSelector", "")
        found: dict[str, dict[str, Any]] = {}
        for added in more:
            items, _rv = self.client.list_objects(
                self.resource.path(self.namespace),
                label_selector=added,
                field_selector=field,
                resource_version=self.resource_version,
                not_older_than=True,
                metadata_only=self.metadata_only,
                deadline=max(LIST_DEADLINE, self.client.timeout),
                what=f"list {self._describe()} (widened by labelSelector={safe(added, 120)})",
                needs=f"list and watch on {self.resource.qualified}",
            )
            self.stats.lists += 1
            self.stats.widenings += 1
            self.stats.list_objects += len(items)
            for obj in items:
                found[self._key(obj)] = obj
        changed: list[tuple[str, dict[str, Any]]] = []
        with self._lock:
            for key, obj in found.items():
                before = self._store.get(key)
                self._store[key] = obj
                if before is None:
                    changed.append(("ADDED", obj))
                elif _rv_of(before) != _rv_of(obj):
                    changed.append(("MODIFIED", obj))
        # The resourceVersion stays where it was: the watch goes on from there, and
        # brings the events of the old part that happened while this list ran.
        for kind, obj in changed:
            self._emit(kind, obj)
        self._listed = max(self._listed, upto)

    # --- WATCH -----------------------------------------------------------------------

    def _watch(self) -> bool:
        """One stream from the last resourceVersion; whether it delivered anything."""
        seconds = max(1, round(self.watch_timeout * random.uniform(1.0, 2.0)))
        params = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(seconds),
            **self._selectors(),
        }
        what = f"watch {self._describe()} from resourceVersion {safe(self.resource_version, 40)}"
        delivered = False
        self.stats.watches += 1
        opened: LineStream | None = None
        try:
            with self.client.open_stream(
                self.resource.path(self.namespace),
                params=params,
                metadata_only=self.metadata_only,
                read_timeout=WATCH_READ_TIMEOUT,
                max_line_bytes=self.max_event_bytes,
                deadline=seconds + WATCH_DEADLINE_MARGIN,
                what=what,
                needs=f"list and watch on {self.resource.qualified}",
            ) as stream:
                opened = stream
                with self._lock:
                    self._stream = stream
                try:
                    if self._stopping.is_set() or self._relist or self._more:
                        return False
                    for line in stream.lines():
                        event = msgspec.json.decode(line)
                        self._apply(event, what)
                        delivered = True
                        if self._stopping.is_set():
                            break
                finally:
                    with self._lock:
                        self._stream = None
        except KubeError:
            # stop() or set_selectors() shut the socket down: reading it, or closing
            # the answer after it, fails, and that is no error of the API's.
            if opened is not None and opened.aborted:
                return delivered
            raise
        return delivered

    def _apply(self, event: Any, what: str) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise ValueError("a watch event is not {type, object}")
        kind = event.get("type")
        obj: dict[str, Any] = event["object"]
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            rv = _rv_of(obj)
            if rv:
                self.resource_version = rv
            return
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Gone()
            raise KubeError(
                f"kubernetes: {what} sent an ERROR event: {safe(code, 10)} "
                f"{safe(obj.get('reason', ''), 60)}: {safe(obj.get('message', ''), 300)} "
                f"({self.client.source}); the informer watches again after a pause",
                code if isinstance(code, int) else None,
            )
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise ValueError(f"a watch event of unknown type {safe(kind, 40)}")
        key = self._key(obj)
        with self._lock:
            if kind == "DELETED":
                self._store.pop(key, None)
            else:
                self._store[key] = obj
            rv = _rv_of(obj)
            if rv:
                self.resource_version = rv
        self.stats.events += 1
        self._emit(kind, obj)

    def _abort_stream(self) -> None:
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.abort()


def _rv_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""
