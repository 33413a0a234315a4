"""Hook implementations of the AWS plugin (the ``aws`` entry point).

A hook whose logic already has the hook's arguments (pluggy passes an
implementation only the ones it names) is that function, marked here; the
others are thin functions that hand over to their module.  The emulator and
the sample node are imported inside their hooks: a node daemon never loads
the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

from . import attributes, detection, metadata_source, profile, routing
from .snapshot import AwsInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)
profile_config = hookimpl(profile.profile_config)
release_profile_config = hookimpl(profile.release_profile_config)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    if not isinstance(instance, AwsInstance):
        return None
    return attributes.device_attributes(context, instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    return list(attributes.RANKING)


@hookimpl
def device_config(instance: InstanceSnapshot, device: DeviceIdentifiers) -> NetworkConfig | None:
    eni = instance.eni(device.mac) if isinstance(instance, AwsInstance) else None
    return routing.eni_config(eni) if eni is not None else None


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
