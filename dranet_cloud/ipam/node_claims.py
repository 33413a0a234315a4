"""A node's own claims, seen through the pods the kubelet runs on it.

Why: leak reclaiming must prove a claim gone, and cluster scope must name a
claim that gen1 DRANET (v1.4.0) sends only by UID.  The API has no lookup by
UID, so both used to list every ResourceClaim on every node, every run (nodes
x claims for one API server).  This node's view costs only its own objects:
one :class:`~dranet_cloud.kube.informer.Informer` on Pods with
``spec.nodeName=<node>`` (one LIST from the watch cache, then a WATCH).

:class:`NodeClaims` keeps which claims (``namespace/name``) a *live* pod of
this node uses (not being deleted, phase neither ``Succeeded`` nor
``Failed``), named in the pod's own namespace by
``spec.resourceClaims[].resourceClaimName`` (a claim made by hand) and
``status.resourceClaimStatuses[].resourceClaimName`` (one a template
generated); and each claim's UID, from ONE ``GET`` when the name is first
seen, on a small resolver thread with a bounded queue (never the informer's
thread or an event loop).  An entry is kept while a live pod uses it or the
store holds rows of its UID, else for ``keep_for`` seconds, at most
``max_known`` of them; a UID's namespace/name never change.

As a :class:`~dranet_cloud.ipam.node.reclaim.ClaimSource` (proof, never
absence of news): a claim a live pod here uses, with the resolved UID, is live
with no call (re-checked by ``GET`` at most once per ``verify_interval``,
jittered); other named claims are proven by ``GET``; a UID-only claim the view
cannot name falls back to one complete list from the watch cache
(``resourceVersion=0``), at most once per ``list_interval`` and only while
such rows are older than the grace, and the names it finds are recorded in the
store's rows for the next runs.

For cluster scope, :meth:`NodeClaims.find` names a gen1 UID from the view; on
a miss it waits (within the request's deadline) for the first list, ``GET`` s
unresolved claims, then lists this node's pods once; still unknown is
``ProviderUnavailable`` (HTTP 500, the kubelet retries), never a guess.
Without a watch (``watch=False``: one-shot ``ipam gc --kubernetes
--node-name``) each run lists this node's pods once instead.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import (
    CLAIM_BATCH,
    DEFAULT_GRACE,
    DEFAULT_RUN_TIMEOUT,
    Evidence,
    KubernetesClaims,
    NothingProven,
)
from dranet_cloud.kube import ClaimIdentity, KubeClient, KubeError
from dranet_cloud.kube.informer import PODS, Informer
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.claims import ClaimReference

__all__ = [
    "DEFAULT_LIST_INTERVAL",
    "DEFAULT_VERIFY_INTERVAL",
    "NodeClaims",
    "NodeClaimsStats",
    "pod_claims",
    "pod_is_live",
]

log = logging.getLogger(__name__)

DEFAULT_VERIFY_INTERVAL = 3600.0  # a claim in use here is re-read this often (jittered)
DEFAULT_LIST_INTERVAL = 3600.0  # the complete list for unnamed UID-only rows, at most this often
DEFAULT_KEEP_FOR = 3600.0  # an entry nothing uses is kept this long
DEFAULT_MAX_KNOWN = 20_000  # UID -> namespace/name entries (a node runs ~100 pods)
DEFAULT_QUEUE = 4096  # claim names waiting for their GET
DEFAULT_MIN_INTERVAL = 1.0  # seconds between two pod lists started for gen1 misses
SYNC_WAIT = 2.0  # a gen1 miss waits at most this long for the view's first list
# A list from the watch cache may be a little behind storage: its evidence is
# dated this much before it began (the grace period comes on top).
CACHE_MARGIN = 60.0
RETRY_FIRST = 5.0  # a claim name the API did not show (yet) is asked again after this
IDLE_WAKE = 60.0  # the resolver with no retry planned sleeps at most this long
DEAD_PHASES = frozenset({"Succeeded", "Failed"})
CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"


def pod_is_live(pod: Mapping[str, Any]) -> bool:
    """Whether the pod may still run its containers (not deleted, not finished)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if not isinstance(meta, dict) or meta.get("deletionTimestamp"):
        return False
    return not (isinstance(status, dict) and status.get("phase") in DEAD_PHASES)


def pod_claims(pod: Mapping[str, Any]) -> frozenset[str]:
    """``namespace/name`` of every claim the pod names (spec and status), live or not."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if not isinstance(namespace, str) or not namespace:
        return frozenset()
    names: set[str] = set()
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    entries = [
        *(spec.get("resourceClaims") or [] if isinstance(spec, dict) else []),
        *(status.get("resourceClaimStatuses") or [] if isinstance(status, dict) else []),
    ]
    for entry in entries:
        name = entry.get("resourceClaimName") if isinstance(entry, dict) else None
        if isinstance(name, str) and name and len(name) <= 253:
            names.add(f"{namespace}/{name}")
    return frozenset(names)


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    if not isinstance(meta, dict):
        return ""
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


@dataclass
class _Known:
    """One claim as a ``GET`` (or the complete list) showed it."""

    namespace: str
    name: str
    uid: str
    verify_at: float  # time.monotonic(): a live pod's claim is read again after this
    kept_at: float  # when a live pod or a store row last needed it

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class NodeClaimsStats:
    """What the view asked of the API besides its informer (benchmarks, tests, /metrics)."""

    claim_gets: int = 0  # GETs of one claim (resolve, verify, prove)
    pod_lists: int = 0  # lists of this node's pods outside the informer
    claim_lists: int = 0  # complete lists of every claim (the UID-only fall-back)
    judged_from_view: int = 0  # claims judged live with no call
    dropped: int = 0  # names not queued (queue full) or not kept (max_known)


class NodeClaims:
    """The claims of this node's pods: a claim source and a UID index (see the module doc).

    ``client`` is the node's :class:`~dranet_cloud.kube.KubeClient`; ``node``
    the node's Kubernetes name.  ``grace`` must be the grace period the runs
    use (the fall-back list waits for rows older than it).  ``counted`` is
    told ``"get-claim"``, ``"list-pods"`` and ``"list-claims"`` before each
    call (figures for cluster scope's benchmarks).
    """

    def __init__(
        self,
        client: KubeClient,
        node: str,
        *,
        watch: bool = True,
        grace: timedelta = DEFAULT_GRACE,
        verify_interval: float = DEFAULT_VERIFY_INTERVAL,
        list_interval: float = DEFAULT_LIST_INTERVAL,
        list_jitter: float = 0.0,
        initial_jitter: float = 0.0,
        keep_for: float = DEFAULT_KEEP_FOR,
        max_known: int = DEFAULT_MAX_KNOWN,
        queue_size: int = DEFAULT_QUEUE,
        min_interval: float = DEFAULT_MIN_INTERVAL,
        run_timeout: float = DEFAULT_RUN_TIMEOUT,
        batch: int = CLAIM_BATCH,
        budget_flag: str = "--budget",
        adopt: bool = False,
        counted: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not node:
            raise ValueError("NodeClaims needs the node's name")
        if min(verify_interval, list_interval, keep_for) <= 0 or max_known < 1 or queue_size < 1:
            raise ValueError("NodeClaims: intervals and bounds must be positive")
        self.client = client
        self.node = node
        self.watch = watch
        self.grace = grace
        self.verify_interval = verify_interval
        self.list_interval = list_interval
        self.initial_jitter = initial_jitter
        self.keep_for = keep_for
        self.max_known = max_known
        self.min_interval = min_interval
        self.run_timeout = run_timeout
        self.batch = batch
        # Its GET, budget and cluster check are the ones this source uses; the
        # cluster's UID is read again only once per verify_interval.
        self.api = KubernetesClaims(
            client,
            run_timeout=run_timeout,
            batch=batch,
            budget_flag=budget_flag,
            adopt=adopt,
            cluster_ttl=verify_interval if watch else 0.0,
        )
        self.stats = NodeClaimsStats()
        self.selector = f"spec.nodeName={node}"
        self._counted = counted or (lambda _kind: None)
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._pods: dict[str, frozenset[str]] = {}  # live pod -> the claims it names
        self._users: dict[str, int] = {}  # claim key -> live pods naming it
        self._by_uid: dict[str, _Known] = {}
        self._by_key: dict[str, str] = {}  # claim key -> the UID last seen under it
        self._retry: dict[str, tuple[float, float]] = {}  # key -> (retry_at, wait)
        self._wake_at = 0.0  # when the resolver's sleep ends (monotonic)
        self._queued: set[str] = set()
        # Names a gen1 miss's own pod list found that the informer had not shown yet.
        self._extra_names: set[str] = set()
        self._queue: queue.Queue[str | None] = queue.Queue(queue_size)
        self._miss_lock = threading.Lock()
        self._pods_listed = -math.inf  # time.monotonic() when the last good pod list began
        self._pods_tried = -math.inf
        self._next_list = time.monotonic() + self._rng.uniform(0.0, max(0.0, list_jitter))
        self._told_wait = -math.inf  # the _next_list the wait for was logged for
        self._informer: Informer | None = None
        self._resolver: threading.Thread | None = None
        self._stopping = threading.Event()
        self._start_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------

    def describe(self) -> str:
        return f"the pods of node {self.node} and {self.api.describe()}"

    def start(self) -> NodeClaims:
        """Start the pods informer and the resolver thread (no-op without ``watch``; idempotent)."""
        with self._start_lock:
            if not self.watch or self._informer is not None or self._stopping.is_set():
                return self

            self._resolver = threading.Thread(
                target=self._resolve_loop, name=f"claims-{self.node}"[:15], daemon=True
            )
            self._resolver.start()
            self._informer = Informer(
                self.client,
                PODS,
                field_selector=self.selector,
                name=f"pods-of-{self.node}",
                on_event=self._on_event,
                initial_jitter=self.initial_jitter,
            ).start()
        return self

    def stop(self) -> None:
        """Stop the informer and the resolver (bounded waits)."""
        self._stopping.set()
        informer, resolver = self._informer, self._resolver
        if informer is not None:
            informer.stop()
        if resolver is not None:
            with contextlib.suppress(queue.Full):  # else it sees _stopping within a second
                self._queue.put_nowait(None)
            resolver.join(5.0)

    close = stop

    @property
    def informer(self) -> Informer | None:
        return self._informer

    @property
    def synced(self) -> bool:
        """Whether the view holds a complete list of this node's pods (with ``watch``)."""
        return self._informer is not None and self._informer.synced

    # -- the pods view -------------------------------------------------------------------

    def _on_event(self, kind: str, pod: dict[str, Any]) -> None:
        """The informer's handler: quick, never calls the API (names go to the resolver)."""
        key = _pod_key(pod)
        claims = pod_claims(pod) if kind != "DELETED" and pod_is_live(pod) else frozenset()
        new = self._set_pod(key, claims)
        for claim in new:
            self._enqueue(claim)

    def _set_pod(self, key: str, claims: frozenset[str]) -> list[str]:
        """Record what the live pod ``key`` uses; the claim keys not resolved yet."""
        with self._lock:
            old = self._pods.pop(key, frozenset())
            if claims:
                self._pods[key] = claims
            for claim in old - claims:
                left = self._users.get(claim, 0) - 1
                if left > 0:
                    self._users[claim] = left
                else:
                    self._users.pop(claim, None)
                    uid = self._by_key.get(claim)
                    if uid in self._by_uid:
                        self._by_uid[uid].kept_at = time.monotonic()
            for claim in claims - old:
                self._users[claim] = self._users.get(claim, 0) + 1
            return [c for c in claims - old if c not in self._by_key]

    def _replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> list[str]:
        """A complete list of this node's pods replaces the view (no informer only)."""
        live = {_pod_key(p): pod_claims(p) for p in pods if pod_is_live(p)}
        unresolved: list[str] = []
        for key in list(self._pods):
            if key not in live:
                self._set_pod(key, frozenset())
        for key, claims in live.items():
            unresolved += self._set_pod(key, claims)
        return unresolved

    def used(self) -> frozenset[str]:
        """``namespace/name`` of every claim a live pod of this node names."""
        with self._lock:
            return frozenset(self._users)

    def cached(self, uid: str) -> ClaimIdentity | None:
        """The claim ``uid`` names, when the view resolved it; no API call."""
        with self._lock:
            known = self._by_uid.get(uid)
            return None if known is None else ClaimIdentity(known.namespace, known.name, uid)

    def _unresolved(self) -> list[str]:
        with self._lock:
            return sorted(k for k in self._users if k not in self._by_key)

    # -- resolving names to UIDs ---------------------------------------------------------

    def _enqueue(self, key: str) -> None:
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
        try:
            self._queue.put_nowait(key)
        except queue.Full:
            with self._lock:
                self._queued.discard(key)
                self.stats.dropped += 1
            # Not lost: a run or a gen1 miss resolves what is still unresolved.
            log.debug("ipam: claim %s waits for a run (resolver queue full)", safe(key))

    def _resolve_loop(self) -> None:
        # Sleeps until the next retry is due (or a key arrives), not on a short
        # timer: a thousand idle nodes waking every second cost a core's slice
        # for nothing.  A retry planned earlier than the sleep's end wakes it.
        while not self._stopping.is_set():
            try:
                key = self._queue.get(timeout=self._until_due())
            except queue.Empty:
                self._requeue_due()
                continue
            if key is None:
                return
            with self._lock:
                self._queued.discard(key)
                wanted = key in self._users and key not in self._by_key
            if not wanted:
                continue  # resolved meanwhile, no longer used, or a wake-up ("")
            try:
                self._resolve(key, self.client.timeout)
            except Exception as exc:  # a failed GET proves nothing: asked again later
                self._later(key)
                log.debug("ipam: resolving claim %s failed: %s", safe(key), safe(exc))

    def _until_due(self) -> float:
        """Seconds until the earliest retry (at most :data:`IDLE_WAKE`); noted for ``_later``."""
        now = time.monotonic()
        with self._lock:
            due = min((at for at, _w in self._retry.values()), default=now + IDLE_WAKE)
            self._wake_at = min(due, now + IDLE_WAKE)
            return max(0.0, self._wake_at - now)

    def _requeue_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [k for k, (at, _w) in self._retry.items() if at <= now and k in self._users]
            for key in list(self._retry):
                if key not in self._users:
                    del self._retry[key]
            for key in due:  # not due again while queued: its GET reschedules it
                _at, wait = self._retry[key]
                self._retry[key] = (now + RETRY_FIRST, wait)
        for key in due:
            self._enqueue(key)

    def _later(self, key: str) -> None:
        """Ask for ``key`` again after a back-off (5 s doubling up to ``verify_interval``)."""
        with self._lock:
            _at, wait = self._retry.get(key, (0.0, RETRY_FIRST / 2))
            wait = min(wait * 2, self.verify_interval)
            at = time.monotonic() + wait * self._rng.uniform(0.8, 1.2)
            self._retry[key] = (at, wait)
            wake = at < self._wake_at
        if wake:  # the resolver sleeps past this retry: wake it to sleep less
            with contextlib.suppress(queue.Full):  # a full queue wakes it anyway
                self._queue.put_nowait("")

    def _resolve(self, key: str, deadline: float) -> ClaimIdentity | None:
        """One ``GET`` of the claim ``key``; records and returns it (``None``: 404)."""
        namespace, _, name = key.partition("/")
        self._counted("get-claim")
        self.stats.claim_gets += 1
        found = self.client.get_resource_claim(namespace, name, deadline=deadline)
        if found is None:
            self._later(key)
            with self._lock:
                self._by_key.pop(key, None)
            return None
        self._learn(found.namespace, found.name, found.uid)
        return found

    def _learn(self, namespace: str, name: str, uid: str) -> None:
        """Record that ``namespace/name`` is (now) the claim ``uid``."""
        now = time.monotonic()
        key = f"{namespace}/{name}"
        with self._lock:
            self._retry.pop(key, None)
            self._by_key[key] = uid
            known = self._by_uid.get(uid)
            if known is None:
                if len(self._by_uid) >= self.max_known:
                    self._evict(now)
                if len(self._by_uid) >= self.max_known:
                    self.stats.dropped += 1
                    return
                self._by_uid[uid] = _Known(namespace, name, uid, self._verify_at(now), now)
            else:
                known.verify_at = self._verify_at(now)
                known.kept_at = now

    def _verify_at(self, now: float) -> float:
        return now + self.verify_interval * self._rng.uniform(0.75, 1.25)

    def _evict(self, now: float, keep: frozenset[str] = frozenset()) -> None:
        """Drop entries no live pod uses, no store row holds and nothing needed lately."""
        for uid, known in list(self._by_uid.items()):
            if known.key in self._users or uid in keep:
                known.kept_at = now
                continue
            if now - known.kept_at > self.keep_for:
                del self._by_uid[uid]
                if self._by_key.get(known.key) == uid:
                    del self._by_key[known.key]

    def _keep(self, uids: Iterable[str]) -> None:
        """The store still holds these UIDs: their entries stay; stale ones go."""
        with self._lock:
            self._evict(time.monotonic(), frozenset(uids))

    # -- the claim source ------------------------------------------------------------------

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        """Everything proven about ``claims`` in one piece (the cluster-wide sweep's call)."""
        until = time.monotonic() + self.run_timeout
        found: set[str] = set()
        judged: set[str] = set()
        first: datetime | None = None
        how = ""
        for evidence in self._judge(claims, None, until, record=False):
            found |= evidence.gone
            judged |= evidence.judged or set()
            first = evidence.as_of if first is None else min(first, evidence.as_of)
            how = evidence.how
        return Evidence(frozenset(found), first or _utc(time.time()), how, frozenset(judged))

    def prove_in_batches(
        self, claims: Sequence[ClaimReference], store: IpamStore, *, record: bool
    ) -> Iterator[Evidence]:
        until = time.monotonic() + self.run_timeout
        cluster, trusted = self.api._confirm_cluster(store, until)
        for evidence in self._judge(claims, store, until, record=record):
            yield replace(evidence, cluster=cluster, cluster_trusted=trusted)

    def _judge(
        self,
        claims: Sequence[ClaimReference],
        store: IpamStore | None,
        until: float,
        *,
        record: bool,
    ) -> Iterator[Evidence]:
        self._refresh(until)
        self._keep(c.uid for c in claims)
        named: list[ClaimReference] = []
        learned: dict[str, tuple[str, str]] = {}

        def name_from_cache(claims: Iterable[ClaimReference]) -> list[ClaimReference]:
            """Move each claim that has (or the cache knows) its name to ``named``."""
            still: list[ClaimReference] = []
            for claim in claims:
                known = None if claim.qualified_name else self.cached(claim.uid)
                if claim.qualified_name:
                    named.append(claim)
                elif known is None:
                    still.append(claim)
                else:
                    named.append(ClaimReference(claim.uid, known.namespace, known.name))
                    learned[claim.uid] = (known.namespace, known.name)
            return still

        unnamed = name_from_cache(claims)
        if unnamed and self._unresolved():
            # Names a pod of this node uses that the resolver has not reached yet:
            # resolve them now, so a UID among them is judged by GET, not by a list.
            self._resolve_all(until)
            unnamed = name_from_cache(unnamed)
        if record and store is not None and learned:
            _record_names(store, learned)
        for begin in range(0, len(named), self.batch):
            yield self._judge_named(named[begin : begin + self.batch], until)
        if unnamed:
            evidence = self._judge_unnamed(unnamed, store, until, record=record)
            if evidence is not None:
                yield evidence

    def _refresh(self, until: float) -> None:
        """Without a watch: one list of this node's pods (with a watch: nothing)."""
        if self.watch:
            if self._informer is None:
                self.start()
            return
        pods = self.api._call(until, self._list_pods)
        for key in self._replace_pods(pods):
            with self._lock:
                self._retry.pop(key, None)

    def _list_pods(self, *, deadline: float) -> list[dict[str, Any]]:
        self._counted("list-pods")
        self.stats.pod_lists += 1
        # From the watch cache: a consistent read would make etcd scan every pod of
        # the cluster to filter this node's.
        return self.client.list_pods(
            field_selector=self.selector, resource_version="0", deadline=deadline
        )

    def _resolve_all(self, until: float) -> None:
        """GET every used claim not resolved yet, within ``until``; failures prove nothing."""
        for key in self._unresolved():
            left = until - time.monotonic()
            if left <= 0:
                return
            try:
                self._resolve(key, min(left, self.client.timeout))
            except KubeError as exc:
                self._later(key)
                log.debug("ipam: resolving claim %s failed: %s", safe(key), safe(exc))

    def _live_here(self, claim: ClaimReference, now: float) -> bool:
        """A live pod of this node uses ``claim`` and it was verified within the interval."""
        key = claim.qualified_name
        with self._lock:
            if key is None or key not in self._users or self._by_key.get(key) != claim.uid:
                return False
            known = self._by_uid.get(claim.uid)
            return known is not None and now < known.verify_at

    def _judge_named(self, chunk: Sequence[ClaimReference], until: float) -> Evidence:
        started = time.time()
        now = time.monotonic()
        gone: set[str] = set()
        from_view = 0
        for claim in chunk:
            if self._live_here(claim, now):
                from_view += 1
                continue
            ns, name = claim.namespace, claim.name
            assert ns is not None and name is not None
            self._counted("get-claim")
            self.stats.claim_gets += 1
            found = self.api._call(until, self.client.get_resource_claim, ns, name)
            if found is None or found.uid != claim.uid:
                gone.add(claim.uid)
            if found is not None:
                self._learn(found.namespace, found.name, found.uid)
                continue
            key = f"{ns}/{name}"
            with self._lock:
                self._by_key.pop(key, None)
                used = key in self._users
            if used:  # a live pod still names it: the resolver asks again later
                self._later(key)
        self.stats.judged_from_view += from_view
        asked = len(chunk) - from_view
        return Evidence(
            frozenset(gone),
            _utc(started),
            f"{from_view} claim(s) in use by live pods of node {self.node} and GET of "
            f"{asked} claim(s) by namespace/name from {self.api.describe()}",
            frozenset(c.uid for c in chunk),
        )

    def _judge_unnamed(
        self,
        unnamed: Sequence[ClaimReference],
        store: IpamStore | None,
        until: float,
        *,
        record: bool,
    ) -> Evidence | None:
        """The fall-back: one complete list from the watch cache, at most once per interval."""
        now = time.monotonic()
        uids = frozenset(c.uid for c in unnamed)
        if now < self._next_list:
            if self._told_wait == self._next_list:
                return None  # said once per wait, not every run
            self._told_wait = self._next_list
            log.info(
                "ipam gc: %d claim(s) known only by UID are on no pod of node %s; the next "
                "complete list of ResourceClaims that judges them is due in %.0f s",
                len(uids),
                self.node,
                self._next_list - now,
            )
            return None
        if store is not None:
            cutoff = datetime.now(timezone.utc) - self.grace
            if not any(a.owner.claim_uid in uids and a.created_at <= cutoff for a in store.list()):
                return None  # none is old enough to free yet: no list
        self._counted("list-claims")
        self.stats.claim_lists += 1
        started = time.time()
        try:
            items = self.api._call(until, self._list_claims)
        except Exception:
            self._next_list = time.monotonic() + min(self.list_interval, 300.0)
            raise
        self._next_list = time.monotonic() + self.list_interval * self._rng.uniform(0.9, 1.1)
        listed: dict[str, tuple[str, str]] = {}
        for item in items:
            meta = item.get("metadata") if isinstance(item, dict) else None
            if not isinstance(meta, dict):
                continue
            uid, ns, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
            if not (isinstance(uid, str) and isinstance(ns, str) and isinstance(name, str)):
                raise NothingProven(
                    f"{self.api.describe()} listed a ResourceClaim without "
                    f"metadata.namespace/name/uid; nothing was freed"
                )
            if uid in uids:
                listed[uid] = (ns, name)
        for uid, (ns, name) in listed.items():
            self._learn(ns, name, uid)
        if record and store is not None and listed:
            _record_names(store, listed)
        return Evidence(
            uids - set(listed),
            _utc(started - CACHE_MARGIN),
            f"a complete list of {len(items)} claim(s) from the watch cache of "
            f"{self.api.describe()} (for {len(uids)} claim(s) known only by UID)",
            uids,
        )

    def _list_claims(self, *, deadline: float) -> list[dict[str, Any]]:
        items, _rv = self.client.list_objects(
            CLAIMS_PATH,
            resource_version="0",
            metadata_only=True,  # the UIDs and names are all it needs
            page_size=self.api.page_size,
            deadline=deadline,
            what="LIST resourceclaims in all namespaces",
            needs="list on resourceclaims.resource.k8s.io",
        )
        return items

    # -- cluster scope: a gen1 UID's namespace/name -----------------------------------------

    def find(self, uid: str, *, asked_at: float, until: float) -> ClaimIdentity:
        """The claim ``uid`` names (see the module doc); :class:`ProviderUnavailable` if unknown.

        ``asked_at`` is when the request arrived (``time.monotonic()``): a
        list of this node's pods begun after it that leads to no claim with
        this UID proves the view is not behind.  ``until`` is the deadline.
        """
        hit = self.cached(uid)
        if hit is not None:
            return hit
        if self.watch:
            self.start()
            informer = self._informer
            if informer is not None and not informer.synced:
                informer.wait_synced(max(0.0, min(SYNC_WAIT, (until - time.monotonic()) / 2)))
        # Misses are served one at a time: concurrent gen1 requests share the GETs
        # and the list of one of them.
        if not self._miss_lock.acquire(timeout=max(0.0, until - time.monotonic())):
            raise self._unknown(uid, "another request's look-up of this node's pods did not end")
        try:
            hit = self._resolve_unresolved(uid, until)
            if hit is None and self._pods_listed < asked_at:
                self._list_for_miss(uid, until)
                hit = self._resolve_unresolved(uid, until)
            if hit is None:
                raise self._unknown(
                    uid,
                    f"no live pod of node {self.node} uses a claim with this UID (its pods "
                    "listed after the request arrived, each claim they name read by GET)",
                )
            return hit
        finally:
            self._miss_lock.release()

    def _list_for_miss(self, uid: str, until: float) -> None:
        wait = self._pods_tried + self.min_interval - time.monotonic()
        if wait > 0:
            if time.monotonic() + wait >= until:
                raise self._unknown(
                    uid,
                    f"this node's pods are listed at most once per {self.min_interval:g} s for "
                    "unknown UIDs and the next list would end after the request's deadline",
                )
            time.sleep(wait)
        started = self._pods_tried = time.monotonic()
        left = until - started
        if left <= 0:
            raise self._unknown(uid, "no time was left to list this node's pods")
        try:
            pods = self._list_pods(deadline=min(left, self.client.timeout))
        except KubeError as exc:
            raise self._unknown(
                uid,
                f"listing this node's pods failed ({exc}); a failed list proves nothing, so "
                "no address was handed out",
            ) from exc
        self._pods_listed = started
        if not self.watch or not self.synced:
            unresolved = self._replace_pods(pods)
        else:  # the informer owns the view: only learn the names this list adds
            unresolved = sorted(
                {k for p in pods if pod_is_live(p) for k in pod_claims(p)} - set(self._by_key)
            )
        with self._lock:
            if len(self._extra_names) + len(unresolved) > self.max_known:
                self._extra_names.clear()
            self._extra_names.update(unresolved[: self.max_known])

    def _resolve_unresolved(self, uid: str, until: float) -> ClaimIdentity | None:
        """GET the claim names known but not resolved, stopping at the one with ``uid``."""
        with self._lock:
            keys = sorted({k for k in (*self._users, *self._extra_names) if k not in self._by_key})
        for key in keys:
            left = until - time.monotonic()
            if left <= 0:
                break
            try:
                found = self._resolve(key, min(left, self.client.timeout))
            except KubeError as exc:
                raise self._unknown(
                    uid,
                    f"reading claim {safe(key)} of a pod of node {self.node} failed ({exc}); "
                    "nothing was handed out",
                ) from exc
            with self._lock:
                self._extra_names.discard(key)
            if found is not None and found.uid == uid:
                return found
        return self.cached(uid)

    @staticmethod
    def _unknown(uid: str, why: str) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"ipam (cluster scope): claim UID {safe(uid)} (gen1 DRANET sends only the UID): "
            f"its namespace/name, which the IPAddress object's parentRef must name, is not "
            f"known: {why}; nothing was handed out, the kubelet retries"
        )


def _record_names(store: IpamStore, names: Mapping[str, tuple[str, str]]) -> None:
    """Write the namespace/name of UID-only rows into the store, when it can keep them."""
    write = getattr(store, "record_claim_names", None)
    if not callable(write):
        return
    try:
        count = write(names)
    except Exception as exc:  # recording is an optimisation: the view still knows them
        log.warning("ipam gc: could not record the names of %d claim(s): %s", len(names), exc)
        return
    if count:
        log.info(
            "ipam gc: recorded the namespace/name of %d claim(s) known only by UID (%d row(s))",
            len(names),
            count,
        )
