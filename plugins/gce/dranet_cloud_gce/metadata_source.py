"""Talking to the GCE metadata server: where it is, a client for it, loading the instance.

The default endpoint is the link-local IP ``169.254.169.254`` rather than
``metadata.google.internal``: it needs no DNS (a host-network pod at boot may
not resolve the name yet, and a DNS answer can be spoofed), and it is what
Google's Go client, the one DRANET uses, talks to.  Two variables move it:

* ``DRANET_CLOUD_GCE_METADATA_ENDPOINT``: a full URL, ``http://host:port`` or
  ``unix:///path/to.sock`` (this project's own knob, wins when both are set);
* ``GCE_METADATA_HOST``: ``host[:port]``, as google-auth and the Go client read it.

Every request carries ``Metadata-Flavor: Google`` and every answer must carry
it back; the shared client refuses an answer without it (``MetadataSpoofed``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.metadata import Endpoint, MetadataClient, resolve_endpoint

from .snapshot import PLUGIN, GceInstance, parse_instance

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://169.254.169.254"
ENDPOINT_ENV = "DRANET_CLOUD_GCE_METADATA_ENDPOINT"
HOST_ENV = "GCE_METADATA_HOST"
FLAVOR_HEADER = "Metadata-Flavor"
FLAVOR_VALUE = "Google"
BASE_PATH = "/computeMetadata/v1/"
RECURSIVE_PARAMS = {"recursive": "true", "alt": "json"}
# The whole tree includes custom instance and project metadata (up to 512 KiB
# each on GCE), so the cap is above the client's 1 MiB default.
MAX_TREE_BYTES = 4 << 20


def endpoint_from(env: Mapping[str, str]) -> Endpoint:
    """The metadata endpoint for this environment, with the variable that set it."""
    return resolve_endpoint(env, DEFAULT_ENDPOINT, [(ENDPOINT_ENV, None), (HOST_ENV, None)])


def open_client(context: ProviderContext, *, timeout: float | None = None) -> MetadataClient:
    """A client for the endpoint ``context.env`` selects, sending and requiring the flavor header.

    ``timeout`` bounds each request (the request timeout by default).
    """
    endpoint = endpoint_from(context.env)
    flavor = {FLAVOR_HEADER: FLAVOR_VALUE}
    return MetadataClient(
        endpoint,
        plugin=PLUGIN,
        headers=flavor,
        required_response_headers=flavor,
        timeout=timeout if timeout is not None else context.options.request_timeout,
        max_bytes=MAX_TREE_BYTES,
    )


def load_instance(context: ProviderContext, deadline: float) -> GceInstance:
    """The whole instance in one recursive request, retried until ``deadline`` seconds."""
    with open_client(context) as client:
        tree = client.get_json(BASE_PATH, params=RECURSIVE_PARAMS, deadline=deadline)
        url = client.endpoint.url
        source = client.endpoint.describe()
    try:
        instance = parse_instance(tree, endpoint=url)
    except ValueError as exc:
        raise ProviderUnavailable(
            f"gce: the metadata server at {url} ({source}) answered the recursive tree "
            f"without the expected shape: {exc}; point {ENDPOINT_ENV} or {HOST_ENV} at a "
            "GCE metadata server"
        ) from exc
    log.info(
        "gce: loaded %s (%s, zone %s) with %d NICs from %s",
        instance.name,
        instance.machine_type,
        instance.zone,
        len(instance.nics),
        url,
    )
    return instance
