"""Hook implementations of the AWS plugin (the ``aws`` entry point).

Kept thin: each hook delegates to the module that holds the logic.  The
emulator and sample host are imported lazily so a node daemon never loads the
test kit.  The snapshot model, attributes, routing and profile modules (all
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
    from .snapshot import AwsInstance

    if not isinstance(instance, AwsInstance):
        return None
    return attributes.device_attributes(context, instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    from .attributes import RANKING

    return list(RANKING)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    from . import routing
    from .snapshot import AwsInstance

    if not isinstance(instance, AwsInstance):
        return None
    eni = instance.eni(device.mac)
    return routing.eni_config(eni) if eni is not None else None


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
    from .snapshot import AwsInstance

    ours = instance if isinstance(instance, AwsInstance) else None
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
    """The Nitro, Xen and Trainium nodes ``sample_host`` writes."""
    from . import sample

    return [variant for variant in sample.VARIANTS if variant is not None]


@hookimpl
def plugin_settings() -> list[Setting]:
    """``aws.allow_imdsv1`` and ``aws.endpoint_mode`` (see :mod:`.metadata_source`)."""
    from dranet_cloud.settings import Setting

    return [
        Setting("allow_imdsv1", "bool", "accept an IMDS that issues no session tokens"),
        Setting("endpoint_mode", "choice", "IMDS over IPv4 or IPv6", ("ipv4", "ipv6")),
    ]


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI and ``/sys/hypervisor/uuid`` (detection),
    the EFA devices' PCI functions.
    """
    return ["/sys"]
