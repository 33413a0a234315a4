"""A Kubernetes API emulator: ResourceClaims and Nodes, the way the API server answers.

Real HTTP on loopback (the emulator kit), real Kubernetes JSON: objects with
``metadata.uid``/``resourceVersion``/``creationTimestamp``, lists with
``metadata.resourceVersion``/``continue``/``remainingItemCount`` and items
without ``kind``, and errors as ``Status`` objects (``NotFound`` 404,
``Expired`` 410, ``InternalError`` 500, ``Unauthorized`` 401).  It serves:

* ``GET /apis/resource.k8s.io/v1/resourceclaims`` (every namespace),
* ``GET /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims[/NAME]``,
* ``GET /api/v1/nodes[/NAME]``,

with ``limit``/``continue`` pagination served from a snapshot taken at the
first page, as the API server does: objects created or deleted meanwhile do
not show up in later pages.  Every request needs ``Authorization: Bearer
<token>``; :meth:`KubernetesEmulator.write_kubeconfig` writes a kubeconfig
holding that token.  Faults on top of the kit's (``delay``, ``drop``...):
:meth:`KubernetesEmulator.fail` answers the next requests with a Status of a
given code, optionally only continued pages; :meth:`expire_lists` forgets every
snapshot so the next continue token gets ``410 Expired``.

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
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from pathlib import Path
from typing import Any

from .emulator import Emulator, Faults, Request, Response

__all__ = ["KubernetesEmulator", "kubernetes_emulator"]

CLAIMS = "resourceclaims"
NODES = "nodes"
_GROUP_PREFIX = "/apis/resource.k8s.io/v1"
_CORE_PREFIX = "/api/v1"
_KIND = {CLAIMS: "ResourceClaim", NODES: "Node"}
_API_VERSION = {CLAIMS: "resource.k8s.io/v1", NODES: "v1"}
_QUALIFIED = {CLAIMS: "resourceclaims.resource.k8s.io", NODES: "nodes"}
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
MAX_SNAPSHOTS = 64  # list snapshots kept for continue tokens
MAX_FIXTURE_BYTES = 64 << 20


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, message: str, *, name: str = "", resource: str = "") -> dict[str, Any]:
    """A ``meta/v1`` Status as the API server sends it for a failed request."""
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, HTTPStatus(code).phrase.replace(" ", "")),
        "code": code,
    }
    if name or resource:
        doc["details"] = {"name": name, "kind": resource}
        if resource == CLAIMS:
            doc["details"]["group"] = "resource.k8s.io"
    return doc


@dataclass
class _PlannedFailure:
    status: int
    remaining: int
    continue_only: bool
    path: str


class KubernetesEmulator:
    """The object store and handler behind an :class:`Emulator` named ``kubernetes``.

    Use it as a context manager or call :meth:`start`/:meth:`stop`; the
    ``url``, ``token`` and ``log`` (via :attr:`emulator`) are what tests need.
    """

    def __init__(
        self,
        *,
        listen: str = "127.0.0.1:0",
        faults: Faults | str | None = None,
        token: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if listen.strip().startswith("unix://"):
            raise ValueError(
                f"listen {listen!r}: the kubernetes emulator serves TCP loopback only "
                "(a kubeconfig server is an http(s) URL)"
            )
        self.token = token or secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {CLAIMS: {}, NODES: {}}
        self._rv = 1000
        self._snapshots: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self._planned: list[_PlannedFailure] = []
        # time.monotonic() of every cluster-wide ResourceClaim list's snapshot
        # (its first page): tests count collection runs that began after an event.
        self.claim_list_snapshots: list[float] = []
        self._tmpdir: str | None = None
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

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store a ResourceClaim or Node object (its ``kind`` decides); fills in metadata."""
        resource = _resource_of(obj)
        doc = json.loads(json.dumps(obj))  # a private deep copy
        meta = doc.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError(f"a {doc.get('kind')} needs metadata.name")
        if resource == CLAIMS and not meta.get("namespace"):
            raise ValueError(f"ResourceClaim {meta['name']} needs metadata.namespace")
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        doc["apiVersion"] = _API_VERSION[resource]
        doc["kind"] = _KIND[resource]
        with self._lock:
            meta["resourceVersion"] = self._next_rv()
            self._objects[resource][(meta.get("namespace", ""), meta["name"])] = doc
        copy: dict[str, Any] = json.loads(json.dumps(doc))
        return copy

    def delete_claim(self, namespace: str, name: str) -> bool:
        """Delete a claim; ``False`` when there was none."""
        with self._lock:
            self._next_rv()
            return self._objects[CLAIMS].pop((namespace, name), None) is not None

    def delete_node(self, name: str) -> bool:
        with self._lock:
            self._next_rv()
            return self._objects[NODES].pop(("", name), None) is not None

    def claims(self) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(json.dumps(c)) for c in self._objects[CLAIMS].values()]

    def load(self, doc: Mapping[str, Any]) -> int:
        """Store every ResourceClaim and Node of a ``kubectl get ... -o json`` answer.

        Accepts a ``List``, ``ResourceClaimList``, ``NodeList`` or one object;
        returns how many objects were stored.
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
        self, status: int, *, times: int = 1, continue_only: bool = False, path: str = ""
    ) -> None:
        """Answer the next ``times`` matching requests with a Status of code ``status``.

        ``continue_only`` matches only requests for a continued page (mid-pagination);
        ``path`` only requests whose path starts with it.
        """
        with self._lock:
            self._planned.append(_PlannedFailure(status, times, continue_only, path))

    def expire_lists(self) -> None:
        """Forget every list snapshot: the next continue token answers 410 Expired."""
        with self._lock:
            self._snapshots.clear()

    def clear_faults(self) -> None:
        with self._lock:
            self._planned.clear()
        self.emulator.faults.clear()

    def _planned_failure(self, request: Request) -> int | None:
        has_continue = bool(request.arg("continue"))
        with self._lock:
            for plan in self._planned:
                if plan.continue_only and not has_continue:
                    continue
                if plan.path and not request.path.startswith(plan.path):
                    continue
                plan.remaining -= 1
                if plan.remaining <= 0:
                    self._planned.remove(plan)
                return plan.status
        return None

    # --- HTTP --------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            return _status(401, "Unauthorized")
        planned = self._planned_failure(request)
        if planned is not None:
            return _status(planned, f"injected failure: {HTTPStatus(planned).phrase}")
        if request.method != "GET":
            return _status(405, f"{request.method} is not served by this emulator")
        route = _route(request.path)
        if route is None:
            return _status(
                404, f"the server could not find the requested resource ({request.path})"
            )
        resource, namespace, name = route
        if name is not None:
            return self._get(resource, namespace or "", name)
        return self._list(resource, namespace, request)

    def _get(self, resource: str, namespace: str, name: str) -> Response:
        with self._lock:
            obj = self._objects[resource].get((namespace, name))
            body = None if obj is None else json.dumps(obj)
        if body is None:
            return _status(
                404, f'{_QUALIFIED[resource]} "{name}" not found', name=name, resource=resource
            )
        return Response(200, body, {}, "application/json")

    def _list(self, resource: str, namespace: str | None, request: Request) -> Response:
        limit_text = request.arg("limit") or "0"
        try:
            limit = int(limit_text)
        except ValueError:
            return _status(400, f"limit: invalid value {limit_text!r}")
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
                snapshot = [
                    {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                    for key, obj in sorted(self._objects[resource].items())
                    if namespace is None or key[0] == namespace
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
            doc = {
                "kind": f"{_KIND[resource]}List",
                "apiVersion": _API_VERSION[resource],
                "metadata": meta,
                "items": items,
            }
            body = json.dumps(doc)
        return Response(200, body, {}, "application/json")


def _resource_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind")
    for resource, name in _KIND.items():
        if kind == name:
            return resource
    raise ValueError(f"the kubernetes emulator serves ResourceClaim and Node objects, not {kind!r}")


def _route(path: str) -> tuple[str, str | None, str | None] | None:
    """(resource, namespace, name) for a served path, else ``None``."""
    parts = [p for p in path.split("/") if p]
    if path.startswith(_GROUP_PREFIX + "/"):
        rest = parts[3:]
        if rest == [CLAIMS]:
            return CLAIMS, None, None
        if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == CLAIMS:
            return CLAIMS, rest[1], rest[3] if len(rest) == 4 else None
    elif path.startswith(_CORE_PREFIX + "/"):
        rest = parts[2:]
        if rest == [NODES]:
            return NODES, None, None
        if len(rest) == 2 and rest[0] == NODES:
            return NODES, "", rest[1]
    return None


def _status(code: int, message: str, *, name: str = "", resource: str = "") -> Response:
    return Response(
        code,
        json.dumps(status_object(code, message, name=name, resource=resource)),
        {},
        "application/json",
    )


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
) -> KubernetesEmulator:
    """An emulator loaded from a ``kubectl get ... -o json`` file and/or objects."""
    emu = KubernetesEmulator(listen=listen, faults=faults)
    if fixture is not None:
        emu.load_file(fixture)
    for obj in objects:
        emu.put(obj)
    return emu
