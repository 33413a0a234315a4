"""Hook implementations of the OCI plugin (the ``oci`` entry point).

Thin on purpose: detection and the instance read are their modules'
functions, marked here (pluggy passes each only the arguments it names);
the attribute hook picks the plugin's own snapshot out of what the host
passes.  OCI has no profile role and no device config: DRANET's OKE
provider publishes attributes only, and an RDMA NIC of a bare-metal GPU
shape is not a VNIC the metadata could route.  The emulator and the sample
node are imported inside their hooks, so a node daemon never loads the test
kit.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import Emulator, hookimpl
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers

from . import attributes, constants, detection, metadata_source
from .snapshot import OciInstance

local_evidence = hookimpl(detection.local_evidence)
confirm_environment = hookimpl(detection.confirm)
instance_properties = hookimpl(metadata_source.load_instance)


@hookimpl
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    ours = instance if isinstance(instance, OciInstance) else None
    return attributes.device_attributes(context.host_root, ours, device)


@hookimpl
def device_config() -> None:
    """Nothing, as DRANET's OKE provider: OCI gives no per-device network config."""
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
def sample_variants() -> list[str]:
    """The default sample under its shape's name."""
    return ["bm-gpu-h100-8"]


@hookimpl
def provider_aliases() -> list[str]:
    """DRANET calls this provider ``OKE``; ``oracle`` is the cloud's own name."""
    return ["OKE", "oracle"]


@hookimpl
def attribute_ranking() -> list[str]:
    """DRANET's five first, the closest topology grouping ahead; VNIC facts last."""
    return [
        constants.LOCAL_BLOCK_ID,
        constants.NETWORK_BLOCK_ID,
        constants.HPC_ISLAND_ID,
        constants.GPU_MEMORY_FABRIC_ID,
        constants.RACK_ID,
        constants.VNIC_ID,
        constants.SUBNET_CIDR_BLOCK,
        constants.VIRTUAL_ROUTER_IP,
    ]


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI (detection) and the NICs' sysfs."""
    return ["/sys"]
