"""A Kubernetes API emulator: the objects dranet-cloud uses, the way the API server answers.

Real HTTP on loopback (the emulator kit, one thread per connection), real
Kubernetes JSON: objects with ``metadata.uid``/``resourceVersion``/
``creationTimestamp``, lists with ``metadata.resourceVersion``/``continue``/
``remainingItemCount`` and items without ``kind``, and errors as ``Status``
objects (``NotFound`` 404, ``AlreadyExists``/``Conflict`` 409, ``Invalid``
422 with ``details.causes``, ``Expired`` 410, ``InternalError`` 500,
``Unauthorized`` 401).  What it serves (paths, verbs, field selectors) is
the table in :mod:`.kube_resources`: ResourceClaims, Nodes, Namespaces,
Pods (read and watch), ``networking.k8s.io/v1`` IPAddresses (create
validated as ``ValidateIPAddress`` does, :mod:`.kube_rules`; delete with
``preconditions``) and ``coordination.k8s.io/v1`` Leases (create, update
with optimistic concurrency, delete), plus the discovery documents kubectl
reads.

Every object's ``metadata.resourceVersion`` comes from one global counter;
every change is an event in a bounded history that ``?watch=true`` streams
(:mod:`.kube_watch`: bookmarks, ``timeoutSeconds``, ``410 Expired`` for an
RV older than the window, label and field selectors).  Lists and gets honour
``Accept: ...;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1``.  Lists
page (``limit``/``continue``) from a snapshot taken at the first page, as
the API server does.

Every request needs ``Authorization: Bearer <token>``;
:meth:`KubernetesEmulator.write_kubeconfig` writes a kubeconfig holding
that token.  Faults on top of the kit's (``delay``, ``drop``...):
:attr:`KubernetesEmulator.latency`, :meth:`~KubernetesEmulator.fail`,
:meth:`~KubernetesEmulator.lose_replies`,
:meth:`~KubernetesEmulator.expire_lists`,
:meth:`~KubernetesEmulator.cut_watches` (and ``_every``); the same from a
spec string (``api_faults=``, ``emulate kubernetes --api-faults``), see
:func:`parse_api_faults`.  ``GET /emulator/calls`` answers what was served
(requests and objects per resource and verb, open watches) to a benchmark
in another process.

Only the standard library is imported: the CKS plugin and tests reuse it.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from pathlib import Path
from typing import Any

from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.faults import Faults
from dranet_cloud.testing.kube_faults import (
    KNOWN_STATUSES,
    VERBS,
    ApiFaults,
    check_verb,
    finite_seconds,
    parse_api_faults,
)
from dranet_cloud.testing.kube_resources import (
    CLAIMS,
    IPADDRESSES,
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCES,
    SERVED,
    discovery,
    route,
    verb_of,
)
from dranet_cloud.testing.kube_rules import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    ip_address_causes,
)
from dranet_cloud.testing.kube_watch import (
    MAX_WATCH_SECONDS,
    WatchEvent,
    WatchExpired,
    WatchHub,
    error_line,
)
from dranet_cloud.testing.messages import Request, Response

__all__ = [
    "CALLS_PATH",
    "CLAIMS",
    "IPADDRESSES",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "VERBS",
    "ApiFaults",
    "KubernetesEmulator",
    "kubernetes_emulator",
    "parse_api_faults",
    "status_object",
]

_GROUP = {r: s.group for r, s in SERVED.items()}
_KIND = {r: s.kind for r, s in SERVED.items()}
_API_VERSION = {r: s.api_version for r, s in SERVED.items()}
_QUALIFIED = {r: s.qualified for r, s in SERVED.items()}
_WRITABLE = frozenset(r for r, s in SERVED.items() if "create" in s.verbs)
CALLS_PATH = "/emulator/calls"  # what was served (not a Kubernetes path)
META_GROUP_VERSION = "meta.k8s.io/v1"
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
MAX_SNAPSHOTS = 64  # list snapshots kept for continue tokens
MAX_FIXTURE_BYTES = 64 << 20
# metadata fields the server owns: a create's values for them are ignored.
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "namespace",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(
    code: int,
    message: str,
    *,
    name: str = "",
    resource: str = "",
    reason: str | None = None,
    kind: str | None = None,
    causes: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A ``meta/v1`` Status as the API server sends it for a failed request.

    ``details.kind`` is the resource (``ipaddresses``) for NotFound,
    AlreadyExists and Conflict, the Kind (``IPAddress``) for Invalid, as in
    ``k8s.io/apimachinery/pkg/api/errors``; ``group`` is left out when empty.
    """
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or _REASONS.get(code, HTTPStatus(code).phrase.replace(" ", "")),
        "code": code,
    }
    if name or resource:
        details: dict[str, Any] = {"name": name}
        if _GROUP.get(resource):
            details["group"] = _GROUP[resource]
        details["kind"] = kind or resource
        if causes:
            details["causes"] = [dict(c) for c in causes]
        doc["details"] = details
    return doc


@dataclass
class _PlannedFailure:
    status: int
    remaining: int | None  # None: until clear_faults()
    continue_only: bool
    path: str
    verb: str = ""
    resource: str = ""


@dataclass
class _LostReplies:
    verb: str
    resource: str
    remaining: int


class KubernetesEmulator:
    """The object store and handler behind an :class:`Emulator` named ``kubernetes``.

    Use it as a context manager or call :meth:`start`/:meth:`stop`; the
    ``url``, ``token`` and ``log`` (via :attr:`emulator`) are what tests need.
    ``cluster_uid`` is the ``kube-system`` Namespace's UID (a new one per
    emulator unless given: two emulators are two clusters); ``latency`` is
    slept before every answer; ``api_faults`` is a :func:`parse_api_faults`
    spec; ``bookmark_interval`` is how often a watch that allows bookmarks
    gets one; ``watch_window`` is how many events the history keeps;
    ``watch_queue_limit`` is how many undelivered events a watch may have
    before it is cut off; ``anonymous`` serves requests that carry no
    credentials (kubectl, which sends its token only over TLS).
    Thread-safe: one lock guards the store, the history and the watches.
    """

    def __init__(
        self,
        *,
        listen: str = "127.0.0.1:0",
        faults: Faults | str | None = None,
        token: str | None = None,
        env: Mapping[str, str] | None = None,
        cluster_uid: str | None = None,
        latency: float = 0.0,
        api_faults: str | None = None,
        bookmark_interval: float = 60.0,
        watch_window: int = 10_000,
        watch_queue_limit: int = 1000,
        anonymous: bool = False,
    ) -> None:
        if listen.strip().startswith("unix://"):
            raise ValueError(
                f"listen {listen!r}: the kubernetes emulator serves TCP loopback only "
                "(a kubeconfig server is an http(s) URL)"
            )
        if not bookmark_interval > 0:
            raise ValueError(f"bookmark_interval must be > 0 seconds, got {bookmark_interval!r}")
        self.token = token or secrets.token_urlsafe(24)
        # A request without credentials is served, as kube-apiserver's
        # --anonymous-auth with a permissive authorizer does (a wrong token is
        # still 401): kubectl sends no bearer token over plain HTTP.
        self.anonymous = anonymous
        self._lock = threading.Lock()
        self._hub = WatchHub(self._lock, window=watch_window, queue_limit=watch_queue_limit)
        self.bookmark_interval = float(bookmark_interval)
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in RESOURCES}
        # Each object as a list item (JSON without kind/apiVersion), encoded once
        # when stored: gets and list pages are joined from these strings.
        self._items: dict[str, dict[tuple[str, str], str]] = {r: {} for r in RESOURCES}
        self._meta_items: dict[str, dict[tuple[str, str], str]] = {r: {} for r in RESOURCES}
        # (label key, value) -> the keys of the objects carrying it: a list or
        # watch with ``k=v`` or ``k in (...)`` reads these instead of every object.
        self._by_label: dict[str, dict[tuple[str, str], set[tuple[str, str]]]] = {
            r: {} for r in RESOURCES
        }
        self._rv = 1000
        self._snapshots: OrderedDict[str, list[str]] = OrderedDict()
        self._planned: list[_PlannedFailure] = []
        self._lost: list[_LostReplies] = []
        self._calls: Counter[tuple[str, str]] = Counter()
        self._served: Counter[tuple[str, str]] = Counter()
        self._cutter: threading.Thread | None = None
        self._cutter_stop = threading.Event()
        self.latency = finite_seconds(latency, "latency")
        # time.monotonic() of every cluster-wide ResourceClaim list's snapshot
        # (its first page): tests count collection runs that began after an event.
        self.claim_list_snapshots: list[float] = []
        self._tmpdir: str | None = None
        for ns in ("default", "kube-public", "kube-node-lease"):
            self._put_namespace(ns, str(uuid.uuid4()))
        self._put_namespace("kube-system", cluster_uid or str(uuid.uuid4()))
        if api_faults:
            self.apply_api_faults(api_faults)
        self.emulator = Emulator(
            self.handle,
            name="kubernetes",
            listen=listen,
            faults=faults,
            # ``env``: more variables for the client (a CKS node's NODE_NAME).
            env_for=lambda url: {"KUBECONFIG": str(self.write_kubeconfig()), **(env or {})},
        )
        # Stopping the bare Emulator (a plugin's emulator hook returns it) cleans up too.
        self.emulator.on_stop.append(self._on_stop)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> KubernetesEmulator:
        self.emulator.start()
        return self

    def stop(self) -> None:
        self.emulator.stop()
        self._on_stop()

    def _on_stop(self) -> None:
        self._stop_cutter()
        self.cut_watches()  # no watch thread outlives the server
        self._remove_tmpdir()

    def _remove_tmpdir(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> KubernetesEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return self.emulator.url

    @property
    def faults(self) -> Faults:
        return self.emulator.faults

    @property
    def cluster_uid(self) -> str:
        """The ``kube-system`` Namespace's ``metadata.uid``: this cluster's identity."""
        with self._lock:
            ns = self._objects[NAMESPACES].get(("", "kube-system"))
            return str(ns["metadata"]["uid"]) if ns else ""

    @property
    def resource_version(self) -> str:
        """The global resourceVersion now (the last change's)."""
        with self._lock:
            return str(self._rv)

    def write_kubeconfig(self, path: str | Path | None = None) -> Path:
        """A kubeconfig (JSON is valid YAML) pointing at this emulator with its token.

        Without ``path`` it goes to a private temporary directory removed by :meth:`stop`.
        """
        if path is None:
            if self._tmpdir is None:
                self._tmpdir = tempfile.mkdtemp(prefix="kube-emulator-")
            path = Path(self._tmpdir) / "kubeconfig"
        target = Path(path)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator", "namespace": "default"},
                }
            ],
            "current-context": "emulator",
        }
        target.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        target.chmod(0o600)
        return target

    # --- the store (callers hold the lock) ----------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _store(self, resource: str, key: tuple[str, str], doc: dict[str, Any]) -> None:
        """Keep ``doc``, its label index entries and list-item JSON (the caller holds the lock)."""
        old = self._objects[resource].get(key)
        if old is not None:
            self._unindex(resource, key, old)
        by_label = self._by_label[resource]
        for label in (doc["metadata"].get("labels") or {}).items():
            by_label.setdefault(label, set()).add(key)
        self._objects[resource][key] = doc
        self._items[resource][key] = json.dumps(
            {k: v for k, v in doc.items() if k not in ("kind", "apiVersion")}
        )
        self._meta_items[resource].pop(key, None)

    def _drop(self, resource: str, key: tuple[str, str]) -> dict[str, Any] | None:
        self._items[resource].pop(key, None)
        self._meta_items[resource].pop(key, None)
        old = self._objects[resource].pop(key, None)
        if old is not None:
            self._unindex(resource, key, old)
        return old

    def _unindex(self, resource: str, key: tuple[str, str], doc: Mapping[str, Any]) -> None:
        by_label = self._by_label[resource]
        for label in (doc["metadata"].get("labels") or {}).items():
            keys = by_label.get(label)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del by_label[label]

    def _selected(
        self, resource: str, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> list[tuple[str, str]]:
        """The sorted keys of the objects a list or watch selects (the caller holds the lock).

        With a ``k=v`` or ``k in (...)`` requirement only the objects carrying
        one of its values are looked at (a node lists the few blocks it uses
        out of a cluster's thousands of addresses); the selectors still decide.
        """
        objects = self._objects[resource]
        narrowest = labels.narrowest()
        if narrowest is not None:
            label, values = narrowest
            by_label = self._by_label[resource]
            keys: Iterable[tuple[str, str]] = {
                k for v in values for k in by_label.get((label, v), ())
            }
        else:
            keys = objects
        found = []
        for key in keys:
            obj = objects[key]
            if (
                (namespace is None or key[0] == namespace)
                and labels.matches(obj["metadata"].get("labels") or {})
                and fields.matches(obj)
            ):
                found.append(key)
        found.sort()
        return found

    def _object_json(self, resource: str, key: tuple[str, str]) -> str | None:
        """The stored object as the API answers a get, ``None`` when absent."""
        item = self._items[resource].get(key)
        if item is None:
            return None
        head = f'{{"kind": "{_KIND[resource]}", "apiVersion": "{_API_VERSION[resource]}"'
        return head + ("}" if item == "{}" else ", " + item[1:])

    def _meta_json(self, resource: str, key: tuple[str, str]) -> str | None:
        """The stored object as a PartialObjectMetadata (cached until it changes)."""
        cached = self._meta_items[resource].get(key)
        if cached is None:
            obj = self._objects[resource].get(key)
            if obj is None:
                return None
            cached = _partial_json(obj)
            self._meta_items[resource][key] = cached
        return cached

    def _commit(
        self, resource: str, key: tuple[str, str], doc: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Store ``doc`` (``None``: delete) under a new RV and record the event.

        The caller holds the lock; ``doc`` is owned by the store from now on
        (events share it).  Returns the stored (or deleted) object.
        """
        old = self._objects[resource].get(key)
        if doc is None:
            if old is None:
                return None
            rv = int(self._next_rv())
            self._drop(resource, key)
            gone = dict(old)
            gone["metadata"] = {**old["metadata"], "resourceVersion": str(rv)}
            self._hub.record(
                WatchEvent("DELETED", resource, key[0], key[1], gone, json.dumps(gone), rv)
            )
            return old
        rv = int(self._next_rv())
        doc["metadata"]["resourceVersion"] = str(rv)
        self._store(resource, key, doc)
        self._hub.record(
            WatchEvent(
                "ADDED" if old is None else "MODIFIED",
                resource,
                key[0],
                key[1],
                doc,
                self._object_json(resource, key) or "{}",
                rv,
                old,
            )
        )
        return doc

    def _put_namespace(self, name: str, uid: str) -> None:
        doc = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": uid,
                "creationTimestamp": _now(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        with self._lock:
            self._commit(NAMESPACES, ("", name), doc)

    def compact(self) -> None:
        """Drop the whole event history: a watch from any RV before now gets 410 Expired."""
        with self._lock:
            self._hub.compact(self._rv)

    # --- objects: helpers for tests -----------------------------------------------------
    def add_claim(
        self,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        node: str = "node-1",
        device: str = "eth1",
        pods: Sequence[tuple[str, str]] = (),
    ) -> dict[str, Any]:
        """Create (or replace) a ResourceClaim allocated on ``node``; returns it.

        ``pods`` are ``(name, uid)`` pairs for ``status.reservedFor``.
        """
        claim: dict[str, Any] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "nic",
                            "exactly": {
                                "deviceClassName": "dranet",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "nic", "driver": "dra.net", "pool": node, "device": device}
                        ]
                    }
                }
            },
        }
        if pods:
            claim["status"]["reservedFor"] = [
                {"resource": "pods", "name": p, "uid": u} for p, u in pods
            ]
        return self.put(claim)

    def add_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        provider_id: str | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": uid or str(uuid.uuid4()),
                "labels": dict(labels or {}),
            },
            "spec": {},
            "status": {},
        }
        if provider_id:
            node["spec"]["providerID"] = provider_id
        return self.put(node)

    def add_ip_address(
        self,
        name: str,
        *,
        parent: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Store (or replace) an IPAddress without validation; returns it.

        ``parent`` is ``spec.parentRef`` (``group``, ``resource``,
        ``namespace``, ``name``); without it the address belongs to someone
        else: the ``default/kubernetes`` Service, as the API server's own
        ClusterIP allocator records it.
        """
        ref = (
            dict(parent)
            if parent is not None
            else {
                "group": "",
                "resource": "services",
                "namespace": "default",
                "name": "kubernetes",
            }
        )
        meta: dict[str, Any] = {"name": name}
        if uid:
            meta["uid"] = uid
        if labels:
            meta["labels"] = dict(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        return self.put(
            {
                "kind": "IPAddress",
                "metadata": meta,
                "spec": {"parentRef": {k: v for k, v in ref.items() if v}},
            }
        )

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str,
        claims: Sequence[tuple[str, str]] = (),
        uid: str | None = None,
        phase: str = "Running",
        labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create (or replace) a Pod bound to ``node``; returns it.

        ``claims`` are ``(request_name, claim_name)`` pairs: the pod's
        ``spec.resourceClaims`` and, as the scheduler and kubelet leave them,
        ``status.resourceClaimStatuses``.  Replacing a pod with the same
        ``uid`` is an update (MODIFIED); without one it keeps the stored UID.
        """
        spec: dict[str, Any] = {
            "nodeName": node,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        }
        status: dict[str, Any] = {"phase": phase}
        if claims:
            spec["resourceClaims"] = [{"name": r, "resourceClaimName": c} for r, c in claims]
            status["resourceClaimStatuses"] = [
                {"name": r, "resourceClaimName": c} for r, c in claims
            ]
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if labels:
            meta["labels"] = dict(labels)
        return self.put(
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
        )

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object of any served kind (its ``kind`` decides); returns a copy.

        Fills in metadata.  An object of the same name is replaced: with the
        same (or no) ``metadata.uid`` that is an update (one MODIFIED event,
        the stored UID and creationTimestamp kept); with another UID the old
        one is deleted and the new one added (DELETED, then ADDED).
        """
        resource = _resource_of(obj)
        doc = json.loads(json.dumps(obj))  # a private deep copy
        meta = doc.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError(f"a {doc.get('kind')} needs metadata.name")
        if SERVED[resource].namespaced and not meta.get("namespace"):
            raise ValueError(f"{_KIND[resource]} {meta['name']} needs metadata.namespace")
        if not SERVED[resource].namespaced:
            meta.pop("namespace", None)  # cluster-scoped
        doc["apiVersion"] = _API_VERSION[resource]
        doc["kind"] = _KIND[resource]
        key = (meta.get("namespace", ""), meta["name"])
        with self._lock:
            old = self._objects[resource].get(key)
            if old is not None:
                if meta.get("uid") in (None, old["metadata"].get("uid")):
                    meta["uid"] = old["metadata"].get("uid")
                    meta.setdefault("creationTimestamp", old["metadata"].get("creationTimestamp"))
                else:
                    self._commit(resource, key, None)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            self._commit(resource, key, doc)
            return _copy(doc)

    def delete_claim(self, namespace: str, name: str) -> bool:
        """Delete a claim (a DELETED event); ``False`` when there was none."""
        return self._remove(CLAIMS, namespace, name)

    def delete_node(self, name: str) -> bool:
        return self._remove(NODES, "", name)

    def delete_pod(self, namespace: str, name: str) -> bool:
        return self._remove(PODS, namespace, name)

    def delete_ip_address(self, name: str) -> bool:
        """Delete an IPAddress behind the API's back; ``False`` when there was none."""
        return self._remove(IPADDRESSES, "", name)

    def delete_object(self, resource: str, namespace: str, name: str) -> bool:
        """Delete any stored object (``namespace`` ``""`` when cluster-scoped)."""
        if resource not in SERVED:
            raise ValueError(f"unknown resource {resource!r}; known: {', '.join(RESOURCES)}")
        return self._remove(resource, namespace, name)

    def _remove(self, resource: str, namespace: str, name: str) -> bool:
        with self._lock:
            return self._commit(resource, (namespace, name), None) is not None

    def claims(self) -> list[dict[str, Any]]:
        return self._copies(CLAIMS)

    def pods(self) -> list[dict[str, Any]]:
        return self._copies(PODS)

    def leases(self) -> list[dict[str, Any]]:
        return self._copies(LEASES)

    def get_object(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of a stored object, ``None`` when absent."""
        with self._lock:
            obj = self._objects[resource].get((namespace, name))
            return None if obj is None else _copy(obj)

    def ip_addresses(self, label_selector: str = "") -> list[dict[str, Any]]:
        """Every stored IPAddress (sorted by name) whose labels match the selector."""
        selector = LabelSelector(label_selector)
        return [
            o
            for o in self._copies(IPADDRESSES)
            if selector.matches(o["metadata"].get("labels") or {})
        ]

    def ip_address(self, name: str) -> dict[str, Any] | None:
        return self.get_object(IPADDRESSES, "", name)

    def _copies(self, resource: str) -> list[dict[str, Any]]:
        with self._lock:
            return [_copy(o) for _, o in sorted(self._objects[resource].items())]

    # --- what was served -----------------------------------------------------------------

    def calls(self, resource: str = IPADDRESSES) -> dict[str, int]:
        """How many requests of each verb (``create``, ``get``, ``watch``...) reached ``resource``.

        Injected failures count (the client made the call); requests the kit's
        own faults dropped before the handler and refused tokens do not.  A
        first list page read consistently (no ``resourceVersion``) counts as
        ``list`` and as ``list-consistent``.
        """
        with self._lock:
            return {verb: n for (res, verb), n in self._calls.items() if res == resource and n}

    def objects(self, resource: str = IPADDRESSES) -> dict[str, int]:
        """How many objects each verb served from ``resource``.

        List items, one per successful get/create/update, and every watch
        event (the initial ADDED burst, BOOKMARKs and ERRORs included).
        """
        with self._lock:
            return {verb: n for (res, verb), n in self._served.items() if res == resource and n}

    def served(self) -> dict[str, Any]:
        """``{"requests": {res: {verb: n}}, "objects": {...}, "watches_open": {res: n}}``."""
        with self._lock:
            doc: dict[str, Any] = {"requests": {}, "objects": {}}
            for name, counter in (("requests", self._calls), ("objects", self._served)):
                for (res, verb), n in sorted(counter.items()):
                    if n:
                        doc[name].setdefault(res, {})[verb] = n
            doc["watches_open"] = self._hub.open_counts()
            return doc

    def watches_open(self, resource: str | None = None) -> int:
        """Open watch streams (of ``resource``, or of all)."""
        with self._lock:
            counts = self._hub.open_counts()
        return counts.get(resource, 0) if resource else sum(counts.values())

    def reset_calls(self) -> None:
        """Zero the request and object counters (open watches are a gauge, kept)."""
        with self._lock:
            self._calls.clear()
            self._served.clear()

    def _count_objects(self, resource: str, verb: str, n: int) -> None:
        with self._lock:
            self._count_objects_locked(resource, verb, n)

    def _count_objects_locked(self, resource: str, verb: str, n: int) -> None:
        self._served[(resource, verb)] += n

    def _calls_answer(self, request: Request) -> Response:
        """``GET CALLS_PATH``: :meth:`served`; ``DELETE``: reset the counters, then the same.

        Not a Kubernetes path: how a benchmark in another process reads the
        API calls its clients made (``emulate kubernetes``).
        """
        if request.method == "DELETE":
            self.reset_calls()
        elif request.method != "GET":
            return _status(405, f"{request.method} {CALLS_PATH}: GET or DELETE")
        return Response.json(self.served())

    def load(self, doc: Mapping[str, Any]) -> int:
        """Store every object of a ``kubectl get ... -o json`` answer.

        Accepts a ``List``, ``ResourceClaimList``, ``NodeList``,
        ``NamespaceList``, ``IPAddressList`` or one object; returns how many
        objects were stored.
        """
        kind = str(doc.get("kind", ""))
        if kind.endswith("List"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise ValueError(f"a {kind} needs an items list")
            default = kind[: -len("List")] or None
            for item in items:
                if not isinstance(item, Mapping):
                    raise ValueError(f"{kind}: every item must be an object")
                obj = dict(item)
                if default and "kind" not in obj:
                    obj["kind"] = default
                self.put(obj)
            return len(items)
        self.put(doc)
        return 1

    def load_file(self, path: str | Path) -> int:
        p = Path(path)
        if p.stat().st_size > MAX_FIXTURE_BYTES:
            raise ValueError(f"{p}: larger than {MAX_FIXTURE_BYTES} bytes")
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{p}: not JSON ({exc}); use kubectl get ... -o json") from exc
        if not isinstance(doc, Mapping):
            raise ValueError(f"{p}: expected a List object")
        return self.load(doc)

    # --- faults ------------------------------------------------------------------------

    def fail(
        self,
        status: int,
        *,
        times: int | None = 1,
        continue_only: bool = False,
        path: str = "",
        verb: str = "",
        resource: str = "",
    ) -> None:
        """Answer the next ``times`` matching requests with a Status of code ``status``.

        ``times=None``: every matching request until :meth:`clear_faults` (the API is down).

        ``continue_only`` matches only requests for a continued page (mid-pagination);
        ``path`` only requests whose path starts with it; ``verb`` (``get``,
        ``list``, ``watch``, ``create``, ``update``, ``delete``) and
        ``resource`` (``ipaddresses``...) only requests of that verb on that resource.
        """
        check_verb(verb)
        if not 400 <= status <= 599 or status not in KNOWN_STATUSES:
            raise ValueError(f"fail({status}): expected an HTTP error status 400-599")
        if resource and resource not in RESOURCES:
            raise ValueError(f"unknown resource {resource!r}; known: {', '.join(RESOURCES)}")
        with self._lock:
            self._planned.append(
                _PlannedFailure(status, times, continue_only, path, verb, resource)
            )

    def lose_replies(
        self, times: int = 1, *, verb: str = "create", resource: str = IPADDRESSES
    ) -> None:
        """Commit the next ``times`` successful ``verb`` requests, then close without answering.

        The object is stored (or deleted) as usual, but the connection is
        reset instead of sending the 2xx: the client cannot tell whether the
        write happened.
        """
        if (
            verb not in ("create", "update", "delete")
            or verb not in SERVED.get(resource, SERVED[NODES]).verbs
        ):
            raise ValueError(
                f"only a create's, an update's or a delete's reply on {sorted(_WRITABLE)} is "
                f"lost, and {resource} is not served with {verb}"
            )
        with self._lock:
            self._lost.append(_LostReplies(verb, resource, times))

    def apply_api_faults(self, spec: str | ApiFaults) -> None:
        """Add a :func:`parse_api_faults` spec's faults; its latency replaces the current one."""
        faults = parse_api_faults(spec) if isinstance(spec, str) else spec
        if faults.latency:
            self.latency = faults.latency
        for verb, status, times in faults.failures:
            self.fail(status, times=times, verb=verb)
        for verb, times in faults.lost_replies:
            # creates and deletes: IPAddresses (as before Leases); updates: Leases
            self.lose_replies(
                times, verb=verb, resource=LEASES if verb == "update" else IPADDRESSES
            )
        if faults.cut_watches:
            self.cut_watches_every(faults.cut_watches)

    def expire_lists(self) -> None:
        """Forget every list snapshot: the next continue token answers 410 Expired."""
        with self._lock:
            self._snapshots.clear()

    def cut_watches(self) -> int:
        """Abort every open watch now (each stream is reset mid-way); returns how many.

        The client sees its watch break, as when an API server restarts or a
        load balancer drops long connections; it resumes from the last RV.
        """
        with self._lock:
            return self._hub.cut_all()

    def cut_watches_every(self, seconds: float) -> None:
        """Keep cutting every open watch every ``seconds`` until :meth:`clear_faults`/stop.

        One timer thread for the emulator, whatever the number of watches.
        """
        finite_seconds(seconds, "cut-watches interval")
        if seconds <= 0:
            raise ValueError("the cut-watches interval must be > 0 seconds")
        self._stop_cutter()
        stop = self._cutter_stop = threading.Event()

        def cut() -> None:
            while not stop.wait(seconds):
                self.cut_watches()

        self._cutter = threading.Thread(target=cut, name="kube-emulator-cut-watches", daemon=True)
        self._cutter.start()

    def _stop_cutter(self) -> None:
        self._cutter_stop.set()
        if self._cutter is not None:
            self._cutter.join(timeout=5)
            self._cutter = None

    def clear_faults(self) -> None:
        """No planned failures, lost replies, watch cuts, latency or kit faults from now on."""
        self._stop_cutter()
        with self._lock:
            self._planned.clear()
            self._lost.clear()
        self.latency = 0.0
        self.emulator.faults.clear()

    def _planned_failure(self, request: Request, resource: str, verb: str) -> int | None:
        if not self._planned:  # most requests: no lock taken (a plan added meanwhile is next)
            return None
        has_continue = bool(request.arg("continue"))
        with self._lock:
            for plan in self._planned:
                if plan.continue_only and not has_continue:
                    continue
                if plan.path and not request.path.startswith(plan.path):
                    continue
                if (plan.verb and plan.verb != verb) or (
                    plan.resource and plan.resource != resource
                ):
                    continue
                if plan.remaining is not None:
                    plan.remaining -= 1
                    if plan.remaining <= 0:
                        self._planned.remove(plan)
                return plan.status
        return None

    def _reply_lost(self, resource: str, verb: str) -> bool:
        if not self._lost:
            return False
        with self._lock:
            for plan in self._lost:
                if plan.verb == verb and plan.resource == resource:
                    plan.remaining -= 1
                    if plan.remaining <= 0:
                        self._lost.remove(plan)
                    return True
        return False

    # --- HTTP --------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        latency = self.latency
        if latency:
            time.sleep(latency)  # this connection's thread only: requests do not queue
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {self.token}" and not (self.anonymous and not auth):
            return _status(401, "Unauthorized")
        if request.path == CALLS_PATH:
            return self._calls_answer(request)
        if request.method == "GET":
            doc = discovery(request.path, self.emulator.host_port)
            if doc is not None:
                return Response(200, doc, {}, "application/json")
        found = route(request.path)
        resource, namespace, name = found if found is not None else ("", None, None)
        watch = (request.arg("watch") or "").lower() in ("true", "1")
        verb = verb_of(request.method, name, watch) if found is not None else ""
        if found is not None and verb:
            with self._lock:
                self._calls[(resource, verb)] += 1
        planned = self._planned_failure(request, resource, verb)
        if planned is not None:
            return _status(planned, f"injected failure: {HTTPStatus(planned).phrase}")
        if found is None:
            return _status(
                404, f"the server could not find the requested resource ({request.path})"
            )
        if not verb or verb not in SERVED[resource].verbs:
            return _status(
                405,
                f"{request.method} ({verb or 'no verb'}) is not served by this emulator for "
                f"{resource}; it serves {', '.join(SERVED[resource].verbs)}",
            )
        meta_only = _wants_metadata(request)
        if verb == "get":
            return self._get(resource, namespace or "", name or "", meta_only)
        if verb == "list":
            return self._list(resource, namespace, request, meta_only)
        if verb == "watch":
            return self._watch(resource, namespace, request, meta_only)
        if verb == "create":
            response = self._create(resource, namespace or "", request)
        elif verb == "update":
            response = self._update(resource, namespace or "", name or "", request)
        else:
            response = self._delete(resource, namespace or "", name or "", request)
        if 200 <= response.status < 300 and self._reply_lost(resource, verb):
            response.abort = True
        return response

    def _get(self, resource: str, namespace: str, name: str, meta_only: bool) -> Response:
        key = (namespace, name)
        with self._lock:
            body = self._meta_json(resource, key) if meta_only else self._object_json(resource, key)
            if body is not None:
                self._served[(resource, "get")] += 1
        if body is None:
            return _not_found(resource, name)
        return Response(200, body, {}, "application/json")

    def _selectors(
        self, resource: str, request: Request
    ) -> tuple[LabelSelector, FieldSelector] | Response:
        try:
            labels = LabelSelector(request.arg("labelSelector") or "")
        except SelectorError as exc:
            return _status(400, f"labelSelector: {exc}")
        try:
            fields = FieldSelector(request.arg("fieldSelector") or "", SERVED[resource].fields)
        except SelectorError as exc:
            return _status(400, f"fieldSelector: {exc}")
        return labels, fields

    def _list(
        self, resource: str, namespace: str | None, request: Request, meta_only: bool
    ) -> Response:
        limit_text = request.arg("limit") or "0"
        try:
            limit = int(limit_text)
        except ValueError:
            return _status(400, f"limit: invalid value {limit_text!r}")
        selectors = self._selectors(resource, request)
        if isinstance(selectors, Response):
            return selectors
        labels, fields = selectors
        token = request.arg("continue") or ""
        consistent = (
            not token
            and not request.arg("resourceVersion")
            and request.arg("resourceVersionMatch") != "NotOlderThan"
        )
        with self._lock:
            if token:
                decoded = _decode_continue(token)
                if decoded is None:
                    return _status(400, "continue: invalid value: not a continue token")
                snap_id, offset, rv = decoded
                snapshot = self._snapshots.get(snap_id)
                if snapshot is None:
                    return _status(
                        410,
                        "The provided continue parameter is too old to display a consistent "
                        "list result. You can start a new list without the continue parameter.",
                    )
            else:
                rv = str(self._rv)
                items_json = self._items[resource]
                snapshot = [
                    self._meta_json(resource, key) or "{}" if meta_only else items_json[key]
                    for key in self._selected(resource, namespace, labels, fields)
                ]
                snap_id = secrets.token_hex(8)
                offset = 0
                if resource == CLAIMS and namespace is None:
                    self.claim_list_snapshots.append(time.monotonic())
                self._snapshots[snap_id] = snapshot
                while len(self._snapshots) > MAX_SNAPSHOTS:
                    self._snapshots.popitem(last=False)
            end = len(snapshot) if limit <= 0 else min(len(snapshot), offset + limit)
            items = snapshot[offset:end]
            meta: dict[str, Any] = {"resourceVersion": rv}
            if end < len(snapshot):
                meta["continue"] = _encode_continue(snap_id, end, rv)
                meta["remainingItemCount"] = len(snapshot) - end
            self._served[(resource, "list")] += len(items)
            if consistent:
                self._calls[(resource, "list-consistent")] += 1
                self._served[(resource, "list-consistent")] += len(items)
        head = json.dumps(
            {
                "kind": "PartialObjectMetadataList" if meta_only else f"{_KIND[resource]}List",
                "apiVersion": META_GROUP_VERSION if meta_only else _API_VERSION[resource],
                "metadata": meta,
            }
        )
        body = head[:-1] + ', "items": [' + ", ".join(items) + "]}"
        return Response(200, body, {}, "application/json")

    def _watch(
        self, resource: str, namespace: str | None, request: Request, meta_only: bool
    ) -> Response:
        """``?watch=true``: a chunked stream of events (:mod:`.kube_watch`)."""
        selectors = self._selectors(resource, request)
        if isinstance(selectors, Response):
            return selectors
        labels, fields = selectors
        rv_text = request.arg("resourceVersion") or ""
        timeout_text = request.arg("timeoutSeconds") or ""
        try:
            since = int(rv_text) if rv_text not in ("", "0") else None
            timeout = float(int(timeout_text)) if timeout_text else MAX_WATCH_SECONDS
        except ValueError:
            return _status(400, f"resourceVersion {rv_text!r} / timeoutSeconds {timeout_text!r}")
        timeout = min(max(timeout, 0.0), MAX_WATCH_SECONDS)
        bookmarks = (request.arg("allowWatchBookmarks") or "").lower() in ("true", "1")
        expired = ""
        first: list[tuple[str, str]] = []
        with self._lock:
            replay: list[WatchEvent] = []
            if since is not None:
                try:
                    replay = self._hub.since(since)
                except WatchExpired as exc:
                    expired = str(exc)
            if expired:
                self._served[(resource, "watch")] += 1
            else:
                w = self._hub.open(
                    resource,
                    namespace=namespace,
                    labels=labels,
                    fields=fields,
                    metadata_only=meta_only,
                )
                if since is None:
                    for key in self._selected(resource, namespace, labels, fields):
                        body = (
                            self._meta_json(resource, key)
                            if meta_only
                            else self._object_json(resource, key)
                        )
                        first.append(("ADDED", body or "{}"))
        if expired:
            status = status_object(410, expired, reason="Expired")
            return Response(200, "", {}, "application/json", stream=iter([error_line(status)]))
        for e in replay:  # events are immutable: filtered and encoded outside the lock
            seen = w.view(e)
            if seen is not None:
                first.append((seen[0], _encode_event(e, seen[1], meta_only)))

        def bookmark() -> str:  # runs under the lock
            kind, api_version = (
                ("PartialObjectMetadata", META_GROUP_VERSION)
                if meta_only
                else (_KIND[resource], _API_VERSION[resource])
            )
            return json.dumps(
                {
                    "kind": kind,
                    "apiVersion": api_version,
                    "metadata": {"resourceVersion": str(self._rv)},
                }
            )

        stream = self._hub.stream(
            w,
            first,
            encode=_encode_event,
            bookmark=bookmark if bookmarks else None,
            bookmark_interval=self.bookmark_interval,
            timeout=timeout,
            count=lambda n: self._count_objects(resource, "watch", n),
            count_locked=lambda n: self._count_objects_locked(resource, "watch", n),
        )
        return Response(200, "", {}, "application/json", stream=stream)

    def _body(self, request: Request) -> dict[str, Any] | Response:
        try:
            doc = json.loads(request.body or b"null")
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return _status(
                400, "the body of the request was in an unknown format: not a JSON object"
            )
        return doc

    def _check_kind(self, resource: str, doc: Mapping[str, Any]) -> Response | None:
        api_version = doc.get("apiVersion", _API_VERSION[resource])
        kind = doc.get("kind", _KIND[resource])
        if kind != _KIND[resource] or api_version != _API_VERSION[resource]:
            return _status(
                400,
                f"the object's kind/apiVersion ({kind}/{api_version}) is not "
                f"{_KIND[resource]}/{_API_VERSION[resource]}",
            )
        return None

    def _create(self, resource: str, namespace: str, request: Request) -> Response:
        doc = self._body(request)
        if isinstance(doc, Response):
            return doc
        bad = self._check_kind(resource, doc)
        if bad is not None:
            return bad
        raw_meta = doc.get("metadata")
        meta_in: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = str(meta_in.get("name") or meta_in.get("generateName") or "")
        if resource == IPADDRESSES:
            causes = ip_address_causes(doc)
        elif not meta_in.get("name"):
            causes = [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                    "field": "metadata.name",
                }
            ]
        else:
            causes = []
        if causes:
            listed = [f"{c['field']}: {c['message']}" for c in causes]
            text = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
            return _status(
                422,
                f'{_KIND[resource]}.{_GROUP[resource]} "{name}" is invalid: {text}',
                name=name,
                resource=resource,
                kind=_KIND[resource],
                causes=causes,
            )
        body_ns = meta_in.get("namespace")
        if SERVED[resource].namespaced and body_ns and body_ns != namespace:
            return _status(
                400,
                f"the namespace of the provided object ({body_ns}) does not match the "
                f"namespace sent on the request ({namespace})",
            )
        meta = {k: v for k, v in meta_in.items() if k not in _SERVER_META}
        if SERVED[resource].namespaced:
            meta["namespace"] = namespace
        stored: dict[str, Any] = {
            "kind": _KIND[resource],
            "apiVersion": _API_VERSION[resource],
            "metadata": meta,
        }
        if resource == IPADDRESSES:
            parent = doc["spec"]["parentRef"]
            stored["spec"] = {
                "parentRef": {
                    k: str(parent[k])
                    for k in ("group", "resource", "namespace", "name")
                    if parent.get(k)
                }
            }
            meta["generation"] = 1
        else:
            stored.update({k: v for k, v in doc.items() if k not in stored and k != "status"})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        key = (namespace if SERVED[resource].namespaced else "", name)
        with self._lock:
            taken = key in self._objects[resource]
            if not taken:
                self._commit(resource, key, stored)
                self._served[(resource, "create")] += 1
                body = self._object_json(resource, key) or ""
        if taken:
            return _status(
                409,
                f'{_QUALIFIED[resource]} "{name}" already exists',
                name=name,
                resource=resource,
                reason="AlreadyExists",
            )
        return Response(201, body, {}, "application/json")

    def _update(self, resource: str, namespace: str, name: str, request: Request) -> Response:
        """PUT: replace the object; a ``metadata.resourceVersion`` not the stored one is 409."""
        doc = self._body(request)
        if isinstance(doc, Response):
            return doc
        bad = self._check_kind(resource, doc)
        if bad is not None:
            return bad
        raw_meta = doc.get("metadata")
        meta_in: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if meta_in.get("name") != name:
            return _status(
                400,
                f"the name of the object ({meta_in.get('name')}) does not match the name on "
                f"the URL ({name})",
            )
        body_ns = meta_in.get("namespace")
        if SERVED[resource].namespaced and body_ns and body_ns != namespace:
            return _status(
                400,
                f"the namespace of the provided object ({body_ns}) does not match the "
                f"namespace sent on the request ({namespace})",
            )
        want_rv = meta_in.get("resourceVersion")
        key = (namespace if SERVED[resource].namespaced else "", name)
        with self._lock:
            old = self._objects[resource].get(key)
            conflict = (
                old is not None and bool(want_rv) and want_rv != old["metadata"]["resourceVersion"]
            )
            if old is not None and not conflict:
                meta = {k: v for k, v in meta_in.items() if k not in _SERVER_META}
                for field in ("uid", "creationTimestamp", "generation"):
                    if field in old["metadata"]:
                        meta[field] = old["metadata"][field]
                if SERVED[resource].namespaced:
                    meta["namespace"] = namespace
                stored = {k: v for k, v in doc.items() if k not in ("metadata", "status")}
                stored.update(
                    kind=_KIND[resource], apiVersion=_API_VERSION[resource], metadata=meta
                )
                if "status" in old:
                    stored["status"] = old["status"]  # status is its own subresource
                self._commit(resource, key, stored)
                self._served[(resource, "update")] += 1
                body = self._object_json(resource, key) or ""
        if old is None:
            return _not_found(resource, name)
        if conflict:
            return _status(
                409,
                f'Operation cannot be fulfilled on {_QUALIFIED[resource]} "{name}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                name=name,
                resource=resource,
                reason="Conflict",
            )
        return Response(200, body, {}, "application/json")

    def _delete(self, resource: str, namespace: str, name: str, request: Request) -> Response:
        options: Any = {}
        if request.body.strip():
            try:
                options = json.loads(request.body)
            except ValueError:
                options = None
        pre = options.get("preconditions") if isinstance(options, dict) else None
        if not isinstance(options, dict) or not isinstance(pre, (dict, type(None))):
            return _status(
                400, "the body of the request was in an unknown format: not DeleteOptions"
            )
        pre = pre or {}
        key = (namespace, name)
        with self._lock:
            obj = self._objects[resource].get(key)
            conflict = None
            if obj is not None:
                meta = obj["metadata"]
                for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                    want = pre.get(field)
                    if want is not None and want != meta.get(field):
                        conflict = (
                            f"Precondition failed: {label} in precondition: {want}, "
                            f"{label} in object meta: {meta.get(field)}"
                        )
                        break
                if conflict is None:
                    self._commit(resource, key, None)
        if obj is None:
            return _not_found(resource, name)
        if conflict is not None:
            return _status(
                409,
                f'Operation cannot be fulfilled on {_QUALIFIED[resource]} "{name}": {conflict}',
                name=name,
                resource=resource,
            )
        details: dict[str, Any] = {"name": name}
        if _GROUP[resource]:
            details["group"] = _GROUP[resource]
        details["kind"] = resource
        details["uid"] = obj["metadata"].get("uid", "")
        done = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
        return Response(200, json.dumps(done), {}, "application/json")


def _encode_event(e: WatchEvent, use_prev: bool, metadata_only: bool) -> str:
    """An event's object as a watch sees it (no lock needed: events are immutable)."""
    if use_prev and e.prev is not None:
        obj: Mapping[str, Any] = {
            **e.prev,
            "metadata": {**e.prev.get("metadata", {}), "resourceVersion": str(e.rv)},
        }
        return _partial_json(obj) if metadata_only else json.dumps(obj)
    return _partial_json(e.obj) if metadata_only else e.json


def _copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    return copy


def _partial_json(obj: Mapping[str, Any]) -> str:
    return json.dumps(
        {
            "kind": "PartialObjectMetadata",
            "apiVersion": META_GROUP_VERSION,
            "metadata": obj.get("metadata", {}),
        }
    )


def _wants_metadata(request: Request) -> bool:
    """Whether ``Accept`` prefers ``as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1``."""
    for media in request.headers.get("Accept", "").split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        wanted = params.get("as")
        if wanted is None:
            return False  # plain JSON comes first
        if wanted.startswith("PartialObjectMetadata") and params.get("g") == "meta.k8s.io":
            return True
    return False


def _resource_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    for resource, name in _KIND.items():
        if kind == name:
            return resource
    raise ValueError(
        f"the kubernetes emulator serves {', '.join(_KIND.values())} objects, not {kind!r}"
    )


def _not_found(resource: str, name: str) -> Response:
    return _status(404, f'{_QUALIFIED[resource]} "{name}" not found', name=name, resource=resource)


def _status(code: int, message: str, **details: Any) -> Response:
    """A failure answer; ``details`` are :func:`status_object`'s keywords."""
    doc = status_object(code, message, **details)
    return Response(code, json.dumps(doc), {}, "application/json")


def _encode_continue(snap_id: str, offset: int, rv: str) -> str:
    raw = json.dumps({"v": "emulator", "s": snap_id, "o": offset, "rv": rv}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[str, int, str] | None:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        return str(doc["s"]), int(doc["o"]), str(doc["rv"])
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None


def kubernetes_emulator(
    fixture: str | Path | None = None,
    *,
    listen: str = "127.0.0.1:0",
    faults: str | None = None,
    objects: Iterable[Mapping[str, Any]] = (),
    cluster_uid: str | None = None,
    latency: float = 0.0,
    api_faults: str | None = None,
    bookmark_interval: float = 60.0,
) -> KubernetesEmulator:
    """An emulator loaded from a ``kubectl get ... -o json`` file and/or objects."""
    emu = KubernetesEmulator(
        listen=listen,
        faults=faults,
        cluster_uid=cluster_uid,
        latency=latency,
        api_faults=api_faults,
        bookmark_interval=bookmark_interval,
    )
    if fixture is not None:
        emu.load_file(fixture)
    for obj in objects:
        emu.put(obj)
    return emu
