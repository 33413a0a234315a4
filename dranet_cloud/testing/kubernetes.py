"""A Kubernetes API emulator: the objects dranet-cloud uses, the way the API server answers.

Real HTTP on loopback (the emulator kit, one thread per connection), real
Kubernetes JSON: objects with ``metadata.uid``/``resourceVersion``/
``creationTimestamp``, lists with ``metadata.resourceVersion``/``continue``/
``remainingItemCount`` and items without ``kind``, and errors as ``Status``
objects (``NotFound`` 404, ``AlreadyExists``/``Conflict`` 409, ``Invalid``
422 with ``details.causes``, ``Expired`` 410, ``InternalError`` 500,
``Unauthorized`` 401).  It serves:

* ``GET /apis/resource.k8s.io/v1/resourceclaims`` (every namespace),
* ``GET /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims[/NAME]``,
* ``GET /api/v1/nodes[/NAME]``, ``GET /api/v1/namespaces[/NAME]`` (``kube-system``'s
  UID is the cluster's identity, :attr:`KubernetesEmulator.cluster_uid`),
* ``networking.k8s.io/v1`` IPAddress objects: ``POST .../ipaddresses`` (atomic
  on the name: a taken name is ``409 AlreadyExists``; validated as
  ``ValidateIPAddress`` does, see :mod:`.kube_rules`), ``GET``/``DELETE
  .../ipaddresses/NAME`` (``DeleteOptions`` ``preconditions.uid`` and
  ``.resourceVersion``: ``409 Conflict``), ``GET .../ipaddresses`` with
  ``labelSelector``,

with ``limit``/``continue`` pagination served from a snapshot taken at the
first page, as the API server does: objects created or deleted meanwhile do
not show up in later pages.  Every request needs ``Authorization: Bearer
<token>``; :meth:`KubernetesEmulator.write_kubeconfig` writes a kubeconfig
holding that token.  Faults on top of the kit's (``delay``, ``drop``...):
:attr:`KubernetesEmulator.latency` sleeps before every answer;
:meth:`KubernetesEmulator.fail` answers the next requests (optionally of one
verb and resource, or only continued pages) with a Status of a given code;
:meth:`~KubernetesEmulator.lose_replies` commits the next writes but closes
the connection without an answer; :meth:`~KubernetesEmulator.expire_lists`
forgets every snapshot so the next continue token gets ``410 Expired``.
``GET /emulator/calls`` answers the request counts per resource and verb
(:meth:`~KubernetesEmulator.calls`) to a benchmark in another process.  The
same faults come from a spec string (``api_faults=``, ``emulate kubernetes
--api-faults``), see :func:`parse_api_faults`.

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

from .emulator import Emulator
from .faults import Faults
from .kube_faults import (
    KNOWN_STATUSES,
    VERBS,
    ApiFaults,
    check_verb,
    finite_seconds,
    parse_api_faults,
)
from .kube_rules import LabelSelector, SelectorError, ip_address_causes
from .messages import Request, Response

__all__ = [
    "CALLS_PATH",
    "CLAIMS",
    "IPADDRESSES",
    "NAMESPACES",
    "NODES",
    "VERBS",
    "ApiFaults",
    "KubernetesEmulator",
    "kubernetes_emulator",
    "parse_api_faults",
    "status_object",
]

CLAIMS = "resourceclaims"
NODES = "nodes"
NAMESPACES = "namespaces"
IPADDRESSES = "ipaddresses"
RESOURCES = (CLAIMS, NODES, NAMESPACES, IPADDRESSES)
_GROUP = {CLAIMS: "resource.k8s.io", NODES: "", NAMESPACES: "", IPADDRESSES: "networking.k8s.io"}
_KIND = {CLAIMS: "ResourceClaim", NODES: "Node", NAMESPACES: "Namespace", IPADDRESSES: "IPAddress"}
_API_VERSION = {r: f"{g}/v1" if g else "v1" for r, g in _GROUP.items()}
_QUALIFIED = {r: f"{r}.{g}" if g else r for r, g in _GROUP.items()}
_WRITABLE = frozenset({IPADDRESSES})  # resources served with create and delete
CALLS_PATH = "/emulator/calls"  # the request counts (not a Kubernetes path)
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
    slept before every answer; ``api_faults`` is a :func:`parse_api_faults` spec.
    Thread-safe: one lock guards the store; a create is a dictionary insert.
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
    ) -> None:
        if listen.strip().startswith("unix://"):
            raise ValueError(
                f"listen {listen!r}: the kubernetes emulator serves TCP loopback only "
                "(a kubeconfig server is an http(s) URL)"
            )
        self.token = token or secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in RESOURCES}
        # Each object as a list item (JSON without kind/apiVersion), encoded once
        # when stored: gets and list pages are joined from these strings.
        self._items: dict[str, dict[tuple[str, str], str]] = {r: {} for r in RESOURCES}
        self._rv = 1000
        self._snapshots: OrderedDict[str, list[str]] = OrderedDict()
        self._planned: list[_PlannedFailure] = []
        self._lost: list[_LostReplies] = []
        self._calls: Counter[tuple[str, str]] = Counter()
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
        self.emulator.on_stop.append(self._remove_tmpdir)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> KubernetesEmulator:
        self.emulator.start()
        return self

    def stop(self) -> None:
        self.emulator.stop()
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

    # --- objects -----------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _store(self, resource: str, key: tuple[str, str], doc: dict[str, Any]) -> None:
        """Keep ``doc`` and its list-item JSON (the caller holds the lock)."""
        self._objects[resource][key] = doc
        self._items[resource][key] = json.dumps(
            {k: v for k, v in doc.items() if k not in ("kind", "apiVersion")}
        )

    def _drop(self, resource: str, key: tuple[str, str]) -> dict[str, Any] | None:
        self._items[resource].pop(key, None)
        return self._objects[resource].pop(key, None)

    def _object_json(self, resource: str, key: tuple[str, str]) -> str | None:
        """The stored object as the API answers a get, ``None`` when absent."""
        item = self._items[resource].get(key)
        if item is None:
            return None
        head = f'{{"kind": "{_KIND[resource]}", "apiVersion": "{_API_VERSION[resource]}"'
        return head + ("}" if item == "{}" else ", " + item[1:])

    def _put_namespace(self, name: str, uid: str) -> None:
        doc = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": uid,
                "resourceVersion": self._next_rv(),
                "creationTimestamp": _now(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        self._store(NAMESPACES, ("", name), doc)

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

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store a ResourceClaim, Node, Namespace or IPAddress (its ``kind`` decides).

        Fills in metadata; replaces an object of the same name.
        """
        resource = _resource_of(obj)
        doc = json.loads(json.dumps(obj))  # a private deep copy
        meta = doc.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError(f"a {doc.get('kind')} needs metadata.name")
        if resource == CLAIMS and not meta.get("namespace"):
            raise ValueError(f"ResourceClaim {meta['name']} needs metadata.namespace")
        if resource != CLAIMS:
            meta.pop("namespace", None)  # cluster-scoped
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        doc["apiVersion"] = _API_VERSION[resource]
        doc["kind"] = _KIND[resource]
        with self._lock:
            meta["resourceVersion"] = self._next_rv()
            self._store(resource, (meta.get("namespace", ""), meta["name"]), doc)
        copy: dict[str, Any] = json.loads(json.dumps(doc))
        return copy

    def delete_claim(self, namespace: str, name: str) -> bool:
        """Delete a claim; ``False`` when there was none."""
        return self._remove(CLAIMS, namespace, name)

    def delete_node(self, name: str) -> bool:
        return self._remove(NODES, "", name)

    def delete_ip_address(self, name: str) -> bool:
        """Delete an IPAddress behind the API's back; ``False`` when there was none."""
        return self._remove(IPADDRESSES, "", name)

    def _remove(self, resource: str, namespace: str, name: str) -> bool:
        with self._lock:
            self._next_rv()
            return self._drop(resource, (namespace, name)) is not None

    def claims(self) -> list[dict[str, Any]]:
        return self._copies(CLAIMS)

    def ip_addresses(self, label_selector: str = "") -> list[dict[str, Any]]:
        """Every stored IPAddress (sorted by name) whose labels match the selector."""
        selector = LabelSelector(label_selector)
        return [
            o
            for o in self._copies(IPADDRESSES)
            if selector.matches(o["metadata"].get("labels") or {})
        ]

    def ip_address(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            obj = self._objects[IPADDRESSES].get(("", name))
            return None if obj is None else _copy(obj)

    def _copies(self, resource: str) -> list[dict[str, Any]]:
        with self._lock:
            return [_copy(o) for _, o in sorted(self._objects[resource].items())]

    def calls(self, resource: str = IPADDRESSES) -> dict[str, int]:
        """How many requests of each verb (``create``, ``get``...) reached ``resource``.

        Injected failures count (the client made the call); requests the kit's
        own faults dropped before the handler and refused tokens do not.
        """
        with self._lock:
            return {verb: n for (res, verb), n in self._calls.items() if res == resource and n}

    def reset_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    def _calls_answer(self, request: Request) -> Response:
        """``GET CALLS_PATH``: the counts of every resource; ``DELETE``: reset them.

        Not a Kubernetes path: how a benchmark in another process reads the
        API calls its clients made (``emulate kubernetes``).
        """
        if request.method == "DELETE":
            self.reset_calls()
        elif request.method != "GET":
            return _status(405, f"{request.method} {CALLS_PATH}: GET or DELETE")
        with self._lock:
            counts: dict[str, dict[str, int]] = {}
            for (res, verb), n in sorted(self._calls.items()):
                counts.setdefault(res, {})[verb] = n
        return Response.json(counts)

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
        ``list``, ``create``, ``delete``) and ``resource`` (``ipaddresses``...)
        only requests of that verb on that resource.
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
        if verb not in ("create", "delete") or resource not in _WRITABLE:
            raise ValueError(f"only a create's or a delete's reply on {sorted(_WRITABLE)} is lost")
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
            self.lose_replies(times, verb=verb)

    def expire_lists(self) -> None:
        """Forget every list snapshot: the next continue token answers 410 Expired."""
        with self._lock:
            self._snapshots.clear()

    def clear_faults(self) -> None:
        """No planned failures, lost replies, latency or kit faults from now on."""
        with self._lock:
            self._planned.clear()
            self._lost.clear()
        self.latency = 0.0
        self.emulator.faults.clear()

    def _planned_failure(self, request: Request, resource: str, verb: str) -> int | None:
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
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            return _status(401, "Unauthorized")
        if request.path == CALLS_PATH:
            return self._calls_answer(request)
        route = _route(request.path)
        resource, namespace, name = route if route is not None else ("", None, None)
        verb = _verb(request.method, name) if route is not None else ""
        if route is not None and verb:
            with self._lock:
                self._calls[(resource, verb)] += 1
        planned = self._planned_failure(request, resource, verb)
        if planned is not None:
            return _status(planned, f"injected failure: {HTTPStatus(planned).phrase}")
        if route is None:
            return _status(
                404, f"the server could not find the requested resource ({request.path})"
            )
        if not verb or (verb in ("create", "delete") and resource not in _WRITABLE):
            return _status(405, f"{request.method} is not served by this emulator for {resource}")
        if verb == "get":
            return self._get(resource, namespace or "", name or "")
        if verb == "list":
            return self._list(resource, namespace, request)
        if verb == "create":
            response = self._create_ip_address(request)
        else:
            response = self._delete_ip_address(request, name or "")
        if 200 <= response.status < 300 and self._reply_lost(resource, verb):
            response.abort = True
        return response

    def _get(self, resource: str, namespace: str, name: str) -> Response:
        with self._lock:
            body = self._object_json(resource, (namespace, name))
        if body is None:
            return _not_found(resource, name)
        return Response(200, body, {}, "application/json")

    def _create_ip_address(self, request: Request) -> Response:
        try:
            doc = json.loads(request.body or b"null")
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return _status(
                400, "the body of the request was in an unknown format: not a JSON object"
            )
        api_version = doc.get("apiVersion", _API_VERSION[IPADDRESSES])
        if doc.get("kind", "IPAddress") != "IPAddress" or api_version != _API_VERSION[IPADDRESSES]:
            return _status(
                400,
                f"the object's kind/apiVersion ({doc.get('kind')}/{api_version}) is not "
                f"IPAddress/{_API_VERSION[IPADDRESSES]}",
            )
        raw_meta = doc.get("metadata")
        meta_in: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        name = str(meta_in.get("name") or meta_in.get("generateName") or "")
        causes = ip_address_causes(doc)
        if causes:
            listed = [f"{c['field']}: {c['message']}" for c in causes]
            text = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
            return _status(
                422,
                f'IPAddress.networking.k8s.io "{name}" is invalid: {text}',
                name=name,
                resource=IPADDRESSES,
                kind="IPAddress",
                causes=causes,
            )
        meta = {k: v for k, v in meta_in.items() if k not in _SERVER_META}
        parent = doc["spec"]["parentRef"]
        stored = {
            "kind": "IPAddress",
            "apiVersion": _API_VERSION[IPADDRESSES],
            "metadata": meta,
            "spec": {
                "parentRef": {
                    k: str(parent[k])
                    for k in ("group", "resource", "namespace", "name")
                    if parent.get(k)
                }
            },
        }
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        key = ("", name)
        with self._lock:
            store = self._objects[IPADDRESSES]
            if key in store:
                taken = True
            else:
                taken = False
                meta["resourceVersion"] = self._next_rv()
                self._store(IPADDRESSES, key, stored)
                body = self._object_json(IPADDRESSES, key) or ""
        if taken:
            return _status(
                409,
                f'{_QUALIFIED[IPADDRESSES]} "{name}" already exists',
                name=name,
                resource=IPADDRESSES,
                reason="AlreadyExists",
            )
        return Response(201, body, {}, "application/json")

    def _delete_ip_address(self, request: Request, name: str) -> Response:
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
        with self._lock:
            store = self._objects[IPADDRESSES]
            obj = store.get(("", name))
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
                    self._drop(IPADDRESSES, ("", name))
                    self._next_rv()
        if obj is None:
            return _not_found(IPADDRESSES, name)
        if conflict is not None:
            return _status(
                409,
                f'Operation cannot be fulfilled on {_QUALIFIED[IPADDRESSES]} "{name}": {conflict}',
                name=name,
                resource=IPADDRESSES,
            )
        done = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": _GROUP[IPADDRESSES],
                "kind": IPADDRESSES,
                "uid": obj["metadata"].get("uid", ""),
            },
        }
        return Response(200, json.dumps(done), {}, "application/json")

    def _list(self, resource: str, namespace: str | None, request: Request) -> Response:
        limit_text = request.arg("limit") or "0"
        try:
            limit = int(limit_text)
        except ValueError:
            return _status(400, f"limit: invalid value {limit_text!r}")
        try:
            selector = LabelSelector(request.arg("labelSelector") or "")
        except SelectorError as exc:
            return _status(400, f"labelSelector: {exc}")
        token = request.arg("continue") or ""
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
                    items_json[key]
                    for key, obj in sorted(self._objects[resource].items())
                    if (namespace is None or key[0] == namespace)
                    and selector.matches(obj["metadata"].get("labels") or {})
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
        head = json.dumps(
            {
                "kind": f"{_KIND[resource]}List",
                "apiVersion": _API_VERSION[resource],
                "metadata": meta,
            }
        )
        body = head[:-1] + ', "items": [' + ", ".join(items) + "]}"
        return Response(200, body, {}, "application/json")


def _copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    return copy


def _resource_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    for resource, name in _KIND.items():
        if kind == name:
            return resource
    raise ValueError(
        "the kubernetes emulator serves ResourceClaim, Node, Namespace and IPAddress objects, "
        f"not {kind!r}"
    )


def _route(path: str) -> tuple[str, str | None, str | None] | None:
    """(resource, namespace, name) for a served path, else ``None``."""
    parts = [p for p in path.split("/") if p]
    if parts[:3] == ["apis", "resource.k8s.io", "v1"]:
        rest = parts[3:]
        if rest == [CLAIMS]:
            return CLAIMS, None, None
        if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == CLAIMS:
            return CLAIMS, rest[1], rest[3] if len(rest) == 4 else None
    elif parts[:3] == ["apis", "networking.k8s.io", "v1"]:
        rest = parts[3:]
        if rest[:1] == [IPADDRESSES] and len(rest) <= 2:
            return IPADDRESSES, "", rest[1] if len(rest) == 2 else None
    elif parts[:2] == ["api", "v1"]:
        rest = parts[2:]
        if len(rest) in (1, 2) and rest[0] in (NODES, NAMESPACES):
            return rest[0], "", rest[1] if len(rest) == 2 else None
    return None


def _verb(method: str, name: str | None) -> str:
    """The Kubernetes verb of a request on a served path, ``""`` when there is none."""
    if method == "GET":
        return "list" if name is None else "get"
    if method == "POST" and name is None:
        return "create"
    if method == "DELETE" and name is not None:
        return "delete"
    return ""


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
) -> KubernetesEmulator:
    """An emulator loaded from a ``kubectl get ... -o json`` file and/or objects."""
    emu = KubernetesEmulator(
        listen=listen,
        faults=faults,
        cluster_uid=cluster_uid,
        latency=latency,
        api_faults=api_faults,
    )
    if fixture is not None:
        emu.load_file(fixture)
    for obj in objects:
        emu.put(obj)
    return emu
