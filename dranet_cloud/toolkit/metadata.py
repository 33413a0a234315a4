"""An HTTP client for cloud metadata servers, shared by every cloud plugin.

Metadata servers are local, small and usually fast, but they are also the
first thing to be missing on a node that is not where it thinks it is, slow
while a VM boots, and a tempting target for spoofing.  This client bakes the
lessons in once so plugins do not each reinvent them:

* one attempt per call unless the caller gives a ``deadline``; with one, retry
  connection errors, timeouts, 5xx and 429 with exponential backoff and jitter
  until the deadline, but never retry a 404 (the key does not exist);
* a response-size cap enforced while streaming, so a hostile server cannot
  make a node daemon buffer gigabytes;
* an optional required response header (GCE's ``Metadata-Flavor: Google``):
  an answer without it is not the metadata server, and is never retried;
* token sessions (AWS IMDSv2, Aliyun): PUT a token with a TTL, reuse it until
  it is about to expire, refresh once on 401.  Tokens are never logged and
  never appear in error messages;
* endpoint overrides from environment variables, and error messages that name
  the plugin, the URL and where the URL came from, so an operator sees the fix.

``unix:///path/to.sock`` endpoints are served over a unix socket.  The client
never reads proxy settings from the environment: metadata traffic must not
leave the node through a proxy.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeAlias

import httpx

from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable
from dranet_cloud.toolkit.httpdeadline import (
    BodyTooLarge,
    deadline_transport,
    describe_transport_error,
    read_capped,
    within,
)
from dranet_cloud.toolkit.value_checks import require_shape

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Endpoint",
    "MetadataClient",
    "MetadataError",
    "MetadataNotADocument",
    "MetadataNotFound",
    "MetadataResponse",
    "MetadataSpoofed",
    "MetadataTooLarge",
    "MetadataUnavailable",
    "Override",
    "RetryPolicy",
    "TokenSpec",
    "normalize_url",
    "require_shape",
    "resolve_endpoint",
    "web_page_kind",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 1 << 20
# Upper bound of 401-driven token refreshes within one call (concurrent
# callers can use up each other's tokens under an expiring-token server).
MAX_TOKEN_REFRESHES = 32
# A session token longer than this is not a token (AWS's are ~56 bytes).
MAX_TOKEN_BYTES = 4096
# No attempt is started with less time than this left before the deadline.
MIN_ATTEMPT = 0.005
UNIX_SCHEME = "unix://"
# Host name used in request URLs sent over a unix socket (ignored by the server
# except as the Host header).
_UDS_BASE = "http://localhost"


# --- errors -------------------------------------------------------------------


class MetadataError(ProviderUnavailable):
    """Base of every metadata client error.

    ``plugin``, ``url`` and ``status`` (``None`` when nothing answered) let
    callers decide without parsing the message.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin: str = "",
        url: str = "",
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.plugin = plugin
        self.url = url
        self.status = status


class MetadataUnavailable(MetadataError):
    """Nothing usable answered before the deadline (refused, timed out, 5xx)."""


class MetadataNotFound(MetadataError):
    """The server answered 404: the key does not exist (never retried)."""


class MetadataSpoofed(MetadataError):
    """An answer lacked the required response header: not the metadata server."""


class MetadataTooLarge(MetadataError):
    """The answer exceeded the client's size cap."""


class MetadataNotADocument(MetadataError):
    """The answer is a web page (a captive portal, a proxy's error), not the metadata asked for."""


# No cloud's metadata server answers HTML: an answer that is a web page comes
# from something in between (a captive portal, a proxy's login or error page).
_PAGE_TYPES = ("text/html", "application/xhtml+xml")
_PAGE_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml")


def web_page_kind(content_type: str, body: bytes) -> str | None:
    """Why an answer is a web page rather than metadata, or ``None`` when it is not one."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in _PAGE_TYPES:
        return f"Content-Type {media}"
    if body.lstrip()[:16].lower().startswith(_PAGE_STARTS):
        return "a body that is an HTML page"
    return None


# --- endpoints ----------------------------------------------------------------

Override: TypeAlias = "tuple[str, Callable[[str], str] | None] | str"


def normalize_url(value: str) -> str:
    """Give a bare ``host[:port]`` the ``http://`` scheme; keep ``unix://`` as is.

    Trailing slashes are dropped so paths can be appended with a leading one.
    """
    value = value.strip()
    if value.startswith(UNIX_SCHEME):
        return value
    if "://" not in value:
        value = "http://" + value
    return value.rstrip("/")


@dataclass(frozen=True)
class Endpoint:
    """Where a plugin's metadata server is, and why.

    ``source`` is ``"default"`` or ``"VAR=value"`` as read from the
    environment; ``variables`` lists the override variables the plugin
    honours, so an error about the default endpoint can name the fix.
    """

    url: str
    source: str = "default"
    variables: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_default(self) -> bool:
        return self.source == "default"

    @property
    def uds_path(self) -> str | None:
        """Socket path for ``unix:///path`` endpoints, else ``None``."""
        if self.url.startswith(UNIX_SCHEME):
            return self.url[len(UNIX_SCHEME) :]
        return None

    @property
    def base_url(self) -> str:
        """The URL requests are built on (``http://localhost`` over a socket)."""
        return _UDS_BASE if self.uds_path is not None else self.url.rstrip("/")

    def describe(self) -> str:
        """``GCE_METADATA_HOST=127.0.0.1:8080`` or ``default http://169...``."""
        return f"default {self.url}" if self.is_default else self.source

    def __str__(self) -> str:
        return self.url


def resolve_endpoint(
    env: Mapping[str, str],
    default: str,
    overrides: Sequence[Override] = (),
) -> Endpoint:
    """Pick the endpoint: the first override variable that is set, else ``default``.

    ``overrides`` holds ``(VAR, transform)`` pairs (or bare variable names);
    ``transform`` turns the raw value into a URL, e.g. GCE's host[:port].  A
    result without a scheme gets ``http://``; ``unix:///path`` is kept.
    """
    names: list[str] = []
    pairs: list[tuple[str, Callable[[str], str] | None]] = []
    for item in overrides:
        pair = (item, None) if isinstance(item, str) else item
        pairs.append(pair)
        names.append(pair[0])
    for name, transform in pairs:
        raw = env.get(name, "").strip()
        if not raw:
            continue
        url = transform(raw) if transform is not None else raw
        return Endpoint(normalize_url(url), f"{name}={raw}", tuple(names))
    return Endpoint(normalize_url(default), "default", tuple(names))


# --- knobs ----------------------------------------------------------------------


@dataclass(frozen=True)
class TokenSpec:
    """A token session (AWS IMDSv2, Aliyun): PUT ``path`` with a TTL header."""

    path: str
    ttl_header: str
    token_header: str
    ttl_seconds: int = 21600
    refresh_margin: float = 60.0  # refresh when fewer seconds than this remain


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff between attempts: ``initial * multiplier**n``, capped, jittered.

    ``jitter`` is the fraction of each delay that is randomised (0 = fixed
    delays, 1 = anywhere between 0 and the delay), so many nodes rebooting
    together do not hammer a recovering server in lock-step.
    """

    initial_backoff: float = 0.05
    max_backoff: float = 1.0
    multiplier: float = 2.0
    jitter: float = 0.5
    retry_statuses: frozenset[int] = frozenset({429})  # besides every 5xx

    def delay(self, attempt: int, rng: random.Random) -> float:
        base = min(self.max_backoff, self.initial_backoff * self.multiplier**attempt)
        return base * (1.0 - self.jitter * rng.random())

    def retryable_status(self, status: int) -> bool:
        return status >= 500 or status in self.retry_statuses


@dataclass
class MetadataResponse:
    """A complete, size-checked answer."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    url: str
    plugin: str = ""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; malformed JSON raises :class:`MetadataError`."""
        try:
            return json.loads(self.content)
        except ValueError as exc:
            raise MetadataError(
                f"{self.plugin}: GET {self.url} answered a body that is not valid JSON "
                f"({exc}); the metadata server is misbehaving or is not the real one",
                plugin=self.plugin,
                url=self.url,
                status=self.status_code,
            ) from exc


# --- internals ------------------------------------------------------------------


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``reason`` is for humans."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class _Token:
    value: str = field(repr=False)
    expires_at: float  # on the client's clock
    generation: int
    served: int = 0  # answers other than 401 obtained with it (approximate)


_TLS_CONTEXT: ssl.SSLContext | None = None


def _unused_tls_context() -> ssl.SSLContext:
    global _TLS_CONTEXT
    if _TLS_CONTEXT is None:
        _TLS_CONTEXT = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CAs loaded
    return _TLS_CONTEXT


class MetadataClient:
    """A sync client for one metadata endpoint, safe to share between threads.

    One ``httpx.Client`` (with keep-alive) per object.  ``headers`` go on
    every request; ``required_response_headers`` must come back on every
    non-retryable answer (the value compared case-insensitively).
    """

    def __init__(
        self,
        endpoint: Endpoint | str,
        *,
        plugin: str,
        headers: Mapping[str, str] | None = None,
        required_response_headers: Mapping[str, str] | None = None,
        token: TokenSpec | None = None,
        timeout: float = 2.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint if isinstance(endpoint, Endpoint) else Endpoint(endpoint)
        self.plugin = plugin
        self.headers = dict(headers or {})
        self.required_response_headers = dict(required_response_headers or {})
        self.token_spec = token
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.retry = retry or RetryPolicy()
        self._rng = rng or random.Random()
        # Token expiry runs on ``clock`` (tests move it); deadlines use real time.
        self._clock = clock
        self._count_lock = threading.Lock()
        self._token_lock = threading.Lock()
        self._token: _Token | None = None
        self._token_generation = 0
        self._closed = threading.Event()
        self.request_count = 0
        self.token_count = 0  # tokens fetched (tests assert on reuse)
        self._check_endpoint()
        if transport is None:
            # Loading the CA bundle costs ~90 ms, more than a whole loopback
            # detection: plain-HTTP endpoints get a context that is never used
            # (and trusts nothing, should a redirect ever ask for TLS).
            plain = not self.endpoint.url.startswith("https://")
            verify: ssl.SSLContext | bool = _unused_tls_context() if plain else True
            transport = deadline_transport(uds=self.endpoint.uds_path, verify=verify)
        try:
            self._http = httpx.Client(
                base_url=self.endpoint.base_url,
                transport=transport,
                trust_env=False,
                follow_redirects=False,
                timeout=timeout,
            )
        except httpx.InvalidURL as exc:
            raise self._bad_endpoint(str(exc)) from exc

    def _check_endpoint(self) -> None:
        ep = self.endpoint
        if ep.uds_path is not None:
            if not ep.uds_path.startswith("/"):
                raise self._bad_endpoint("a unix socket URL needs an absolute path")
            return
        scheme, _, rest = ep.url.partition("://")
        if scheme not in ("http", "https") or not rest:
            raise self._bad_endpoint("expected http://HOST[:PORT], https://... or unix:///path")

    def _bad_endpoint(self, why: str) -> ConfigError:
        ep = self.endpoint
        where = f"the default endpoint {ep.url!r}" if ep.is_default else ep.source
        return ConfigError(f"{self.plugin}: {where} is not a usable metadata URL: {why}")

    # --- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool and abort any backoff sleep in progress."""
        self._closed.set()
        self._http.close()

    def __enter__(self) -> MetadataClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MetadataClient({self.plugin!r}, {self.endpoint.url!r})"

    # --- public API ----------------------------------------------------------------

    def url_for(self, path: str) -> str:
        """The full URL of ``path`` as shown in messages."""
        return self.endpoint.url.rstrip("/") + "/" + path.lstrip("/")

    def get(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        deadline: float | None = None,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> MetadataResponse:
        """GET ``path``; see the module docstring for retries and errors.

        ``deadline`` ``None`` means one attempt.  ``timeout`` overrides the
        client's per-attempt timeout (detection probes use a short one).
        """
        until = None if deadline is None else time.monotonic() + deadline
        return self._get(path, params, until, deadline, timeout, headers)

    def get_text(
        self, path: str, *, params: Mapping[str, str] | None = None, deadline: float | None = None
    ) -> str:
        """The body of ``path`` as text (UTF-8, stripped of nothing)."""
        return self.get(path, params=params, deadline=deadline).text

    def get_json(
        self, path: str, *, params: Mapping[str, str] | None = None, deadline: float | None = None
    ) -> Any:
        """The body of ``path`` parsed as JSON (``MetadataError`` if malformed)."""
        return self.get(path, params=params, deadline=deadline).json()

    def get_many(
        self,
        paths: Iterable[str],
        *,
        deadline: float | None = None,
        max_workers: int = 8,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, str | None]:
        """GET independent keys concurrently; ``None`` for a key that is 404.

        All keys share one overall ``deadline``.  Any other error is raised
        (the first one seen) and the keys not yet started are cancelled.
        """
        unique = list(dict.fromkeys(paths))
        if not unique:
            return {}
        until = None if deadline is None else time.monotonic() + deadline

        def one(path: str) -> str | None:
            try:
                return self._get(path, params, until, deadline, None, None).text
            except MetadataNotFound:
                return None

        if len(unique) == 1:
            return {unique[0]: one(unique[0])}
        workers = max(1, min(max_workers, len(unique)))
        pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{self.plugin}-metadata")
        failed = False
        try:
            futures: dict[Future[str | None], str] = {pool.submit(one, p): p for p in unique}
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for fut in futures:
                error = fut.exception() if fut in done else None
                if error is not None:
                    failed = True
                    raise error
            # Nothing failed, so every future completed.
            out = {path: fut.result() for fut, path in futures.items()}
        finally:
            # On failure, do not wait for keys still retrying: their answers
            # are not wanted any more.
            pool.shutdown(wait=not failed, cancel_futures=True)
        return {p: out[p] for p in unique}

    # --- the retry loop ------------------------------------------------------------

    def _count(self) -> None:
        with self._count_lock:
            self.request_count += 1

    def _remaining(self, until: float | None) -> float | None:
        return None if until is None else until - time.monotonic()

    def _attempt_timeout(self, until: float | None, timeout: float | None) -> float:
        per = self.timeout if timeout is None else timeout
        remaining = self._remaining(until)
        if remaining is not None:
            per = min(per, remaining)
        return max(per, 0.001)

    def _get(
        self,
        path: str,
        params: Mapping[str, str] | None,
        until: float | None,
        deadline: float | None,
        timeout: float | None,
        extra_headers: Mapping[str, str] | None,
    ) -> MetadataResponse:
        url = self.url_for(path)
        attempt = 0
        unauthorized = 0
        after_401 = False  # the next token this call fetches answers a 401
        own_fresh = -1  # generation of the token fetched because of a 401
        last_reason = "no attempt made"
        last_status: int | None = None
        while True:
            if self._closed.is_set():
                raise MetadataUnavailable(
                    f"{self.plugin}: metadata client for {self.endpoint.url} is closed",
                    plugin=self.plugin,
                    url=url,
                )
            try:
                token, fetched = self._ensure_token(until, timeout)
                if fetched and after_401 and token is not None:
                    own_fresh, after_401 = token.generation, False
                resp = self._once(path, params, until, timeout, extra_headers, token)
                if resp.status_code == 401 and token is not None:
                    # The token expired or the server restarted: fetch a fresh
                    # one, once.  Give up when the token this call fetched
                    # after a 401 is refused before serving anything: the
                    # server will not take our tokens.  A token refused after
                    # serving other requests merely expired (concurrent callers
                    # can use up each other's tokens), which does not count.
                    unauthorized += 1
                    hopeless = token.generation == own_fresh and token.served == 0
                    if hopeless:
                        # Requests that used the token up just before ours may
                        # still be on their way back; give them a moment.
                        self._closed.wait(max(self.retry.initial_backoff, 0.05))
                        hopeless = token.served == 0
                    if not hopeless and unauthorized <= MAX_TOKEN_REFRESHES:
                        log.debug("%s: 401 for %s, refreshing the metadata token", self.plugin, url)
                        self._drop_token(token.generation)
                        after_401 = True
                        continue
                elif token is not None:
                    token.served += 1
                return self._finish(resp)
            except _Retryable as exc:
                # An HTTP status says more than a timeout of a last, short attempt.
                last_reason = exc.reason
                last_status = exc.status if exc.status is not None else last_status
            remaining = self._remaining(until)
            if remaining is None or remaining <= 0:
                break
            delay = min(self.retry.delay(attempt, self._rng), remaining)
            log.debug(
                "%s: GET %s failed (%s); retrying in %.3f s (%.1f s left)",
                self.plugin,
                url,
                last_reason,
                delay,
                remaining,
            )
            attempt += 1
            if self._closed.wait(delay):
                continue  # closed while sleeping: reported at the loop top
            if until is not None and until - time.monotonic() < MIN_ATTEMPT:
                break
        raise self._unavailable(url, last_reason, last_status, deadline, timeout)

    def _once(
        self,
        path: str,
        params: Mapping[str, str] | None,
        until: float | None,
        timeout: float | None,
        extra_headers: Mapping[str, str] | None,
        token: _Token | None,
    ) -> MetadataResponse:
        """One GET, with the session token if there is one."""
        headers = dict(self.headers)
        if extra_headers:
            headers.update(extra_headers)
        if token is not None and self.token_spec is not None:
            headers[self.token_spec.token_header] = token.value
        return self._send("GET", path, params, headers, until, timeout)

    def _send(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        until: float | None,
        timeout: float | None,
    ) -> MetadataResponse:
        """One request with its body read under the cap.

        Raises ``_Retryable`` for connection trouble, 5xx and 429; any other
        status is returned for the caller to judge.
        """
        budget = self._attempt_timeout(until, timeout)
        request = self._http.build_request(
            method,
            "/" + path.lstrip("/"),
            params=dict(params) if params else None,
            headers=headers,
            timeout=budget,
        )
        full = self.url_for(request.url.raw_path.decode("ascii", "replace"))
        self._count()
        # The attempt's budget covers connect, headers and the whole body: a
        # server dripping bytes is cut off when it runs out, not per read.
        with within(budget):
            return self._exchange(request, full)

    def _exchange(self, request: httpx.Request, full: str) -> MetadataResponse:
        try:
            resp = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise _Retryable(describe_transport_error(exc)) from exc
        except RuntimeError as exc:  # httpx refuses requests on a closed client
            if not self._closed.is_set():
                raise
            raise MetadataUnavailable(
                f"{self.plugin}: metadata client for {self.endpoint.url} is closed",
                plugin=self.plugin,
                url=full,
            ) from exc
        try:
            if self.retry.retryable_status(resp.status_code):
                raise _Retryable(f"HTTP {resp.status_code}", resp.status_code)
            content = read_capped(resp, self.max_bytes)
        except BodyTooLarge as exc:
            raise MetadataTooLarge(
                f"{self.plugin}: {request.method} {full} {exc.detail}; {self._source_hint()}",
                plugin=self.plugin,
                url=full,
                status=resp.status_code,
            ) from None
        except httpx.TransportError as exc:
            raise _Retryable(describe_transport_error(exc)) from exc
        finally:
            resp.close()
        return MetadataResponse(resp.status_code, resp.headers, content, full, self.plugin)

    def _finish(self, resp: MetadataResponse) -> MetadataResponse:
        """Turn a final (non-retryable) answer into a result or an error."""
        full = resp.url
        self._check_required_headers(resp, full)
        status = resp.status_code
        if status == 404:
            raise MetadataNotFound(
                f"{self.plugin}: GET {full} answered 404: no such metadata key",
                plugin=self.plugin,
                url=full,
                status=404,
            )
        if not 200 <= status < 300:
            raise MetadataError(
                f"{self.plugin}: GET {full} answered HTTP {status}"
                + (" (token rejected)" if status == 401 and self.token_spec else "")
                + f"; {self._source_hint()}",
                plugin=self.plugin,
                url=full,
                status=status,
            )
        self._check_document(resp, "GET", full)
        log.debug("%s: GET %s -> %d (%d bytes)", self.plugin, full, status, len(resp.content))
        return resp

    def _check_document(self, resp: MetadataResponse, method: str, full: str) -> None:
        """Refuse a web page: it is never the document asked for, whatever its status."""
        kind = web_page_kind(resp.headers.get("content-type", ""), resp.content)
        if kind is not None:
            raise MetadataNotADocument(
                f"{self.plugin}: {method} {full} answered {kind}, not the metadata it asked for: "
                "a captive portal or proxy answers in place of the metadata server; "
                f"{self._source_hint()}",
                plugin=self.plugin,
                url=full,
                status=resp.status_code,
            )

    def _check_required_headers(self, resp: MetadataResponse, full: str) -> None:
        for name, expected in self.required_response_headers.items():
            got = resp.headers.get(name)
            if got is None or got.strip().lower() != expected.lower():
                seen = "it was missing" if got is None else f"got {got!r}"
                raise MetadataSpoofed(
                    f"{self.plugin}: GET {full} answered without the header "
                    f"'{name}: {expected}' ({seen}), so it is not the genuine metadata "
                    f"server; {self._source_hint()}",
                    plugin=self.plugin,
                    url=full,
                    status=resp.status_code,
                )

    # --- tokens ----------------------------------------------------------------------

    def _ensure_token(
        self, until: float | None, timeout: float | None
    ) -> tuple[_Token | None, bool]:
        """The session token (``None`` without a spec) and whether it was fetched now."""
        spec = self.token_spec
        if spec is None:
            return None, False
        with self._token_lock:
            tok = self._token
            margin = min(spec.refresh_margin, spec.ttl_seconds / 2)
            if tok is not None and tok.expires_at - self._clock() > margin:
                return tok, False
            resp = self._send(
                "PUT",
                spec.path,
                None,
                {**self.headers, spec.ttl_header: str(spec.ttl_seconds)},
                until,
                timeout,
            )
            full = self.url_for(spec.path)
            self._check_required_headers(resp, full)
            if resp.status_code == 200:
                self._check_document(resp, "PUT", full)
            if resp.status_code != 200 or not resp.content.strip():
                raise MetadataError(
                    f"{self.plugin}: PUT {full} (token request) answered HTTP "
                    f"{resp.status_code}"
                    + ("" if resp.status_code != 200 else " with an empty token")
                    + f"; {self._source_hint()}",
                    plugin=self.plugin,
                    url=full,
                    status=resp.status_code,
                )
            value = resp.content.strip()
            if len(value) > MAX_TOKEN_BYTES or not all(0x21 <= b <= 0x7E for b in value):
                # It goes back in a header: a non-ASCII or control byte would
                # crash the next request instead of failing cleanly here.
                raise MetadataError(
                    f"{self.plugin}: PUT {full} (token request) answered a token that is not "
                    f"1-{MAX_TOKEN_BYTES} printable ASCII characters; {self._source_hint()}",
                    plugin=self.plugin,
                    url=full,
                    status=resp.status_code,
                )
            ttl = float(spec.ttl_seconds)
            granted = resp.headers.get(spec.ttl_header, "")
            if granted.strip().isdigit():
                ttl = min(ttl, float(granted))
            self._token_generation += 1
            self.token_count += 1
            self._token = _Token(
                value.decode("ascii"),
                self._clock() + ttl,
                self._token_generation,
            )
            log.debug("%s: got a metadata token valid for %.0f s", self.plugin, ttl)
            return self._token, True

    def _drop_token(self, generation: int) -> None:
        """Forget the token, unless another thread already replaced it."""
        with self._token_lock:
            if self._token is not None and self._token.generation == generation:
                self._token = None

    # --- messages -----------------------------------------------------------------

    def _source_hint(self) -> str:
        ep = self.endpoint
        if ep.is_default:
            if ep.variables:
                return f"endpoint {ep.url} is the default (override with {ep.variables[0]})"
            return f"endpoint {ep.url} is the default"
        return f"endpoint set by {ep.source}"

    def _unavailable(
        self,
        url: str,
        reason: str,
        status: int | None,
        deadline: float | None,
        timeout: float | None,
    ) -> MetadataUnavailable:
        ep = self.endpoint
        if deadline is not None:
            span = f"{deadline:.1f} s"
        else:
            span = f"{self.timeout if timeout is None else timeout:.1f} s (one attempt)"
        if status is not None:
            what = f"kept answering HTTP {status} for {span}"
            if not reason.startswith("HTTP "):
                what += f" (last attempt: {reason})"
        else:
            what = f"did not answer within {span} ({reason})"
        if ep.is_default:
            fix = (
                f"; if this node's metadata server lives elsewhere set {ep.variables[0]}"
                if ep.variables
                else ""
            )
            message = f"{self.plugin}: the metadata server at {ep.url} {what} [GET {url}]{fix}"
        else:
            var = ep.source.split("=", 1)[0]
            message = (
                f"{self.plugin}: {ep.source} points at a server that {what} [GET {url}]; "
                f"start that server or unset {var}"
            )
        return MetadataUnavailable(message, plugin=self.plugin, url=url, status=status)
