"""``GET /health``: the capability handshake, parsed strictly.

DRANET's first client swallowed every ``/health`` failure and assumed both
capabilities, so a node became ready with a broken webhook and failed at claim
time.  Here every failure is an error saying which of four things happened:
the webhook is unreachable, it answered a non-200 status, the body is not
JSON, or the JSON does not declare both capabilities as booleans.
"""

from __future__ import annotations

import logging
import random
import time

import httpx
from pydantic import ValidationError

from dranet_cloud.wire.models import Capabilities

from .client import WebhookAnswer, WebhookUnavailable, send, server_message
from .endpoint import PLUGIN, WebhookEndpoint

log = logging.getLogger(__name__)

HEALTH_PATH = "/health"
EXPECTED = '{"cloudProvider": bool, "profileProvider": bool}'


class HealthError(WebhookUnavailable):
    """``/health`` failed; ``retryable`` when waiting could fix it."""

    retryable = False

    def gave_up(self, note: str) -> HealthError:
        """The same failure with ``note`` appended (how long start-up waited)."""
        self.args = (f"{self} ({note})",)
        return self


class HealthUnreachable(HealthError):
    retryable = True


class HealthBadStatus(HealthError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status >= 500 or status == 429


class HealthNotJson(HealthError):
    pass


class HealthInvalid(HealthError):
    pass


def parse_health(answer: WebhookAnswer, endpoint: WebhookEndpoint) -> Capabilities:
    """Strictly parse a ``/health`` answer into :class:`Capabilities`."""
    where = f"GET {endpoint.describe(HEALTH_PATH)}"
    if answer.status != 200:
        raise HealthBadStatus(
            f"{PLUGIN}: {where} answered HTTP {answer.status} instead of 200: "
            f"{server_message(answer)}; the webhook reports itself unhealthy",
            answer.status,
        )
    try:
        doc = answer.json()
    except (ValueError, UnicodeDecodeError):
        excerpt = server_message(answer)
        raise HealthNotJson(
            f"{PLUGIN}: {where} answered 200 but the body is not JSON ({excerpt!r}); "
            f"a BYODP webhook answers {EXPECTED}"
        ) from None
    if not isinstance(doc, dict):
        raise HealthInvalid(
            f"{PLUGIN}: {where} answered JSON {type(doc).__name__} instead of an object; "
            f"a BYODP webhook answers {EXPECTED}"
        )
    try:
        return Capabilities.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise HealthInvalid(
            f"{PLUGIN}: {where} answered JSON without valid capabilities ({problems}); "
            f"a BYODP webhook answers {EXPECTED}"
        ) from None


def fetch_health(client: httpx.Client, endpoint: WebhookEndpoint, timeout: float) -> Capabilities:
    """One ``/health`` request; raises a :class:`HealthError` saying what went wrong."""
    try:
        answer = send(client, endpoint, "GET", HEALTH_PATH, timeout=timeout)
    except WebhookUnavailable as exc:
        # The message already names the URL and says unreachable / timed out.
        raise HealthUnreachable(str(exc)) from None
    return parse_health(answer, endpoint)


def wait_for_health(
    client: httpx.Client,
    endpoint: WebhookEndpoint,
    *,
    wait: float,
    request_timeout: float,
) -> Capabilities:
    """Poll ``/health`` for up to ``wait`` seconds while the webhook comes up.

    Only an unreachable webhook or a 5xx/429 is retried (a sidecar starting
    next to the daemon); a non-JSON or capability-less answer is final at
    once, because waiting will not change what the server is.
    """
    start = time.monotonic()
    delay = 0.05
    attempts = 0
    while True:
        attempts += 1
        remaining = wait - (time.monotonic() - start)
        try:
            return fetch_health(client, endpoint, max(0.05, min(request_timeout, remaining)))
        except HealthError as exc:
            remaining = wait - (time.monotonic() - start)
            if not exc.retryable:
                raise
            if remaining <= 0:
                raise exc.gave_up(f"gave up after {attempts} attempt(s) over {wait:g} s") from None
            log.debug("%s: /health not ready yet (%s); retrying", PLUGIN, exc)
            time.sleep(min(remaining, delay * (0.5 + random.random())))
            delay = min(delay * 2, 0.5)
