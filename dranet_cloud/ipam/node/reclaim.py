"""Reclaiming leaked allocations: free an address only when its claim is proven gone.

DRANET never retries a release (``unprepareResourceClaim`` in its
``pkg/driver/dra_hooks.go`` logs a failed ``ReleaseProfileConfig`` and reports
the claim unprepared), so leaks are the provider's to reclaim.  Freeing the
address of a claim that still runs hands it to a second pod: duplicate IPs,
the worst outcome this project can cause.  So the rule is *proof, not absence
of news*: any error, timeout or partial answer frees nothing
(:class:`NothingProven`).

* The API (:class:`KubernetesClaims`): a claim with a recorded namespace/name
  is gone when ``GET`` answers 404 or another UID (deleted, or recreated under
  the name); a UID-only claim is gone when a *complete* list of every
  ResourceClaim lacks it.  With the node's name,
  :class:`~dranet_cloud.ipam.node_claims.NodeClaims` (this node's pods) names
  UID-only claims instead and lists only for UIDs no pod showed.
* A file for air-gapped nodes (:class:`ClaimsFile`): ``kubectl get
  resourceclaims -A -o json`` output (complete by construction; unparsable,
  truncated or paged output proves nothing), or one UID a line ending with
  :data:`COMPLETE_MARKER`, appended only after the list succeeded, so a failed
  ``kubectl`` or a truncating ``> file`` never reads as "no claim is live".

An allocation younger than the evidence minus the grace period is kept
whatever the evidence says.  Reclaiming runs outside the store: ``list()``,
decide, then ``release(owner)`` once the owner's allocations are checked to
be the ones judged.  Guards against evidence from the wrong place or size:

* *the cluster*: a claim of another cluster is "gone" from this one, so the
  store records the cluster its claims came from (the ``kube-system``
  Namespace UID, which lasts the cluster's life: KEP-2149,
  ``keps/sig-multicluster/2149-clusterid``) and another UID frees nothing
  (:class:`ClusterMismatch`).  It is recorded only from proof
  (:func:`record_cluster`), never from first contact or by a refused or
  failed run; without it see :class:`ClusterUnproven`;
* *everything at once*: evidence that every claim of a store of
  :data:`FORCE_THRESHOLD`+ allocations is gone needs ``--force``
  (:class:`WouldFreeEverything`): a drained node rarely leaks that much, a
  broken API or a wrong context always looks like it;
* *batches*: named claims are proven (one GET each) and freed
  :data:`CLAIM_BATCH` at a time, newest first, under one budget per run; a
  late error keeps what was freed before it (:class:`RunCutShort`) and names
  the budget's flag.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

from dranet_cloud.ipam.base import Allocation, IpamStore, Owner
from dranet_cloud.kube import KubeClient, KubeError
from dranet_cloud.toolkit.errors import DranetCloudError
from dranet_cloud.wire.claims import ClaimReference

__all__ = [
    "COMPLETE_MARKER",
    "DEFAULT_GRACE",
    "MAX_CLAIMS_FILE_BYTES",
    "ClaimSource",
    "ClaimsFile",
    "ClusterMismatch",
    "ClusterUnproven",
    "Evidence",
    "KubernetesClaims",
    "NothingProven",
    "ReclaimResult",
    "describe_claim",
    "parse_claims_text",
    "reclaim",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

COMPLETE_MARKER = "# complete"
# What a claim UID may hold (the server accepts no other): a line outside it is no UID.
_UID_LINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
DEFAULT_GRACE = timedelta(minutes=2)
MAX_CLAIMS_FILE_BYTES = 64 << 20
DEFAULT_RUN_TIMEOUT = 60.0  # seconds for every API call of one reclaim run
# A store at least this large whose every claim is "gone" needs --force.
FORCE_THRESHOLD = 10
# Claims proven (GET each) and freed together before the next batch is judged.
CLAIM_BATCH = 100
CLUSTER_UID_KEY = "cluster_uid"
NOTHING_FREED = "; nothing was freed"


class NothingProven(DranetCloudError):
    """The evidence could not prove any claim gone; nothing was freed.

    ``exit_code`` is 5 when the API failed (temporary: the next run retries)
    and 2 when the operator's input (a claims file) is unusable.
    """

    def __init__(self, message: str, *, exit_code: int = 5) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ClusterMismatch(NothingProven):
    """The API is another cluster than the one the store's claims came from (exit 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class ClusterUnproven(NothingProven):
    """The store records no cluster and no claim it holds is live in the API's (exit 2).

    Every claim of another cluster looks gone from this one, so such a run is
    indistinguishable from a wrong kubeconfig: it frees nothing and records
    nothing; ``--adopt-cluster`` is the operator's word that it is the node's.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class WouldFreeEverything(NothingProven):
    """Every claim of a non-trivial store looks gone: freed only with ``--force`` (exit 2)."""

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message, exit_code=2)
        self.count = count


class RunCutShort(NothingProven):
    """The evidence failed part-way; ``result`` holds what was freed before (exit 5)."""

    def __init__(self, message: str, result: ReclaimResult) -> None:
        super().__init__(message, exit_code=5)
        self.result = result


@dataclass(frozen=True)
class Evidence:
    """What a source proved: these claim UIDs are gone, as of ``as_of``.

    ``judged`` are the UIDs the evidence speaks about (``None``: every claim
    asked about), so a claim judged and not gone is proven live.  ``cluster``
    is the identity of the cluster the evidence comes from (``None``: a file,
    which names none); ``cluster_trusted`` is False when the store has not
    recorded it (and ``--adopt-cluster`` was not given): then only a live
    claim proves it, and :func:`reclaim` frees nothing until one is seen.
    """

    gone: frozenset[str]
    as_of: datetime
    how: str
    judged: frozenset[str] | None = None
    cluster: str | None = None
    cluster_trusted: bool = True


class ClaimSource(Protocol):
    """Something that can prove claims gone (the API, a file)."""

    def describe(self) -> str: ...

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        """UIDs among ``claims`` proven gone; raises :class:`NothingProven` on any doubt."""
        ...

    def prove_in_batches(
        self, claims: Sequence[ClaimReference], store: IpamStore, *, record: bool
    ) -> Iterator[Evidence]:
        """Evidence for ``claims``, one batch at a time, after checking the source
        speaks for the store's cluster (each batch names it: :attr:`Evidence.cluster`);
        raises :class:`NothingProven` on any doubt.  A source records nothing:
        :func:`reclaim` records the cluster once a live claim proves it (and
        ``record``, False for a dry run, allows it)."""
        ...


def recorded_cluster(store: IpamStore) -> str | None:
    """The cluster identity the store recorded, ``None`` when it has none (or cannot keep one)."""
    read = getattr(store, "get_meta", None)
    return read(CLUSTER_UID_KEY) if callable(read) else None


def record_cluster(store: IpamStore, uid: str) -> bool:
    """Record ``uid`` as the store's cluster; False when the store cannot keep it.

    Call it only with proof that ``uid`` is the cluster of the store's claims:
    ``serve``'s own API answered, a claim the store holds is live there, or
    the operator said so (``--adopt-cluster``).
    """
    write = getattr(store, "set_meta", None)
    if not callable(write):
        return False
    write(CLUSTER_UID_KEY, uid)
    return True


def api_where(client: Any) -> str:
    """Where a client's API is: the kubeconfig (or service account), server and context."""
    context = getattr(client, "context_name", None)
    source = str(getattr(client, "source", client))
    return f"{source}, context {context}" if context else source


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


# --- the Kubernetes API --------------------------------------------------------------


class KubernetesClaims:
    """Proof from the API server through a :class:`~dranet_cloud.kube.KubeClient`.

    When every claim has a recorded namespace/name, one ``GET`` per claim
    (cheap on a big cluster), in batches of ``batch``; when any is known
    only by UID, one complete list judges them all.  ``run_timeout`` bounds
    every call of one run, cluster check included; ``budget_flag`` is the
    flag that sets it, named when it runs out.  ``adopt`` records the API's
    cluster as the store's even when the store recorded another one.
    ``cluster_ttl`` (seconds) reuses the cluster's UID read within it
    instead of reading it every run (a long-running collector: the
    ``kube-system`` Namespace's UID lasts the cluster's life, and a GET per
    node per minute is a cost of the whole cluster); 0 reads it every run.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        page_size: int = 500,
        run_timeout: float = DEFAULT_RUN_TIMEOUT,
        batch: int = CLAIM_BATCH,
        budget_flag: str = "--budget",
        adopt: bool = False,
        cluster_ttl: float = 0.0,
    ) -> None:
        if batch < 1:
            raise ValueError("the claim batch must hold at least one claim")
        self.cluster_ttl = cluster_ttl
        self._cluster: tuple[str, float] | None = None  # (uid, time.monotonic() read)
        self.client = client
        self.page_size = page_size
        self.run_timeout = run_timeout
        self.batch = batch
        self.budget_flag = budget_flag
        self.adopt = adopt

    def describe(self) -> str:
        return f"the Kubernetes API ({api_where(self.client)})"

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        until = time.monotonic() + self.run_timeout
        found: set[str] = set()
        how = ""
        first: datetime | None = None
        for evidence in self._batches(claims, until):
            found |= evidence.gone
            first = evidence.as_of if first is None else min(first, evidence.as_of)
            how = evidence.how
        return Evidence(frozenset(found), first or _utc(time.time()), how)

    def prove_in_batches(
        self, claims: Sequence[ClaimReference], store: IpamStore, *, record: bool
    ) -> Iterator[Evidence]:
        until = time.monotonic() + self.run_timeout
        uid, trusted = self._confirm_cluster(store, until)
        for evidence in self._batches(claims, until):
            yield replace(evidence, cluster=uid, cluster_trusted=trusted)

    def _confirm_cluster(self, store: IpamStore, until: float) -> tuple[str, bool]:
        """The API's cluster and whether the store vouches for it (or ``adopt`` does).

        Another cluster than the recorded one frees nothing (:class:`ClusterMismatch`);
        none recorded is not trusted: :func:`reclaim` then needs a live claim.
        Nothing is recorded here.  The UID read within ``cluster_ttl`` is reused.
        """
        cached = self._cluster
        if cached is not None and time.monotonic() - cached[1] < self.cluster_ttl:
            uid = cached[0]
        else:
            read_at = time.monotonic()
            uid = self._call(until, self.client.cluster_uid)
            self._cluster = (uid, read_at)
        known = recorded_cluster(store)
        if known == uid or self.adopt:
            return uid, True
        if known is not None:
            raise ClusterMismatch(
                f"the Kubernetes API ({api_where(self.client)}) is cluster {uid} (kube-system "
                f"Namespace UID), but this store's claims came from cluster {known}; nothing "
                "was freed: every claim of another cluster looks gone from this one. Point "
                "--kubeconfig (or its current context) at this node's cluster; if the node "
                "really moved to that cluster, run `dranet-cloud ipam gc --kubernetes "
                "--adopt-cluster` once"
            )
        return uid, False

    def _batches(self, claims: Sequence[ClaimReference], until: float) -> Iterator[Evidence]:
        if any(c.qualified_name is None for c in claims):
            listing = self._call(until, self.client.list_resource_claims, page_size=self.page_size)
            live = listing.uids
            yield Evidence(
                frozenset(c.uid for c in claims if c.uid not in live),
                _utc(listing.started),
                f"a complete list of {len(live)} claim(s) from {self.describe()}",
            )
            return
        for begin in range(0, len(claims), self.batch):
            chunk = claims[begin : begin + self.batch]
            started = time.time()
            found: set[str] = set()
            for claim in chunk:
                ns, name = claim.namespace, claim.name
                assert ns is not None and name is not None
                now = self._call(until, self.client.get_resource_claim, ns, name)
                if now is None or now.uid != claim.uid:
                    found.add(claim.uid)
            yield Evidence(
                frozenset(found),
                _utc(started),
                f"GET of {len(claims)} claim(s) by namespace/name from {self.describe()}",
                frozenset(c.uid for c in chunk),
            )

    def _call(self, until: float, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """One API call within what is left of the run's budget, its errors as NothingProven."""
        left = until - time.monotonic()
        if left <= 0:
            raise self._out_of_budget()
        try:
            return call(*args, deadline=min(left, self.client.timeout), **kwargs)
        except KubeError as exc:
            # The run's budget was this call's deadline and it is (all but) spent: say
            # so with the flag, not with the fraction of a second the call had left.
            if left < self.client.timeout and time.monotonic() >= until - min(0.05, left / 10):
                raise self._out_of_budget() from exc
            raise NothingProven(f"{exc}{NOTHING_FREED}") from exc

    def _out_of_budget(self) -> NothingProven:
        return NothingProven(
            f"the API calls of this run took longer than its budget ({self.budget_flag} "
            f"{self.run_timeout:g}s) at {self.describe()}; raise {self.budget_flag} if the API "
            f"is this slow{NOTHING_FREED}"
        )


# --- files ------------------------------------------------------------------------------


def parse_claims_text(text: str, where: str) -> frozenset[str]:
    """Live claim UIDs from a claims file's text; :class:`NothingProven` unless complete.

    ``where`` names the file in messages.
    """
    body = text.strip()
    hint = (
        "write it with `kubectl get resourceclaims -A -o json > FILE.tmp && mv FILE.tmp FILE`, "
        f"or as one UID a line followed by a last line {COMPLETE_MARKER!r}"
    )
    if not body:
        raise NothingProven(
            f"the live claims file {where} is empty, which proves nothing (a failed kubectl "
            f"or a truncating redirection writes nothing); nothing was freed; {hint}",
            exit_code=2,
        )
    if body.startswith("{"):
        return _parse_claim_list(body, where, hint)
    lines = [line.strip() for line in body.splitlines()]
    if lines[-1] != COMPLETE_MARKER:
        raise NothingProven(
            f"the live claims file {where} does not end with the line {COMPLETE_MARKER!r}, so "
            f"it may be cut short; nothing was freed; {hint}",
            exit_code=2,
        )
    uids: set[str] = set()
    for number, line in enumerate(lines[:-1], 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if len(entry) > 128 or not _UID_LINE.fullmatch(entry):
            # Names (`kubectl get -o name`, ns/name) match no UID: read as UIDs they
            # would make every live claim look gone.
            raise NothingProven(
                f"the live claims file {where} line {number}: {entry[:60]!r} is not a claim "
                "UID (letters, digits and ._:- as in metadata.uid; `-o name` prints names, "
                f"not UIDs); nothing was freed; {hint}",
                exit_code=2,
            )
        uids.add(entry)
    return frozenset(uids)


def _parse_claim_list(body: str, where: str, hint: str) -> frozenset[str]:
    def bad(why: str) -> NothingProven:
        return NothingProven(
            f"the live claims file {where} {why}; nothing was freed; {hint}", exit_code=2
        )

    try:
        doc: Any = json.loads(body)
    except ValueError as exc:
        raise bad(f"is not complete JSON ({exc}): truncated or not kubectl's output") from None
    if not isinstance(doc, dict) or doc.get("kind") not in ("ResourceClaimList", "List"):
        raise bad("is JSON but not a ResourceClaimList (kubectl get resourceclaims -A -o json)")
    items = doc.get("items")
    if not isinstance(items, list):
        raise bad("has no items list")
    meta = doc.get("metadata")
    if isinstance(meta, dict) and meta.get("continue"):
        raise bad("is one page of a paged list (metadata.continue is set)")
    uids: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad(f"item {index} is not an object")
        kind = item.get("kind", "ResourceClaim")
        if kind != "ResourceClaim":
            raise bad(f"item {index} is a {kind}, not a ResourceClaim")
        meta_of = item.get("metadata")
        uid = meta_of.get("uid") if isinstance(meta_of, dict) else None
        if not isinstance(uid, str) or not uid:
            raise bad(f"item {index} has no metadata.uid")
        uids.add(uid)
    return frozenset(uids)


class ClaimsFile:
    """Proof from a file of live claims (``-`` reads standard input).

    The evidence is as of the file's modification time (standard input: the
    time it was read); the grace period covers the time the writer took.
    """

    def __init__(self, path: str, *, read_stdin: Callable[[], str] | None = None) -> None:
        self.path = path
        self._read_stdin = read_stdin or sys.stdin.read

    def describe(self) -> str:
        return "standard input" if self.path == "-" else f"the live claims file {self.path}"

    def read(self) -> tuple[frozenset[str], datetime]:
        where = "on standard input" if self.path == "-" else self.path
        try:
            if self.path == "-":
                text, taken = self._read_stdin()[: MAX_CLAIMS_FILE_BYTES + 1], time.time()
            else:
                p = Path(self.path)
                taken = p.stat().st_mtime
                with p.open("rb") as fh:
                    raw = fh.read(MAX_CLAIMS_FILE_BYTES + 1)
                text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise NothingProven(
                f"cannot read the live claims file {where} ({exc}); nothing was freed",
                exit_code=2,
            ) from exc
        if len(text) > MAX_CLAIMS_FILE_BYTES:
            raise NothingProven(
                f"the live claims file {where} is larger than {MAX_CLAIMS_FILE_BYTES} bytes; "
                "nothing was freed",
                exit_code=2,
            )
        return parse_claims_text(text, where), _utc(min(taken, time.time()))

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        live, as_of = self.read()
        gone = frozenset(c.uid for c in claims if c.uid not in live)
        return Evidence(gone, as_of, f"{len(live)} live claim(s) in {self.describe()}")

    def prove_in_batches(
        self, claims: Sequence[ClaimReference], store: IpamStore, *, record: bool
    ) -> Iterator[Evidence]:
        """One batch: the file.  It names no cluster, so nothing is checked or recorded."""
        yield self.prove_gone(claims)


# --- the run ------------------------------------------------------------------------------


@dataclass
class ReclaimResult:
    """One run: what was freed (or would be, ``dry_run``) and what was kept and why."""

    source: str
    dry_run: bool
    checked: int = 0  # allocations looked at
    freed: list[Allocation] = field(default_factory=list)
    kept_recent: list[Allocation] = field(default_factory=list)  # gone, but within the grace
    changed: list[Owner] = field(default_factory=list)  # changed while judged: left for next run
    evidence: str = ""
    needs_force: bool = False  # a dry run that would free everything: a real one needs --force
    recorded_cluster: str = ""  # the cluster this run recorded as the store's, with its proof

    def summary(self) -> str:
        verb = "would free" if self.dry_run else "freed"
        text = f"ipam gc {verb} {len(self.freed)} of {self.checked} allocation(s)"
        if self.evidence:
            text += f", judged by {self.evidence}"
        if self.kept_recent:
            text += (
                f"; kept {len(self.kept_recent)} allocation(s) of gone claims that are "
                "younger than the grace period (the next run frees them)"
            )
        if self.changed:
            text += f"; {len(self.changed)} claim(s) changed while judged, left for the next run"
        if self.needs_force:
            text += "; every claim is gone, so a real run stops and asks for --force"
        if self.recorded_cluster:
            text += f"; recorded cluster {self.recorded_cluster}"
        return text


def _claims_of(allocs: Sequence[Allocation]) -> list[ClaimReference]:
    """One reference per claim UID, preferring one that records namespace/name.

    Newest claims first: they are the likeliest to be live, and a live claim
    in the first batch is what lets a run free batch by batch (see
    :func:`reclaim`).
    """
    by_uid: dict[str, ClaimReference] = {}
    newest: dict[str, datetime] = {}
    for alloc in allocs:
        uid = alloc.owner.claim_uid
        recorded = alloc.claim
        if recorded is not None and recorded.uid == uid and recorded.qualified_name:
            ref = recorded
        else:
            ref = ClaimReference(uid)
        if uid not in by_uid or (ref.qualified_name and not by_uid[uid].qualified_name):
            by_uid[uid] = ref
        newest[uid] = max(newest.get(uid, alloc.created_at), alloc.created_at)
    return [by_uid[uid] for uid in sorted(by_uid, key=lambda u: (-newest[u].timestamp(), u))]


class _Run:
    """One reclaim run's bookkeeping: judge each batch of evidence, free what is ripe."""

    def __init__(
        self,
        store: IpamStore,
        allocs: Sequence[Allocation],
        result: ReclaimResult,
        grace: timedelta,
    ) -> None:
        self.store = store
        self.result = result
        self.grace = grace
        self.by_uid: dict[str, list[Allocation]] = {}
        for alloc in allocs:
            self.by_uid.setdefault(alloc.owner.claim_uid, []).append(alloc)
        self.held_back: list[tuple[Owner, list[Allocation], datetime]] = []
        self.gone: set[str] = set()
        self.judged: set[str] = set()

    def judge(self, evidence: Evidence) -> None:
        """Note what ``evidence`` proved and hold the ripe owners of gone claims back."""
        uids = set(self.by_uid) if evidence.judged is None else set(evidence.judged)
        self.judged |= uids
        gone = evidence.gone & uids
        self.gone |= gone
        cutoff = evidence.as_of - self.grace
        by_owner: dict[Owner, list[Allocation]] = {}
        for uid in sorted(gone):
            for alloc in self.by_uid.get(uid, []):
                by_owner.setdefault(alloc.owner, []).append(alloc)
        for owner, judged in sorted(by_owner.items()):
            if all(a.created_at <= cutoff for a in judged):
                self.held_back.append((owner, judged, cutoff))
            else:
                self.result.kept_recent.extend(judged)

    @property
    def live_seen(self) -> bool:
        return bool(self.judged - self.gone)

    def free_held_back(self, dry_run: bool) -> None:
        held, self.held_back = self.held_back, []
        for owner, judged, cutoff in held:
            if dry_run:
                self.result.freed.extend(judged)
                continue
            # Re-read: what the owner holds now (its NIC's linked identities
            # included) must all have been judged freeable, else leave it for
            # the next run.  Empty: already released through a linked identity.
            freeable = {a.address for a in judged}
            current = self.store.held(owner)
            if not current:
                continue
            if any(a.address not in freeable or a.created_at > cutoff for a in current):
                self.result.changed.append(owner)
                continue
            released = set(self.store.release(owner))
            self.result.freed.extend(a for a in current if a.address in released)


def reclaim(
    store: IpamStore,
    source: ClaimSource,
    *,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    force: bool = False,
) -> ReclaimResult:
    """Free the allocations whose claims ``source`` proves gone, batch by batch.

    Raises :class:`NothingProven` or a subclass (each says when); with no
    allocation, the source is not asked.

    Frees wait until a batch shows a live claim: until then the run may yet
    turn out to be "every claim is gone", which only ``force`` frees (and,
    on a store with no recorded cluster, nothing frees).  Only a real run
    that completed records the source's cluster as the store's: a refused,
    failed or dry run records nothing.
    """
    if grace < timedelta(0):
        raise ValueError("the grace period must not be negative")
    result = ReclaimResult(source.describe(), dry_run)
    allocs = store.list()
    result.checked = len(allocs)
    if not allocs:
        return result
    claims = _claims_of(allocs)
    guarded = len(allocs) >= FORCE_THRESHOLD and not force
    run = _Run(store, allocs, result, grace)
    evidence_iter = source.prove_in_batches(claims, store, record=not dry_run)
    cluster: str | None = None
    unproven = False  # the store records no cluster: only a live claim proves the source's
    try:
        for evidence in evidence_iter:
            result.evidence = evidence.how
            cluster = evidence.cluster
            unproven = cluster is not None and not evidence.cluster_trusted
            run.judge(evidence)
            if run.live_seen or not (guarded or unproven):
                run.free_held_back(dry_run)
    except NothingProven as exc:
        if result.freed or result.changed:
            raise RunCutShort(
                f"{str(exc).removesuffix(NOTHING_FREED)}; the {len(result.freed)} allocation(s) "
                "of claims proven gone before it were freed, the rest waits for the next run",
                result,
            ) from exc
        raise
    if unproven and not run.live_seen:
        _refuse_unproven(result, run, len(claims), str(cluster), guarded=guarded)
    if run.held_back and not run.live_seen:
        count = sum(len(judged) for _owner, judged, _cutoff in run.held_back)
        if not dry_run:
            raise WouldFreeEverything(
                _everything_message(result.evidence, len(claims), count), count
            )
        result.needs_force = True
    run.free_held_back(dry_run)
    if cluster is not None and not dry_run and recorded_cluster(store) != cluster:
        _record(store, source, run, cluster, result)
    return result


def _everything_message(evidence: str, claims: int, count: int) -> str:
    return (
        f"the evidence ({evidence}) says every one of the {claims} claim(s) "
        f"of this store is gone, which would free all {count} of its allocation(s) at "
        "once: that is what a wrong cluster or context, or a broken API, looks like, "
        "so nothing was freed; check where the evidence came from, then run "
        f"`dranet-cloud ipam gc` again with --force to free the {count}"
    )


def _refuse_unproven(
    result: ReclaimResult, run: _Run, claims: int, cluster: str, *, guarded: bool
) -> None:
    """No live claim on a store with no recorded cluster: free nothing, record nothing, say why."""
    count = sum(len(judged) for _owner, judged, _cutoff in run.held_back)
    unproven = (
        f"this store records no cluster yet, and none of its {claims} claim(s) is live in "
        f"cluster {cluster} (kube-system Namespace UID) of {result.source}: every one looks "
        "gone, which is also what the API of another cluster than the node's looks like"
    )
    fix = (
        "point --kubeconfig (or its current context) at this node's cluster; if cluster "
        f"{cluster} is this node's and its claims really are all gone, run `dranet-cloud ipam "
        "gc --kubernetes --adopt-cluster` once to record it"
    )
    if guarded and count and not result.dry_run:
        # The --force guard speaks first (it is what an operator may try next), and
        # says that --force alone will not do.
        raise WouldFreeEverything(
            f"{_everything_message(result.evidence, claims, count)}; and {unproven}, so --force "
            f"alone frees nothing either: {fix}",
            count,
        )
    raise ClusterUnproven(f"{unproven}; so nothing was freed and no cluster was recorded: {fix}")


def _record(
    store: IpamStore, source: ClaimSource, run: _Run, cluster: str, result: ReclaimResult
) -> None:
    """Record ``cluster`` (proven by a live claim, or adopted) as the store's."""
    live = sorted(run.judged - run.gone)
    if live:
        proof = f"claim {describe_claim(run.by_uid[live[0]][0])} is live there"
    else:
        proof = "--adopt-cluster"
    known = recorded_cluster(store)
    if not record_cluster(store, cluster):
        return
    result.recorded_cluster = cluster
    log.warning(
        "ipam gc: recorded cluster %s (%s) as the cluster of this store's claims (%s)%s; "
        "a later run against another cluster frees nothing",
        cluster,
        source.describe(),
        proof,
        f", replacing {known}" if known else "",
    )


def describe_claim(alloc: Allocation) -> str:
    """``ns/name`` when recorded, else the UID: what an operator searches for."""
    claim = alloc.claim
    if claim is not None and claim.qualified_name:
        return f"{claim.qualified_name} (uid {alloc.owner.claim_uid})"
    return f"uid {alloc.owner.claim_uid}"
