"""The BYODP webhook as a lean ASGI application around a started :class:`ProviderHost`.

Paths, bodies and status codes are DRANET's (its client,
``pkg/cloudprovider/webhook/webhook.go``; the gen2 profile body carrying the
whole claim since DRANET PR #282), because the client is DRANET's Go daemon,
unchanged:

* ``GET /health`` -> ``{"cloudProvider": bool, "profileProvider": bool}``, the
  roles the host really has, or 503 with the reason when the IPAM store cannot
  be trusted (failed its integrity check, cannot be written);
* ``POST /GetDeviceAttributes`` and ``POST /GetDeviceConfig`` (DeviceIdentifiers);
* ``POST /GetProfileConfig`` and ``POST /ReleaseProfileConfig`` (ProfileRequest).

Errors are plain text like Go's ``http.Error``: 400 for a malformed request
(naming the field or the limit) or a role this server lacks, 404/409 for
denials, 413 for an oversized body, 503 (with ``Retry-After``) when no worker
can take the request in time and 500 only for temporary failures the kubelet
should retry.

Why a hand-written router and not FastAPI: the whole job of a request is a
dictionary lookup, one JSON parse, one model validation and (for the IPAM)
one SQLite transaction; FastAPI's dependency resolution, its threadpool hop
for ``/health`` and a middleware that re-encodes every body cost several
times that.  Here ``/health`` is answered on the event loop from bytes built
once, so no IPAM lock, slow plugin or busy worker can delay it; everything
that may block (plugins, the store) runs in a bounded worker pool, and a
request that finds every worker busy waits for one in arrival order only as
long as its answer can still reach DRANET in time (:mod:`.admission`).
The exception is a request that only the built-in local IPAM serves: it runs
on the loop without ever waiting and its writes are committed in groups by
one thread (:mod:`.lane`).
FastAPI still builds ``/openapi.json`` (:mod:`.docs`) and answers unknown
paths and methods.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam.node.sqlite import SqliteStore
from dranet_cloud.ipam.requests import InvalidIpamRequest
from dranet_cloud.providers.local_ipam import PLUGIN_NAME as LOCAL_IPAM
from dranet_cloud.server.admission import Admission
from dranet_cloud.server.docs import documentation_app
from dranet_cloud.server.ipam_loop import StoreLane, StoreOnlyJob
from dranet_cloud.server.middleware import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    WebhookMiddleware,
    access_fields,
    claim_uid_of,
    has_unpaired_surrogate,
    printable,
    read_capped_body,
)
from dranet_cloud.server.workers import WorkerPool
from dranet_cloud.toolkit.errors import (
    ConfigError,
    DranetCloudError,
    ProfileDenied,
    ProviderUnavailable,
    WouldBlock,
)
from dranet_cloud.toolkit.logsafe import WarnOnce, safe
from dranet_cloud.wire.models import (
    DeviceIdentifiers,
    NetworkConfig,
    ProfileRequest,
    WireModel,
    parse_peer_config,
    parse_profile_request,
)

log = logging.getLogger(__name__)
access_log = logging.getLogger("dranet_cloud.server.access")

DEFAULT_MAX_BODY_BYTES = 1 << 20
# Enough for a batch of concurrent IPAM writes to share a commit; more threads only
# fight over the GIL and the store lock.
DEFAULT_WORKERS = 8
_MAX_REPORTED_ERRORS = 5
T = TypeVar("T")

# Input limits (each 400 names the limit it broke).  Kubernetes UIDs are 36
# characters; DRANET device names are interface names (15) or DRA device
# names (a DNS label, 63); a claim asks for one address per family.
MAX_CLAIM_UID = 128
MAX_DEVICE_FIELD = 64
MAX_STATIC_ADDRESSES = 16
_CLAIM_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")

# (status, body, content type); the content type is empty for an empty body.
Reply = tuple[int, bytes, bytes]
# Called once per request with method, path, status and seconds taken (metrics).
RequestObserver = Callable[[str, str, int, float], None]

_JSON = b"application/json"
_TEXT = b"text/plain; charset=utf-8"
_NO_SNIFF = (b"x-content-type-options", b"nosniff")
_RETRY_AFTER = (b"retry-after", b"1")


# An unknown top-level field is most often a client that wraps the document
# once too often (``{"device": {...}}`` sent to /GetDeviceAttributes, whose
# body is the DeviceIdentifiers itself).  The request is still answered as it
# always was (as Go's encoding/json ignores an unknown field), but the
# operator is told once per field name, per process: the memory is bounded,
# as is what one request can log, and the name is escaped and cut short.
_UNKNOWN_FIELDS_REPORTED = 4
_MAX_FIELD_NAME_SHOWN = 64
_unknown_field_warning = WarnOnce(log, limit=256)


def warn_unknown_fields(path: str, doc: Any, known: frozenset[str], wire: Sequence[str]) -> None:
    """Warn (once per name) about top-level keys of ``doc`` that ``path`` does not read."""
    if not isinstance(doc, dict) or known.issuperset(doc):  # every request: one set test
        return
    unknown = [key for key in doc if key not in known][:_UNKNOWN_FIELDS_REPORTED]
    for key in unknown:
        shown = safe(key, _MAX_FIELD_NAME_SHOWN)
        _unknown_field_warning.warn(
            (shown,),
            "POST %s: ignoring the unknown top-level field %s; this endpoint's body has the "
            "fields %s (the request is answered without it; logged once per field name)",
            path,
            shown,
            ", ".join(wire),
        )


def _top_level_fields(model: type[WireModel]) -> tuple[frozenset[str], tuple[str, ...]]:
    """``(every key the model reads, its wire spellings)`` of a request body model."""
    fields = model.model_fields
    wire = tuple(sorted({f.alias or name for name, f in fields.items()}))
    return frozenset(wire) | frozenset(fields), wire


class ReleaseRequest(WireModel):
    """``POST /ReleaseProfileConfig``: a ProfileRequest whose config is checked leniently.

    DRANET sends a release once and never retries it, so a config this side
    finds invalid must not turn into a 400 that leaks the allocation: the
    release then goes ahead without the config (every profile provider
    releases by device and claim UID).
    """

    device: DeviceIdentifiers
    claim_uid: str
    config: dict[str, Any] | None = None


def text_reply(status: int, message: str) -> Reply:
    """An error body shaped like Go's ``http.Error``: the message and a newline."""
    return status, (message + "\n").encode("utf-8"), _TEXT


def json_reply(doc: Any) -> Reply:
    """A 200 with compact JSON, as Go's encoder writes it."""
    return 200, json.dumps(doc, separators=(",", ":")).encode("utf-8"), _JSON


def describe_validation_errors(path: str, errors: Sequence[Any]) -> str:
    """One line naming every invalid field (``device.name: Input should be ...``)."""
    parts: list[str] = []
    for err in list(errors)[:_MAX_REPORTED_ERRORS]:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        kind = err.get("type", "")
        if kind == "json_invalid":
            detail = (err.get("ctx") or {}).get("error", "")
            where = f" at byte {loc[0]}" if loc else ""
            parts.append(f"malformed JSON{where}: {detail}".rstrip(": "))
        elif kind == "missing" and not loc:
            parts.append("the body is missing; send a JSON document")
        else:
            field = ".".join(loc) or "(body)"
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            parts.append(f"{field}: {safe(msg)}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return f"invalid request body for {path}: " + "; ".join(parts or ["rejected"])


def _no_role(role: str, path: str) -> Reply:
    if role == "cloud":
        fix = (
            "start `dranet-cloud serve` with a cloud plugin (--cloud-provider-hint NAME), or drop "
            "--cloud-provider-hint=webhook from DRANET and keep only --profile-provider=webhook"
        )
    else:
        fix = (
            "start `dranet-cloud serve` with --ipam-range CIDR (the local-ipam profile) or a "
            "--profile-provider plugin, or drop --profile-provider=webhook from DRANET"
        )
    return text_reply(
        400,
        f"POST {path}: this server has no {role} provider role (GET /health reports "
        f"{role}Provider=false); {fix}",
    )


def device_limit_problem(device: DeviceIdentifiers) -> str | None:
    """Which size limit the device identifiers break, or ``None``."""
    for field, value in (
        ("device.name", device.name),
        ("device.mac_address", device.mac_address),
        ("device.pci_address", device.pci_address),
    ):
        if value and len(value) > MAX_DEVICE_FIELD:
            return f"{field} is {len(value)} characters, over the limit of {MAX_DEVICE_FIELD}"
    return None


def claim_uid_problem(uid: str) -> str | None:
    """Why ``uid`` is not an acceptable claim UID, or ``None``."""
    if not uid:
        return None  # the host explains an empty one
    if len(uid) > MAX_CLAIM_UID:
        return f"claim_uid is {len(uid)} characters, over the limit of {MAX_CLAIM_UID}"
    if not _CLAIM_UID.fullmatch(uid):
        return (
            f"claim_uid {safe(uid, 80)} may hold only letters, digits and . _ : - "
            "(a Kubernetes UID looks like 4f9d3c1e-7a51-4c8e-9d1b-2b6f0c9a7e11)"
        )
    return None


def config_limit_problem(config: NetworkConfig | None) -> str | None:
    """Which size limit the claim's config breaks, or ``None``."""
    addresses = config.interface.addresses if config is not None else None
    if addresses and len(addresses) > MAX_STATIC_ADDRESSES:
        return (
            f"config.interface.addresses holds {len(addresses)} addresses, over the limit of "
            f"{MAX_STATIC_ADDRESSES} per claim"
        )
    return None


def _call(path: str, what: str, fn: Callable[[], T]) -> T | Reply:
    """Run a host call, turning its errors into BYODP status codes.

    :class:`WouldBlock` is no error: the store lane runs the request again
    on a worker thread (:mod:`.lane`).
    """
    try:
        return fn()
    except WouldBlock:
        raise
    except ProfileDenied as exc:
        status = exc.status if 400 <= exc.status < 600 else 400
        log.info("POST %s denied (%d) for %s: %s", path, status, what, safe(exc.message, 500))
        return text_reply(status, exc.message)
    except InvalidIpamRequest as exc:
        return text_reply(400, str(exc))
    except (ProviderUnavailable, ConfigError, DranetCloudError) as exc:
        log.warning(
            "POST %s for %s failed (temporary, the kubelet retries): %s",
            path,
            what,
            safe(exc, 500),
        )
        return text_reply(500, str(exc))
    except Exception as exc:
        log.exception("POST %s for %s: unexpected error", path, what)
        return text_reply(
            500, f"POST {path} for {what}: internal error ({type(exc).__name__}: {safe(exc)})"
        )


class _Route:
    """A fast-path endpoint: its method, a parser that returns a blocking job or a
    reply, and the top-level fields of its body (``body``, the request model)."""

    def __init__(
        self,
        method: str,
        parse: Callable[[str, Any], Callable[[], Reply] | Reply],
        body: type[WireModel],
    ) -> None:
        self.method = method
        self.parse = parse
        self.known, self.wire = _top_level_fields(body)


class ByodpApp:
    """The ASGI application serving ``host``, which must be started.

    ``observers`` receive every finished request (``method, path, status,
    seconds``), the place for metrics.  ``store_health`` returns why the
    store cannot be trusted (or ``None``); by default it asks the host's IPAM
    store, if one is open, through its ``health()`` method, whose warnings
    (a degraded store that still serves) become a ``warnings`` list in the
    200 answer.
    """

    def __init__(
        self,
        host: ProviderHost,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        access_log: bool = True,
        workers: int = DEFAULT_WORKERS,
        store_health: Callable[[], str | None] | None = None,
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
        caps = host.capabilities()  # raises at once when host.start() was not called
        self.host = host
        self.max_body_bytes = max_body_bytes
        self.access_log = access_log
        self.observers: list[RequestObserver] = []
        # Worker threads are the scarce part; the store lane (local-ipam) needs none.
        self.admission = Admission(workers)
        self._busy_logged = 0.0
        self._cloud = caps.cloud_provider
        self._profile = caps.profile_provider
        self._health_body = json.dumps(caps.to_wire(), separators=(",", ":")).encode()
        self._store_health = store_health
        # More sources of /health warnings (the Kubernetes API's state, an
        # --ipam-range selector that matches no NIC): each is
        # called on the event loop, so it must only read what others computed.
        self.health_warnings: list[Callable[[], Sequence[str]]] = []
        self._caps_wire = caps.to_wire()
        self._workers = workers
        self._pool: WorkerPool | None = None
        self._committer: WorkerPool | None = None
        self._lane: StoreLane | None = None
        self._pool_lock = threading.Lock()
        self._routes: dict[str, _Route] = {
            "/GetDeviceAttributes": _Route("POST", self._device_attributes, DeviceIdentifiers),
            "/GetDeviceConfig": _Route("POST", self._device_config, DeviceIdentifiers),
            "/GetProfileConfig": _Route("POST", self._profile_config, ProfileRequest),
            "/ReleaseProfileConfig": _Route("POST", self._release, ReleaseRequest),
        }
        self._docs: ASGIApp | None = None
        self._docs_args = (max_body_bytes, access_log)

    # --- plumbing -------------------------------------------------------------

    @property
    def docs(self) -> ASGIApp:
        """The FastAPI documentation app (built on first use: it costs ~100 ms)."""
        if self._docs is None:
            cap, logged = self._docs_args
            docs = documentation_app()
            self._docs = WebhookMiddleware(docs, max_body_bytes=cap, access_log=logged)
        return self._docs

    def _executor(self) -> WorkerPool:
        pool = self._pool
        if pool is not None:
            return pool
        with self._pool_lock:
            if self._pool is None:
                self._pool = WorkerPool(self._workers)
            return self._pool

    def close(self) -> None:
        """Stop the worker pool: queued jobs are dropped, running ones end on their own.

        uvicorn's graceful shutdown already waited for requests in flight (up
        to --shutdown-timeout); a job still running after that must not hold
        the clean-up (socket removal, store close) hostage.
        """
        with self._pool_lock:
            pools = (self._pool, self._committer)
            self._pool = self._committer = None
            self._lane = None
        for pool in pools:
            if pool is not None:
                pool.close()

    def _store_lane(self) -> StoreLane | None:
        """The lane for store-only requests, once the SQLite store is open."""
        lane = self._lane
        if lane is not None:
            return lane
        store = self.host.context.ipam_if_open
        if not isinstance(store, SqliteStore):
            return None
        with self._pool_lock:
            if self._lane is None:
                self._committer = WorkerPool(1, name="byodp-committer")
                self._lane = StoreLane(
                    store,
                    fallback=self._on_worker,
                    committer=self._committer.submit,
                    failed=lambda exc: text_reply(
                        500,
                        f"the IPAM store could not commit this claim's addresses ({safe(exc)}); "
                        "nothing was handed out, retry",
                    ),
                    late=lambda: text_reply(
                        503,
                        f"the IPAM store did not commit within {self.admission.budget:g} s of "
                        "this request (a slow disk?); a retry of the claim gets the same addresses",
                    ),
                    budget=self.admission.budget,
                )
            return self._lane

    def _store_only(self, plugins: Sequence[str | None]) -> bool:
        """Whether every plugin a call reaches is the built-in local IPAM (store only)."""
        return bool(plugins) and all(p == LOCAL_IPAM for p in plugins)

    def _store_state(self) -> tuple[str | None, Sequence[str]]:
        """Why claims cannot be served (or ``None``) and the store's degraded-state warnings."""
        if self._store_health is not None:
            return self._store_health(), ()
        probe = getattr(self.host.context.ipam_if_open, "health", None)
        if not callable(probe):
            return None, ()
        state = probe()
        return state.reason, state.warnings

    def handles(self, method: str, path: str) -> bool:
        """Whether this router answers ``method path`` itself (and tells its observers)."""
        if path == "/health":
            return method == "GET"
        route = self._routes.get(path)
        return route is not None and route.method == method

    def health(self) -> Reply:
        """``/health``: built once, plus a cheap, non-blocking look at the store."""
        problem, warnings = self._store_state()
        if problem:
            return text_reply(503, f"unhealthy: {problem}")
        if self.health_warnings:
            warnings = [*warnings, *(w for more in self.health_warnings for w in more())]
        cluster = self._cluster_state()
        if warnings or cluster is not None:
            # degraded but serving: said, not a 503 that restarts the sidecar
            doc = {**self._caps_wire}
            if warnings:
                doc["warnings"] = list(warnings)
            if cluster is not None:
                doc["ipam"] = cluster
            return 200, json.dumps(doc, separators=(",", ":")).encode(), _JSON
        return 200, self._health_body, _JSON

    def _cluster_state(self) -> dict[str, Any] | None:
        """Cluster scope's views (synced, last error) and the reclaimer lease, if any."""
        store = self.host.context.ipam_if_open
        probe = getattr(store, "cluster_state", None)
        if not callable(probe):
            return None
        doc: dict[str, Any] = probe()
        reclaimer = getattr(store, "reclaimer", None)
        if reclaimer is not None:
            doc["reclaimer"] = reclaimer.state()
        return doc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.docs(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        started = time.perf_counter()
        claim: str | None = None
        if path == "/health" and method == "GET":
            reply = self.health()
        else:
            route = self._routes.get(path)
            if route is None or method != route.method:
                await self.docs(scope, receive, send)
                return
            body = await read_capped_body(scope, receive, self.max_body_bytes)
            if body is None:
                reply = text_reply(
                    413,
                    f"request body exceeds this server's limit of {self.max_body_bytes} bytes; "
                    "BYODP bodies are small JSON documents (raise --max-body-bytes if yours "
                    "are legitimately larger)",
                )
            else:
                claim, reply_or_job = self._parse(path, route, body)
                if callable(reply_or_job):
                    reply = await self._run(reply_or_job, started)
                else:
                    reply = reply_or_job
        status, payload, ctype = reply
        headers = [(b"content-length", b"%d" % len(payload))]
        if ctype:
            headers.append((b"content-type", ctype))
            if ctype is _TEXT:
                headers.append(_NO_SNIFF)
        if status == 503:
            headers.append(_RETRY_AFTER)
        # Logged before the answer leaves: once a client has it, the line exists.
        self._finished(method, path, status, started, claim)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def _finished(
        self, method: str, path: str, status: int, started: float, claim: str | None
    ) -> None:
        elapsed = time.perf_counter() - started
        if self.access_log:
            who = "-" if claim is None else printable(claim)
            access_log.info(
                "%s %s %d %.2fms claim=%s",
                method,
                path,
                status,
                elapsed * 1e3,
                who,
                extra=access_fields(method, path, status, elapsed, claim),
            )
        for observe in self.observers:
            try:
                observe(method, path, status, elapsed)
            except Exception:
                log.exception("request observer %r failed", observe)

    def _parse(
        self, path: str, route: _Route, body: bytes
    ) -> tuple[str | None, Callable[[], Reply] | Reply]:
        if not body:
            return None, text_reply(
                400, f"invalid request body for {path}: the body is missing; send a JSON document"
            )
        try:
            doc = json.loads(body)
        except ValueError as exc:
            where = f" at byte {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
            return None, text_reply(
                400, f"invalid request body for {path}: malformed JSON{where}: {detail}"
            )
        except RecursionError:
            return None, text_reply(400, f"invalid request body for {path}: nested too deeply")
        claim = claim_uid_of(doc)
        if b"\\u" in body and has_unpaired_surrogate(doc):
            return claim, text_reply(
                400,
                f"invalid request body for {path}: a JSON string holds an unpaired UTF-16 "
                "surrogate escape (such as \\ud800), which is not valid Unicode",
            )
        warn_unknown_fields(path, doc, route.known, route.wire)
        try:
            return claim, route.parse(path, doc)
        except ValidationError as exc:
            return claim, text_reply(400, describe_validation_errors(path, exc.errors()))

    async def _run(self, job: Callable[[], Reply], arrival: float) -> Reply:
        """Run a job: a store-only one on the loop (the lane), others on a worker."""
        if isinstance(job, StoreOnlyJob) and (lane := self._store_lane()) is not None:
            # A failed commit or a refused worker answers with its own reply,
            # which finish passes on.
            reply: Reply = job.finish(await lane.run(job.job, arrival))
            return reply
        return await self._on_worker(job, arrival)

    async def _on_worker(self, job: Callable[[], T], arrival: float) -> T | Reply:
        """``job`` on a worker thread once one is free in time, else a 503."""
        refused = await self.admission.acquire(arrival)
        if refused is not None:
            now = time.monotonic()
            if now - self._busy_logged >= 1.0:  # a burst of 503s is one line a second
                self._busy_logged = now
                log.warning(
                    "busy: answering 503 (the kubelet retries; %d so far): %s",
                    self.admission.turned_away,
                    refused,
                )
            return text_reply(
                503,
                f"the server is busy: {refused}; a plugin or the IPAM store is slow, retry later",
            )
        began = time.perf_counter()
        try:
            return await self._executor().submit(job)
        finally:
            self.admission.release(time.perf_counter() - began)

    # --- endpoints (parse on the loop, return the blocking part) ------------------

    def _device_job(
        self,
        path: str,
        doc: Any,
        call: Callable[[DeviceIdentifiers], T],
        encode: Callable[[T], Any],
    ) -> Callable[[], Reply] | Reply:
        device = DeviceIdentifiers.model_validate(doc)
        if not self._cloud:
            return _no_role("cloud", path)
        problem = device_limit_problem(device)
        if problem:
            return text_reply(400, f"invalid request body for {path}: {problem}")

        def job() -> Reply:
            result = _call(path, f"device {safe(device.label())}", lambda: call(device))
            return result if isinstance(result, tuple) else json_reply(encode(result))

        return job

    def _device_attributes(self, path: str, doc: Any) -> Callable[[], Reply] | Reply:
        return self._device_job(
            path, doc, self.host.device_attributes, lambda a: {k: v.to_wire() for k, v in a.items()}
        )

    def _device_config(self, path: str, doc: Any) -> Callable[[], Reply] | Reply:
        return self._device_job(
            path, doc, self.host.device_config, lambda c: (c or NetworkConfig()).to_wire()
        )

    def _claim_problem(self, path: str, device: DeviceIdentifiers, uid: str) -> Reply | None:
        problem = device_limit_problem(device) or claim_uid_problem(uid)
        return text_reply(400, f"invalid request body for {path}: {problem}") if problem else None

    def _profile_config(self, path: str, doc: Any) -> Callable[[], Reply] | Reply:
        req = parse_profile_request(doc)  # gen1 claim_uid and/or gen2 claim
        claim = req.claim_ref
        if not self._profile:
            return _no_role("profile", path)
        bad = self._claim_problem(path, req.device, claim.uid)
        problem = config_limit_problem(req.config)
        if bad is not None or problem:
            return bad or text_reply(400, f"invalid request body for {path}: {problem}")
        config = req.config or NetworkConfig()
        what = f"device {safe(req.device.label())} claim {safe(claim.uid)}"

        # DRANET's checks now, while parsing: a denial is answered without a thread,
        # and the job that may hold the IPAM store only asks the plugin.
        call = _call(
            path, what, lambda: self.host.profile_call(req.device, claim.uid, config, claim=claim)
        )
        if isinstance(call, tuple):
            return call

        def allocate() -> NetworkConfig | Reply | None:
            return _call(path, what, call)

        def reply(result: NetworkConfig | Reply | None) -> Reply:
            if isinstance(result, tuple):
                return result
            return json_reply((result or NetworkConfig()).to_wire())

        job = StoreOnlyJob(allocate, reply)
        return job if self._store_only([self.host.profile_plugin(config)]) else job.__call__

    def _release(self, path: str, doc: Any) -> Callable[[], Reply] | Reply:
        req = ReleaseRequest.model_validate(doc)
        if not self._profile:
            return _no_role("profile", path)
        if not req.claim_uid:
            return text_reply(400, f"invalid request body for {path}: claim_uid is empty")
        bad = self._claim_problem(path, req.device, req.claim_uid)
        if bad is not None:
            return bad
        what = f"device {safe(req.device.label())} claim {safe(req.claim_uid)}"
        config: NetworkConfig | None = None
        if req.config is not None:
            try:
                config = parse_peer_config(req.config)
            except ValidationError as exc:
                log.warning(
                    "POST %s for %s: config is invalid (%s); releasing by device and claim UID",
                    path,
                    what,
                    describe_validation_errors(path, exc.errors()),
                )

        def job() -> Reply:
            released = _call(
                path, what, lambda: self.host.release(req.device, req.claim_uid, config)
            )
            if isinstance(released, tuple):
                return released
            if not released:
                return text_reply(
                    500,
                    f"POST {path} for {what}: the provider could not release it "
                    "(see the server log); reclaim it with `dranet-cloud ipam gc` or --gc-interval",
                )
            return 200, b"", b""

        if self._store_only(self.host.release_plugins(config)):
            return StoreOnlyJob(job)
        return job


# The ASGI application serving a host, which must be started.
create_app = ByodpApp


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "ByodpApp",
    "Message",
    "ReleaseRequest",
    "Reply",
    "RequestObserver",
    "create_app",
    "describe_validation_errors",
]
