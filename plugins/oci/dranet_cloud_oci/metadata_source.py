"""Talking to OCI IMDS v2: where it is and loading the three documents.

Every request carries ``Authorization: Bearer Oracle``; without it IMDS v2
answers 401.  A load is one concurrent round of three GETs under one
deadline: ``/opc/v2/instance/`` (identity, shape), ``/opc/v2/host/`` (the
RDMA topology DRANET publishes) and ``/opc/v2/vnics/`` (per-NIC facts).  A
404 for ``host/`` or ``vnics/`` is an answer (the instance has none), not a
failure; a 404 for ``instance/`` means this is not IMDS v2.
``DRANET_CLOUD_OCI_METADATA_ENDPOINT`` (``http://host:port`` or
``unix:///path``) moves the endpoint, for tests and emulators.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.metadata import Endpoint, MetadataClient, resolve_endpoint

from .constants import (
    AUTH_HEADER,
    AUTH_VALUE,
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    HOST_PATH,
    INSTANCE_PATH,
    PLUGIN,
    VNICS_PATH,
)
from .snapshot import OciInstance, parse_instance

log = logging.getLogger(__name__)


def endpoint_from(env: Mapping[str, str]) -> Endpoint:
    """``DRANET_CLOUD_OCI_METADATA_ENDPOINT`` when set, else ``http://169.254.169.254``."""
    return resolve_endpoint(env, DEFAULT_ENDPOINT, [ENDPOINT_ENV])


def open_client(context: ProviderContext, *, timeout: float) -> MetadataClient:
    """A client that sends ``Authorization: Bearer Oracle`` on every request."""
    return MetadataClient(
        endpoint_from(context.env),
        plugin=PLUGIN,
        headers={AUTH_HEADER: AUTH_VALUE},
        timeout=timeout,
    )


def _json(client: MetadataClient, path: str, text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProviderUnavailable(
            f"{PLUGIN}: {client.endpoint.describe()} answered {path} with a body that is not "
            f"JSON ({exc}); point {ENDPOINT_ENV} at OCI IMDS v2 or its emulator"
        ) from exc


def load_instance(context: ProviderContext, deadline: float) -> OciInstance:
    """The three documents, retried (5xx, 429, no answer) until ``deadline`` seconds."""
    paths = [INSTANCE_PATH, HOST_PATH, VNICS_PATH]
    with open_client(context, timeout=context.options.request_timeout) as client:
        answers = client.get_many(paths, deadline=deadline, max_workers=len(paths))
    instance_doc = _json(client, INSTANCE_PATH, answers[INSTANCE_PATH])
    if not isinstance(instance_doc, dict):
        raise ProviderUnavailable(
            f"{PLUGIN}: {client.endpoint.describe()} has no instance document at "
            f"{INSTANCE_PATH} (404 or not an object): not OCI IMDS v2; point {ENDPOINT_ENV} "
            "at OCI IMDS v2 or its emulator, or enable IMDS v2 on the instance"
        )
    try:
        instance = parse_instance(
            instance_doc,
            _json(client, HOST_PATH, answers[HOST_PATH]),
            _json(client, VNICS_PATH, answers[VNICS_PATH]),
            endpoint=client.endpoint.url,
            host_missing=answers[HOST_PATH] is None,
        )
    except ValueError as exc:
        raise ProviderUnavailable(f"{PLUGIN}: {exc}") from exc
    log.info(
        "%s: instance %s (%s) with %d VNICs from %s",
        PLUGIN,
        instance.display_name or instance.instance_id,
        instance.shape,
        len(instance.vnics),
        client.endpoint.describe(),
    )
    return instance
