"""Hook implementations of the Alibaba Cloud (ECS) plugin.

Thin on purpose: each hook hands over to the module that holds the logic
(detection, metadata_source, attributes, routing, profile, emulator, sample).
Nothing is kept at module level; the snapshot the host passes back carries
all the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.hookspecs import hookimpl

from . import detection

if TYPE_CHECKING:
    from pathlib import Path

    from dranet_cloud.claims import ClaimReference
    from dranet_cloud.context import InstanceSnapshot, ProviderContext, SampleHost
    from dranet_cloud.models import AttributeMap, DeviceIdentifiers, NetworkConfig
    from dranet_cloud.settings import Setting
    from dranet_cloud.testing.emulator import Emulator

    from .snapshot import AliyunInstance

# The metadata client (httpx), the pydantic models (snapshot, attributes,
# routing, profile), the emulator and the sample hosts are imported inside the
# hooks that need them, so loading the plugin for local evidence (every CLI
# command, every auto-detection) imports neither pydantic nor httpx.


def _ours(instance: InstanceSnapshot | None) -> AliyunInstance | None:
    from .snapshot import AliyunInstance

    return instance if isinstance(instance, AliyunInstance) else None


@hookimpl
def local_evidence(context: ProviderContext) -> str | None:
    return detection.local_evidence(context)


@hookimpl
def confirm_environment(context: ProviderContext, timeout: float) -> str | None:
    return detection.confirm(context, timeout)


@hookimpl
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    from .metadata_source import load_instance

    return load_instance(context, deadline)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    from . import attributes

    return attributes.device_attributes(context.host_root, _ours(instance), device)


@hookimpl
def attribute_ranking() -> list[str]:
    """eRDMA and placement first (what claims select by); IDs that only describe last."""
    from . import attributes as a

    return [
        a.ERDMA,
        a.INSTANCE_TYPE,
        a.ZONE_ID,
        a.VSWITCH_ID,
        a.VPC_ID,
        a.NETWORK_INTERFACE_ID,
        a.REGION_ID,
    ]


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    from . import routing

    return routing.device_config(context.host_root, _ours(instance), device)


@hookimpl
def profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    from . import profile

    return profile.profile_config(context, device, claim_uid, config, claim)


@hookimpl
def release_profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
) -> bool | None:
    from . import profile

    return profile.release_profile_config(context, device, claim_uid)


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from .sample import build_sample_host

    return build_sample_host(dest, variant)


@hookimpl
def sample_variants() -> list[str]:
    """The eRDMA node (the default) and the LACP-bond node with eflo ranges."""
    from .sample import VARIANTS

    return list(VARIANTS)


@hookimpl
def provider_aliases() -> list[str]:
    """DRANET calls this provider ``ALIBABA`` in ``--cloud-provider-hint``."""
    return ["alibaba"]


@hookimpl
def plugin_settings() -> list[Setting]:
    """Alibaba Cloud reads no ``--set`` keys (endpoint overrides come from the environment)."""
    return []


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI, the eRDMA devices, and the parent NIC's
    IPv6 addresses and routes (``/proc/net/if_inet6``, ``/proc/net/ipv6_route``).
    """
    return ["/proc/net", "/sys"]
