"""Hook implementations of the webhook (BYODP client) plugin.

Thin on purpose: each hook hands over to the module that holds the logic,
as in every plugin.  The webhook maps onto the plugin skeleton like this:
detection (:mod:`.detection`) is a configured URL, confirmed by ``/health``;
the metadata source (:mod:`.metadata_source`) is the webhook itself, whose
``/health`` handshake is the snapshot (:mod:`.snapshot`); the attribute,
device-config and profile hooks (:mod:`.attributes`, :mod:`.routing`,
:mod:`.profile`) each forward one BYODP call (:mod:`.calls`).  URL and TLS
handling live in :mod:`.endpoint`, HTTP in :mod:`.client`.  Those import
the HTTP stack, so they are imported inside the hooks: loading the plugin
for ``local_evidence`` (every node, every start) imports neither httpx,
pydantic nor ssl.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.errors import ProviderUnavailable
from dranet_cloud.hookspecs import hookimpl

from . import detection
from .constants import PLUGIN

if TYPE_CHECKING:
    from pathlib import Path

    from dranet_cloud.claims import ClaimReference
    from dranet_cloud.context import InstanceSnapshot, ProviderContext, SampleHost
    from dranet_cloud.models import AttributeMap, DeviceIdentifiers, NetworkConfig
    from dranet_cloud.settings import Setting
    from dranet_cloud.testing.emulator import Emulator

    from .snapshot import WebhookInstance


@hookimpl
def local_evidence(context: ProviderContext) -> str | None:
    return detection.local_evidence(context)


@hookimpl
def confirm_environment(context: ProviderContext, timeout: float) -> str | None:
    return detection.confirm(context, timeout)


@hookimpl
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    from . import metadata_source

    return metadata_source.load_instance(context, deadline)


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
    from . import attributes

    return attributes.device_attributes(context, webhook, device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    webhook = _webhook(instance)
    if webhook is None:
        return None
    from . import routing

    return routing.device_config(context, webhook, device)


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
    from . import profile

    return profile.profile_config(context, webhook, device, claim_uid, config, claim)


@hookimpl
def release_profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
) -> bool | None:
    webhook = _require_webhook(instance, "ReleaseProfileConfig")
    from . import profile

    return profile.release_profile_config(context, webhook, device, claim_uid, config)


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    """The example BYODP server, wrapped in the core emulator kit."""
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from . import sample

    return sample.build_sample_host(dest, variant)


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


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: nothing: the remote provider answers, the
    core resolves the NIC.
    """
    return []
