"""Talking to Azure IMDS: where it is and loading the instance document.

Every request carries ``Metadata: true`` (IMDS answers 400 without it) and
``api-version=2025-11-11``, the version DRANET pins.  The whole instance is
one request: ``/metadata/instance?format=json`` holds both documents DRANET
fetches separately (``compute`` and ``network``), so one answer is one
consistent view and one request against IMDS's per-VM rate limit.
``DRANET_CLOUD_AZURE_METADATA_ENDPOINT`` (``http://host:port`` or
``unix:///path``) moves the endpoint, for tests and emulators.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.metadata import Endpoint, MetadataClient, resolve_endpoint

from .constants import (
    API_VERSION,
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    INSTANCE_PATH,
    METADATA_HEADER,
    METADATA_HEADER_VALUE,
    PLUGIN,
)
from .snapshot import AzureInstance, parse_instance

log = logging.getLogger(__name__)

JSON_PARAMS = {"api-version": API_VERSION, "format": "json"}


def endpoint_from(env: Mapping[str, str]) -> Endpoint:
    """``DRANET_CLOUD_AZURE_METADATA_ENDPOINT`` when set, else ``http://169.254.169.254``."""
    return resolve_endpoint(env, DEFAULT_ENDPOINT, [ENDPOINT_ENV])


def open_client(context: ProviderContext, *, timeout: float) -> MetadataClient:
    """A client that sends ``Metadata: true`` on every request."""
    return MetadataClient(
        endpoint_from(context.env),
        plugin=PLUGIN,
        headers={METADATA_HEADER: METADATA_HEADER_VALUE},
        timeout=timeout,
    )


def load_instance(context: ProviderContext, deadline: float) -> AzureInstance:
    """The instance document, retried (5xx, 429, no answer) until ``deadline`` seconds."""
    with open_client(context, timeout=context.options.request_timeout) as client:
        document = client.get_json(INSTANCE_PATH, params=JSON_PARAMS, deadline=deadline)
    try:
        instance = parse_instance(document, endpoint=client.endpoint.url)
    except ValueError as exc:
        raise ProviderUnavailable(
            f"{PLUGIN}: {client.endpoint.describe()} answered {INSTANCE_PATH} without the "
            f"shape of Azure IMDS: {exc}; point {ENDPOINT_ENV} at Azure IMDS or its emulator"
        ) from exc
    log.info(
        "%s: VM %s (%s, placement group %s) with %d NICs from %s",
        PLUGIN,
        instance.name or instance.vm_id,
        instance.vm_size,
        instance.placement_group_id or "none",
        len(instance.interfaces),
        client.endpoint.describe(),
    )
    return instance
