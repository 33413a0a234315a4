"""The Kubernetes emulator's event history and watches, as the API server's watch cache does them.

Every create, update and delete the emulator commits becomes a
:class:`WatchEvent` carrying the global ``resourceVersion`` it was given;
:class:`WatchHub` keeps the last ``window`` of them (a watch from an older
RV gets one ``ERROR`` event, a ``410 Expired`` Status, and the stream ends)
and hands each one to the open watches it concerns.

Cheap at scale (a benchmark holds thousands of watches on two cores):

* fan-out touches only the watches of the event's resource, and among those
  only the ones whose index bucket can match: a watch is filed under one
  requirement of its selectors that names the values it accepts
  (``spec.nodeName=n1``, ``app=x``, its namespace, or under each value of
  ``block in (a,b,c)``) and an event looks up the buckets of its object's
  (and previous object's) values, plus the watches with no such requirement;
* the filter runs once, under the store lock, in the writer's thread; the
  line is encoded in the watcher's own thread, once per event and view (full
  object or metadata, new or previous state, event type): a thousand
  watchers of one event cost one encoding;
* a waiting watch sleeps on its own :class:`threading.Condition` (sharing the
  store's lock) until an event, its bookmark time or its deadline: no
  polling, no timer thread;
* while a watch sleeps with nothing queued, the writer sends its event
  straight to the watch's socket without blocking (:class:`DirectSink`): one
  event reaching seven watches costs seven ``send`` calls in one thread, not
  seven thread wake-ups.  A socket that cannot take the whole line at once
  hands the rest, and every later event, back to the watch's own thread;
* each watch's queue is bounded: a watch that does not read is cut off (its
  stream ends), as the API server drops a blocked watcher; the client
  resumes from the last RV it saw.

Selector transitions are the cache's: an object that starts to match is
``ADDED`` to that watch, one that stops matching is ``DELETED`` (its previous
state with the event's RV).  All methods whose name does not say otherwise
expect the caller to hold the hub's lock (the emulator's store lock).
"""

from __future__ import annotations

import bisect
import json
import os
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dranet_cloud.testing.kube_rules import FieldSelector, LabelSelector, field_value
from dranet_cloud.testing.messages import StreamAborted, http_chunk

__all__ = [
    "Encoder",
    "WatchEvent",
    "WatchExpired",
    "WatchHub",
    "WatchStream",
    "Watcher",
    "error_line",
]

OPEN, CUT, OVERFLOW = "open", "cut", "overflow"
MAX_WATCH_SECONDS = 1800.0  # the server's own limit on a watch without timeoutSeconds
_BATCH_BYTES = 256 << 10  # lines joined into one chunk up to this size


class WatchExpired(Exception):
    """A watch asked for an RV older than the history window (410 Expired)."""


@dataclass(frozen=True)
class WatchEvent:
    """One committed change, as the watch cache keeps it."""

    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    namespace: str
    name: str
    obj: Mapping[str, Any]  # the new state (for DELETED the last one, with the delete's RV)
    json: str  # ``obj`` encoded, with kind and apiVersion
    rv: int
    prev: Mapping[str, Any] | None = None  # the state before a MODIFIED
    # (type, use prev?, metadata only?) -> the encoded watch line; filled by
    # whichever watcher's thread needs it first (a race only encodes twice).
    lines: dict[tuple[str, bool, bool], bytes] = field(
        default_factory=dict, compare=False, repr=False
    )


_Labels = Callable[[Mapping[str, Any]], Mapping[str, str]]
IndexKey = tuple[str, str, str]  # ("field"|"label", key, value): one bucket
# ("field"|"label", key, values): a watcher is in the bucket of each value
Index = tuple[str, str, frozenset[str]]
# (event, use the previous object?, metadata only?) -> the object's JSON
Encoder = Callable[[WatchEvent, bool, bool], str]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


@dataclass(eq=False)
class Watcher:
    """One open watch: its filter, its bounded queue and the condition it sleeps on."""

    resource: str
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    cond: threading.Condition
    limit: int
    metadata_only: bool = False
    queue: deque[tuple[str, WatchEvent, bool]] = field(default_factory=deque)
    state: str = OPEN
    index: Index | None = None
    # Set only while the stream's thread sleeps with an empty queue (under the lock):
    # the writer may then send events itself.  ``tail`` is what a short send left.
    sink: DirectSink | None = None
    tail: bytes = b""

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.namespace is not None:
            meta = obj.get("metadata")
            ns = meta.get("namespace") if isinstance(meta, Mapping) else None
            if (ns or "") != self.namespace:
                return False
        return self.labels.matches(_labels(obj)) and self.fields.matches(obj)

    def view(self, event: WatchEvent) -> tuple[str, bool] | None:
        """(type this watch sees, use the previous object?) or ``None``: not its business."""
        if event.resource != self.resource:
            return None
        if event.type != "MODIFIED" or event.prev is None:
            return (event.type, False) if self.matches(event.obj) else None
        now, before = self.matches(event.obj), self.matches(event.prev)
        if now:
            return ("MODIFIED" if before else "ADDED"), False
        return ("DELETED", True) if before else None

    def offer(self, kind: str, event: WatchEvent, use_prev: bool) -> None:
        if self.state != OPEN:
            return
        sink = self.sink
        if sink is not None and not self.queue:
            sent = sink.send(_event_line(kind, event, use_prev, self.metadata_only, sink.encode))
            if sent is None:
                return  # on the wire whole: the stream's thread sleeps on
            self.sink = None  # the rest, and every later event, is the thread's to send
            self.tail = sent
            self.cond.notify()
            return
        if len(self.queue) >= self.limit:
            self.state = OVERFLOW  # a watcher that does not read is cut off
            self.queue.clear()
        else:
            self.queue.append((kind, event, use_prev))
        self.cond.notify()


class DirectSink:
    """A watch's socket, written without blocking by whichever thread records an event.

    Only a connection whose socket has a timeout qualifies: Python runs such
    a socket non-blocking underneath, so a second socket object on the same
    descriptor with timeout 0 sends what fits and returns at once, while the
    stream's own thread keeps its blocking-with-deadline writes.  Used under
    the hub's lock only, and only while that thread sleeps (``Watcher.sink``).
    """

    def __init__(self, sock: socket.socket, encode: Encoder, count: Callable[[int], None]):
        self.encode = encode
        self._count = count  # called under the hub's lock
        self._sock = socket.socket(fileno=os.dup(sock.fileno()))
        self._sock.settimeout(0.0)

    @classmethod
    def of(
        cls, sock: socket.socket | None, encode: Encoder, count: Callable[[int], None]
    ) -> DirectSink | None:
        if sock is None or sock.gettimeout() in (None, 0.0):
            return None  # a blocking socket would turn non-blocking under its owner
        return cls(sock, encode, count)

    def send(self, line: bytes) -> bytes | None:
        """Send ``line`` as one chunk: ``None`` when all of it left, else the bytes
        still to send (the whole frame when nothing did or the peer is gone)."""
        frame = http_chunk(line)
        try:
            n = self._sock.send(frame)
        except OSError:  # full (BlockingIOError) or gone: the stream's thread finds out
            n = 0
        self._count(1)  # it goes out now or as the stream's tail
        return None if n == len(frame) else frame[n:]

    def close(self) -> None:
        self._sock.close()  # a second close is a no-op


def _index_key(w: Watcher) -> Index | None:
    """The requirement ``w`` is filed under: a field equality, else its label
    requirement with the fewest values, else its namespace (``None``: none)."""
    for key, value in w.fields.equalities:
        return ("field", key, frozenset((value,)))
    narrowest = w.labels.narrowest()
    if narrowest is not None:
        return ("label", *narrowest)
    if w.namespace is not None:
        return ("field", "metadata.namespace", frozenset((w.namespace,)))
    return None


def _bucket_keys(index: Index | None) -> list[IndexKey | None]:
    if index is None:
        return [None]
    kind, key, values = index
    return [(kind, key, v) for v in values]


def _event_line(
    kind: str, e: WatchEvent, use_prev: bool, metadata_only: bool, encode: Encoder
) -> bytes:
    """The watch line of ``e`` as a watcher sees it, encoded once per view."""
    view = (kind, use_prev, metadata_only)
    line = e.lines.get(view)
    if line is None:
        obj_json = encode(e, use_prev, metadata_only)
        line = e.lines[view] = f'{{"type": "{kind}", "object": {obj_json}}}\n'.encode()
    return line


def _value(obj: Mapping[str, Any], kind: str, key: str) -> str | None:
    if kind == "field":
        return field_value(obj, key)
    return _labels(obj).get(key)


class WatchHub:
    """History window and open watches of one emulator; see the module docstring."""

    def __init__(self, lock: threading.Lock, *, window: int = 10_000, queue_limit: int = 1000):
        if window < 1 or queue_limit < 1:
            raise ValueError("watch_window and the watch queue limit must be at least 1")
        self.lock = lock
        self.window = window
        self.queue_limit = queue_limit
        self._history: list[WatchEvent] = []
        self._rvs: list[int] = []
        self._compacted = 0  # a watch from an RV below this is expired
        # resource -> index key (None: no equality) -> watchers
        self._buckets: dict[str, dict[IndexKey | None, set[Watcher]]] = {}
        self._dims: dict[str, Counter[tuple[str, str]]] = {}
        self._open: Counter[str] = Counter()

    # --- history (caller holds the lock) ------------------------------------------------

    def record(self, event: WatchEvent) -> None:
        """Keep ``event`` in the window and queue it on every watch it concerns."""
        self._history.append(event)
        self._rvs.append(event.rv)
        if len(self._history) >= 2 * self.window:  # trim in halves: O(1) amortized
            drop = len(self._history) - self.window
            self._compacted = max(self._compacted, self._rvs[drop - 1])
            del self._history[:drop]
            del self._rvs[:drop]
        buckets = self._buckets.get(event.resource)
        if not buckets:
            return
        for w in self._candidates(event, buckets):
            seen = w.view(event)
            if seen is not None:
                w.offer(seen[0], event, seen[1])

    def _candidates(
        self, event: WatchEvent, buckets: dict[IndexKey | None, set[Watcher]]
    ) -> Iterable[Watcher]:
        found: set[Watcher] = set(buckets.get(None, ()))
        for kind, key in self._dims.get(event.resource, {}):
            for obj in (event.obj, event.prev):
                if obj is None:
                    continue
                value = _value(obj, kind, key)
                if value is not None:
                    found.update(buckets.get((kind, key, value), ()))
        return found

    def oldest_rv(self) -> int:
        """The oldest RV a watch may start from (older ones are expired)."""
        if len(self._history) > self.window:
            return max(self._compacted, self._rvs[-self.window - 1])
        return self._compacted

    def compact(self, current_rv: int) -> None:
        """Drop the whole history: a watch from an RV below ``current_rv`` gets 410."""
        self._history.clear()
        self._rvs.clear()
        self._compacted = current_rv

    def since(self, rv: int) -> list[WatchEvent]:
        """The kept events after ``rv``; :class:`WatchExpired` when some are gone."""
        if rv < self.oldest_rv():
            raise WatchExpired(f"too old resource version: {rv} ({self.oldest_rv() + 1})")
        return self._history[bisect.bisect_right(self._rvs, rv) :]

    # --- watches (caller holds the lock) ------------------------------------------------

    def open(
        self,
        resource: str,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        metadata_only: bool = False,
    ) -> Watcher:
        w = Watcher(
            resource,
            namespace,
            labels,
            fields,
            threading.Condition(self.lock),
            self.queue_limit,
            metadata_only,
        )
        w.index = _index_key(w)
        buckets = self._buckets.setdefault(resource, {})
        for key in _bucket_keys(w.index):
            buckets.setdefault(key, set()).add(w)
        if w.index is not None:
            self._dims.setdefault(resource, Counter())[w.index[:2]] += 1
        self._open[resource] += 1
        return w

    def close(self, w: Watcher) -> None:
        buckets = self._buckets.get(w.resource, {})
        keys = _bucket_keys(w.index)
        if w not in buckets.get(keys[0], ()):
            return  # closed already
        for key in keys:
            members = buckets[key]
            members.discard(w)
            if not members:
                del buckets[key]
        if w.index is not None:
            dims = self._dims[w.resource]
            dims[w.index[:2]] -= 1
            if dims[w.index[:2]] <= 0:
                del dims[w.index[:2]]
        self._open[w.resource] -= 1
        if self._open[w.resource] <= 0:
            del self._open[w.resource]

    def cut_all(self) -> int:
        """Abort every open watch (their streams reset); returns how many."""
        n = 0
        for buckets in self._buckets.values():
            for members in buckets.values():
                for w in members:
                    if w.state == OPEN:
                        w.state = CUT
                        w.cond.notify()
                        n += 1
        return n

    def open_counts(self) -> dict[str, int]:
        return {r: n for r, n in sorted(self._open.items()) if n}

    # --- the stream (its own thread; takes the lock itself) -----------------------------

    def stream(
        self,
        w: Watcher,
        first: list[tuple[str, str]],
        *,
        count_locked: Callable[[int], None],
        **options: Any,
    ) -> WatchStream:
        """The watch's answer body, unregistered however it ends; ``options`` are
        :meth:`_lines`' keywords (encode, bookmark, bookmark_interval, timeout,
        count); ``count_locked`` counts what a direct send sent, under the lock."""
        return WatchStream(self, w, first, options, count_locked)

    def _lines(
        self,
        w: Watcher,
        first: list[tuple[str, str]],
        *,
        encode: Encoder,
        bookmark: Callable[[], str] | None,
        bookmark_interval: float,
        timeout: float,
        count: Callable[[int], None],
        sink: DirectSink | None = None,
    ) -> Iterator[bytes]:
        """The watch's pieces: ``first`` (type, object JSON) pairs, then live events.

        ``bookmark()`` (called under the lock, after the queue is drained, so
        its RV covers everything sent) gives a BOOKMARK object every
        ``bookmark_interval`` seconds; the stream ends cleanly at ``timeout``
        seconds or when the watch overflowed, and raises
        :class:`StreamAborted` when it was cut.  Closing the generator (the
        client went away) unregisters the watch.  With a ``sink`` the pieces
        are whole chunks (the sink's tails among them); without, bare lines.
        """

        def piece(data: bytes) -> bytes:
            return http_chunk(data) if sink is not None else data

        try:
            deadline = time.monotonic() + timeout
            batch: list[str] = []
            size = 0
            for kind, obj_json in first:
                line = f'{{"type": "{kind}", "object": {obj_json}}}\n'
                batch.append(line)
                size += len(line)
                if size >= _BATCH_BYTES:
                    count(len(batch))
                    yield piece("".join(batch).encode())
                    batch, size = [], 0
            if batch:
                count(len(batch))
                yield piece("".join(batch).encode())
            next_mark = time.monotonic() + bookmark_interval
            while True:
                mark_json = ""
                with self.lock:
                    while not w.queue and not w.tail and w.state == OPEN:
                        now = time.monotonic()
                        until = min(deadline, next_mark) if bookmark is not None else deadline
                        if now >= until:
                            break
                        w.sink = sink  # the writer may send while this thread sleeps
                        w.cond.wait(until - now)
                        w.sink = None
                    tail, w.tail = w.tail, b""
                    events = list(w.queue)
                    w.queue.clear()
                    state = w.state
                    now = time.monotonic()
                    if bookmark is not None and now >= next_mark and state == OPEN:
                        mark_json = bookmark()
                        next_mark = now + bookmark_interval
                if state == CUT:
                    raise StreamAborted("the watch was cut")
                lines = [
                    _event_line(kind, e, prev, w.metadata_only, encode) for kind, e, prev in events
                ]
                if mark_json:
                    lines.append(f'{{"type": "BOOKMARK", "object": {mark_json}}}\n'.encode())
                if lines:
                    count(len(lines))
                if tail or lines:
                    yield tail + (piece(b"".join(lines)) if lines else b"")
                if state == OVERFLOW or time.monotonic() >= deadline:
                    return
        finally:
            with self.lock:
                w.sink = None
                self.close(w)
            if sink is not None:
                sink.close()


class WatchStream:
    """A watch's body iterator whose :meth:`close` unregisters the watch even if never started.

    (A generator closed before its first ``next`` skips its ``finally``.)
    The server calls :meth:`attach_socket` before the first ``next`` to let
    writers send events to the socket themselves (:class:`DirectSink`).
    """

    def __init__(
        self,
        hub: WatchHub,
        w: Watcher,
        first: list[tuple[str, str]],
        options: dict[str, Any],
        count_locked: Callable[[int], None],
    ) -> None:
        self._hub = hub
        self._watcher = w
        self._first = first
        self._options = options
        self._count_locked = count_locked
        self._sink: DirectSink | None = None
        self._lines: Iterator[bytes] | None = None

    def attach_socket(self, sock: socket.socket) -> bool:
        """Use ``sock`` for direct sends; ``True``: the pieces are whole chunks from now on."""
        if self._lines is not None:
            return False
        self._sink = DirectSink.of(sock, self._options["encode"], self._count_locked)
        self._lines = self._hub._lines(self._watcher, self._first, sink=self._sink, **self._options)
        return self._sink is not None

    def __iter__(self) -> WatchStream:
        return self

    def __next__(self) -> bytes:
        if self._lines is None:
            self._lines = self._hub._lines(self._watcher, self._first, **self._options)
        return next(self._lines)

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()
        with self._hub.lock:
            self._watcher.sink = None
            self._hub.close(self._watcher)
        if self._sink is not None:
            self._sink.close()  # the generator's own close skips this when it never ran


def error_line(status: Mapping[str, Any]) -> bytes:
    """The one ``ERROR`` event of an expired watch."""
    return (json.dumps({"type": "ERROR", "object": status}) + "\n").encode()
