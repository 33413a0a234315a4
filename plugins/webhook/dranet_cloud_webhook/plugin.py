"""Hook implementations of the webhook (BYODP client) plugin.

Thin on purpose: URL and TLS handling live in :mod:`.endpoint`, HTTP in
:mod:`.client`, the ``/health`` handshake in :mod:`.health` and the four
BYODP calls in :mod:`.calls`.  Those import the HTTP stack, so they are
imported inside the hooks, as are the pydantic snapshot and URL/TLS
handling: loading the plugin for ``local_evidence`` (every node, every
start) imports neither httpx, pydantic nor ssl; :mod:`.detection` holds all
that hook needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.errors import ConfigError, ProviderUnavailable
from dranet_cloud.hookspecs import CONFIGURED_EVIDENCE, hookimpl
from dranet_cloud.lazylog import LazyLogger

from .detection import PLUGIN, configured_url

if TYPE_CHECKING:
    from pathlib import Path

    from dranet_cloud.claims import ClaimReference
    from dranet_cloud.context import InstanceSnapshot, ProviderContext, SampleHost
    from dranet_cloud.models import AttributeMap, DeviceIdentifiers, NetworkConfig
    from dranet_cloud.settings import Setting
    from dranet_cloud.testing.emulator import Emulator

    from .snapshot import WebhookInstance

log = LazyLogger(__name__)


@hookimpl
def local_evidence(context: ProviderContext) -> str | None:
    """The webhook's evidence is simply a configured URL (no I/O)."""
    url = configured_url(context)
    return f"{CONFIGURED_EVIDENCE}webhook URL {url}" if url else None


@hookimpl
def confirm_environment(context: ProviderContext, timeout: float) -> str | None:
    """Poll ``/health`` for at most ``timeout`` seconds; never fail detection otherwise.

    Nothing answering raises ``ProviderUnavailable`` (the host drops the
    webhook and goes on).  An answer that is not a BYODP webhook, or one that
    does not offer the cloud role, is ``None`` with a warning saying why.
    """
    url = configured_url(context)
    if url is None:
        return None
    from .client import pooled_client
    from .endpoint import parse_webhook_url, tls_from_context
    from .health import HealthError, wait_for_health

    try:
        endpoint = parse_webhook_url(url)
        client = pooled_client(endpoint, tls_from_context(context))
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


@hookimpl
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    """Handshake with ``/health``; any failure raises, saying which one happened.

    Start-up waits at most ``min(deadline, webhook.health_wait)`` seconds (3 s
    by default) for a webhook that is still coming up, so an explicit but
    broken webhook fails the daemon quickly.  The snapshot's
    ``serving_roles`` carries what ``/health`` declared; the host refuses an
    explicitly requested role the webhook does not serve, naming the roles
    ``/health`` declared.
    """
    from .client import pooled_client
    from .endpoint import endpoint_from_context, health_wait, request_timeout, tls_from_context
    from .health import wait_for_health
    from .snapshot import WebhookInstance

    endpoint = endpoint_from_context(context)
    client = pooled_client(endpoint, tls_from_context(context))
    caps = wait_for_health(
        client,
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


def _webhook(instance: InstanceSnapshot | None) -> WebhookInstance | None:
    from .snapshot import WebhookInstance

    return instance if isinstance(instance, WebhookInstance) else None


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    webhook = _webhook(instance)
    if webhook is None:
        return None
    from . import calls

    return calls.device_attributes(context, webhook, device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    webhook = _webhook(instance)
    if webhook is None:
        return None
    from . import calls

    return calls.device_config(context, webhook, device)


def _require_webhook(instance: InstanceSnapshot, what: str) -> WebhookInstance:
    webhook = _webhook(instance)
    if webhook is None:
        raise ProviderUnavailable(
            f"{PLUGIN}: {what} was called without the webhook's own snapshot "
            f"(got {type(instance).__name__}); the host must load the webhook with "
            f"instance_properties first"
        )
    return webhook


@hookimpl
def profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    webhook = _require_webhook(instance, "GetProfileConfig")
    from . import calls

    return calls.profile_config(context, webhook, device, claim_uid, config, claim)


@hookimpl
def release_profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
) -> bool | None:
    webhook = _require_webhook(instance, "ReleaseProfileConfig")
    from . import calls

    return calls.release_profile_config(context, webhook, device, claim_uid, config)


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    """The example BYODP server, wrapped in the core emulator kit."""
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from .emulator import write_sample_host

    return write_sample_host(dest, variant)


@hookimpl
def sample_variants() -> list[str]:
    """The default sample under its own name."""
    return ["bare-metal"]


@hookimpl
def plugin_settings() -> list[Setting]:
    """TLS files and timeouts of the BYODP client (see :mod:`.endpoint`)."""
    from dranet_cloud.settings import Setting

    return [
        Setting("ca_bundle", "path", "CA bundle that signs the webhook's certificate"),
        Setting("client_cert", "path", "client certificate for mutual TLS"),
        Setting("client_key", "path", "client key for mutual TLS"),
        Setting("timeout", "seconds", "per-request timeout"),
        Setting("health_wait", "seconds", "how long start-up polls /health"),
    ]
