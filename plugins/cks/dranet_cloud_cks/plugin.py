"""Hook implementations of the CKS plugin (the ``cks`` entry point, alias ``CKS``).

Thin on purpose: detection and the instance read are their modules'
functions, marked here (pluggy passes each only the arguments it names).
Local evidence is configuration, not hardware (CKS nodes carry no DMI
marker; see :mod:`.detection`).  It ranks after every hardware evidence, and
the confirmation reads the Node and checks its ``cks.coreweave.com/cluster``
label, as DRANET does.  The metadata source is the Node itself
(:mod:`.metadata_source`).  The emulator and the sample node are imported
inside their hooks, so a node daemon never loads the test kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers

from . import attributes, detection, labels, metadata_source
from .snapshot import CksInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)


@hookimpl
def provider_aliases() -> list[str]:
    return ["CKS", "coreweave"]


@hookimpl
def plugin_settings() -> list[Setting]:
    return []


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    if not isinstance(instance, CksInstance):
        return None
    return attributes.device_attributes(context, instance, device)


@hookimpl
def attribute_ranking() -> list[str]:
    return list(labels.RANKING)


@hookimpl
def device_config() -> None:
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
