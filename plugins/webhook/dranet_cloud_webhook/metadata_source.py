"""The webhook's metadata source: the webhook itself, and ``/health`` its document.

A BYODP webhook has no instance document; what the host loads at start-up
is the capability handshake (``GET /health``, see :mod:`.health`), which
says which roles the webhook serves.  Two parts of the plugin skeleton look
different here, on purpose:

* :func:`endpoint_from` takes the whole context, not only the environment:
  ``--webhook-url`` is an option and wins over ``DRANET_CLOUD_WEBHOOK_URL``.
* :func:`open_client` takes the endpoint and no timeout: every caller (the
  handshake and each BYODP call) shares one keep-alive pool per endpoint and
  TLS material, and bounds each request itself (``webhook.timeout``).
"""

from __future__ import annotations

import logging

import httpx

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ConfigError

from .client import pooled_client
from .constants import PLUGIN, URL_ENV, configured_url
from .endpoint import (
    ACCEPTED_FORMS,
    WebhookEndpoint,
    health_wait,
    parse_webhook_url,
    request_timeout,
    tls_from_context,
)
from .health import wait_for_health
from .snapshot import WebhookInstance

log = logging.getLogger(__name__)


def endpoint_from(context: ProviderContext) -> WebhookEndpoint:
    """The configured endpoint; :class:`ConfigError` when none or malformed."""
    url = configured_url(context)
    if url is None:
        raise ConfigError(
            f"{PLUGIN}: no webhook URL is configured; pass --webhook-url "
            f"({ACCEPTED_FORMS}) or set {URL_ENV}"
        )
    return parse_webhook_url(url)


def open_client(context: ProviderContext, endpoint: WebhookEndpoint) -> httpx.Client:
    """The process-wide keep-alive client for ``endpoint`` with the context's TLS material."""
    return pooled_client(endpoint, tls_from_context(context))


def load_instance(context: ProviderContext, deadline: float) -> WebhookInstance:
    """Handshake with ``/health``; any failure raises, saying which one happened.

    Start-up waits at most ``min(deadline, webhook.health_wait)`` seconds (3 s
    by default) for a webhook that is still coming up, so an explicit but
    broken webhook fails the daemon quickly.  The snapshot's
    ``serving_roles`` carries what ``/health`` declared; the host refuses an
    explicitly requested role the webhook does not serve, naming the roles
    ``/health`` declared.
    """
    endpoint = endpoint_from(context)
    caps = wait_for_health(
        open_client(context, endpoint),
        endpoint,
        wait=max(0.0, min(deadline, health_wait(context))),
        request_timeout=request_timeout(context),
    )
    instance = WebhookInstance(url=endpoint.url, endpoint=endpoint.url, capabilities=caps)
    served = instance.serving_roles()
    log.info(
        "%s: webhook at %s serves %s",
        PLUGIN,
        endpoint.url,
        ", ".join(sorted(served)) or "no role",
    )
    return instance
