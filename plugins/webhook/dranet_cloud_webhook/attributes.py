"""The webhook's attribute hook: ``POST /GetDeviceAttributes`` with the
DeviceIdentifiers JSON, for a webhook whose ``/health`` declared the cloud
role.

Any failure is logged and yields no attributes (as DRANET does), so
discovery never breaks on a webhook; a bad entry of the answer is dropped
and the rest kept.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.models import (
    AttributeMap,
    DeviceAttribute,
    DeviceIdentifiers,
    describe_validation_error,
)

from .calls import InvalidAnswer, discover
from .endpoint import PLUGIN, WebhookEndpoint
from .snapshot import WebhookInstance

log = logging.getLogger(__name__)

GET_DEVICE_ATTRIBUTES = "/GetDeviceAttributes"


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


def device_attributes(
    context: ProviderContext, instance: WebhookInstance, device: DeviceIdentifiers
) -> AttributeMap | None:
    """Attributes for one NIC; any failure is logged and yields none (as DRANET does)."""

    def parse(doc: Any, endpoint: WebhookEndpoint) -> AttributeMap:
        return parse_attribute_map(doc, endpoint, device)

    return discover(context, instance, device, GET_DEVICE_ATTRIBUTES, "attributes", parse) or None
