"""What the Kubernetes emulator serves: its resources, their paths and verbs, and discovery.

One table (:data:`SERVED`) says, for each resource, its group/version, Kind,
scope, verbs and the fields its field selector accepts; routing a path
(:func:`route`), naming a request's verb (:func:`verb_of`) and the discovery
documents kubectl reads before anything else (``/api``, ``/api/v1``,
``/apis``, ``/apis/<group>/<version>``, ``/version``) all derive from it, so a
resource added here is served, counted and discoverable at once.

Discovery is the legacy, unaggregated form (``APIVersions``,
``APIGroupList``, ``APIResourceList``): a client that asks for aggregated
discovery (``as=APIGroupDiscoveryList``) and gets plain JSON falls back to
it, as kubectl does against an older server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dranet_cloud.testing.kube_rules import COMMON_FIELDS

__all__ = [
    "CLAIMS",
    "IPADDRESSES",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "RESOURCES",
    "SERVED",
    "Served",
    "discovery",
    "route",
    "verb_of",
]

CLAIMS = "resourceclaims"
NODES = "nodes"
NAMESPACES = "namespaces"
IPADDRESSES = "ipaddresses"
PODS = "pods"
LEASES = "leases"

_READ = ("get", "list", "watch")


@dataclass(frozen=True)
class Served:
    """One resource the emulator serves."""

    plural: str
    group: str  # "" for the core group
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    fields: tuple[str, ...] = COMMON_FIELDS  # what its fieldSelector accepts
    short_names: tuple[str, ...] = ()
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else "v1"

    @property
    def qualified(self) -> str:
        """``ipaddresses.networking.k8s.io`` as the API server names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


SERVED: dict[str, Served] = {
    s.plural: s
    for s in (
        Served(CLAIMS, "resource.k8s.io", "ResourceClaim", True, _READ),
        Served(NODES, "", "Node", False, _READ, short_names=("no",)),
        Served(NAMESPACES, "", "Namespace", False, _READ, short_names=("ns",)),
        Served(
            IPADDRESSES,
            "networking.k8s.io",
            "IPAddress",
            False,
            (*_READ, "create", "delete"),
            short_names=("ip",),
        ),
        Served(
            PODS,
            "",
            "Pod",
            True,
            _READ,
            fields=(*COMMON_FIELDS, "spec.nodeName", "status.phase"),
            short_names=("po",),
        ),
        Served(
            LEASES,
            "coordination.k8s.io",
            "Lease",
            True,
            (*_READ, "create", "update", "delete"),
        ),
    )
}
RESOURCES = tuple(SERVED)
_BY_GROUP: dict[str, list[Served]] = {}
for _s in SERVED.values():
    _BY_GROUP.setdefault(_s.group, []).append(_s)


def route(path: str) -> tuple[str, str | None, str | None] | None:
    """``(resource, namespace, name)`` for a served object path, else ``None``.

    ``namespace`` is ``None`` for a namespaced collection across every
    namespace and ``""`` for a cluster-scoped resource.
    """
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis" and parts[2] == "v1":
        group, rest = parts[1], parts[3:]
    else:
        return None
    served = {s.plural: s for s in _BY_GROUP.get(group, ())}
    if len(rest) in (1, 2) and rest[0] in served:
        s = served[rest[0]]
        if s.namespaced and len(rest) == 2:
            return None  # a namespaced object needs its namespace in the path
        return s.plural, (None if s.namespaced else ""), rest[1] if len(rest) == 2 else None
    if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] in served:
        s = served[rest[2]]
        if s.namespaced:
            return s.plural, rest[1], rest[3] if len(rest) == 4 else None
    return None


def verb_of(method: str, name: str | None, watch: bool) -> str:
    """The Kubernetes verb of a request on a served path, ``""`` when there is none."""
    if method == "GET":
        if name is None:
            return "watch" if watch else "list"
        return "get"
    if method == "POST" and name is None:
        return "create"
    if method == "PUT" and name is not None:
        return "update"
    if method == "DELETE" and name is not None:
        return "delete"
    return ""


def _resource_list(group: str) -> dict[str, Any]:
    resources = []
    for s in _BY_GROUP.get(group, ()):
        entry: dict[str, Any] = {
            "name": s.plural,
            "singularName": s.singular or s.kind.lower(),
            "namespaced": s.namespaced,
            "kind": s.kind,
            "verbs": list(s.verbs),
        }
        if s.short_names:
            entry["shortNames"] = list(s.short_names)
        resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/v1" if group else "v1",
        "resources": resources,
    }


def _group_list() -> dict[str, Any]:
    groups = []
    for group in sorted(g for g in _BY_GROUP if g):
        version = {"groupVersion": f"{group}/v1", "version": "v1"}
        groups.append(
            {"name": group, "versions": [version], "preferredVersion": version},
        )
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-dranet-cloud-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def discovery(path: str, server_address: str = "") -> str | None:
    """The discovery document at ``path`` as JSON, or ``None`` when it is not one."""
    parts = [p for p in path.split("/") if p]
    doc: Mapping[str, Any] | None = None
    if parts == ["api"]:
        doc = {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }
    elif parts == ["api", "v1"]:
        doc = _resource_list("")
    elif parts == ["apis"]:
        doc = _group_list()
    elif len(parts) == 3 and parts[0] == "apis" and parts[2] == "v1" and parts[1] in _BY_GROUP:
        doc = _resource_list(parts[1])
    elif len(parts) == 2 and parts[0] == "apis" and parts[1] in _BY_GROUP and parts[1]:
        version = {"groupVersion": f"{parts[1]}/v1", "version": "v1"}
        doc = {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": parts[1],
            "versions": [version],
            "preferredVersion": version,
        }
    elif parts == ["version"]:
        doc = VERSION
    return None if doc is None else json.dumps(doc)
