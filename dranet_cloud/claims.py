"""Which ResourceClaim a profile call is for, as far as the caller told us.

DRANET up to Aug 2026 (gen1) sends only ``claim_uid``; since Sep 2026 (gen2,
DRANET PR #282) it sends the whole ``resource.k8s.io/v1`` ResourceClaim.  The
host reduces both to a :class:`ClaimReference`: the UID always, the
namespace, name and consuming pods when known.  The IPAM records them with an
allocation so a leak can later be checked against the Kubernetes API by
namespace/name (a claim recreated under the same name has a new UID).

Plain dataclasses: nothing here imports pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PodReference:
    """One entry of the claim's ``status.reservedFor`` with ``resource: pods``.

    Pods consume claims of their own namespace, so the claim's namespace is
    the pod's.
    """

    name: str
    uid: str = ""


@dataclass(frozen=True)
class ClaimReference:
    """A claim as a profile plugin and the IPAM see it.

    ``namespace`` and ``name`` are ``None`` when the caller sent only a UID
    (gen1 DRANET, ``profile get --claim-uid``).
    """

    uid: str
    namespace: str | None = None
    name: str | None = None
    pods: tuple[PodReference, ...] = field(default_factory=tuple)

    @property
    def qualified_name(self) -> str | None:
        """``namespace/name`` when both are known."""
        if self.namespace and self.name:
            return f"{self.namespace}/{self.name}"
        return None
