"""Hook implementations of the Azure plugin (the ``azure`` entry point).

Thin on purpose: a hook whose logic already takes the hook's arguments is
that function, marked here (pluggy passes an implementation only the
arguments it names); the others hand over to their module.  The profile
role serves one profile, ``azure-ipoib`` (see :mod:`.profile`): an
InfiniBand NIC's address from the Hyper-V KVP pool, which DRANET's own
Azure provider does not offer.  The emulator and the sample node are
imported inside their hooks, so a node daemon never loads the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

from . import attributes, constants, detection, metadata_source, profile, routing
from .snapshot import AzureInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
profile_config = hookimpl(profile.profile_config)


def _ours(instance: InstanceSnapshot | None) -> AzureInstance | None:
    return instance if isinstance(instance, AzureInstance) else None


@hookimpl
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    profile.settings(context)  # a bad --set azure.* stops the start, not the first claim
    return metadata_source.load_instance(context, deadline)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    return attributes.device_attributes(context.host_root, _ours(instance), device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    return routing.device_config(context.host_root, _ours(instance), device)


@hookimpl
def release_profile_config() -> bool:
    """Nothing to free: the host owns the KVP mapping, this plugin only reads it."""
    return True


@hookimpl
def plugin_settings() -> list[Setting]:
    """The ``azure-ipoib`` profile's settings (see :mod:`.profile`)."""
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
    return [
        constants.PLACEMENT_GROUP_ID,
        constants.INTERCONNECT_GROUP_ID,
        constants.INTERCONNECT_SUBGROUP_ID,
        constants.VM_SIZE,
        constants.IPV4_SUBNET,
        constants.ACCELERATED_NETWORKING_VF,
        constants.ACCELERATED_NETWORKING,
    ]


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI, the netvsc/VF pairs, the IPv6 default
    route (``/proc/net/ipv6_route``) and the azure-ipoib profile's Hyper-V KVP pool
    (``/var/lib/hyperv/.kvp_pool_0``).
    """
    return ["/proc/net", "/sys", "/var/lib/hyperv"]
