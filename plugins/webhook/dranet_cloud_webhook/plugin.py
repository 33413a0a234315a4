"""Hook implementations of the webhook (BYODP client) plugin.

Thin on purpose: each hook hands over to the module that holds the logic,
as in every plugin (detection and the instance read are those modules'
functions, marked here).  The webhook maps onto the plugin skeleton like
this: detection (:mod:`.detection`) is a configured URL, confirmed by
``/health``; the metadata source (:mod:`.metadata_source`) is the webhook
itself, whose ``/health`` handshake is the snapshot (:mod:`.snapshot`); the
attribute, device-config and profile hooks (:mod:`.attributes`,
:mod:`.routing`, :mod:`.profile`) each forward one BYODP call
(:mod:`.calls`).  URL and TLS handling live in :mod:`.endpoint`, HTTP in
:mod:`.client`.  The emulator and the sample node are imported inside their
hooks, so a node daemon never loads the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

from . import attributes, detection, metadata_source, profile, routing
from .constants import PLUGIN
from .snapshot import WebhookInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    if not isinstance(instance, WebhookInstance):
        return None
    return attributes.device_attributes(context, instance, device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    if not isinstance(instance, WebhookInstance):
        return None
    return routing.device_config(context, instance, device)


def _require_webhook(instance: InstanceSnapshot, what: str) -> WebhookInstance:
    if not isinstance(instance, WebhookInstance):
        raise ProviderUnavailable(
            f"{PLUGIN}: {what} was called without the webhook's own snapshot "
            f"(got {type(instance).__name__}); the host must load the webhook with "
            f"instance_properties first"
        )
    return instance


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
