"""Hook implementations of the Azure plugin (the ``azure`` entry point).

Thin on purpose: each hook hands over to the module that holds the logic.
The metadata client (httpx) and the pydantic models are imported inside the
hooks that need them, so loading the plugin for local evidence (every CLI
command, every auto-detection) imports neither.  The profile role serves one
profile, ``azure-ipoib`` (see :mod:`.profile`): an InfiniBand NIC's address
from the Hyper-V KVP pool, which DRANET's own Azure provider does not offer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.hookspecs import hookimpl

from . import detection

if TYPE_CHECKING:
    from pathlib import Path

    from dranet_cloud.context import InstanceSnapshot, ProviderContext, SampleHost
    from dranet_cloud.models import AttributeMap, DeviceIdentifiers, NetworkConfig
    from dranet_cloud.settings import Setting
    from dranet_cloud.testing.emulator import Emulator

    from .snapshot import AzureInstance


def _ours(instance: InstanceSnapshot | None) -> AzureInstance | None:
    from .snapshot import AzureInstance

    return instance if isinstance(instance, AzureInstance) else None


@hookimpl
def local_evidence(context: ProviderContext) -> str | None:
    return detection.local_evidence(context)


@hookimpl
def confirm_environment(context: ProviderContext, timeout: float) -> str | None:
    return detection.confirm(context, timeout)


@hookimpl
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    from . import metadata_source
    from .profile import settings

    settings(context)  # a bad --set azure.* stops the start, not the first claim
    return metadata_source.load_instance(context, deadline)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    from . import attributes

    return attributes.device_attributes(context.host_root, _ours(instance), device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    from . import routing

    return routing.device_config(context.host_root, _ours(instance), device)


@hookimpl
def profile_config(
    context: ProviderContext, device: DeviceIdentifiers, config: NetworkConfig
) -> NetworkConfig | None:
    """The azure-ipoib answer (see :mod:`.profile`): it needs no other argument."""
    from . import profile

    return profile.profile_config(context, device, config)


@hookimpl
def release_profile_config() -> bool:
    """Nothing to free: the host owns the KVP mapping, this plugin only reads it."""
    return True


@hookimpl
def plugin_settings() -> list[Setting]:
    """The ``azure-ipoib`` profile's settings (see :mod:`.profile`)."""
    from dranet_cloud.settings import Setting

    return [
        Setting("ipoib_prefix_length", "int", "prefix length of azure-ipoib addresses (16)"),
        Setting(
            "kvp_pool", "path", "node path of the Hyper-V KVP pool (/var/lib/hyperv/.kvp_pool_0)"
        ),
        Setting("kvp_reread", "seconds", "re-read the KVP pool when older than this (5)"),
    ]


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from . import sample

    return sample.build_sample_host(dest, variant)


@hookimpl
def sample_variants() -> list[str]:
    """The default sample under its VM size's name."""
    return ["nd-h100-v5"]


@hookimpl
def provider_aliases() -> list[str]:
    """DRANET calls this provider ``AZURE`` in ``--cloud-provider-hint``."""
    return ["AZURE"]


@hookimpl
def attribute_ranking() -> list[str]:
    """DRANET's four first, the fabric-defining ones ahead; the pairing marks last."""
    from .constants import (
        ACCELERATED_NETWORKING,
        ACCELERATED_NETWORKING_VF,
        INTERCONNECT_GROUP_ID,
        INTERCONNECT_SUBGROUP_ID,
        IPV4_SUBNET,
        PLACEMENT_GROUP_ID,
        VM_SIZE,
    )

    return [
        PLACEMENT_GROUP_ID,
        INTERCONNECT_GROUP_ID,
        INTERCONNECT_SUBGROUP_ID,
        VM_SIZE,
        IPV4_SUBNET,
        ACCELERATED_NETWORKING_VF,
        ACCELERATED_NETWORKING,
    ]


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI, the netvsc/VF pairs, the IPv6 default
    route (``/proc/net/ipv6_route``) and the azure-ipoib profile's Hyper-V KVP pool
    (``/var/lib/hyperv/.kvp_pool_0``).
    """
    return ["/proc/net", "/sys", "/var/lib/hyperv"]
