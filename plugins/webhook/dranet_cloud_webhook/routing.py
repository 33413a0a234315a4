"""The webhook's device-config hook: ``POST /GetDeviceConfig`` with the
DeviceIdentifiers JSON, for a webhook whose ``/health`` declared the cloud
role.

The answer is the webhook's baseline NetworkConfig for the NIC (an MTU,
routes), checked field by field; any failure is logged and yields no config
(as DRANET does), so discovery never breaks on a webhook.
"""

from __future__ import annotations

from typing import Any

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

from .calls import discover, parse_network_config
from .endpoint import WebhookEndpoint
from .snapshot import WebhookInstance

GET_DEVICE_CONFIG = "/GetDeviceConfig"


def device_config(
    context: ProviderContext, instance: WebhookInstance, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """The webhook's baseline config for one NIC; failures are logged and yield none."""

    def parse(doc: Any, endpoint: WebhookEndpoint) -> NetworkConfig | None:
        return parse_network_config(doc, endpoint, GET_DEVICE_CONFIG)

    return discover(context, instance, device, GET_DEVICE_CONFIG, "device config", parse)
