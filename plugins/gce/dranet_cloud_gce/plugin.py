"""Hook implementations of the GCE plugin (the ``gce`` entry point).

Detection, the metadata read and the release are their modules' functions,
marked as hooks here (pluggy passes each only the arguments it names); the
other hooks pick the plugin's own snapshot out of what the host passes and
hand over.  The emulator and sample hooks import their modules when called,
so a node daemon never loads the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

from . import attributes, detection, metadata_source, profile, routing
from .snapshot import GceInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)
profile_config = hookimpl(profile.profile_config)
release_profile_config = hookimpl(profile.release_profile_config)


@hookimpl
def device_attributes(
    instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    if not isinstance(instance, GceInstance):
        return None
    return attributes.device_attributes(instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    """Topology and network first (what claims select by); descriptions last."""
    return [
        attributes.ATTR_NETWORK_NAME,
        attributes.ATTR_BLOCK,
        attributes.ATTR_SUB_BLOCK,
        attributes.ATTR_HOST,
        attributes.ATTR_MACHINE_TYPE,
        attributes.ATTR_GPU_DIRECT,
        attributes.ATTR_NETWORK_PROJECT_NUMBER,
        attributes.ATTR_IP_ALIASES,
    ]


@hookimpl
def device_config(instance: InstanceSnapshot, device: DeviceIdentifiers) -> NetworkConfig | None:
    nic = instance.nic_for(device) if isinstance(instance, GceInstance) else None
    return routing.nic_config(nic) if nic is not None else None


@hookimpl
def sample_variants() -> list[str]:
    """The machine types ``sample_host`` writes besides the default one."""
    from .sample import VARIANTS

    return [v for v in VARIANTS if v]


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from .sample import build_sample_host

    return build_sample_host(dest, variant)


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def plugin_settings() -> list[Setting]:
    """GCE reads no ``--set`` keys (endpoint overrides come from the environment)."""
    return []


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI (detection) and the NICs' sysfs."""
    return ["/sys"]
