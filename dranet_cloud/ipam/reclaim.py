"""Reclaiming leaked allocations: free an address only when its claim is proven gone.

DRANET never retries a release, so leaks are the provider's to reclaim
(REFERENCE section 4).  Freeing the address of a claim that still runs hands
it to a second pod: duplicate IPs, the worst outcome this project can cause.
So the rule here is *proof, not absence of news*:

* the Kubernetes API (:class:`KubernetesClaims`): a claim whose namespace and
  name were recorded is gone when ``GET`` answers 404 or an object with
  another UID (deleted, or deleted and recreated under the same name); a
  claim known only by UID is gone when a *complete* paginated list of every
  ResourceClaim lacks its UID.  Any error, timeout or partial list proves
  nothing and frees nothing (:class:`NothingProven`);
* a file for air-gapped nodes (:class:`ClaimsFile`): either ``kubectl get
  resourceclaims -A -o json`` output (a ResourceClaimList is complete by
  construction; unparsable, truncated or paged output proves nothing), or one
  UID a line ending with the line :data:`COMPLETE_MARKER`, which the writer
  appends only after the list succeeded.  An empty or unmarked file proves
  nothing: a failed ``kubectl`` or a ``> file`` redirection that truncated
  first must never read as "no claim is live".

A grace period covers claims prepared after the evidence was taken: an
allocation younger than the evidence minus the grace is kept whatever the
evidence says.  Reclaiming runs outside the store: ``list()``, decide, then
``release(owner)`` after checking the owner's allocations are still the ones
that were judged.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..claims import ClaimReference
from ..errors import DranetCloudError
from .base import Allocation, IpamStore, Owner

if TYPE_CHECKING:
    from ..kube import KubeClient

__all__ = [
    "COMPLETE_MARKER",
    "DEFAULT_GRACE",
    "MAX_CLAIMS_FILE_BYTES",
    "ClaimSource",
    "ClaimsFile",
    "Evidence",
    "KubernetesClaims",
    "NothingProven",
    "ReclaimResult",
    "describe_claim",
    "parse_claims_text",
    "reclaim",
]

log = logging.getLogger(__name__)

COMPLETE_MARKER = "# complete"
# What a claim UID may hold (the server accepts no other): a line outside it is no UID.
_UID_LINE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
DEFAULT_GRACE = timedelta(minutes=2)
MAX_CLAIMS_FILE_BYTES = 64 << 20
DEFAULT_RUN_TIMEOUT = 60.0  # seconds for every API call of one reclaim run


class NothingProven(DranetCloudError):
    """The evidence could not prove any claim gone; nothing was freed.

    ``exit_code`` is 5 when the API failed (temporary: the next run retries)
    and 2 when the operator's input (a claims file) is unusable.
    """

    def __init__(self, message: str, *, exit_code: int = 5) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Evidence:
    """What a source proved: these claim UIDs are gone, as of ``as_of``."""

    gone: frozenset[str]
    as_of: datetime
    how: str


class ClaimSource(Protocol):
    """Something that can prove claims gone (the API, a file)."""

    def describe(self) -> str: ...

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        """UIDs among ``claims`` proven gone; raises :class:`NothingProven` on any doubt."""
        ...


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


# --- the Kubernetes API --------------------------------------------------------------


class KubernetesClaims:
    """Proof from the API server through a :class:`~dranet_cloud.kube.KubeClient`.

    When every claim has a recorded namespace/name, one ``GET`` per claim
    (cheap on a big cluster); when any is known only by UID, one complete
    list judges them all.  ``run_timeout`` bounds every call of one run.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        page_size: int = 500,
        run_timeout: float = DEFAULT_RUN_TIMEOUT,
    ) -> None:
        self.client = client
        self.page_size = page_size
        self.run_timeout = run_timeout

    def describe(self) -> str:
        return f"the Kubernetes API ({self.client.source})"

    def prove_gone(self, claims: Sequence[ClaimReference]) -> Evidence:
        from ..kube import KubeError

        until = time.monotonic() + self.run_timeout
        started = time.time()
        try:
            if any(c.qualified_name is None for c in claims):
                listing = self.client.list_resource_claims(
                    page_size=self.page_size, deadline=self._left(until)
                )
                live = listing.uids
                gone = frozenset(c.uid for c in claims if c.uid not in live)
                return Evidence(
                    gone,
                    _utc(listing.started),
                    f"a complete list of {len(live)} claim(s) from {self.describe()}",
                )
            found: set[str] = set()
            for claim in claims:
                assert claim.namespace is not None and claim.name is not None
                now = self.client.get_resource_claim(
                    claim.namespace, claim.name, deadline=self._left(until)
                )
                if now is None or now.uid != claim.uid:
                    found.add(claim.uid)
            return Evidence(
                frozenset(found),
                _utc(started),
                f"GET of {len(claims)} claim(s) by namespace/name from {self.describe()}",
            )
        except KubeError as exc:
            raise NothingProven(f"{exc}; nothing was freed") from exc

    def _left(self, until: float) -> float:
        left = until - time.monotonic()
        if left <= 0:
            raise NothingProven(
                f"the API calls of this run took longer than {self.run_timeout:g} s "
                f"({self.describe()}); nothing was freed"
            )
        return min(left, self.client.timeout)


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
        return text


def _claims_of(allocs: Sequence[Allocation]) -> list[ClaimReference]:
    """One reference per claim UID, preferring one that records namespace/name."""
    by_uid: dict[str, ClaimReference] = {}
    for alloc in allocs:
        uid = alloc.owner.claim_uid
        recorded = alloc.claim
        if recorded is not None and recorded.uid == uid and recorded.qualified_name:
            ref = recorded
        else:
            ref = ClaimReference(uid)
        if uid not in by_uid or (ref.qualified_name and not by_uid[uid].qualified_name):
            by_uid[uid] = ref
    return [by_uid[uid] for uid in sorted(by_uid)]


def reclaim(
    store: IpamStore,
    source: ClaimSource,
    *,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
) -> ReclaimResult:
    """Free the allocations whose claims ``source`` proves gone.

    Raises :class:`NothingProven` (nothing freed) when the source cannot
    prove anything.  With no allocation, the source is not asked.
    """
    if grace < timedelta(0):
        raise ValueError("the grace period must not be negative")
    result = ReclaimResult(source.describe(), dry_run)
    allocs = store.list()
    result.checked = len(allocs)
    if not allocs:
        return result
    evidence = source.prove_gone(_claims_of(allocs))
    result.evidence = evidence.how
    cutoff = evidence.as_of - grace
    by_owner: dict[Owner, list[Allocation]] = {}
    for alloc in allocs:
        if alloc.owner.claim_uid in evidence.gone:
            by_owner.setdefault(alloc.owner, []).append(alloc)
    ripe = {
        owner: judged
        for owner, judged in by_owner.items()
        if all(a.created_at <= cutoff for a in judged)
    }
    freeable = {a.address for judged in ripe.values() for a in judged}
    for owner, judged in sorted(by_owner.items()):
        if owner not in ripe:
            result.kept_recent.extend(judged)
            continue
        if dry_run:
            result.freed.extend(judged)
            continue
        # Re-read: what the owner holds now (its NIC's linked identities
        # included) must all have been judged freeable, else leave it for the
        # next run.  Empty: already released through a linked identity.
        current = store.held(owner)
        if not current:
            continue
        if any(a.address not in freeable or a.created_at > cutoff for a in current):
            result.changed.append(owner)
            continue
        released = set(store.release(owner))
        result.freed.extend(a for a in current if a.address in released)
    return result


def describe_claim(alloc: Allocation) -> str:
    """``ns/name`` when recorded, else the UID: what an operator searches for."""
    claim = alloc.claim
    if claim is not None and claim.qualified_name:
        return f"{claim.qualified_name} (uid {alloc.owner.claim_uid})"
    return f"uid {alloc.owner.claim_uid}"
