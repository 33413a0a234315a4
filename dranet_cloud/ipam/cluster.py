"""Cluster scope: one address, one pod, across every node, on the Kubernetes API.

A node-local store cannot keep addresses unique on an L2 segment that pods
of several nodes share (IPVLAN subinterfaces).  In cluster scope every
address handed out is a ``networking.k8s.io/v1`` ``IPAddress`` object, the
object kube-apiserver allocates Service ClusterIPs with: cluster-scoped and
named by the address in canonical form, so creating it is an atomic,
cluster-wide reservation (409 AlreadyExists: someone holds it).  Nothing
else coordinates the nodes: no leader, no lock, no custom resource.

:class:`ClusterIpam` is an :class:`~.base.IpamStore`, so the ``local-ipam``
profile (and its precedence, validation and owner rules in
:mod:`dranet_cloud.subinterface`) is unchanged.  The node's SQLite store is
its journal (:mod:`.cluster_journal`):

1. the intent (owner, claim, candidate, ``pending``) is committed first;
2. then the create; on 201 the object's UID is committed (``bound``), and
   only then is the address answered;
3. a retry of a claim whose rows are all bound is answered from the journal
   with no API call; a pending row is resolved by reading the object back:
   one that names this claim (parentRef and claim UID, this node and NIC)
   is adopted, a 404 is created again, anyone else's drops the intent and
   another candidate is tried.  Never a duplicate, never a leak.

Choosing a candidate costs no round trip per taken address: each range has
a :class:`~.cluster_journal.RangeView` of the addresses the cluster holds
(one complete list of ``IPAddress`` objects, refreshed on a 409 and
periodically), merged with the node's own rows, and the search starts from
a point derived from the node's name, so nodes mostly fill separate stretches
of a shared range and rarely meet.  At most ``max_creates`` creates are
tried per allocation; a range the cluster has filled is a 409 naming it.

A gen1 request names the claim only by UID; the parentRef's namespace and
name then come from the journal (an earlier try) or from the claims of this
node's pods (:class:`~.node_claims.NodeClaims`: a watch of the node's own
pods, a GET per claim name; never a cluster-wide list); a UID the view
cannot name is a 500 the kubelet retries, never a guess.

When the API cannot be reached or answers 5xx, a new claim gets
:class:`~dranet_cloud.errors.ProviderUnavailable` (the server answers 500,
the kubelet retries) and never an address the API did not confirm; claims
already bound in the journal keep their answers.

API calls never run on an event loop: :meth:`ClusterIpam.allocate` and
:meth:`~ClusterIpam.release` raise :class:`~dranet_cloud.errors.WouldBlock` before
calling the API on a thread that runs one, so a caller that tried them there
(the server's store lane) runs them on a worker thread instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import (
    AddressConflict,
    ConfigError,
    ProviderUnavailable,
    RangeExhausted,
)
from ..iprange import IPRange
from ..logsafe import safe
from .base import Allocation, Owner
from .cluster_api import (
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
)
from .cluster_journal import (
    BOUND,
    RELEASING,
    ClusterJournal,
    JournalRow,
    RangeView,
    ViewStart,
    cluster_call,
)
from .requests import host_cidr, ordered_ranges, parse_static, require_collect_bounds
from .sqlite_transactions import would_block

if TYPE_CHECKING:
    from ..claims import ClaimReference
    from ..kube.ipaddress import IPAddressObject
    from .node_claims import NodeClaims
    from .reclaim import ClaimSource
    from .sqlite import StoreHealth
    from .tally import AllocationTally

log = logging.getLogger(__name__)

SCOPES = ("node", "cluster")
SCOPE_ENV = "DRANET_CLOUD_IPAM_SCOPE"
CLUSTER_POOLS = frozenset({"local-ipam"})
DEFAULT_MAX_CREATES = 8
DEFAULT_CALL_TIMEOUT = 3.0  # one API call
DEFAULT_BUDGET = 8.0  # one allocation or release, every call included (DRANET waits 10 s)
DEFAULT_REFRESH = 60.0  # a range's view is listed again at least this often when used
DEFAULT_MIN_REFRESH = 5.0  # and at most this often on 409s
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


def _kube_errors() -> tuple[type[Exception], type[Exception], type[Exception], type[Exception]]:
    from ..kube import KubeAlreadyExists, KubeConflict, KubeError, KubeNotFound

    return KubeError, KubeNotFound, KubeConflict, KubeAlreadyExists


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
        refresh_interval: float = DEFAULT_REFRESH,
        min_refresh: float = DEFAULT_MIN_REFRESH,
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
        self.refresh_interval = refresh_interval
        self.min_refresh = min_refresh
        self._close_api = close_api
        self._home = node_home(node)
        self._views: dict[IPRange, RangeView] = {}
        self._views_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._listed = -math.inf  # time.monotonic() when the last good list began
        self._new_views = -math.inf  # when a range was first asked for
        environ = os.environ if env is None else env
        self._exit_after_create = environ.get(EXIT_AFTER_CREATE_ENV) == "1"
        # Figures for benchmarks and tests (never reset): API calls by kind.
        self.calls: dict[str, int] = {"create": 0, "get": 0, "delete": 0, "list": 0}
        self._calls_lock = threading.Lock()
        # gen1 DRANET names a claim by UID only: its namespace/name from the claims
        # of this node's pods (shared with the collector when it has the view;
        # else this store's own, whose watch starts at the first gen1 request).
        self._own_claims = claims is None
        if claims is None:
            from .node_claims import NodeClaims

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
        while True:
            if creates >= self.max_creates:
                raise ProviderUnavailable(
                    f"ipam (cluster scope): {owner}: {creates} address(es) tried in "
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
                retry = retry or not done
                if not done and creates == self.max_creates // 2:
                    # Half the tries lost: the view is too old to steer; list now.
                    self._refresh(budget, newer_than=time.monotonic(), required=False)
            if not retry:
                return addresses

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]:
        if owner.pool not in self.pools:
            return self.journal.reserve(owner, addresses, claim=claim)
        asked_at = time.monotonic()
        asked = [host_cidr(a) for a in parse_static(owner, addresses)]
        bound = {r.address for r in self.journal.rows(owner) if r.state == BOUND}
        if all(a in bound for a in asked):
            return asked  # a retry: the journal answers
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

    def close(self) -> None:
        try:
            if self._own_claims:
                self.claims.stop()
            self.journal.close()
        finally:
            if self._close_api is not None:
                close, self._close_api = self._close_api, None
                close()

    # The journal's state and counters, for /health and /metrics.

    def health(self) -> StoreHealth:
        return self.journal.health()

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
        self, source: ClaimSource, *, grace: timedelta, dry_run: bool = False
    ) -> ClusterReclaimResult:
        """After the journal's reclaim: failed releases again, then the cluster-wide sweep."""
        from .cluster_reclaim import sweep_ip_addresses

        result = ClusterReclaimResult()
        if not dry_run:
            result.retried_releases, result.failed_releases = self.retry_releases()
        result.sweep = sweep_ip_addresses(
            self.api, source, grace=grace, dry_run=dry_run, counted=self._count
        )
        return result

    # -- internals -----------------------------------------------------------------------------

    def _count(self, kind: str) -> None:
        with self._calls_lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1

    def _known(self, owner: Owner, families: set[int]) -> dict[int, str] | None:
        """The owner's bound dynamic addresses by family, when they cover ``families``."""
        found: dict[int, str] = {}
        for row in self.journal.rows(owner):
            if row.allocation.static:
                continue
            if row.state != BOUND:
                return None
            found.setdefault(row.family, row.address)
        return found if families <= set(found) else None

    def _request_budget(self, doing: str) -> _Budget:
        """The deadline of one allocation, reservation or release (never on an event loop)."""
        _off_loop(doing)
        return _Budget(self.budget, self.call_timeout)

    def _named(
        self, owner: Owner, claim: ClaimReference | None, asked_at: float, budget: _Budget
    ) -> ClaimReference:
        """``claim`` with its namespace and name, which the parentRef must carry.

        gen2 DRANET sends them; for a gen1 request (UID only) they come from
        the journal (an earlier try of this claim) or else from the claims of
        this node's pods (:class:`~.node_claims.NodeClaims`): never a guess.
        """
        from ..claims import ClaimReference

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
        """The journal's addresses for ``owner`` (new intents committed); refreshes the views
        once when the journal finds a range full."""
        refreshed = False
        while True:
            try:
                with cluster_call(views) as inserted:
                    addresses = self.journal.allocate(owner, wanted, claim=claim)
                return addresses, list(inserted)
            except RangeExhausted:
                if refreshed:
                    full = next(
                        (
                            r
                            for r in wanted
                            if r.version in views and self._looks_full(views[r.version])
                        ),
                        wanted[0],
                    )
                    raise RangeExhausted(
                        f"ipam (cluster scope): no free address left in IPv{full.version} range "
                        f"{full} for {owner}: the cluster holds every address of it as IPAddress "
                        "objects (kubectl get ipaddresses); free addresses with `dranet-cloud "
                        "ipam gc --kubernetes --ipam-scope cluster` or configure a larger range"
                    ) from None
                refreshed = True
                self._refresh(budget, newer_than=time.monotonic())

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
        view knows, so the next pick avoids it.
        """
        kube_error, _not_found, _conflict, already_exists = _kube_errors()
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
        try:
            obj = self._create(row, claim, budget)
        except already_exists:
            if not fresh:
                found = self._read(row.name, budget)
                if found is not None and self._ours(found, row):
                    self._bind(row, found)
                    return True, 1
            self._lost(row, view)
            if view is not None:
                view.move_home()
                self._refresh(
                    budget, newer_than=time.monotonic() - self.min_refresh, required=False
                )
            return False, 1
        except kube_error as exc:
            self._create_failed(row, exc)
        if view is not None:
            view.add(row.value)
            view.advance(row.value)
        self._bind(row, obj)
        return True, 1

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
            view.add(row.value)
        log.debug("ipam (cluster scope): %s is held elsewhere in the cluster", row.name)

    def _bind(self, row: JournalRow, obj: IPAddressObject) -> None:
        if self.journal.set_state(row, BOUND, obj.uid):
            return
        # Released while the create was in flight: nobody records the object now,
        # so it goes (a failed delete leaves it to the sweep: its claim is gone).
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
        from ..kube.ipaddress import ParentRef

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
        kube_error, not_found, _conflict, _exists = _kube_errors()
        self._count("get")
        try:
            return self.api.get_ip_address(name, deadline=budget.call(f"get {name}"))
        except not_found:
            return None
        except kube_error as exc:
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
        kube_error, not_found, conflict, _exists = _kube_errors()
        self._count("delete")
        try:
            self.api.delete_ip_address(name, uid, deadline=budget.call(f"delete {name}"))
        except (not_found, conflict):
            return
        except kube_error as exc:
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
        for row, _exc in failed:
            if row.state != RELEASING:
                self.journal.set_state(row, RELEASING, row.uid)
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

    def _view(self, rng: IPRange, budget: _Budget) -> RangeView:
        now = time.monotonic()
        with self._views_lock:
            view = self._views.get(rng)
            if view is None:
                view = self._views[rng] = RangeView(rng, self._home)
                self._new_views = now
        # A new range needs a list begun after it was known; any needs one now and then.
        self._refresh(budget, newer_than=max(self._new_views, now - self.refresh_interval))
        return view

    def _refresh(self, budget: _Budget, *, newer_than: float, required: bool = True) -> None:
        """List every IPAddress once and refill every range's view from it, unless
        a list begun after ``newer_than`` already did (one list at a time).

        Only a ``required`` list fails the caller: after a 409 the list merely
        helps the next pick, and the create stays the referee.
        """
        if self._listed >= newer_than:
            return
        with self._refresh_lock:
            if self._listed >= newer_than:
                return
            with self._views_lock:
                views = list(self._views.values())
            kube_error = _kube_errors()[0]
            started = time.monotonic()
            self._count("list")
            try:
                # A list may take longer than one call: it gets what is left.
                names = self.api.list_ip_address_names(
                    deadline=max(budget.call("list ipaddresses"), budget.until - started)
                )
            except kube_error as exc:
                if not required:
                    log.info("ipam (cluster scope): cannot list IPAddress objects: %s", safe(exc))
                    return
                raise ProviderUnavailable(
                    f"ipam (cluster scope): cannot list IPAddress objects ({exc}); retry"
                ) from exc
            taken: dict[int, list[int]] = {id(v): [] for v in views}
            for name in names:
                try:
                    addr = ipaddress.ip_address(name)
                except ValueError:
                    continue
                value = int(addr)
                for v in views:
                    if v.range.version == addr.version and v.lo <= value <= v.hi:
                        taken[id(v)].append(value)
            for v in views:
                v.replace(taken[id(v)], started)
            self._listed = started
            log.debug("ipam (cluster scope): listed %d IPAddress objects", len(names))

    # Last: a method named ``list`` shadows the builtin in annotations below it.
    def list(self) -> list[Allocation]:
        return self.journal.list()


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
    **options: Any,
) -> ClusterIpam:
    """The cluster-scope store: the journal at ``path`` and an API client.

    Without ``api`` a :class:`~dranet_cloud.kube.KubeClient` is built from
    ``kubeconfig`` (else ``KUBECONFIG``, else the service account).
    """
    close: Callable[[], None] | None = None
    if api is None:
        from ..kube import KubeClient

        client = KubeClient(kubeconfig)
        api, close = client, client.close
    try:
        journal = ClusterJournal(path, rng=ViewStart(), create=create)
    except BaseException:
        if close is not None:
            close()
        raise
    return ClusterIpam(journal, api, node=node, close_api=close, **options)
