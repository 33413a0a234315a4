"""Hook implementations of the Alibaba Cloud (ECS) plugin.

Thin on purpose: a hook whose logic already takes the hook's arguments is
that function, marked here (pluggy passes an implementation only the
arguments it names); the attribute and device-config hooks pick the
plugin's own snapshot out of what the host passes.  Nothing is kept at
module level; the snapshot the host passes back carries all the state.  The
emulator and the sample hosts are imported inside their hooks, so a node
daemon never loads the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

from . import attributes, detection, metadata_source, profile, routing
from .snapshot import AliyunInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)
profile_config = hookimpl(profile.profile_config)
release_profile_config = hookimpl(profile.release_profile_config)


def _ours(instance: InstanceSnapshot | None) -> AliyunInstance | None:
    return instance if isinstance(instance, AliyunInstance) else None


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    return attributes.device_attributes(context.host_root, _ours(instance), device)


@hookimpl
def attribute_ranking() -> list[str]:
    """eRDMA and placement first (what claims select by); IDs that only describe last."""
    return [
        attributes.ERDMA,
        attributes.INSTANCE_TYPE,
        attributes.ZONE_ID,
        attributes.VSWITCH_ID,
        attributes.VPC_ID,
        attributes.NETWORK_INTERFACE_ID,
        attributes.REGION_ID,
    ]


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    return routing.device_config(context.host_root, _ours(instance), device)


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
