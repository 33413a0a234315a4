"""``networking.k8s.io/v1`` IPAddress objects: their shape, built and read as the API has them.

An IPAddress is cluster-scoped and named by the address in canonical form,
so creating one is an atomic, cluster-wide reservation of that address (the
API server answers ``409 AlreadyExists`` for a taken name).  This module
holds what is pure about them, the JSON a create sends and the typed view of
what the API answers; :class:`dranet_cloud.kube.KubeClient` does the calls
(``create_ip_address``, ``get_ip_address``, ``delete_ip_address``,
``list_ip_addresses``).  Shapes follow ``k8s.io/api/networking/v1``
(``IPAddress``, ``IPAddressSpec.parentRef``, ``ParentReference`` with
``group``, ``resource``, ``namespace``, ``name``; empty ones are omitted).

A body that is not such an object raises ``ValueError``; the client turns it
into a :class:`~dranet_cloud.kube.KubeError` naming the call.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from dranet_cloud.kube.objects import of_kind

__all__ = [
    "API_VERSION",
    "IPADDRESSES_PATH",
    "IP_FAMILY_LABEL",
    "MANAGED_BY_LABEL",
    "IPAddressObject",
    "ParentRef",
    "canonical_name",
    "ip_address_body",
    "ip_address_path",
    "parse_ip_address",
    "parse_ip_address_page",
]

API_VERSION = "networking.k8s.io/v1"
IPADDRESSES_PATH = "/apis/networking.k8s.io/v1/ipaddresses"
# Well-known labels (k8s.io/api/networking/v1): the built-in ClusterIP
# allocator sets managed-by to "ipallocator.k8s.io" and its repair loop
# leaves objects with any other value alone.
MANAGED_BY_LABEL = "ipaddress.kubernetes.io/managed-by"
IP_FAMILY_LABEL = "ipaddress.kubernetes.io/ip-family"
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class ParentRef:
    """``spec.parentRef``: the object an address is attached to (``group`` "" is core)."""

    group: str
    resource: str
    namespace: str
    name: str

    @classmethod
    def resource_claim(cls, namespace: str, name: str) -> ParentRef:
        """The reference to a ``resource.k8s.io`` ResourceClaim."""
        return cls("resource.k8s.io", "resourceclaims", namespace, name)

    def to_json(self) -> dict[str, str]:
        doc = {"group": self.group, "resource": self.resource}
        doc.update(namespace=self.namespace, name=self.name)
        return {k: v for k, v in doc.items() if v}


@dataclass(frozen=True)
class IPAddressObject:
    """One IPAddress as the API stores it.

    ``name`` is the address (canonical), ``uid`` the object's identity (the
    precondition a delete needs), ``parent`` ``None`` only for an object
    without ``spec.parentRef`` (the API refuses to create one; an older or
    foreign writer might have left it), ``created`` the server's
    ``creationTimestamp``.
    """

    name: str
    uid: str
    parent: ParentRef | None
    # Read-only views; left out of the hash (an object is hashable, e.g. in a set).
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY, hash=False)
    created: datetime | None = None
    resource_version: str = ""

    @property
    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.name)


def canonical_name(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The IPAddress name of ``address``: IPv4 dotted decimal, IPv6 per RFC 5952.

    Refuses (``ValueError``) what the API would: not an IP, an IPv6 zone, an
    IPv4-mapped IPv6 address (name the IPv4 address instead).
    """
    addr = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            raise ValueError(f"{address}: an IPAddress name has no IPv6 zone")
        if addr.ipv4_mapped is not None:
            raise ValueError(
                f"{address}: an IPv4-mapped IPv6 address is not a valid IPAddress name; "
                f"use {addr.ipv4_mapped}"
            )
    return str(addr)


def ip_address_path(name: str) -> str:
    """The object's URL path; refuses a name that would address another path."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not an IPAddress name")
    return f"{IPADDRESSES_PATH}/{quote(name, safe=':')}"


def ip_address_body(
    name: str,
    parent: ParentRef,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The JSON a create sends."""
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": API_VERSION,
        "kind": "IPAddress",
        "metadata": meta,
        "spec": {"parentRef": parent.to_json()},
    }


def _strings(value: Any, what: str) -> Mapping[str, str]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{what} is not a map of strings")
    return MappingProxyType(dict(value))


def _timestamp(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("metadata.creationTimestamp is not a string")
    stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def _parent(spec: Any) -> ParentRef | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError("spec is not an object")
    ref = spec.get("parentRef")
    if ref is None:
        return None
    if not isinstance(ref, Mapping):
        raise ValueError("spec.parentRef is not an object")
    values = [ref.get(k) or "" for k in ("group", "resource", "namespace", "name")]
    if not all(isinstance(v, str) for v in values):
        raise ValueError("spec.parentRef has a field that is not a string")
    return ParentRef(*values)


def parse_ip_address(doc: Any) -> IPAddressObject:
    """The typed view of one IPAddress object (a list item has no ``kind``: fine)."""
    doc = of_kind(doc, "IPAddress", "an IPAddress")
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError("an IPAddress without metadata")
    name, uid = meta.get("name"), meta.get("uid")
    if not (isinstance(name, str) and name and isinstance(uid, str) and uid):
        raise ValueError("an IPAddress without metadata.name or metadata.uid")
    rv = meta.get("resourceVersion") or ""
    return IPAddressObject(
        name=name,
        uid=uid,
        parent=_parent(doc.get("spec")),
        labels=_strings(meta.get("labels"), "metadata.labels"),
        annotations=_strings(meta.get("annotations"), "metadata.annotations"),
        created=_timestamp(meta.get("creationTimestamp")),
        resource_version=str(rv),
    )


def parse_ip_address_page(doc: Any) -> tuple[list[IPAddressObject], str]:
    """The items of one IPAddressList page and its continue token ("" on the last page).

    A page that says more items remain but gives no token is a partial answer
    and raises, as does anything that is not an IPAddressList.
    """
    doc = of_kind(doc, "IPAddressList", "a list answer")
    items = doc.get("items")
    if items is None and "items" in doc:
        items = []  # Go encodes an empty slice as null in some versions
    if not isinstance(items, list):
        raise ValueError("a list answer without items")
    meta = doc.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ValueError("a list answer whose metadata is not an object")
    token = meta.get("continue") or ""
    if not isinstance(token, str):
        raise ValueError("metadata.continue is not a string")
    remaining = meta.get("remainingItemCount")
    if not token and isinstance(remaining, int) and remaining > 0:
        raise ValueError(f"the page says {remaining} items remain but gives no continue token")
    return [parse_ip_address(one) for one in items], token
