"""Deleting this project's IPAddress objects whose claims are proven gone.

An ``IPAddress`` is cluster-scoped and its claim is namespaced, so it cannot
carry an ownerReference and Kubernetes' garbage collector never deletes it (a
cluster-scoped dependent of a namespaced owner has an unresolvable owner
reference: kubernetes/website
``content/en/docs/concepts/architecture/garbage-collection.md``).  A node
that releases its claims deletes their objects; what is left is judged here,
for three callers that each look at a bounded set of objects:

* a node's collector: its own orphans (objects labelled with this node that
  its journal does not hold), from its watches (:meth:`~.allocator.ClusterIpam.cluster_reclaim`);
* the one reclaimer that holds the Lease: the objects of nodes that no longer
  exist (:mod:`.reclaimer`);
* ``ipam gc --kubernetes --ipam-scope cluster`` run once by an operator:
  every object of the project, but never one of a node whose Node exists.

The rules are :mod:`.reclaim`'s: proof, not absence of news.  A claim is gone
when the :class:`~.reclaim.ClaimSource` proves it (GET of the parentRef's
namespace/name answers 404 or another UID); an object younger than the grace
period before the evidence is kept; an object that does not say which claim
it belongs to is never touched.  Each delete carries the object's UID as a
precondition, so an address reassigned meanwhile is not freed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from dranet_cloud.ipam.cluster.api import (
    CLAIM_GROUP,
    CLAIM_RESOURCE,
    CLAIM_UID_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODE_ANNOTATION,
    NODE_LABEL,
    IPAddressApi,
)
from dranet_cloud.ipam.node.reclaim import ClaimSource, NothingProven
from dranet_cloud.kube import KubeConflict, KubeError, KubeNotFound
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.claims import ClaimReference

log = logging.getLogger(__name__)

# Above this many distinct claims, one complete list of ResourceClaims is
# cheaper for the API server than a GET per claim.
MAX_CLAIM_GETS = 50
DEFAULT_SWEEP_TIMEOUT = 60.0


@dataclass
class SweepResult:
    """One sweep: objects looked at, deleted (or that would be), kept and why."""

    dry_run: bool
    checked: int = 0
    deleted: list[str] = field(default_factory=list)  # object names
    kept_recent: list[str] = field(default_factory=list)  # claim gone, within the grace
    anonymous: list[str] = field(default_factory=list)  # no claim UID: never touched
    failed: int = 0  # deletes that failed: the next run retries
    evidence: str = ""

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        text = (
            f"ipam gc (cluster scope) {verb} {len(self.deleted)} of {self.checked} IPAddress "
            "object(s) of claims proven gone"
        )
        if self.evidence:
            text += f", judged by {self.evidence}"
        if self.kept_recent:
            text += f"; kept {len(self.kept_recent)} younger than the grace period"
        if self.anonymous:
            text += f"; left {len(self.anonymous)} that name no claim UID alone"
        if self.failed:
            text += f"; {self.failed} delete(s) failed, the next run retries"
        return text


def _created(obj: Any) -> datetime | None:
    value = getattr(obj, "created", None)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _claim_of(obj: Any) -> ClaimReference | None:
    uid = (getattr(obj, "annotations", None) or {}).get(CLAIM_UID_ANNOTATION)
    if not uid:
        return None
    parent = getattr(obj, "parent", None)
    if (
        parent is not None
        and parent.group == CLAIM_GROUP
        and parent.resource == CLAIM_RESOURCE
        and parent.namespace
        and parent.name
    ):
        return ClaimReference(uid=str(uid), namespace=parent.namespace, name=parent.name)
    return ClaimReference(uid=str(uid))


def node_of(obj: Any) -> str | None:
    """The node an object names (annotation, else label), or None."""
    notes = getattr(obj, "annotations", None) or {}
    labels = getattr(obj, "labels", None) or {}
    return notes.get(NODE_ANNOTATION) or labels.get(NODE_LABEL) or None


def list_managed(
    api: IPAddressApi,
    selector: str = f"{MANAGED_BY_LABEL}={MANAGED_BY}",
    *,
    timeout: float = DEFAULT_SWEEP_TIMEOUT,
    counted: Callable[[str], None] | None = None,
    cached: bool = False,
) -> list[Any]:
    """This project's objects matching ``selector``, complete, or :class:`NothingProven`.

    ``cached``: from the API server's watch cache (the reclaimer's lists: a
    list a little behind only delays a delete, which a GET proves anyway).
    """
    (counted or (lambda _kind: None))("list")
    try:
        return list(api.list_ip_addresses(selector, deadline=timeout, cached=cached))
    except KubeError as exc:
        raise NothingProven(f"cannot list IPAddress objects ({exc}); nothing was deleted") from exc


def sweep_ip_addresses(
    api: IPAddressApi,
    source: ClaimSource,
    *,
    grace: timedelta,
    dry_run: bool = False,
    timeout: float = DEFAULT_SWEEP_TIMEOUT,
    counted: Callable[[str], None] | None = None,
    objects: Sequence[Any] | None = None,
    skip: Callable[[Any], bool] | None = None,
) -> SweepResult:
    """Delete the objects (``objects``, else every object of this project, listed once)
    whose claims ``source`` proves gone; ``skip(obj)`` True leaves one alone.

    Raises :class:`~.reclaim.NothingProven` (nothing deleted) when the list
    of objects or the evidence fails.
    """
    count = counted or (lambda _kind: None)
    until = time.monotonic() + timeout
    result = SweepResult(dry_run)
    if objects is None:
        objects = list_managed(api, timeout=timeout, counted=count)
    if skip is not None:
        objects = [o for o in objects if not skip(o)]
    result.checked = len(objects)
    by_uid: dict[str, ClaimReference] = {}
    judged: list[tuple[Any, str]] = []
    for obj in objects:
        claim = _claim_of(obj)
        if claim is None:
            result.anonymous.append(obj.name)
            continue
        judged.append((obj, claim.uid))
        if claim.uid not in by_uid or (
            claim.qualified_name and not by_uid[claim.uid].qualified_name
        ):
            by_uid[claim.uid] = claim
    if not judged:
        return result
    claims = list(by_uid.values())
    if len(claims) > MAX_CLAIM_GETS:
        claims = [ClaimReference(uid=c.uid) for c in claims]  # one complete list judges all
    evidence = source.prove_gone(claims)
    result.evidence = evidence.how
    cutoff = evidence.as_of - grace
    for obj, uid in judged:
        if uid not in evidence.gone:
            continue
        created = _created(obj)
        if created is None or created > cutoff:
            result.kept_recent.append(obj.name)
            continue
        if dry_run:
            result.deleted.append(obj.name)
            continue
        if not delete_object(api, obj, until, count):
            result.failed += 1
            continue
        result.deleted.append(obj.name)
        log.info(
            "ipam gc deleted IPAddress %s of claim %s (uid %s, node %s): the claim is gone",
            obj.name,
            safe(by_uid[uid].qualified_name or "?"),
            safe(uid),
            safe(node_of(obj) or "?"),
        )
    return result


def delete_object(api: IPAddressApi, obj: Any, until: float, count: Callable[[str], None]) -> bool:
    """Delete ``obj`` if it still has its UID; True when it is gone (or replaced)."""
    left = until - time.monotonic()
    if left <= 0:
        return False
    count("delete")
    try:
        api.delete_ip_address(obj.name, obj.uid, deadline=min(left, 10.0))
    except (KubeNotFound, KubeConflict):
        return True  # gone already, or the name holds a new object now: not ours to free
    except KubeError as exc:
        log.warning(
            "ipam gc: cannot delete IPAddress %s (%s); the next run retries", obj.name, safe(exc)
        )
        return False
    return True
