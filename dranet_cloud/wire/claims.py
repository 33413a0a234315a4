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
from typing import Any


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


# Size limits for what a caller may send (Kubernetes' own limits).
MAX_UID = 128
MAX_NAME = 253
MAX_NAMESPACE = 63
MAX_RESERVED_FOR = 256  # ResourceClaimReservedForMaxSize


def _string(obj: dict[str, Any], key: str, where: str, limit: int, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise ValueError(f"{where}.{key}: required, a non-empty string")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}.{key}: must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{where}.{key} is {len(value)} characters, over the limit of {limit}")
    return value


def _object(obj: Any, where: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: must be an object, got {type(obj).__name__}")
    return obj


def claim_reference_from_resource_claim(obj: Any) -> ClaimReference:
    """Reduce a ``resource.k8s.io/v1`` ResourceClaim (as gen2 DRANET sends it) to a reference.

    Only ``metadata.uid`` is required; ``metadata.namespace``/``name`` and the
    ``status.reservedFor`` entries with ``resource: pods`` are kept when
    present.  Everything else is ignored.  Raises ``ValueError`` naming the
    field (``claim.metadata.uid``) when the object is unusable or over a
    size limit.
    """
    claim = _object(obj, "claim")
    if obj is None:
        raise ValueError("claim: must be a ResourceClaim object, got null")
    meta = _object(claim.get("metadata"), "claim.metadata")
    uid = _string(meta, "uid", "claim.metadata", MAX_UID, required=True)
    namespace = _string(meta, "namespace", "claim.metadata", MAX_NAMESPACE)
    name = _string(meta, "name", "claim.metadata", MAX_NAME)
    status = _object(claim.get("status"), "claim.status")
    reserved = status.get("reservedFor") or []
    if not isinstance(reserved, list):
        raise ValueError("claim.status.reservedFor: must be a list")
    if len(reserved) > MAX_RESERVED_FOR:
        raise ValueError(
            f"claim.status.reservedFor: at most {MAX_RESERVED_FOR} entries, got {len(reserved)}"
        )
    pods: list[PodReference] = []
    for i, entry in enumerate(reserved):
        where = f"claim.status.reservedFor[{i}]"
        ref = _object(entry, where)
        if ref.get("resource") != "pods" or ref.get("apiGroup") not in (None, ""):
            continue
        pods.append(
            PodReference(
                name=_string(ref, "name", where, MAX_NAME, required=True),
                uid=_string(ref, "uid", where, MAX_UID),
            )
        )
    return ClaimReference(uid=uid, namespace=namespace or None, name=name or None, pods=tuple(pods))


def resolve_claim(claim_uid: str | None, claim: Any) -> ClaimReference:
    """The claim of a profile request of either generation.

    gen2 sends ``claim`` (UID from ``claim.metadata.uid``), gen1 ``claim_uid``;
    this project's client sends both.  Both present and different, or
    neither, is a ``ValueError`` (the server answers 400).
    """
    if claim_uid is not None and not isinstance(claim_uid, str):
        raise ValueError("claim_uid: must be a string")
    if claim_uid is not None and len(claim_uid) > MAX_UID:
        raise ValueError(f"claim_uid is {len(claim_uid)} characters, over the limit of {MAX_UID}")
    if claim is None:
        if not claim_uid:
            raise ValueError(
                "claim: required (gen2 DRANET sends the ResourceClaim as 'claim', gen1 sends "
                "'claim_uid'); the request has neither"
            )
        return ClaimReference(uid=claim_uid)
    ref = claim_reference_from_resource_claim(claim)
    if claim_uid and claim_uid != ref.uid:
        raise ValueError(
            f"claim_uid: {claim_uid!r} differs from claim.metadata.uid {ref.uid!r}; send one "
            "claim, or both for the same claim"
        )
    return ref


def resource_claim_document(ref: ClaimReference) -> dict[str, Any]:
    """A minimal ResourceClaim for a gen2 peer, built from what is known.

    ``metadata.uid`` always; ``namespace``/``name`` and ``status.reservedFor``
    only when known (a gen1 caller sends only the UID).
    """
    meta: dict[str, Any] = {"uid": ref.uid}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    if ref.name:
        meta["name"] = ref.name
    doc: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
    }
    if ref.pods:
        doc["status"] = {
            "reservedFor": [
                {"resource": "pods", "name": p.name, **({"uid": p.uid} if p.uid else {})}
                for p in ref.pods
            ]
        }
    return doc
