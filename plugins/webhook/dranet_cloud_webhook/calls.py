"""The four BYODP calls, with DRANET's exact paths and bodies.

Cloud role: ``POST /GetDeviceAttributes`` and ``POST /GetDeviceConfig`` with
the DeviceIdentifiers JSON.  Profile role: ``POST /GetProfileConfig`` and
``POST /ReleaseProfileConfig`` with ``{"device", "claim_uid", "config"}``.
A call whose role the webhook did not declare in ``/health`` never reaches
the network.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from pydantic import ValidationError

from dranet_cloud.claims import ClaimReference, resource_claim_document
from dranet_cloud.context import ProviderContext
from dranet_cloud.errors import DranetCloudError, ProfileDenied
from dranet_cloud.logsafe import safe
from dranet_cloud.models import (
    AttributeMap,
    DeviceAttribute,
    DeviceIdentifiers,
    NetworkConfig,
    ProfileRequest,
    describe_validation_error,
    parse_peer_config,
)

from .client import WebhookAnswer, WebhookUnavailable, check_status, pooled_client, send
from .endpoint import PLUGIN, WebhookEndpoint, parse_webhook_url, request_timeout, tls_from_context
from .snapshot import WebhookInstance

log = logging.getLogger(__name__)

GET_DEVICE_ATTRIBUTES = "/GetDeviceAttributes"
GET_DEVICE_CONFIG = "/GetDeviceConfig"
GET_PROFILE_CONFIG = "/GetProfileConfig"
RELEASE_PROFILE_CONFIG = "/ReleaseProfileConfig"


class InvalidAnswer(WebhookUnavailable):
    """A 200 answer whose body is not the document BYODP promises."""


def _post(
    context: ProviderContext, instance: WebhookInstance, path: str, body: bytes
) -> tuple[WebhookEndpoint, WebhookAnswer]:
    endpoint = parse_webhook_url(instance.url)
    client = pooled_client(endpoint, tls_from_context(context))
    answer = send(client, endpoint, "POST", path, body=body, timeout=request_timeout(context))
    check_status(answer, endpoint, "POST", path)
    return endpoint, answer


def _json_or_none(answer: WebhookAnswer, endpoint: WebhookEndpoint, path: str) -> Any:
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


def parse_attribute_map(
    doc: Any, endpoint: WebhookEndpoint, device: DeviceIdentifiers
) -> AttributeMap:
    """Parse an attribute map leniently: a bad entry is dropped, the rest kept.

    Only the *value* is checked here (it must be a DeviceAttribute at all).
    Names are left to the host, whose validation against the API-server
    limits drops e.g. ``dra.net/webhook-attr`` with the warning operators
    are told to look for.
    """
    where = f"POST {endpoint.describe(GET_DEVICE_ATTRIBUTES)}"
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidAnswer(
            f"{PLUGIN}: {where} answered JSON {type(doc).__name__} for {device.label()} instead "
            f'of an attribute map ({{"domain/name": {{"string": "..."}}}}); fix the webhook'
        )
    attributes: AttributeMap = {}
    for name, value in doc.items():
        try:
            attributes[str(name)] = DeviceAttribute.model_validate(value)
        except ValidationError as exc:
            log.warning(
                "%s: dropping attribute %s for %s from %s: not a DeviceAttribute (%s)",
                PLUGIN,
                safe(name, 80),
                safe(device.label()),
                where,
                safe(describe_validation_error(exc, root="value"), 300),
            )
    return attributes


def _serves(instance: WebhookInstance, role: str) -> bool:
    return role in instance.serving_roles()


def device_attributes(
    context: ProviderContext, instance: WebhookInstance, device: DeviceIdentifiers
) -> AttributeMap | None:
    """Attributes for one NIC; any failure is logged and yields none (as DRANET does)."""
    if not _serves(instance, "cloud"):
        return None
    try:
        endpoint, answer = _post(
            context, instance, GET_DEVICE_ATTRIBUTES, device.to_json().encode()
        )
        attributes = parse_attribute_map(
            _json_or_none(answer, endpoint, GET_DEVICE_ATTRIBUTES), endpoint, device
        )
    except DranetCloudError as exc:
        _log_discovery_failure("attributes", device, exc)
        return None
    return attributes or None


def device_config(
    context: ProviderContext, instance: WebhookInstance, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """The webhook's baseline config for one NIC; failures are logged and yield none."""
    if not _serves(instance, "cloud"):
        return None
    try:
        endpoint, answer = _post(context, instance, GET_DEVICE_CONFIG, device.to_json().encode())
        return parse_network_config(
            _json_or_none(answer, endpoint, GET_DEVICE_CONFIG), endpoint, GET_DEVICE_CONFIG
        )
    except DranetCloudError as exc:
        _log_discovery_failure("device config", device, exc)
        return None


def _log_discovery_failure(what: str, device: DeviceIdentifiers, exc: DranetCloudError) -> None:
    # A 404 is the webhook saying "I know nothing about this NIC": not a fault.
    level = (
        logging.INFO if isinstance(exc, ProfileDenied) and exc.status == 404 else logging.WARNING
    )
    log.log(level, "%s: no %s for %s: %s", PLUGIN, what, device.label(), exc)


def _profile_body(
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
    claim: ClaimReference | None = None,
) -> bytes:
    """A profile request both generations of peer understand.

    ``claim`` (a minimal ResourceClaim) is what a gen2 peer reads, ``claim_uid``
    what a gen1 peer reads; each ignores the other.  A release carries only
    ``claim_uid``, as DRANET's own release does.  Always send a config object
    (``{"interface": {}}`` at least): servers written against DRANET index into
    it without checking for null.
    """
    doc = ProfileRequest.model_construct(
        device=device,
        claim_uid=claim_uid,
        claim=resource_claim_document(claim) if claim is not None else None,
        config=config or NetworkConfig(),
    )
    return doc.to_json().encode()


def _refuse_undeclared(instance: WebhookInstance, call: str) -> NoReturn:
    raise WebhookUnavailable(
        f"{PLUGIN}: webhook at {instance.url} declares profileProvider=false, so {call} is "
        f"not sent to it; enable the profile capability in the webhook or choose another "
        f"--profile-provider"
    )


def profile_config(
    context: ProviderContext,
    instance: WebhookInstance,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    """``POST /GetProfileConfig``; denials and outages propagate to the host."""
    if not _serves(instance, "profile"):
        _refuse_undeclared(instance, GET_PROFILE_CONFIG)
    ref = claim if claim is not None else ClaimReference(uid=claim_uid)
    endpoint, answer = _post(
        context, instance, GET_PROFILE_CONFIG, _profile_body(device, claim_uid, config, ref)
    )
    return parse_network_config(
        _json_or_none(answer, endpoint, GET_PROFILE_CONFIG), endpoint, GET_PROFILE_CONFIG
    )


def release_profile_config(
    context: ProviderContext,
    instance: WebhookInstance,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
) -> bool | None:
    """``POST /ReleaseProfileConfig``: any 2xx is success; failures raise (the host logs)."""
    if not _serves(instance, "profile"):
        # Nothing was ever allocated through this webhook, so nothing to free.
        return None
    _post(context, instance, RELEASE_PROFILE_CONFIG, _profile_body(device, claim_uid, config))
    return True
