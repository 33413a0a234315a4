"""Cluster scope: one address, one pod, across every node, on the Kubernetes API.

A node-local store cannot keep addresses unique on an L2 segment that pods of
several nodes share (IPVLAN subinterfaces).  Here every address handed out is
a cluster-scoped ``networking.k8s.io/v1`` ``IPAddress`` (what kube-apiserver
allocates Service ClusterIPs with) named by the address, so creating it is an
atomic cluster-wide reservation (409 AlreadyExists: someone holds it); no
leader, lock or custom resource.  :class:`ClusterIpam` is an
:class:`~dranet_cloud.ipam.base.IpamStore`, so the ``local-ipam`` profile is
unchanged.  The node's SQLite store is its journal (:mod:`.journal`): the
intent (``pending``) is committed before the create, the object's UID
(``bound``) before the address is answered; a pending row is resolved by
reading the object back (this claim's: adopted; 404: created again; anyone
else's: another candidate).  Never a duplicate, never a leak.

A candidate costs no round trip per taken address: each range's
:class:`~.journal.RangeView` holds what the cluster has in this node's
64-address blocks (one watch, :mod:`.range_view`; never a list of the whole
range).  Next fit from a home derived from the node's name keeps nodes in
separate stretches; a 409 teaches the view; at most ``max_creates`` creates
are tried per allocation.

The API is the truth: a bound claim is answered again only while its objects
exist (watched state, else one GET); one gone is re-created with the same
address (:mod:`.repair`, also on the watch's delete).  If someone else took it
meanwhile: an ERROR log, a ``/health`` warning, a counter and an error naming
both claims, never the old address silently.  A release marks rows
``releasing`` first so its own deletes are not repaired.  A gen1 request's
UID is named from the journal or :class:`~dranet_cloud.ipam.node_claims.NodeClaims`,
never guessed.  When the API fails a new claim gets ``ProviderUnavailable``
(500, the kubelet retries), never an unconfirmed address; bound claims keep
their answers.  API calls never run on an event loop (``WouldBlock``, so the
server's store lane moves them to a worker thread).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, NoReturn

from dranet_cloud.ipam.base import Allocation, Owner
from dranet_cloud.ipam.cluster.api import (
    BLOCK_LABEL,
    BLOCK_SIZE,
    CLAIM_GROUP,
    CLAIM_RESOURCE,
    CLAIM_UID_ANNOTATION,
    CLAIM_UID_LABEL,
    DEVICE_ANNOTATION,
    IP_FAMILY_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODE_ANNOTATION,
    NODE_LABEL,
    POOL_ANNOTATION,
    RANGE_ANNOTATION,
    IPAddressApi,
    block_index,
    block_value,
)
from dranet_cloud.ipam.cluster.journal import (
    BOUND,
    PENDING,
    RELEASING,
    UNBACKED,
    ClusterJournal,
    JournalRow,
    RangeView,
    ViewStart,
    cluster_call,
)
from dranet_cloud.ipam.cluster.range_view import InformerFactory, RangeWatch
from dranet_cloud.ipam.cluster.reclaim import list_managed, node_of, sweep_ip_addresses
from dranet_cloud.ipam.cluster.repair import ConflictBook, RepairQueue
from dranet_cloud.ipam.node.pool_counts import AllocationTally
from dranet_cloud.ipam.node.reclaim import ClaimSource
from dranet_cloud.ipam.node.sqlite import StoreHealth
from dranet_cloud.ipam.node.transactions import would_block
from dranet_cloud.ipam.node_claims import NodeClaims
from dranet_cloud.ipam.requests import (
    host_cidr,
    ordered_ranges,
    parse_static,
    require_collect_bounds,
)
from dranet_cloud.kube import (
    KubeAlreadyExists,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeNotFound,
)
from dranet_cloud.kube.informer import IPADDRESSES, Informer
from dranet_cloud.kube.ipaddress import (
    IPAddressObject,
    ParentRef,
    canonical_name,
    parse_ip_address,
)
from dranet_cloud.toolkit.errors import (
    AddressConflict,
    ConfigError,
    ProviderUnavailable,
    RangeExhausted,
)
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.claims import ClaimReference

log = logging.getLogger(__name__)

CLUSTER_POOLS = frozenset({"local-ipam"})
DEFAULT_MAX_CREATES = 8
DEFAULT_CALL_TIMEOUT = 3.0  # one API call
DEFAULT_BUDGET = 8.0  # one allocation or release, every call included (DRANET waits 10 s)
MAX_START_OBJECTS = 100_000  # of this node's objects kept from the start-up list
DEFAULT_SYNC_WAIT = 2.0  # a new block's view is waited for this long before a create
# Test hook: exit right after a create succeeded, before the journal records
# it (the crash the recovery path exists for).  Never set it in production.
EXIT_AFTER_CREATE_ENV = "DRANET_CLOUD_FAULT_EXIT_AFTER_IPADDRESS_CREATE"

_LABEL_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def label_value_ok(value: str) -> bool:
    """Whether ``value`` is a valid Kubernetes label value (63 characters, alnum ends)."""
    return (
        0 < len(value) <= 63
        and value[0].isalnum()
        and value[-1].isalnum()
        and value.isascii()
        and set(value) <= _LABEL_VALUE_CHARS
    )


class _Budget:
    """The end-to-end deadline of one allocation or release."""

    def __init__(self, seconds: float, per_call: float) -> None:
        self.until = time.monotonic() + seconds
        self.per_call = per_call
        self.seconds = seconds

    def call(self, what: str) -> float:
        left = self.until - time.monotonic()
        if left <= 0:
            raise ProviderUnavailable(
                f"ipam (cluster scope): {what}: the API calls of this request took longer than "
                f"{self.seconds:g} s; nothing unconfirmed was handed out, retry"
            )
        return min(left, self.per_call)


def _off_loop(what: str) -> None:
    """Refuse to call the API on a thread that runs an event loop (see the module doc)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise would_block(f"ipam (cluster scope): {what} calls the Kubernetes API")


@dataclass
class ClusterReclaimResult:
    """What a collection in cluster scope did beyond the journal's own reclaim."""

    retried_releases: list[str] = field(default_factory=list)
    failed_releases: int = 0
    sweep: Any = None  # a cluster_reclaim.SweepResult when the sweep ran


class ClusterIpam:
    """The cluster-scope :class:`~.base.IpamStore` (see the module doc).

    ``pools`` are the owner pools allocated on the API (the ``local-ipam``
    profile); others (a cloud plugin's per-VM ranges) stay node scope in
    the same journal.  ``close_api`` is called by :meth:`close`.
    """

    def __init__(
        self,
        journal: ClusterJournal,
        api: IPAddressApi,
        *,
        node: str,
        pools: Iterable[str] = CLUSTER_POOLS,
        max_creates: int = DEFAULT_MAX_CREATES,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        budget: float = DEFAULT_BUDGET,
        make_informer: InformerFactory | None = None,
        initial_jitter: float = 0.0,
        sync_wait: float = DEFAULT_SYNC_WAIT,
        close_api: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
        claims: NodeClaims | None = None,
    ) -> None:
        if not node:
            raise ConfigError(
                "ipam (cluster scope) needs the node's name (--node-name or NODE_NAME)"
            )
        if max_creates < 1:
            raise ConfigError(
                f"ipam (cluster scope): max_creates must be at least 1, got {max_creates}"
            )
        self.journal = journal
        self.api = api
        self.node = node
        self.pools = frozenset(pools)
        self.max_creates = max_creates
        self.call_timeout = call_timeout
        self.budget = budget
        self.sync_wait = sync_wait
        self._close_api = close_api
        self._home = node_home(node)
        self._views: dict[IPRange, RangeView] = {}
        self._watches: dict[IPRange, RangeWatch] = {}
        self._views_lock = threading.Lock()
        # Without an informer factory (a one-shot CLI command) the views know
        # only the journal and what 409s teach; the create stays the referee.
        self._make_informer = make_informer
        self._initial_jitter = initial_jitter
        self._own_blocks: dict[str, list[int]] | None = None  # range -> blocks, at start
        self._own_at_start: list[IPAddressObject] = []  # this node's objects, at start
        environ = os.environ if env is None else env
        self._exit_after_create = environ.get(EXIT_AFTER_CREATE_ENV) == "1"
        # Figures for benchmarks and tests (never reset): API calls by kind.
        self.calls: dict[str, int] = {"create": 0, "get": 0, "delete": 0, "list": 0}
        self._calls_lock = threading.Lock()
        # Objects re-created, conflicts met (for /health and /metrics).
        self.conflicts = ConflictBook()
        self.repairs = RepairQueue(self._repair, name=f"ipam-repair {node}")
        # The Lease candidate of this sidecar (serve sets it), for /health and /metrics.
        self.reclaimer: Any = None
        # gen1 DRANET names a claim by UID only: its namespace/name from the claims
        # of this node's pods (shared with the collector when it has the view;
        # else this store's own, whose watch starts at the first gen1 request).
        self._own_claims = claims is None
        if claims is None:
            claims = NodeClaims(api, node, counted=self._count)  # type: ignore[arg-type]
        self.claims = claims

    # -- the IpamStore protocol --------------------------------------------------------

    def allocate(
        self, owner: Owner, ranges: Sequence[IPRange], *, claim: ClaimReference | None = None
    ) -> list[str]:
        if owner.pool not in self.pools:
            return self.journal.allocate(owner, ranges, claim=claim)
        asked_at = time.monotonic()
        wanted = ordered_ranges(owner, ranges)
        known = self._known(owner, {r.version for r in wanted})
        if known is not None:
            return [known[r.version] for r in wanted]
        budget = self._request_budget(f"allocating for {owner}")
        claim = self._named(owner, claim, asked_at, budget)
        creates = 0
        misses = 0  # candidates the widened view showed taken (no write spent)
        while True:
            if creates >= self.max_creates or misses >= self.max_creates * 8:
                raise ProviderUnavailable(
                    f"ipam (cluster scope): {owner}: {creates + misses} address(es) tried in "
                    f"{', '.join(map(str, wanted))} were all taken by other nodes; the range "
                    "is contended, retry"
                )
            views = {r.version: self._view(r, budget) for r in wanted}
            addresses, new_rows = self._intents(owner, wanted, claim, views, budget)
            fresh = {(r.family, r.value) for r in new_rows}
            rows = [r for r in new_rows if r.address in addresses]
            if len(rows) < len(addresses):  # some were in the journal already: read them
                rows = [r for r in self.journal.rows(owner) if r.address in addresses]
            retry = False
            for row in rows:
                if row.state == BOUND:
                    continue
                done, wrote = self._settle(
                    row, claim, fresh=(row.family, row.value) in fresh, budget=budget, views=views
                )
                creates += wrote
                misses += 0 if wrote or done else 1
                retry = retry or not done
            if not retry:
                return addresses

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]:
        if owner.pool not in self.pools:
            return self.journal.reserve(owner, addresses, claim=claim)
        asked_at = time.monotonic()
        asked = [host_cidr(a) for a in parse_static(owner, addresses)]
        held = self.journal.rows(owner)
        bound = {r.address for r in held if r.state == BOUND}
        if all(a in bound for a in asked):
            # A retry: answered once the API still holds the objects (or holds them again).
            self._confirm([r for r in held if r.address in asked], f"reserving for {owner}")
            return asked
        budget = self._request_budget(f"reserving for {owner}")
        claim = self._named(owner, claim, asked_at, budget)
        # The journal refuses what another owner of this node holds; it writes
        # the intents of the new addresses.
        views: dict[int, RangeView] = {}
        with cluster_call(views) as new_rows:
            result = self.journal.reserve(owner, addresses, claim=claim)
        fresh = {(r.family, r.value) for r in new_rows}
        wanted = set(result)
        rows = [r for r in self.journal.rows(owner) if r.address in wanted and r.state != BOUND]
        made: list[JournalRow] = []
        for row in rows:
            new = (row.family, row.value) in fresh
            done, _wrote = self._settle(row, claim, fresh=new, budget=budget, views=views)
            if done:
                made += [row] if new else []
                continue
            holder = self._holder(row.name, budget)
            # All or nothing, as in node scope: what this call reserved goes again.
            self._release_rows(made, budget, strict=False)
            raise AddressConflict(
                f"ipam (cluster scope): {row.name} requested by {owner} is already held in "
                f"the cluster ({holder}); pick another address or release the holder's claim"
            )
        return result

    def release(self, owner: Owner) -> list[str]:
        if owner.pool not in self.pools:
            return self.journal.release(owner)
        rows = self.journal.rows(owner)
        if not rows:
            return []
        return self._release_rows(rows, self._request_budget(f"releasing for {owner}"))

    def held(self, owner: Owner) -> list[Allocation]:
        return self.journal.held(owner)

    def collect(
        self, live_claims: Iterable[str] | None = None, older_than: timedelta | None = None
    ) -> list[Allocation]:
        """Like the node store's ``collect``, deleting the objects of what it frees."""
        require_collect_bounds(live_claims, older_than)  # the node store's refusal
        live = None if live_claims is None else frozenset(live_claims)
        cutoff = None if older_than is None else datetime.now(timezone.utc) - older_than
        victims = [
            row
            for row in self.journal.all_rows()
            if (live is None or row.owner.claim_uid not in live)
            and (cutoff is None or row.allocation.created_at <= cutoff)
        ]
        local = [r for r in victims if r.owner.pool not in self.pools]
        self.journal.forget(local)
        freed = [r.allocation for r in local]
        cluster = [r for r in victims if r.owner.pool in self.pools]
        if cluster:
            done = self._release_rows(
                cluster, _Budget(self.budget * 4, self.call_timeout), strict=False
            )
            freed += [r.allocation for r in cluster if r.address in done]
        return freed

    def start(self, ranges: Sequence[IPRange]) -> ClusterIpam:
        """Start the views of ``ranges`` now (serve: at start, with the initial jitter),
        not at the first claim; without an informer factory this does nothing."""
        if self._make_informer is not None:
            for rng in ranges:
                self._view(rng)
        return self

    def stop_watching(self) -> None:
        """Stop the views' informers and the repair thread (bounded waits)."""
        self.repairs.stop()
        with self._views_lock:
            watches = list(self._watches.values())
            self._watches.clear()
            self._make_informer = None
        for watch in watches:
            watch.stop()

    def close(self) -> None:
        try:
            self.stop_watching()
            if self._own_claims:
                self.claims.stop()
        finally:
            self._close_journal()

    def _close_journal(self) -> None:
        try:
            self.journal.close()
        finally:
            if self._close_api is not None:
                close, self._close_api = self._close_api, None
                close()

    # The journal's state and counters, for /health and /metrics.

    def health(self) -> StoreHealth:
        """The journal's state, plus warnings: conflicts met, views that fail."""
        state = self.journal.health()
        extra = list(self.conflicts.warnings())
        for view in self.view_states():
            if view.get("last_error") and not view.get("synced"):
                extra.append(
                    f"ipam (cluster scope): the watch of range {view['range']} has not synced: "
                    f"{view['last_error']}"
                )
        if not extra:
            return state
        return replace(state, warnings=(*state.warnings, *extra))

    def view_states(self) -> list[dict[str, Any]]:
        """Each watched range: blocks, synced, last error, the informer's counters."""
        with self._views_lock:
            watches = list(self._watches.values())
        return [w.state() for w in watches]

    def cluster_state(self) -> dict[str, Any]:
        """What ``/health`` shows of cluster scope (cheap: no call, no journal read)."""
        return {
            "scope": "cluster",
            "node": self.node,
            "views": self.view_states(),
            "conflicts": len(self.conflicts.warnings()),
        }

    def cluster_stats(self) -> dict[str, int]:
        """Counters for ``/metrics``: repairs, conflicts, API calls, the views' informers."""
        stats = dict(self.conflicts.counters)
        stats["repairs_dropped"] += self.repairs.dropped
        with self._calls_lock:
            for kind, n in self.calls.items():
                stats[f"calls_{kind}"] = n
        for key in ("lists", "list_objects", "watches", "events", "relists", "widenings", "errors"):
            stats[f"informer_{key}"] = sum(int(v.get(key, 0)) for v in self.view_states())
        return stats

    def health_problem(self) -> str | None:
        return self.journal.health_problem()

    @property
    def tally(self) -> AllocationTally:
        return self.journal.tally

    def watch_ranges(self, ranges: Sequence[IPRange]) -> None:
        self.journal.watch_ranges(ranges)

    def recount_if_changed(self) -> bool:
        return self.journal.recount_if_changed()

    def get_meta(self, key: str) -> str | None:
        """The journal's recorded facts (the cluster identity leak reclaiming checks)."""
        return self.journal.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self.journal.set_meta(key, value)

    def record_claim_names(self, names: Mapping[str, tuple[str, str]]) -> int:
        """The journal's rows known only by UID learn their claim's namespace/name."""
        return self.journal.record_claim_names(names)

    def __enter__(self) -> ClusterIpam:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the collector's part ----------------------------------------------------------------

    def retry_releases(self) -> tuple[list[str], int]:
        """Delete the objects of releases that failed earlier; (freed, still failing)."""
        rows = self.journal.all_rows(RELEASING)
        if not rows:
            return [], 0
        freed = self._release_rows(rows, _Budget(self.budget * 4, self.call_timeout), strict=False)
        return freed, len(rows) - len(freed)

    def cluster_reclaim(
        self,
        source: ClaimSource,
        *,
        grace: timedelta,
        dry_run: bool = False,
        everyone: bool = False,
    ) -> ClusterReclaimResult:
        """After the journal's reclaim: failed releases again, then this node's own
        orphans (objects naming this node that the journal does not hold, whose
        claims are proven gone): from the watched blocks, no list.

        ``everyone`` (``ipam gc`` run once by an operator) judges every object
        of the project instead (one list), except those of another node whose
        Node object exists: that node reclaims its own.  Objects of nodes
        that vanished are otherwise the Lease holder's (:mod:`.reclaimer`).
        """
        result = ClusterReclaimResult()
        if not dry_run:
            result.retried_releases, result.failed_releases = self.retry_releases()
        which: dict[str, Any]  # every object but live nodes' (one-shot), or this node's own
        if everyone:
            alive: dict[str, bool] = {}
            which = {"skip": lambda obj: self._held(obj) or self._other_node_alive(obj, alive)}
        else:
            which = {"objects": [o for o in self._own_objects() if not self._held(o)]}
        result.sweep = sweep_ip_addresses(
            self.api, source, grace=grace, dry_run=dry_run, counted=self._count, **which
        )
        return result

    def _own_objects(self) -> list[IPAddressObject]:
        """This node's objects: those of the watched blocks when watching (no call),
        else one LIST by node label (a one-shot command)."""
        with self._views_lock:
            watches = list(self._watches.values())
        if not watches:
            if not label_value_ok(self.node):
                return []
            return list_managed(self.api, f"{NODE_LABEL}={self.node}", counted=self._count)
        found: dict[str, IPAddressObject] = {}
        for watch in watches:
            if not watch.synced_all():
                return []  # judged at the next run, once the views hold their blocks
            for doc in watch.own_objects():  # those naming this node, as they arrived
                try:
                    obj = parse_ip_address(doc)
                except ValueError:
                    continue
                found[obj.name] = obj
        # The start-up list's objects that no watch shows (no block label: an earlier
        # version's; or a range no longer configured) are judged too, as listed then.
        for obj in self._own_at_start:
            if obj.name not in found:
                row = self._watch_for_name(obj.name)
                if row is not None and row.lookup(obj.name) is not None:
                    continue  # watched: judged above when it still names this node
                if (
                    row is None
                    or not row.covers(int(obj.address))
                    or (not (obj.labels or {}).get(BLOCK_LABEL))
                ):
                    found[obj.name] = obj
        return list(found.values())

    def _watch_for_name(self, name: str) -> RangeWatch | None:
        try:
            addr = ipaddress.ip_address(name)
        except ValueError:
            return None
        with self._views_lock:
            for rng, watch in self._watches.items():
                if rng.version == addr.version and int(rng.start) <= int(addr) <= int(rng.end):
                    return watch
        return None

    def _held(self, obj: IPAddressObject) -> bool:
        """Whether the journal holds ``obj``'s address for the claim it names."""
        try:
            addr = obj.address
        except ValueError:
            return False
        row = self.journal.row_at(addr.version, int(addr))
        if row is None:
            return False
        return (obj.annotations or {}).get(CLAIM_UID_ANNOTATION) == row.owner.claim_uid

    def _other_node_alive(self, obj: IPAddressObject, cache: dict[str, bool]) -> bool:
        """Whether ``obj`` names another node whose Node object exists (never swept)."""
        node = node_of(obj)
        if node is None or node == self.node:
            return False
        if node not in cache:
            self._count("get")
            try:
                self.api.get_node(node, deadline=self.call_timeout)
                cache[node] = True
            except KubeNotFound:
                cache[node] = False
            except KubeError:
                cache[node] = True  # unknown: kept
        return cache[node]

    # -- internals -----------------------------------------------------------------------------

    def _count(self, kind: str) -> None:
        with self._calls_lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1

    def _known(self, owner: Owner, families: set[int]) -> dict[int, str] | None:
        """The owner's bound dynamic addresses by family, when they cover ``families``."""
        found: dict[int, str] = {}
        rows = self.journal.rows(owner)
        for row in rows:
            if row.allocation.static:
                continue
            if row.state != BOUND:
                return None
            found.setdefault(row.family, row.address)
        if not families <= set(found):
            return None
        self._confirm(rows, f"allocating for {owner}")
        return found

    # -- the API is the truth: a retry's objects, repairs, conflicts ---------------------

    def _confirm(self, rows: Sequence[JournalRow], doing: str) -> None:
        """Before bound rows answer a retry: their objects must still be there.

        The watched state answers when the row's block is watched and synced
        and shows the object (no call); else one GET decides (the watch may
        not have delivered a create yet).  An object gone is re-created with the same
        address first; someone else's object there is a conflict (raised,
        naming both claims).  A GET that fails answers from the journal.
        """
        for row in rows:
            if row.state != BOUND or row.owner.pool not in self.pools:
                continue
            watch = self._watch_of(row)
            obj = None
            if watch is not None and watch.covers(row.value):
                obj = self._watched_object(watch, row.name)
            if obj is not None and obj.uid == row.uid:
                continue  # the watched state answers: no call
            # Not watched, or the watch does not show it (gone, or its ADDED not
            # delivered yet): one GET decides before anything is re-created.
            budget = self._request_budget(doing)
            try:
                obj = self._read(row.name, budget)
            except ProviderUnavailable as exc:
                log.debug("ipam (cluster scope): %s answered from the journal: %s", row.name, exc)
                continue
            if obj is not None and obj.uid == row.uid:
                continue
            if obj is not None and self._ours(obj, row):
                self.journal.set_state(row, BOUND, obj.uid, expect=(BOUND,))
                continue
            if obj is not None:
                raise self._conflict(row, obj)
            self._request_budget(doing)  # a create never runs on an event loop
            self._recreate(row, _Budget(self.budget, self.call_timeout))

    def _watched_object(self, watch: RangeWatch, name: str) -> IPAddressObject | None:
        doc = watch.lookup(name)
        if doc is None:
            return None
        try:
            return parse_ip_address(doc)
        except ValueError:
            return None

    def _recreate(self, row: JournalRow, budget: _Budget) -> None:
        """Create ``row``'s object again, the same address, for the same claim.

        Raises the conflict when someone else holds the address now, and
        :class:`ProviderUnavailable` when the API does not confirm the create.
        """
        recorded = row.allocation.claim
        if recorded is None or not recorded.namespace or not recorded.name:
            raise ProviderUnavailable(
                f"ipam (cluster scope): IPAddress {row.name} of {row.owner} is gone and the "
                "journal does not record its claim's namespace/name to create it again; "
                "release the claim (delete its pod) so it is allocated afresh"
            )
        try:
            obj = self._create(row, None, budget)
        except KubeAlreadyExists:
            holder = self._read(row.name, budget)
            if holder is None:
                raise ProviderUnavailable(
                    f"ipam (cluster scope): IPAddress {row.name} of {row.owner} was being "
                    "re-created while someone deleted it again; retry"
                ) from None
            if self._ours(holder, row):
                self.journal.set_state(row, BOUND, holder.uid, expect=(BOUND,))
                return
            raise self._conflict(row, holder) from None
        except KubeError as exc:
            raise ProviderUnavailable(
                f"ipam (cluster scope): IPAddress {row.name} of {row.owner} is gone and "
                f"creating it again failed ({exc}); nothing was answered, retry"
            ) from exc
        if not self.journal.set_state(row, BOUND, obj.uid, expect=(BOUND,), expect_uid=row.uid):
            # Released (or repaired by another thread) meanwhile: this object is nobody's.
            try:
                self._delete(row.name, obj.uid, _Budget(self.call_timeout, self.call_timeout))
            except ProviderUnavailable as exc:
                log.warning("ipam (cluster scope): %s", safe(exc))
            return
        self.conflicts.count("repairs")
        self.conflicts.clear(row.name)
        log.warning(
            "ipam (cluster scope): re-created IPAddress %s of %s (claim %s): its object had "
            "been deleted by someone else while the claim is live",
            row.name,
            row.owner,
            safe(_claim_text(recorded)),
        )

    def _repair(self, name: str, uid: str) -> None:
        """The repair thread's work: the watch saw ``name`` (``uid``) deleted."""
        try:
            addr = ipaddress.ip_address(canonical_name(name))
        except ValueError:
            return
        row = self.journal.row_at(addr.version, int(addr))
        if row is None or row.state != BOUND or row.uid != uid:
            return  # released (ours), never bound, or already repaired
        if row.owner.pool not in self.pools:
            return
        try:
            self._recreate(row, _Budget(self.budget, self.call_timeout))
        except AddressConflict:
            pass  # reported by _conflict
        except ProviderUnavailable as exc:
            log.warning(
                "ipam (cluster scope): cannot re-create IPAddress %s yet (%s); the claim's "
                "next retry does",
                name,
                safe(exc),
            )

    def _conflict(self, row: JournalRow, holder: IPAddressObject) -> AddressConflict:
        """Report (ERROR log, /health, counter) that someone else holds ``row``'s address."""
        ours = _claim_text(row.allocation.claim, row.owner.claim_uid)
        notes = holder.annotations or {}
        parent = holder.parent
        theirs = f"{parent.namespace}/{parent.name}" if parent is not None and parent.name else "?"
        theirs += f" (uid {notes.get(CLAIM_UID_ANNOTATION, '?')}"
        theirs += f", node {notes.get(NODE_ANNOTATION, '?')}"
        theirs += f", managed by {(holder.labels or {}).get(MANAGED_BY_LABEL, '?')})"
        message = (
            f"ipam (cluster scope): IPAddress {row.name} of claim {ours} on node {self.node} "
            f"was deleted, and the address is now held by claim {safe(theirs)}: one address, "
            "two claims. This claim is not answered; release one of the two claims (delete "
            "its pod) so the other keeps the address"
        )
        if self.conflicts.report(row.name, holder.uid, message):
            log.error("%s", message)
        return AddressConflict(message)

    def _request_budget(self, doing: str) -> _Budget:
        """The deadline of one allocation, reservation or release (never on an event loop)."""
        _off_loop(doing)
        return _Budget(self.budget, self.call_timeout)

    def _named(
        self, owner: Owner, claim: ClaimReference | None, asked_at: float, budget: _Budget
    ) -> ClaimReference:
        """``claim`` with the namespace and name the parentRef must carry (gen2 DRANET
        sends them; gen1's come from the journal or ``self.claims``, never a guess)."""
        if claim is not None and claim.namespace and claim.name:
            return claim
        pods = claim.pods if claim is not None else ()
        for row in self.journal.rows(owner):
            recorded = row.allocation.claim
            if recorded is not None and recorded.namespace and recorded.name:
                return ClaimReference(owner.claim_uid, recorded.namespace, recorded.name, pods)
        found = self.claims.find(owner.claim_uid, asked_at=asked_at, until=budget.until)
        log.info(
            "ipam (cluster scope): claim UID %s is %s/%s (a claim of a pod of this node)",
            safe(owner.claim_uid),
            safe(found.namespace),
            safe(found.name),
        )
        return ClaimReference(owner.claim_uid, found.namespace, found.name, pods)

    def _intents(
        self,
        owner: Owner,
        wanted: list[IPRange],
        claim: ClaimReference | None,
        views: dict[int, RangeView],
        budget: _Budget,
    ) -> tuple[list[str], list[JournalRow]]:
        """The journal's addresses for ``owner`` (new intents committed).

        Full means every address is known taken (the journal, the watched
        blocks, the 409s met): no list is made to double-check.
        """
        try:
            with cluster_call(views) as inserted:
                addresses = self.journal.allocate(owner, wanted, claim=claim)
            return addresses, list(inserted)
        except RangeExhausted:
            full = next(
                (r for r in wanted if r.version in views and self._looks_full(views[r.version])),
                wanted[0],
            )
            raise RangeExhausted(
                f"ipam (cluster scope): no free address left in IPv{full.version} range "
                f"{full} for {owner}: the cluster holds every address of it as IPAddress "
                "objects (kubectl get ipaddresses); free addresses with `dranet-cloud "
                "ipam gc --kubernetes --ipam-scope cluster` or configure a larger range"
            ) from None

    @staticmethod
    def _looks_full(view: RangeView) -> bool:
        return len(view) >= view.range.size

    def _settle(
        self,
        row: JournalRow,
        claim: ClaimReference | None,
        *,
        fresh: bool,
        budget: _Budget,
        views: Mapping[int, RangeView],
    ) -> tuple[bool, int]:
        """Bring a non-bound row to ``bound``; ``(done, writes)``.

        Not done: someone else holds the address, the row is dropped and the
        view knows, so the next pick avoids it.  A fresh candidate in a block
        the view does not watch yet widens the watch first (waited for
        briefly), so a taken address costs no write when the watch shows it.
        """
        view = views.get(row.family)
        if not fresh:
            obj = self._read(row.name, budget)
            if obj is not None:
                if self._ours(obj, row):
                    self._bind(row, obj)
                    log.info("ipam (cluster scope): %s adopted IPAddress %s", row.owner, row.name)
                    return True, 0
                self._lost(row, view)
                return False, 0
        elif self._taken_in_view(row, budget):
            self._lost(row, view)
            return False, 0
        try:
            obj = self._create(row, claim, budget)
        except KubeAlreadyExists:
            if not fresh:
                found = self._read(row.name, budget)
                if found is not None and self._ours(found, row):
                    self._bind(row, found)
                    return True, 1
            self.conflicts.count("create_conflicts")
            self._lost(row, view)  # the view learns it: no list follows
            self._jump(row, view)  # and the search leaves the stretch the winner fills
            return False, 1
        except KubeError as exc:
            self._create_failed(row, exc)
        if view is not None:
            view.add(row.value)
            view.advance(row.value)
        self._bind(row, obj)
        self._prefetch(row)
        return True, 1

    def _taken_in_view(self, row: JournalRow, budget: _Budget) -> bool:
        """Whether the watch of ``row``'s block shows someone else's object there."""
        watch = self._watch_of(row)
        if watch is None:
            return False
        block = watch.block_of(row.value)
        if watch.watch([block]):
            wait = min(
                self.sync_wait, max(0.0, budget.until - time.monotonic() - self.call_timeout)
            )
            watch.wait_covered(row.value, wait)
        return watch.covers(row.value) and watch.lookup(row.name) is not None

    def _prefetch(self, row: JournalRow) -> None:
        """Near the end of a block, watch the next one: next fit goes there soon."""
        watch = self._watch_of(row)
        if watch is None:
            return
        offset = row.value - watch.view.lo
        if offset % BLOCK_SIZE >= BLOCK_SIZE * 3 // 4 and offset + BLOCK_SIZE < watch.range.size:
            watch.watch([watch.block_of(row.value) + 1])

    def _create_failed(self, row: JournalRow, exc: Exception) -> NoReturn:
        # A create refused with a 4xx was certainly not stored: the intent goes.
        # Anything else (5xx, 429, a timeout, a lost reply) may have been stored,
        # so the intent stays pending until the object is read back.
        status = getattr(exc, "status", None)
        if not getattr(exc, "transient", True):
            self.journal.forget([row])
            if status in (400, 422):
                raise ConfigError(
                    f"ipam (cluster scope): the API refused IPAddress {row.name} for "
                    f"{row.owner}: {exc}"
                ) from exc
            raise ProviderUnavailable(
                f"ipam (cluster scope): cannot create IPAddress {row.name} for {row.owner}: {exc}"
                + (
                    "; grant create, get, list, watch and delete on ipaddresses.networking.k8s.io "
                    "(deploy/overlays/bare-metal/rbac-ipaddresses.yaml)"
                    if status == 403
                    else ""
                )
            ) from exc
        raise ProviderUnavailable(
            f"ipam (cluster scope): creating IPAddress {row.name} for {row.owner} failed ({exc}); "
            "the intent is kept and checked on the next try, nothing was handed out"
        ) from exc

    def _lost(self, row: JournalRow, view: RangeView | None) -> None:
        self.journal.forget([row])
        if view is not None:
            view.add(row.value)  # from the watch's store, else a foreign address
            view.advance(row.value)
        log.debug("ipam (cluster scope): %s is held elsewhere in the cluster", row.name)

    def _bind(self, row: JournalRow, obj: IPAddressObject) -> None:
        if self.journal.set_state(row, BOUND, obj.uid, expect=(PENDING, UNBACKED)):
            return
        # Released while the create was in flight: nobody records the object now,
        # so it goes (a failed delete leaves it to the collector: its claim is gone).
        try:
            self._delete(row.name, obj.uid, _Budget(self.call_timeout, self.call_timeout))
        except ProviderUnavailable as exc:
            log.warning("ipam (cluster scope): %s", safe(exc))
        raise ProviderUnavailable(
            f"ipam (cluster scope): {row.owner} was released while {row.name} was being "
            "reserved; retry"
        )

    def _create(
        self, row: JournalRow, claim: ClaimReference | None, budget: _Budget
    ) -> IPAddressObject:
        recorded = row.allocation.claim
        ref = recorded if recorded is not None and recorded.name else claim
        assert ref is not None and ref.namespace and ref.name  # _named found them
        parent = ParentRef(
            group=CLAIM_GROUP, resource=CLAIM_RESOURCE, namespace=ref.namespace, name=ref.name
        )
        labels = {
            MANAGED_BY_LABEL: MANAGED_BY,
            IP_FAMILY_LABEL: f"IPv{row.family}",
        }
        if label_value_ok(self.node):
            labels[NODE_LABEL] = self.node
        if label_value_ok(row.owner.claim_uid):
            labels[CLAIM_UID_LABEL] = row.owner.claim_uid
        annotations = {
            NODE_ANNOTATION: self.node,
            CLAIM_UID_ANNOTATION: row.owner.claim_uid,
            DEVICE_ANNOTATION: row.owner.device,
            POOL_ANNOTATION: row.owner.pool,
        }
        rng = self._range_of(row)
        if rng is not None:
            annotations[RANGE_ANNOTATION] = str(rng)
            labels[BLOCK_LABEL] = block_value(rng, block_index(rng, row.value))
        self._count("create")
        obj = self.api.create_ip_address(
            row.name, parent, labels, annotations, deadline=budget.call(f"create {row.name}")
        )
        if self._exit_after_create:
            os._exit(137)
        return obj

    def _range_of(self, row: JournalRow) -> IPRange | None:
        with self._views_lock:
            for rng in self._views:
                if rng.version == row.family and int(rng.start) <= row.value <= int(rng.end):
                    return rng
        return None

    def _ours(self, obj: IPAddressObject, row: JournalRow) -> bool:
        """Whether ``obj`` is the object this row's create made (adopt it)."""
        labels = obj.labels or {}
        notes = obj.annotations or {}
        parent = obj.parent
        recorded = row.allocation.claim
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY or parent is None:
            return False
        if parent.group != CLAIM_GROUP or parent.resource != CLAIM_RESOURCE:
            return False
        if (
            recorded is not None
            and recorded.name
            and (parent.namespace != recorded.namespace or parent.name != recorded.name)
        ):
            return False
        return (
            notes.get(CLAIM_UID_ANNOTATION) == row.owner.claim_uid
            and notes.get(NODE_ANNOTATION) == self.node
            and notes.get(DEVICE_ANNOTATION) == row.owner.device
            and notes.get(POOL_ANNOTATION) == row.owner.pool
        )

    def _read(self, name: str, budget: _Budget) -> IPAddressObject | None:
        self._count("get")
        try:
            return self.api.get_ip_address(name, deadline=budget.call(f"get {name}"))
        except KubeNotFound:
            return None
        except KubeError as exc:
            raise ProviderUnavailable(
                f"ipam (cluster scope): cannot read IPAddress {name} ({exc}); retry"
            ) from exc

    def _holder(self, name: str, budget: _Budget) -> str:
        try:
            obj = self._read(name, budget)
        except ProviderUnavailable:
            return "holder unknown: the API did not answer"
        if obj is None:
            return "released meanwhile"
        notes = obj.annotations or {}
        parent = obj.parent
        who = f"{parent.namespace}/{parent.name}" if parent is not None else "?"
        manager = (obj.labels or {}).get(MANAGED_BY_LABEL, "?")
        node = notes.get(NODE_ANNOTATION)
        return f"IPAddress {name} of {who}, managed by {manager}" + (
            f", node {node}" if node else ""
        )

    def _delete(self, name: str, uid: str, budget: _Budget) -> None:
        """Delete our object ``name`` if it still has ``uid``; gone or replaced is done."""
        self._count("delete")
        try:
            self.api.delete_ip_address(name, uid, deadline=budget.call(f"delete {name}"))
        except (KubeNotFound, KubeConflict):
            return
        except KubeError as exc:
            raise ProviderUnavailable(
                f"ipam (cluster scope): cannot delete IPAddress {name} ({exc}); the journal "
                "keeps it and the collector retries"
            ) from exc

    def _release_rows(
        self, rows: Sequence[JournalRow], budget: _Budget, *, strict: bool = True
    ) -> list[str]:
        """Delete the rows' objects, then forget the rows whose objects are gone.

        A row whose delete failed is kept as ``releasing`` for the collector;
        with ``strict`` the first failure is raised after the others were tried.
        """
        done: list[JournalRow] = []
        failed: list[tuple[JournalRow, Exception]] = []
        for row in rows:
            if row.owner.pool in self.pools and row.state != RELEASING:
                # Before the delete: the watch's DELETED event of our own delete
                # must not be taken for someone else's and repaired.
                self.journal.set_state(row, RELEASING, row.uid)
            try:
                if row.owner.pool in self.pools:
                    self._release_object(row, budget)
            except ProviderUnavailable as exc:
                failed.append((row, exc))
                continue
            done.append(row)
        self.journal.forget(done)
        for row in done:
            view = self._existing_view(row)
            if view is not None:
                view.discard(row.value)
            self.conflicts.clear(row.name)
        if failed:
            log.warning(
                "ipam (cluster scope): %d object(s) could not be deleted (kept for the "
                "collector): %s",
                len(failed),
                safe(failed[0][1]),
            )
            if strict:
                raise failed[0][1]
        return [row.address for row in done]

    def _release_object(self, row: JournalRow, budget: _Budget) -> None:
        uid = row.uid
        if uid is None:  # an intent, or a node-scope row: is there an object of ours?
            obj = self._read(row.name, budget)
            if obj is None or not self._ours(obj, row):
                return
            uid = obj.uid
        self._delete(row.name, uid, budget)

    def _existing_view(self, row: JournalRow) -> RangeView | None:
        rng = self._range_of(row)
        if rng is None:
            return None
        with self._views_lock:
            return self._views.get(rng)

    def _view(self, rng: IPRange, budget: _Budget | None = None) -> RangeView:
        """The range's view; its watch (when this store watches) starts on first use
        over the blocks this node uses, and a first allocation waits for it briefly."""
        with self._views_lock:
            view = self._views.get(rng)
            if view is not None:
                return view
            view = self._views[rng] = RangeView(rng, self._home)
            watch = None
            if self._make_informer is not None:
                watch = self._watches[rng] = RangeWatch(
                    view,
                    self._make_informer,
                    on_deleted=self.repairs.deleted,
                    initial_jitter=self._initial_jitter,
                    node=self.node,
                )
        if watch is not None:
            watch.watch(self._blocks_in_use(rng, view))
            if budget is not None:
                wait = min(self.sync_wait, max(0.0, budget.until - time.monotonic() - 1.0))
                watch.wait_covered(view.lo + view.home, wait)
        return view

    def _blocks_in_use(self, rng: IPRange, view: RangeView) -> set[int]:
        """The home block, the blocks of the journal's rows and of this node's objects."""
        blocks = {block_index(rng, view.lo + view.home)}
        for row in self.journal.all_rows():
            if row.family == rng.version and view.lo <= row.value <= view.hi:
                blocks.add(block_index(rng, row.value))
        own = self._own_object_blocks()
        blocks.update(own.get(str(rng), ()))
        return blocks

    def _own_object_blocks(self) -> dict[str, list[int]]:
        """Blocks (by range) of this node's objects: one LIST by node label, at start.

        Finds objects the journal does not know (a journal lost or replaced) so
        their blocks are watched too.  A failure is logged and tried again at
        the next range's start: it only widens what is watched.
        """
        if self._own_blocks is not None:
            return self._own_blocks
        if not label_value_ok(self.node):
            self._own_blocks = {}
            return self._own_blocks
        self._count("list")
        try:
            # From the watch cache: every node of a rollout asks this at once.
            objs = self.api.list_ip_addresses(
                f"{NODE_LABEL}={self.node}", deadline=30.0, cached=True
            )
        except KubeError as exc:
            log.warning(
                "ipam (cluster scope): cannot list this node's IPAddress objects (%s); only "
                "the journal's blocks are watched",
                safe(exc),
            )
            return {}
        self._own_at_start = list(objs)[:MAX_START_OBJECTS]
        found: dict[str, list[int]] = {}
        for obj in objs:
            rng_text = (obj.annotations or {}).get(RANGE_ANNOTATION)
            if not rng_text:
                continue
            try:
                rng = IPRange.parse(rng_text)
                value = int(obj.address)
            except ValueError:
                continue
            if int(rng.start) <= value <= int(rng.end):
                found.setdefault(str(rng), []).append(block_index(rng, value))
        self._own_blocks = found
        return found

    def _jump(self, row: JournalRow, view: RangeView | None) -> None:
        """After a lost race, search on in a wide free stretch of the watched blocks."""
        watch = self._watch_of(row)
        if view is None or watch is None:
            return
        with watch.lock:
            blocks = sorted(watch.blocks)
        size = BLOCK_SIZE
        view.jump([(view.lo + b * size, view.lo + (b + 1) * size - 1) for b in blocks])

    def _watch_of(self, row: JournalRow) -> RangeWatch | None:
        rng = self._range_of(row)
        if rng is None:
            return None
        with self._views_lock:
            return self._watches.get(rng)

    # Last: a method named ``list`` shadows the builtin in annotations below it.
    def list(self) -> list[Allocation]:
        return self.journal.list()


def _claim_text(claim: ClaimReference | None, uid: str = "") -> str:
    if claim is None:
        return f"uid {uid or '?'}"
    name = f"{claim.namespace}/{claim.name}" if claim.namespace and claim.name else "?"
    return f"{name} (uid {claim.uid or uid or '?'})"


def node_home(node: str) -> int:
    """A stable number derived from the node's name: where its searches start."""
    return int.from_bytes(hashlib.sha256(node.encode()).digest()[:8], "big")


def open_cluster_ipam(
    path: str,
    *,
    node: str,
    kubeconfig: str | None = None,
    api: IPAddressApi | None = None,
    create: bool = False,
    watch: bool = True,
    **options: Any,
) -> ClusterIpam:
    """The cluster-scope store: the journal at ``path`` and an API client.

    Without ``api`` a :class:`~dranet_cloud.kube.KubeClient` is built from
    ``kubeconfig`` (else ``KUBECONFIG``, else the service account); with
    ``watch`` (and no ``make_informer`` given) the ranges' views are
    informers on that client.  A one-shot command passes ``watch=False``:
    it learns what is taken from the 409s alone.
    """
    close: Callable[[], None] | None = None
    client: Any = api
    if api is None:
        client = KubeClient(kubeconfig)
        api, close = client, client.close
    if watch and "make_informer" not in options:
        options["make_informer"] = informer_factory(client)
    try:
        journal = ClusterJournal(path, rng=ViewStart(), create=create)
    except BaseException:
        if close is not None:
            close()
        raise
    return ClusterIpam(journal, api, node=node, close_api=close, **options)


def informer_factory(client: Any) -> InformerFactory:
    """Informers on IPAddresses through ``client`` (a :class:`~dranet_cloud.kube.KubeClient`)."""

    def make(**kwargs: Any) -> Any:
        return Informer(client, IPADDRESSES, **kwargs)

    return make
