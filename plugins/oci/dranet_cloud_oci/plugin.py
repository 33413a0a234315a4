"""Hook implementations of the OCI plugin (the ``oci`` entry point).

Thin on purpose: each hook hands over to the module that holds the logic.
The metadata client (httpx) and the pydantic models are imported inside the
hooks that need them, so loading the plugin for local evidence (every CLI
command, every auto-detection) imports neither.  OCI has no profile role and
no device config: DRANET's OKE provider publishes attributes only, and an
RDMA NIC of a bare-metal GPU shape is not a VNIC the metadata could route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.hookspecs import hookimpl

from . import detection

if TYPE_CHECKING:
    from pathlib import Path

    from dranet_cloud.context import InstanceSnapshot, ProviderContext, SampleHost
    from dranet_cloud.models import AttributeMap, DeviceIdentifiers, NetworkConfig
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
    from .snapshot import OciInstance

    ours = instance if isinstance(instance, OciInstance) else None
    return attributes.device_attributes(context.host_root, ours, device)


@hookimpl
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
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
    from .constants import (
        GPU_MEMORY_FABRIC_ID,
        HPC_ISLAND_ID,
        LOCAL_BLOCK_ID,
        NETWORK_BLOCK_ID,
        RACK_ID,
        SUBNET_CIDR_BLOCK,
        VIRTUAL_ROUTER_IP,
        VNIC_ID,
    )

    return [
        LOCAL_BLOCK_ID,
        NETWORK_BLOCK_ID,
        HPC_ISLAND_ID,
        GPU_MEMORY_FABRIC_ID,
        RACK_ID,
        VNIC_ID,
        SUBNET_CIDR_BLOCK,
        VIRTUAL_ROUTER_IP,
    ]


@hookimpl
def host_paths() -> list[str]:
    """The node directories read under the host root: DMI (detection) and the NICs' sysfs."""
    return ["/sys"]
