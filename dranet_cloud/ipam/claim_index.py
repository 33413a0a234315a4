"""Which ResourceClaim a UID names: the cluster scope's answer for gen1 DRANET.

DRANET v1.4.0 (gen1) names a claim in ``GetProfileConfig`` only by its UID,
but an ``IPAddress`` object's ``spec.parentRef`` must name the claim by
namespace and name.  The Kubernetes API has no lookup by UID, so
:class:`ClaimIndex` keeps ``uid -> (namespace, name)`` built from one
*complete* paginated list of every ``resource.k8s.io/v1`` ResourceClaim
(:meth:`~dranet_cloud.kube.KubeClient.list_resource_claims`, the list leak
reclaiming already uses, so RBAC already grants it).

Why a cache and not a list per request: a list costs the whole cluster's
claims; the kubelet prepares a claim only after the scheduler allocated it,
so a claim a request names exists before the request arrives, and one list
begun after that moment answers every request that arrived before it.  The
index is listed again only when a UID is missing, at most once per
``min_interval`` seconds, and concurrent requests share that one list.

Never a guess: a UID missing from a complete list begun after the request
arrived, or a list that failed, is :class:`~dranet_cloud.errors.ProviderUnavailable`
(HTTP 500, the kubelet retries); no address is handed out without the
claim's namespace and name confirmed by the API.

The list runs on the caller's thread under the caller's deadline; callers
(:class:`~.cluster.ClusterIpam`) never call it on an event loop.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..errors import ProviderUnavailable
from ..logsafe import safe

if TYPE_CHECKING:
    from ..kube.client import ClaimIdentity, ClaimListing

log = logging.getLogger(__name__)

DEFAULT_MIN_INTERVAL = 1.0  # seconds between two lists started for missing UIDs


class ClaimLister(Protocol):
    """What the index needs from the API (:class:`~dranet_cloud.kube.KubeClient`)."""

    def list_resource_claims(self, *, deadline: float | None = None) -> ClaimListing: ...


class ClaimIndex:
    """``uid -> ClaimIdentity`` from the last complete list of ResourceClaims (module doc).

    ``counted`` is told ``"list-claims"`` before each list (figures for
    benchmarks and tests).
    """

    def __init__(
        self,
        api: ClaimLister,
        *,
        min_interval: float = DEFAULT_MIN_INTERVAL,
        counted: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        self.min_interval = min_interval
        self._counted = counted
        self._by_uid: dict[str, ClaimIdentity] = {}
        self._lock = threading.Lock()
        self._listed = -math.inf  # time.monotonic() when the last complete list began
        self._tried = -math.inf  # when the last list (complete or not) began

    def __len__(self) -> int:
        return len(self._by_uid)

    def cached(self, uid: str) -> ClaimIdentity | None:
        """The claim ``uid`` names as the last list saw it; no API call."""
        return self._by_uid.get(uid)

    def find(self, uid: str, *, asked_at: float, until: float) -> ClaimIdentity:
        """The claim ``uid`` names, from a list begun at or after ``asked_at`` when needed.

        ``asked_at`` is when the request arrived (``time.monotonic()``): a
        complete list begun after it that lacks the UID proves the claim is
        not there.  ``until`` is the request's deadline.  Raises
        :class:`ProviderUnavailable` when not found or not known.
        """
        hit = self._by_uid.get(uid)
        if hit is not None:
            return hit
        if not self._lock.acquire(timeout=max(0.0, until - time.monotonic())):
            raise self._unknown(uid, "another request's list of ResourceClaims did not end in time")
        try:
            hit = self._by_uid.get(uid)
            if hit is not None or self._listed >= asked_at:
                return self._found(uid, hit)
            wait = self._tried + self.min_interval - time.monotonic()
            if wait > 0:
                if time.monotonic() + wait >= until:
                    raise self._unknown(
                        uid,
                        f"ResourceClaims are listed at most once per {self.min_interval:g} s "
                        "and the next list would end after the request's deadline",
                    )
                time.sleep(wait)
            self._list(uid, until)
            return self._found(uid, self._by_uid.get(uid))
        finally:
            self._lock.release()

    def _list(self, uid: str, until: float) -> None:
        from ..kube import KubeError

        started = self._tried = time.monotonic()
        left = until - started
        if left <= 0:
            raise self._unknown(uid, "no time was left to list ResourceClaims")
        if self._counted is not None:
            self._counted("list-claims")
        try:
            listing = self.api.list_resource_claims(deadline=left)
        except KubeError as exc:
            raise self._unknown(
                uid,
                f"listing ResourceClaims failed ({exc}); a failed list proves nothing, so "
                "no address was handed out",
            ) from exc
        self._by_uid = {c.uid: c for c in listing.claims}
        self._listed = started
        log.debug("ipam (cluster scope): listed %d ResourceClaims", len(listing.claims))

    def _found(self, uid: str, hit: ClaimIdentity | None) -> ClaimIdentity:
        if hit is None:
            raise self._unknown(
                uid,
                "a complete list of ResourceClaims in every namespace, begun after the request "
                "arrived, has no claim with this UID (deleted, or not yet visible to this API "
                "server)",
            )
        return hit

    @staticmethod
    def _unknown(uid: str, why: str) -> ProviderUnavailable:
        return ProviderUnavailable(
            f"ipam (cluster scope): claim UID {safe(uid)} (gen1 DRANET sends only the UID): "
            f"its namespace/name, which the IPAddress object's parentRef must name, is not "
            f"known: {why}; nothing was handed out, the kubelet retries"
        )
