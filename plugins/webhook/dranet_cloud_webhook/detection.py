"""Is a BYODP webhook configured here, and does it answer as one?

Local evidence is simply a configured URL (``--webhook-url`` or
``DRANET_CLOUD_WEBHOOK_URL``), found without any I/O: auto-detection calls
it on every node start.
Confirmation polls ``/health`` (see :mod:`.health`) for at most the probe
timeout, under the core's rule (:func:`dranet_cloud.contract.confirm.confirm_probe`):
a webhook that is not a BYODP webhook, or that does not offer the cloud
role, is ``None`` with a log line saying why; nothing answering at all
raises ``ProviderUnavailable`` (the host drops the webhook and goes on).
"""

from __future__ import annotations

import logging

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.contract.hookspecs import CONFIGURED_EVIDENCE
from dranet_cloud.toolkit.errors import ConfigError, ProviderUnavailable
from dranet_cloud.wire.models import Capabilities

from .constants import PLUGIN, configured_url
from .health import HealthError, wait_for_health
from .metadata_source import endpoint_from, open_client

log = logging.getLogger(__name__)


def local_evidence(context: ProviderContext) -> str | None:
    """The webhook's evidence is simply a configured URL (no I/O)."""
    url = configured_url(context)
    return f"{CONFIGURED_EVIDENCE}webhook URL {url}" if url else None


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """Poll ``/health`` for at most ``timeout`` seconds; never fail detection otherwise.

    Under the rule of :func:`dranet_cloud.contract.confirm.confirm_probe`: nothing
    answering (or only 5xx) raises ``ProviderUnavailable`` (the host drops
    the webhook and goes on), as does a malformed URL; an answer that is not
    a BYODP webhook's is ``None``, logged at WARNING (the operator set the
    URL).  A webhook that declares no cloud role is ``None`` at INFO: a
    profile-only webhook is a normal set-up.
    """
    url = configured_url(context)
    if url is None:
        return None

    def probe() -> Capabilities:
        try:
            endpoint = endpoint_from(context)
            client = open_client(context, endpoint)
        except ConfigError as exc:
            raise ProviderUnavailable(str(exc)) from None
        try:
            return wait_for_health(client, endpoint, wait=timeout, request_timeout=timeout)
        except HealthError as exc:
            if exc.retryable:  # nothing answered, or only 5xx
                raise
            raise NotThisCloud(f"ignoring the auto-detected webhook: {exc}") from None

    caps = confirm_probe(PLUGIN, probe, warn=True)
    if caps is None:
        return None
    if not caps.cloud_provider:
        log.info(
            "%s: webhook at %s declares cloudProvider=false; not using it as the cloud provider",
            PLUGIN,
            url,
        )
        return None
    return (
        f"webhook at {url} (cloudProvider={str(caps.cloud_provider).lower()}, "
        f"profileProvider={str(caps.profile_provider).lower()})"
    )
