"""One BYODP call: the POST every role module makes, and reading its answer.

The webhook's attribute, device-config and profile hooks
(:mod:`.attributes`, :mod:`.routing`, :mod:`.profile`) each forward one of
DRANET's four calls with DRANET's exact path and body; this module holds
what they share: the request on the pooled client (bounded by
``webhook.timeout``), BYODP's status mapping, an answer's JSON and a
NetworkConfig answer checked field by field.  A call whose role the webhook
did not declare in ``/health`` never reaches the network.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import DranetCloudError, ProfileDenied
from dranet_cloud.wire.models import (
    DeviceIdentifiers,
    NetworkConfig,
    describe_validation_error,
    parse_peer_config,
)

from .client import WebhookAnswer, WebhookUnavailable, check_status, send
from .endpoint import PLUGIN, WebhookEndpoint, parse_webhook_url, request_timeout
from .metadata_source import open_client
from .snapshot import CLOUD_ROLE, WebhookInstance

log = logging.getLogger(__name__)

T = TypeVar("T")


class InvalidAnswer(WebhookUnavailable):
    """A 200 answer whose body is not the document BYODP promises."""


def serves(instance: WebhookInstance, role: str) -> bool:
    """Whether ``/health`` declared ``role`` (``cloud`` or ``profile``)."""
    return role in instance.serving_roles()


def post(
    context: ProviderContext, instance: WebhookInstance, path: str, body: bytes
) -> tuple[WebhookEndpoint, WebhookAnswer]:
    """POST ``body`` to ``path``; a status other than 2xx raises (see ``check_status``)."""
    endpoint = parse_webhook_url(instance.url)
    client = open_client(context, endpoint)
    answer = send(client, endpoint, "POST", path, body=body, timeout=request_timeout(context))
    check_status(answer, endpoint, "POST", path)
    return endpoint, answer


def json_or_none(answer: WebhookAnswer, endpoint: WebhookEndpoint, path: str) -> Any:
    """The answer's JSON; ``None`` for an empty body or ``null``."""
    if not answer.body.strip():
        return None
    try:
        return answer.json()
    except (ValueError, UnicodeDecodeError):
        excerpt = answer.body[:80].decode("utf-8", errors="replace")
        raise InvalidAnswer(
            f"{PLUGIN}: POST {endpoint.describe(path)} answered 200 with a body that is not "
            f"JSON ({excerpt!r}); fix the webhook"
        ) from None


def parse_network_config(doc: Any, endpoint: WebhookEndpoint, path: str) -> NetworkConfig | None:
    """Validate a NetworkConfig answer; the error names every invalid field."""
    if doc is None:
        return None
    try:
        return parse_peer_config(doc)
    except ValidationError as exc:
        raise InvalidAnswer(
            f"{PLUGIN}: POST {endpoint.describe(path)} answered an invalid NetworkConfig "
            f"({describe_validation_error(exc)}); fix the webhook"
        ) from None


def discover(
    context: ProviderContext,
    instance: WebhookInstance,
    device: DeviceIdentifiers,
    path: str,
    what: str,
    parse: Callable[[Any, WebhookEndpoint], T],
) -> T | None:
    """A cloud-role call: POST the DeviceIdentifiers JSON to ``path``, ``parse`` the answer.

    ``None`` when ``/health`` did not declare the cloud role.  Any failure is
    logged (``no <what> for <device>``) and yields ``None``, as DRANET does,
    so discovery never breaks on a webhook: at INFO for a 404 (the webhook
    saying "I know nothing about this NIC": not a fault), else at WARNING.
    """
    if not serves(instance, CLOUD_ROLE):
        return None
    try:
        endpoint, answer = post(context, instance, path, device.to_json().encode())
        return parse(json_or_none(answer, endpoint, path), endpoint)
    except DranetCloudError as exc:
        not_known = isinstance(exc, ProfileDenied) and exc.status == 404
        log.log(
            logging.INFO if not_known else logging.WARNING,
            "%s: no %s for %s: %s",
            PLUGIN,
            what,
            device.label(),
            exc,
        )
        return None
