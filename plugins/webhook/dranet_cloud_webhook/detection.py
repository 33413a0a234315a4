"""Is a BYODP webhook configured here, and does it answer as one?

Local evidence is simply a configured URL (``--webhook-url`` or
``DRANET_CLOUD_WEBHOOK_URL``), found without any I/O and without importing
``ssl``, httpx or pydantic: auto-detection calls it on every node start.
Confirmation polls ``/health`` (see :mod:`.health`) for at most the probe
timeout: a webhook that is not a BYODP webhook, or that does not offer the
cloud role, is ``None`` with a log line saying why; nothing answering at
all raises ``ProviderUnavailable`` (the host drops the webhook and goes on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.hookspecs import CONFIGURED_EVIDENCE
from dranet_cloud.lazylog import LazyLogger

from .constants import PLUGIN, configured_url

if TYPE_CHECKING:
    from dranet_cloud.context import ProviderContext

log = LazyLogger(__name__)


def local_evidence(context: ProviderContext) -> str | None:
    """The webhook's evidence is simply a configured URL (no I/O)."""
    url = configured_url(context)
    return f"{CONFIGURED_EVIDENCE}webhook URL {url}" if url else None


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """Poll ``/health`` for at most ``timeout`` seconds; never fail detection otherwise.

    Nothing answering raises ``ProviderUnavailable`` (the host drops the
    webhook and goes on).  An answer that is not a BYODP webhook, or one that
    does not offer the cloud role, is ``None`` with a warning saying why.
    """
    url = configured_url(context)
    if url is None:
        return None
    from dranet_cloud.errors import ConfigError, ProviderUnavailable

    from .health import HealthError, wait_for_health
    from .metadata_source import endpoint_from, open_client

    try:
        endpoint = endpoint_from(context)
        client = open_client(context, endpoint)
    except ConfigError as exc:
        raise ProviderUnavailable(str(exc)) from None
    try:
        caps = wait_for_health(client, endpoint, wait=timeout, request_timeout=timeout)
    except HealthError as exc:
        if exc.retryable:  # nothing answered, or only 5xx: ProviderUnavailable
            raise
        log.warning("%s: ignoring the auto-detected webhook: %s", PLUGIN, exc)
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
