"""Hook implementations of the CKS plugin (the ``cks`` entry point, alias ``CKS``).

Thin on purpose: each hook hands over to the module that holds the logic.
Local evidence is configuration, not hardware (CKS nodes carry no DMI
marker; see :mod:`.detection`).  It ranks after every hardware evidence, and
the confirmation reads the Node and checks its ``cks.coreweave.com/cluster``
label, as DRANET does.  The metadata source is the Node itself
(:mod:`.metadata_source`).  Everything that needs pydantic or the Kubernetes
client is imported inside the hooks.
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


@hookimpl
def provider_aliases() -> list[str]:
    return ["CKS", "coreweave"]


@hookimpl
def plugin_settings() -> list[Setting]:
    return []


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
    from .snapshot import CksInstance

    if not isinstance(instance, CksInstance):
        return None
    return attributes.device_attributes(context, instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    from .labels import RANKING

    return list(RANKING)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """None: CKS labels define no addresses, routes or MTU (as in DRANET)."""
    return None


@hookimpl
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    from .emulator import build_emulator

    return build_emulator(fixture, listen, faults)


@hookimpl
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    from . import sample

    return sample.build_sample_host(dest, variant)


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: the NICs' sysfs (the cloud's facts are on the
    Node object).
    """
    return ["/sys"]
