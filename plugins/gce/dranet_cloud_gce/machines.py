"""What GCE machine types imply about their accelerator NICs.

Google documents one GPUDirect networking stack per accelerator-optimized
machine type, so the protocol is a lookup, not something read from the node.
Values match the strings DRANET's Go provider publishes, so selectors written
for it keep working.
"""

from __future__ import annotations

GPUDIRECT_TCPX = "GPUDirect-TCPX"
GPUDIRECT_TCPXO = "GPUDirect-TCPXO"
GPUDIRECT_RDMA = "GPUDirect-RDMA"

GPUDIRECT_BY_MACHINE_TYPE: dict[str, str] = {
    "a3-highgpu-1g": GPUDIRECT_TCPX,
    "a3-highgpu-2g": GPUDIRECT_TCPX,
    "a3-highgpu-4g": GPUDIRECT_TCPX,
    "a3-highgpu-8g": GPUDIRECT_TCPX,
    "a3-edgegpu-8g": GPUDIRECT_TCPX,
    "a3-megagpu-8g": GPUDIRECT_TCPXO,
    "a3-ultragpu-8g": GPUDIRECT_RDMA,
    "a4-highgpu-8g": GPUDIRECT_RDMA,
}


def gpudirect_for(machine_type: str | None) -> str | None:
    """The GPUDirect protocol of a machine type's base name, or ``None``."""
    if not machine_type:
        return None
    return GPUDIRECT_BY_MACHINE_TYPE.get(machine_type)
