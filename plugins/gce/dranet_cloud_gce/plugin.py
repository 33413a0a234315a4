"""Hook implementations of the GCE plugin (the ``gce`` entry point).

Kept thin: each hook delegates to the module that holds the logic.  The
metadata client (httpx) is imported on first network use, so loading the
plugin and checking local evidence stay cheap for every CLI command; the
emulator and sample host are imported lazily so a node daemon never loads the
test kit.  The instance model, attributes, routing and profile modules (all
pydantic) are imported inside the hooks that use them, so auto-detection,
which only calls ``local_evidence``, imports neither pydantic nor httpx.
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


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    from . import attributes
    from .snapshot import GceInstance

    if not isinstance(instance, GceInstance):
        return None
    return attributes.device_attributes(instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    """Topology and network first (what claims select by); descriptions last."""
    from . import attributes as a

    return [
        a.ATTR_NETWORK_NAME,
        a.ATTR_BLOCK,
        a.ATTR_SUB_BLOCK,
        a.ATTR_HOST,
        a.ATTR_MACHINE_TYPE,
        a.ATTR_GPU_DIRECT,
        a.ATTR_NETWORK_PROJECT_NUMBER,
        a.ATTR_IP_ALIASES,
    ]


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    from . import routing
    from .snapshot import GceInstance

    if not isinstance(instance, GceInstance):
        return None
    nic = instance.nic_for(device)
    return routing.nic_config(nic) if nic is not None else None


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
    from .snapshot import GceInstance

    ours = instance if isinstance(instance, GceInstance) else None
    return profile.profile_config(context, ours, device, claim_uid, config, claim)


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
    """The machine types ``sample_host`` writes besides the default one."""
    from .sample import VARIANTS

    return [v for v in VARIANTS if v]


@hookimpl
def plugin_settings() -> list[Setting]:
    """GCE reads no ``--set`` keys (endpoint overrides come from the environment)."""
    return []


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI (detection) and the NICs' sysfs."""
    return ["/sys"]
