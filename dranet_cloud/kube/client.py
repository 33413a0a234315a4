"""A small, bounded Kubernetes API client: lightkube's configuration, lean HTTP/1.1.

Why a facade rather than lightkube everywhere: the callers need a few reads
and writes (ResourceClaims, Nodes, IPAddresses, Leases, lists and watches),
and each of them must have an end-to-end deadline, a response-size cap and an
error that says what to fix.  lightkube brings the parts that must match
kubectl: kubeconfig parsing, in-cluster service-account config, the TLS
context, and the authentication (a token, a token file re-read on 401, an
exec plugin re-run on 401, basic auth).  The requests themselves go over
:mod:`.wire`, plain sockets speaking HTTP/1.1, because lightkube's httpx2
stack cost a node most of its CPU per allocation; this module adds:

* the bounds every HTTP client here shares (:mod:`dranet_cloud.toolkit.httpdeadline`):
  every connect, send and read ends by the call's deadline, every body is
  read under a byte cap, a watch's every read under its read timeout;
* a complete-list guarantee (:meth:`KubeClient._restarting`): every list
  raises rather than answer a part, so a caller never mistakes a partial
  answer for the cluster's state.

Configuration, like kubectl and client-go: ``--kubeconfig FILE`` when given,
else the file named by ``KUBECONFIG``, else the in-cluster service account
(``KUBERNETES_SERVICE_HOST``/``_PORT`` and the token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount``).  Proxy variables are not
read: a node daemon talks to its API server directly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from dranet_cloud.kube.ipaddress import (
    IPADDRESSES_PATH,
    IPAddressObject,
    ParentRef,
    ip_address_body,
    ip_address_path,
    parse_ip_address,
    parse_ip_address_page,
)
from dranet_cloud.kube.objects import metadata_string
from dranet_cloud.kube.stream import LineStream
from dranet_cloud.kube.wire import Answer, Endpoint, HeadTooLarge, Wire, WireError, WireTimeout
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable
from dranet_cloud.toolkit.httpdeadline import BodyTooLarge, within
from dranet_cloud.toolkit.logsafe import safe

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "KUBECONFIG_ENV",
    "LEASES_GROUP",
    "MAX_LIST_RESTARTS",
    "METADATA_ACCEPT",
    "METADATA_LIST_ACCEPT",
    "SERVICE_ACCOUNT_DIR",
    "ClaimIdentity",
    "ClaimListing",
    "KubeAlreadyExists",
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeInvalid",
    "KubeNotFound",
    "load_config",
]

if TYPE_CHECKING:  # lightkube is imported where a client is built: it costs serve ~150 ms
    from lightkube.config.kubeconfig import SingleConfig

log = logging.getLogger(__name__)

KUBECONFIG_ENV = "KUBECONFIG"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TIMEOUT = 10.0  # seconds for one whole call (every page of a list included)
DEFAULT_MAX_BYTES = 16 << 20  # per response; a page of 500 claims is far below
DEFAULT_PAGE_SIZE = 500
MAX_LIST_RESTARTS = 3  # new lists after 410 Expired before giving up
RESOURCE_CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"
NODES_PATH = "/api/v1/nodes"
KUBE_SYSTEM_PATH = "/api/v1/namespaces/kube-system"
_IPADDRESSES = "ipaddresses.networking.k8s.io"
LEASES_GROUP = "/apis/coordination.k8s.io/v1"
# Metadata only (PartialObjectMetadata): a list, and one object or a watch's events.
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
MAX_ERROR_BYTES = 64 << 10  # the Status of a refused stream

T = TypeVar("T")


class KubeError(ProviderUnavailable):
    """The API gave no usable answer (``status``: the HTTP one, if any); nothing may be
    concluded from a call that raised this."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether a retry may succeed: no answer at all (connection, timeout, lost
        reply), 429 or 5xx.  The others (401, 403, 404, 409, 422) need a change first."""
        return self.status is None or self.status == 429 or self.status >= 500


class KubeNotFound(KubeError):
    """The API answered 404 for a named object.

    ``object_name`` is ``details.name`` of the API server's ``NotFound``
    Status, ``None`` when the 404 had none (a path the server does not serve,
    a proxy's page): only the former says that this object does not exist.
    """

    def __init__(self, message: str, status: int | None = None, object_name: str | None = None):
        super().__init__(message, status)
        self.object_name = object_name


class KubeConflict(KubeError):
    """409: the object is not in the state the request required.

    A delete's UID precondition failed (the name now belongs to another
    object), or, as :class:`KubeAlreadyExists`, a create found the name
    taken.  ``object_name`` is the Status's ``details.name``.
    """

    def __init__(self, message: str, status: int | None = 409, object_name: str | None = None):
        super().__init__(message, status)
        self.object_name = object_name


class KubeAlreadyExists(KubeConflict):
    """409 ``AlreadyExists``: a create's name is taken (for an IPAddress: the address is held)."""


class KubeInvalid(KubeError):
    """422 ``Invalid``: the API refused the object's content; ``causes`` are the
    Status's ``details.causes`` as ``"field: message"`` strings.  A bug or a
    bad input, not an outage: retrying the same request fails again."""

    def __init__(self, message: str, status: int | None = 422, causes: tuple[str, ...] = ()):
        super().__init__(message, status)
        self.causes = causes


@dataclass(frozen=True)
class ClaimIdentity:
    """What the reclaimer needs from a ResourceClaim: who it is."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class ClaimListing:
    """A complete list of every ResourceClaim in the cluster.

    ``started`` (``time.time()``) is just before the first page of the list
    that succeeded: claims created after it may be missing.
    """

    claims: tuple[ClaimIdentity, ...]
    started: float
    restarts: int

    @property
    def uids(self) -> frozenset[str]:
        return frozenset(c.uid for c in self.claims)


class _StatusAnswer(Exception):
    """An error answer that is a Kubernetes ``Status``: what :meth:`KubeClient._deadline`
    words (code, reason, message, ``details.name`` and ``details.causes``)."""

    def __init__(self, http_status: int, doc: dict[str, Any]) -> None:
        super().__init__(f"HTTP {http_status}")
        code = doc.get("code")
        self.code: int = code if isinstance(code, int) and code else http_status
        reason, message = doc.get("reason"), doc.get("message")
        self.reason: str = reason if isinstance(reason, str) else ""
        self.message: str = message if isinstance(message, str) else ""
        details = doc.get("details")
        self.has_details = isinstance(details, dict)
        found = details if isinstance(details, dict) else {}
        name = found.get("name")
        self.name: str | None = name if isinstance(name, str) else None
        causes = found.get("causes")
        self.causes: list[dict[str, Any]] = (
            [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []
        )


class _PlainAnswer(Exception):
    """An error answer that is no Status (a proxy's page, a load balancer's 502)."""

    def __init__(self, http_status: int) -> None:
        super().__init__(f"HTTP {http_status}")
        self.code = http_status


def _answer_error(answer: Answer) -> Exception:
    """The exception for a non-2xx ``answer``: a Status, or a page that is none."""
    try:
        doc = msgspec.json.decode(answer.body)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return _StatusAnswer(answer.status, doc)
    return _PlainAnswer(answer.status)


def _in_cluster_available(sa_dir: str) -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(
        os.path.join(sa_dir, "token")
    )


def _kubeconfig_from_file(path: str) -> SingleConfig | None:
    """The current context of the kubeconfig at ``path``.

    lightkube indexes the parsed YAML without checking its shape, so an empty
    file, a list or invalid YAML surfaces as AttributeError, TypeError or a
    YAML error: a broken file the operator must fix, not a bug in this
    program, so it becomes a :class:`ConfigError` naming the file.
    """
    from lightkube import KubeConfig

    try:
        return KubeConfig.from_file(path).get()
    except ConfigError:
        raise
    except Exception as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(
            f"kubernetes: kubeconfig {path} is not a usable kubeconfig ({detail}); "
            f"check it with `kubectl config view --kubeconfig {path}`"
        ) from exc


def load_config(
    kubeconfig: str | None = None,
    *,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> tuple[SingleConfig, str]:
    """The connection settings and a phrase saying where they came from.

    Raises :class:`ConfigError` naming the fix when there is no configuration.
    """
    from lightkube import KubeConfig
    from lightkube.core.exceptions import ConfigError as LightkubeConfigError

    path = kubeconfig or os.environ.get(KUBECONFIG_ENV) or None
    try:
        if path is not None:
            # KUBECONFIG may name several files; like kubectl, use the first.
            first = path.split(os.pathsep)[0]
            if not os.path.isfile(first):
                raise ConfigError(
                    f"kubernetes: no kubeconfig file at {first} "
                    f"({'--kubeconfig' if kubeconfig else KUBECONFIG_ENV}); pass an existing "
                    "file, or run in a pod with a service account"
                )
            config = _kubeconfig_from_file(first)
            where = f"kubeconfig {first}"
        elif _in_cluster_available(service_account_dir):
            config = KubeConfig.from_service_account(service_account_dir).get()
            where = f"in-cluster service account ({service_account_dir})"
        else:
            raise ConfigError(
                "kubernetes: no API configuration: not in a pod (KUBERNETES_SERVICE_HOST and "
                f"{service_account_dir}/token missing) and no --kubeconfig FILE or "
                f"{KUBECONFIG_ENV}; run in a pod with a service account or pass --kubeconfig"
            )
    except (LightkubeConfigError, OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"kubernetes: cannot load the API configuration: {exc}") from exc
    if config is None:
        raise ConfigError(f"kubernetes: {path}: no current context; set one with kubectl")
    return config, f"{where} -> {config.cluster.server}"


class KubeClient:
    """The reads dranet-cloud needs from the Kubernetes API, each with a deadline.

    ``timeout`` is the default end-to-end deadline of one call in seconds
    (a list with all its pages and restarts is one call).  Thread-safe: the
    deadline travels in a context variable, the connection pool is httpx's.
    """

    def __init__(
        self,
        kubeconfig: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
    ) -> None:
        from lightkube.config.client_adapter import user_auth, verify_cluster
        from lightkube.core.exceptions import ConfigError as LightkubeConfigError

        if timeout <= 0:
            raise ConfigError(f"kubernetes: the API timeout must be positive, got {timeout:g} s")
        config, self.source = load_config(kubeconfig, service_account_dir=service_account_dir)
        # Named in errors that depend on which cluster this is (ipam gc's cluster check).
        self.context_name: str | None = getattr(config, "context_name", None) or None
        self.timeout = timeout
        self.max_bytes = max_bytes
        if config.user is None:
            raise ConfigError(
                f"kubernetes: {self.source}: the current context names no user; add one "
                "(a token, a client certificate or an exec plugin) to the kubeconfig"
            )
        try:
            tls = verify_cluster(config.cluster, config.user, config.abs_file, trust_env=False)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"kubernetes: bad TLS settings in {self.source}: {exc}") from exc
        try:
            auth = user_auth(config.user)
        except LightkubeConfigError as exc:
            raise ConfigError(f"kubernetes: {self.source}: {exc}") from exc
        try:
            endpoint = Endpoint(config.cluster.server, tls)
        except ValueError as exc:
            raise ConfigError(f"kubernetes: {self.source}: {exc}") from exc
        self._wire = Wire(endpoint, auth, timeout)

    # --- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Close the idle connections (a stream's own ends with its block)."""
        self._wire.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeClient({self.source!r})"

    # --- calls -----------------------------------------------------------------------

    def get_resource_claim(
        self, namespace: str, name: str, *, deadline: float | None = None
    ) -> ClaimIdentity | None:
        """The claim now stored under ``namespace/name``, ``None`` when the API answers 404."""
        what = f"GET resourceclaim {namespace}/{name}"
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
        try:
            with self._deadline(deadline, what):
                obj = self._request("GET", path)
        except KubeNotFound as exc:
            # Only the API server's NotFound naming this claim proves it gone; a
            # bare 404 (resource.k8s.io/v1 not served, a proxy) would free every
            # live claim on the node.
            if exc.object_name == name:
                return None
            raise KubeError(
                f"{exc}; a 404 that is not NotFound for {namespace}/{name} proves nothing: "
                "does this API server serve resource.k8s.io/v1 (Kubernetes 1.34+), and does "
                "the kubeconfig server URL point at it?",
                404,
            ) from exc
        return _identity(obj, what)

    def list_resource_claims(
        self,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        deadline: float | None = None,
        max_restarts: int = MAX_LIST_RESTARTS,
    ) -> ClaimListing:
        """Every ResourceClaim in the cluster, or :class:`KubeError`; never a part of them."""
        what = "LIST resourceclaims in all namespaces"

        def attempt() -> tuple[tuple[ClaimIdentity, ...], float]:
            started = time.time()
            items, _ = self._pages(RESOURCE_CLAIMS_PATH, {}, "", None, page_size)
            return tuple(_identity(obj, what) for obj in items), started

        (claims, started), restarts = self._restarting(what, deadline, max_restarts, attempt)
        return ClaimListing(claims, started, restarts)

    def get_node(self, name: str, *, deadline: float | None = None) -> dict[str, Any]:
        """The Node object as Kubernetes JSON; :class:`KubeNotFound` when there is none."""
        what = f"GET node {name}"
        with self._deadline(deadline, what):
            return _json_object(self._request("GET", f"{NODES_PATH}/{name}"), "Node")

    def cluster_uid(self, *, deadline: float | None = None) -> str:
        """The ``kube-system`` Namespace's UID: the identity of the cluster this client reaches.

        It never changes for a cluster's life, so a caller that recorded it can
        tell that a kubeconfig now points at another cluster.
        """
        what = f"get namespace kube-system (GET {KUBE_SYSTEM_PATH})"
        with self._deadline(deadline, what, needs="get on namespaces (core group)"):
            doc = self._request("GET", KUBE_SYSTEM_PATH)
            return metadata_string(doc, "uid", "the Namespace has no metadata.uid")

    # --- collections, streams (the informer's calls) ---------------------------------

    def list_objects(
        self,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        not_older_than: bool = False,
        metadata_only: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
        deadline: float | None = None,
        what: str | None = None,
        needs: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of the collection at ``path`` (raw JSON) and the list's resourceVersion.

        ``resource_version="0"`` lets the API server answer from its watch
        cache (what a thousand nodes starting at once must use); ``""`` is a
        consistent read from storage; ``not_older_than`` asks for a state no
        older than ``resource_version`` (``resourceVersionMatch=NotOlderThan``,
        from the watch cache too): what an informer that widens its selector
        lists, so that it can watch on from where it was.  A continued page
        carries no resourceVersion, as the API requires.  Never a part.
        """
        selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        where = path + "".join(
            f"{'?' if i == 0 else '&'}{k}={safe(v, 120)}"
            for i, (k, v) in enumerate((k, v) for k, v in selectors.items() if v)
        )
        what = what or f"list {where}"
        headers = {"Accept": METADATA_LIST_ACCEPT} if metadata_only else None

        def attempt() -> tuple[list[dict[str, Any]], str]:
            return self._pages(
                path, selectors, resource_version, headers, page_size, not_older_than
            )

        found, _ = self._restarting(what, deadline, MAX_LIST_RESTARTS, attempt, needs=needs)
        return found

    def _pages(
        self,
        path: str,
        selectors: Mapping[str, str],
        resource_version: str,
        headers: Mapping[str, str] | None,
        page_size: int,
        not_older_than: bool = False,
        read: Callable[[Any], tuple[list[Any], str, str]] | None = None,
    ) -> tuple[list[Any], str]:
        """Every page of one list (no restart): the items and the list's resourceVersion.

        ``read`` turns a page into (items, continue token, resourceVersion).
        """
        items: list[Any] = []
        token = ""
        seen: set[str] = set()
        while True:
            params = {"limit": str(page_size)}
            params.update({k: v for k, v in selectors.items() if v})
            if token:
                params["continue"] = token  # the first page's version holds for the rest
            elif resource_version:
                params["resourceVersion"] = resource_version
                if not_older_than:
                    params["resourceVersionMatch"] = "NotOlderThan"
            page = self._request("GET", path, params=params, headers=headers)
            found, token, rv = (read or _list_page)(page)
            items.extend(found)
            if not token:
                return items, rv
            if token in seen:
                raise ValueError("the API gave a continue token twice; its pages never end")
            seen.add(token)

    @contextlib.contextmanager
    def open_stream(
        self,
        path: str,
        *,
        params: Mapping[str, str],
        metadata_only: bool = False,
        read_timeout: float,
        max_line_bytes: int,
        deadline: float,
        what: str,
        needs: str | None = None,
    ) -> Iterator[LineStream]:
        """A streaming GET (a watch) on its own connection, ending by ``deadline`` s from now.

        Lines are capped at ``max_line_bytes``; failures inside the block,
        reading included, raise :class:`KubeError` naming ``what``.
        """
        accept = METADATA_ACCEPT if metadata_only else "application/json"
        until = time.monotonic() + max(0.0, deadline)
        with self._deadline(deadline, what, until=until, needs=needs):
            answer = self._wire.open_stream(
                path,
                params=params,
                accept=accept,
                read_timeout=read_timeout,
                until=until,
                error_limit=MAX_ERROR_BYTES,
            )
            if isinstance(answer, Answer):
                raise _answer_error(answer)
            try:
                yield LineStream(answer, max_line_bytes, what)
            finally:
                answer.close()

    # --- pods and leases ---------------------------------------------------------------

    def list_pods(
        self,
        *,
        field_selector: str,
        namespace: str | None = None,
        label_selector: str = "",
        resource_version: str = "",
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """The pods matching ``field_selector`` (``spec.nodeName=NODE``: one node's pods).

        A consistent read by default (proof of what exists); pass
        ``resource_version="0"`` for the watch cache.
        """
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        items, _ = self.list_objects(
            path,
            field_selector=field_selector,
            label_selector=label_selector,
            resource_version=resource_version,
            deadline=deadline,
            needs="list on pods (core group)",
        )
        return items

    def get_lease(self, namespace: str, name: str, *, deadline: float | None = None) -> Any:
        """The Lease ``namespace/name`` as JSON; :class:`KubeNotFound` when there is none."""
        return self._lease("get", "GET", _lease_path(namespace, name), None, deadline)

    def create_lease(
        self, namespace: str, body: Mapping[str, Any], *, deadline: float | None = None
    ) -> Any:
        """Create a Lease; :class:`KubeAlreadyExists` when the name is taken."""
        return self._lease("create", "POST", _lease_path(namespace), body, deadline)

    def update_lease(
        self,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        deadline: float | None = None,
    ) -> Any:
        """Replace the Lease (PUT); :class:`KubeConflict` when ``metadata.resourceVersion``
        is not the stored one (someone else wrote it since it was read)."""
        return self._lease("update", "PUT", _lease_path(namespace, name), body, deadline)

    def _lease(
        self,
        verb: str,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        deadline: float | None,
    ) -> Any:
        with self._deadline(deadline, f"{verb} lease ({method} {path})", needs=_LEASE_RBAC):
            sent = None if body is None else dict(body)
            return _json_object(self._request(method, path, body=sent), "Lease")

    # --- IPAddress objects (networking.k8s.io/v1) --------------------------------------

    def create_ip_address(
        self,
        name: str,
        parent: ParentRef,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        *,
        deadline: float | None = None,
    ) -> IPAddressObject:
        """Create the IPAddress ``name`` (an address in canonical form): reserve it cluster-wide.

        Returns the object the API stored (its ``uid`` is what a delete needs).
        Raises :class:`KubeAlreadyExists` when the name is taken,
        :class:`KubeInvalid` when the API refuses the object, and a
        :class:`KubeError` with ``transient`` set when no answer came or the
        API failed (5xx, also 504 after a storage timeout): then the create may
        or may not have been committed, and only :meth:`get_ip_address` tells.
        A 429 is refused before any work.
        """
        what = f"create ipaddress {safe(name, 64)} (POST {IPADDRESSES_PATH})"
        body = ip_address_body(name, parent, labels, annotations)
        try:
            with self._deadline(deadline, what, needs=f"create on {_IPADDRESSES}"):
                return parse_ip_address(self._request("POST", IPADDRESSES_PATH, body=body))
        except KubeError as exc:
            if exc.status is not None and exc.status < 500:
                raise
            raise KubeError(
                f"{exc}; the create may have been committed without its answer reaching "
                f"us: get ipaddress {safe(name, 64)} to learn whether it exists and whose it is",
                exc.status,
            ) from exc

    def get_ip_address(self, name: str, *, deadline: float | None = None) -> IPAddressObject:
        """The IPAddress ``name``; :class:`KubeNotFound` (``object_name == name``) when absent."""
        path = ip_address_path(name)
        what = f"get ipaddress {safe(name, 64)} (GET {path})"
        with self._deadline(deadline, what, needs=f"get on {_IPADDRESSES}"):
            return parse_ip_address(self._request("GET", path))

    def delete_ip_address(self, name: str, uid: str, *, deadline: float | None = None) -> None:
        """Delete the IPAddress ``name`` only if it is still the object ``uid``.

        The UID precondition makes the delete safe against a race: if the
        address was released and taken again meanwhile, the new holder's
        object survives.  Raises :class:`KubeNotFound` when there is no such
        object, :class:`KubeConflict` when the name now has another UID; after
        a transient :class:`KubeError` the delete may have happened, and a
        retry that gets :class:`KubeNotFound` means it did.
        """
        path = ip_address_path(name)
        what = f"delete ipaddress {safe(name, 64)} uid {safe(uid, 64)} (DELETE {path})"
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        with self._deadline(deadline, what, needs=f"delete on {_IPADDRESSES}"):
            self._request("DELETE", path, body=body)

    def list_ip_addresses(
        self,
        label_selector: str | Mapping[str, str] | None = None,
        *,
        deadline: float | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        cached: bool = False,
    ) -> list[IPAddressObject]:
        """Every IPAddress matching ``label_selector``, or :class:`KubeError`; never a part.

        ``label_selector`` is selector text or a mapping of labels that must
        all be equal.  ``cached``: from the watch cache (``resourceVersion=0``,
        see :meth:`list_objects`); otherwise a consistent read.
        """
        if isinstance(label_selector, Mapping):
            selector = ",".join(f"{k}={v}" for k, v in label_selector.items())
        else:
            selector = label_selector or ""
        what = f"list ipaddresses (GET {IPADDRESSES_PATH}" + (
            f"?labelSelector={safe(selector, 120)})" if selector else ")"
        )
        found, _ = self._restarting(
            what,
            deadline,
            MAX_LIST_RESTARTS,
            lambda: self._pages(
                IPADDRESSES_PATH,
                {"labelSelector": selector},
                "0" if cached else "",
                None,
                page_size,
                read=lambda page: (*parse_ip_address_page(page), ""),
            )[0],
            needs=f"list on {_IPADDRESSES}",
        )
        return found

    def _restarting(
        self,
        what: str,
        deadline: float | None,
        max_restarts: int,
        attempt: Callable[[], T],
        *,
        needs: str | None = None,
    ) -> tuple[T, int]:
        """``attempt()`` (a whole list, every ``continue`` followed) and its restart count.

        One deadline covers every page and restart; a ``410 Expired`` (the
        snapshot behind a continue token is gone) starts a new list, at most
        ``max_restarts`` times; anything else raises.
        """
        budget = self.timeout if deadline is None else deadline
        until = time.monotonic() + budget
        restarts = 0
        while True:
            try:
                with self._deadline(budget, what, until=until, needs=needs):
                    return attempt(), restarts
            except KubeError as exc:
                if exc.status == 410 and restarts < max_restarts:
                    restarts += 1
                    log.info("kubernetes: %s expired mid-way (410); starting again", what)
                    continue
                raise

    # --- internals -------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The decoded JSON answer (lenient: not lightkube's models); an error answer is
        raised as :class:`_StatusAnswer` or :class:`_PlainAnswer` for :meth:`_deadline` to word."""
        accept = (
            "application/json" if headers is None else headers.get("Accept", "application/json")
        )
        content = None if body is None else msgspec.json.encode(body)
        answer = self._wire.request(
            method, path, params=params, body=content, accept=accept, limit=self.max_bytes
        )
        if not 200 <= answer.status < 300:
            raise _answer_error(answer)
        return msgspec.json.decode(answer.body)

    @contextlib.contextmanager
    def _deadline(
        self,
        seconds: float | None,
        what: str,
        *,
        until: float | None = None,
        needs: str | None = None,
    ) -> Iterator[None]:
        """Run a call under an end-to-end deadline and turn every failure into KubeError.

        ``until`` (``time.monotonic()``) continues an earlier deadline;
        ``needs`` is the permission the call needs, named when the API answers 403.
        """
        budget = self.timeout if seconds is None else seconds
        try:
            with within(budget, until=until):
                yield
        except _StatusAnswer as exc:
            code, reason = exc.code, exc.reason
            message_text = (
                f"kubernetes: {what} answered {code} {reason}: {safe(exc.message, 400)} "
                f"({self.source})" + _fix_for(code, what, needs)
            )
            if code == 404:
                named = exc.name if exc.has_details and reason == "NotFound" else None
                raise KubeNotFound(message_text, code, named) from exc
            if code == 409:
                conflict = KubeAlreadyExists if reason == "AlreadyExists" else KubeConflict
                raise conflict(message_text, code, exc.name) from exc
            if code == 422:
                causes = tuple(
                    safe(f"{c.get('field')}: {c.get('message')}", 200) for c in exc.causes
                )
                raise KubeInvalid(message_text, code, causes) from exc
            raise KubeError(message_text, code) from exc
        except _PlainAnswer as exc:
            code = exc.code
            cls = KubeNotFound if code == 404 else KubeError
            raise cls(
                f"kubernetes: {what} answered {code} without a Status object "
                f"({self.source})" + _fix_for(code, what, needs),
                code,
            ) from exc
        except WireTimeout as exc:
            raise KubeError(
                f"kubernetes: {what} did not finish within {budget:g} s ({self.source}); "
                "is the API server reachable and healthy?"
            ) from exc
        except (BodyTooLarge, HeadTooLarge) as exc:
            raise KubeError(f"kubernetes: {what} {exc.detail} ({self.source})") from exc
        except WireError as exc:
            raise KubeError(
                f"kubernetes: {what} failed: {exc.reason} ({self.source}); "
                "is the API server reachable?"
            ) from exc
        except (msgspec.MsgspecError, ValueError, TypeError) as exc:
            raise KubeError(
                f"kubernetes: {what} answered a body that is not the expected object: {exc} "
                f"({self.source})"
            ) from exc


_LEASE_RBAC = "get, create and update on leases.coordination.k8s.io in the namespace"


def _lease_path(namespace: str, name: str | None = None) -> str:
    base = f"{LEASES_GROUP}/namespaces/{namespace}/leases"
    return base if name is None else f"{base}/{name}"


def _list_page(page: Any) -> tuple[list[Any], str, str]:
    if not isinstance(page, dict) or not isinstance(page.get("items", []), list):
        raise ValueError("the answer is not a list of objects")
    meta = page.get("metadata") or {}
    token = str(meta.get("continue") or "")
    rv = meta.get("resourceVersion")
    if not token and (not isinstance(rv, str) or not rv):
        raise ValueError("the list has no metadata.resourceVersion")
    return [i for i in page.get("items") or [] if isinstance(i, dict)], token, rv or ""


def _json_object(doc: Any, kind: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or doc.get("kind", kind) != kind:
        raise ValueError(f"expected a {kind} object")
    return doc


def _identity(obj: Any, what: str) -> ClaimIdentity:
    """Namespace, name and UID of a decoded claim; a claim without them is a bad answer."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    found = meta if isinstance(meta, dict) else {}
    namespace, name, uid = found.get("namespace"), found.get("name"), found.get("uid")
    if not (namespace and name and uid):
        raise KubeError(
            f"kubernetes: {what} answered a claim without metadata.namespace/name/uid "
            f"({namespace!r}/{name!r}, uid {uid!r}); not a ResourceClaim the API would send"
        )
    return ClaimIdentity(str(namespace), str(name), str(uid))


def _fix_for(status: int, what: str = "", needs: str | None = None) -> str:
    """What an operator does about a status, appended to the error.

    A 403 names the permission the refused request needed (``needs``, else
    guessed from ``what``): a Node read (CKS) needs only ``get`` on nodes, and
    pointing its operator at claims misleads.
    """
    if status == 401:
        return "; the token was refused: check the kubeconfig user or the service account token"
    if status == 403:
        needed = needs or (
            "get on nodes (core group)"
            if what.startswith("GET node ")
            else "get and list on resourceclaims.resource.k8s.io (and get on nodes)"
        )
        return f"; grant {needed} with a ClusterRole bound to this service account"
    if status in (404, 409):
        return ""
    if status == 410:
        return "; the list expired too often while being read, try again"
    if status == 422:
        return "; the API refused the object's content: a bug in the caller, report it"
    if status in (400, 405):
        return "; does this API server serve the resource (networking.k8s.io/v1 needs 1.33+)?"
    return "; the API server may be overloaded, the next run retries"
