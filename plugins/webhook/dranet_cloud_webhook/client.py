"""HTTP plumbing to a BYODP webhook: pooled clients, capped bodies, status mapping.

One keep-alive ``httpx.Client`` per (URL, TLS settings) per process: claims
are prepared concurrently and a new TCP/TLS handshake per call would dominate
an IPAM webhook's latency.  Status codes map onto the core errors exactly as
BYODP defines them, so the CLI's exit codes say what the webhook meant.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from dranet_cloud.toolkit.errors import ProfileDenied, ProviderUnavailable
from dranet_cloud.toolkit.httpdeadline import (
    BodyTooLarge,
    deadline_transport,
    describe_transport_error,
    expired,
    read_capped,
    within,
)
from dranet_cloud.toolkit.logsafe import safe

from .endpoint import PLUGIN, TlsSettings, WebhookEndpoint, build_ssl_context

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
# BYODP statuses that mean "the webhook refuses this request" (not "try again").
DENY_STATUSES = frozenset({400, 404, 409, 422})
USER_AGENT = "dranet-cloud-webhook/0.1"
JSON_HEADERS = {"Content-Type": "application/json"}
_MESSAGE_LIMIT = 300


class WebhookUnavailable(ProviderUnavailable):
    """The webhook did not answer usefully (unreachable, timeout, 5xx, oversize)."""


@dataclass(frozen=True)
class WebhookAnswer:
    """A complete answer read from the webhook (body already size-capped)."""

    status: int
    body: bytes
    content_type: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` when it is not JSON."""
        return json.loads(self.body.decode("utf-8"))


_POOL_LOCK = threading.Lock()
_POOL: dict[tuple[str, str | None, TlsSettings], httpx.Client] = {}
_WARNED_TLS_UNUSED: set[str] = set()


def pooled_client(endpoint: WebhookEndpoint, tls: TlsSettings) -> httpx.Client:
    """The process-wide keep-alive client for this endpoint and TLS material."""
    key = (endpoint.base_url, endpoint.uds, tls)
    with _POOL_LOCK:
        client = _POOL.get(key)
        if client is not None and not client.is_closed:
            return client
        if endpoint.is_tls:
            verify: Any = build_ssl_context(tls)
        else:
            verify = False  # plain HTTP or a unix socket: no TLS to verify
            if not tls.is_default and endpoint.url not in _WARNED_TLS_UNUSED:
                _WARNED_TLS_UNUSED.add(endpoint.url)
                log.warning(
                    "%s: TLS settings (CA bundle / client certificate) are ignored for %s, "
                    "which is not an https:// URL",
                    PLUGIN,
                    endpoint.url,
                )
        transport = deadline_transport(
            verify=verify,
            uds=endpoint.uds,
            trust_env=False,  # a node-local webhook must never go through a proxy
            limits=httpx.Limits(
                max_connections=64, max_keepalive_connections=16, keepalive_expiry=30.0
            ),
        )
        client = httpx.Client(
            transport=transport,
            base_url=endpoint.base_url,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            trust_env=False,
            follow_redirects=False,
        )
        _POOL[key] = client
        return client


def close_pooled_clients() -> None:
    """Close every pooled client (tests, process exit)."""
    with _POOL_LOCK:
        clients = list(_POOL.values())
        _POOL.clear()
    for client in clients:
        client.close()


def pool_size() -> int:
    """How many pooled clients exist (tests assert that calls reuse one)."""
    with _POOL_LOCK:
        return sum(1 for c in _POOL.values() if not c.is_closed)


def send(
    client: httpx.Client,
    endpoint: WebhookEndpoint,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    timeout: float,
    max_bytes: int = MAX_BODY_BYTES,
) -> WebhookAnswer:
    """Send one request and read the whole answer, at most ``max_bytes`` of body.

    A request that dies because the server closed a kept-alive connection under
    us (or reset it mid-answer) is sent once more: every BYODP call is
    idempotent by contract.  A refused connection or a timeout is not retried
    here (callers fail fast); both raise :class:`WebhookUnavailable`.
    """
    where = f"{method} {endpoint.describe(path)}"
    # ``timeout`` bounds the whole call (connect, headers, every body byte and
    # the one resend), not each socket read: a dripping webhook is cut off.
    with within(timeout):
        return _send(client, where, method, path, body, timeout, max_bytes)


def _send(
    client: httpx.Client,
    where: str,
    method: str,
    path: str,
    body: bytes | None,
    timeout: float,
    max_bytes: int,
) -> WebhookAnswer:
    headers = JSON_HEADERS if body is not None else None
    for attempt in (1, 2):
        try:
            with client.stream(
                method, path, content=body, headers=headers, timeout=timeout
            ) as response:
                data = read_capped(response, max_bytes)
                return WebhookAnswer(
                    status=response.status_code,
                    body=data,
                    content_type=response.headers.get("content-type", ""),
                )
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            if attempt == 1 and not expired():
                log.debug("%s: %s: connection dropped (%s), sending once more", PLUGIN, where, exc)
                continue
            raise WebhookUnavailable(
                f"{PLUGIN}: {where} failed: the webhook closed the connection ({exc}); "
                f"check the webhook's logs"
            ) from None
        except BodyTooLarge as exc:
            raise WebhookUnavailable(
                f"{PLUGIN}: {where} {exc.detail}; the webhook must answer small JSON documents"
            ) from None
        except httpx.TimeoutException:
            raise WebhookUnavailable(
                f"{PLUGIN}: {where} timed out after {timeout:g} s; the webhook is too slow "
                f"or hung (raise webhook.timeout if it is just slow)"
            ) from None
        except httpx.TransportError as exc:
            raise WebhookUnavailable(
                f"{PLUGIN}: {where} failed: webhook unreachable ({describe_transport_error(exc)}); "
                f"start the webhook or fix --webhook-url"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def server_message(answer: WebhookAnswer) -> str:
    """The webhook's own explanation of a non-200 answer, short and printable.

    BYODP servers answer errors as plain text (Go's ``http.Error``) or as a
    JSON object with an ``error``/``message`` field; both are accepted.
    """
    text = answer.body.decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        for key in ("error", "message", "reason", "detail"):
            value = doc.get(key)
            if isinstance(value, str) and value.strip():
                text = value.strip()
                break
    text = " ".join(text.split())
    if not text:
        return "(empty body)"
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 3] + "..."
    # The peer chose these bytes: no escape sequence reaches a log or terminal.
    return safe(text, _MESSAGE_LIMIT)


def check_status(answer: WebhookAnswer, endpoint: WebhookEndpoint, method: str, path: str) -> None:
    """Raise the core error BYODP's status code stands for; return on 2xx.

    400/404/409/422 refuse the request (``ProfileDenied`` carrying the status
    and the server's message); anything else that is not 2xx (5xx, 429,
    redirects, auth failures) is the webhook not serving (``ProviderUnavailable``).
    """
    if answer.ok:
        return
    where = f"{method} {endpoint.describe(path)}"
    message = server_message(answer)
    if answer.status in DENY_STATUSES:
        raise ProfileDenied(
            f"{PLUGIN}: {where} denied the request with HTTP {answer.status}: {message}",
            status=answer.status,
        )
    hint = (
        "a temporary failure; kubelet will retry"
        if answer.status >= 500
        else "the webhook does not speak BYODP at this URL"
    )
    raise WebhookUnavailable(f"{PLUGIN}: {where} answered HTTP {answer.status}: {message} ({hint})")
