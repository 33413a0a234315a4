"""The CKS instance snapshot: the Node's labels this plugin reads, and the
node's RDMA devices by PCI address (read once, like DRANET, when the
snapshot is loaded by :mod:`.metadata_source`)."""

from __future__ import annotations

from pydantic import Field

from dranet_cloud.contract.snapshot import InstanceSnapshot
from dranet_cloud.node.hostroot import HostRoot

from .labels import normalize_pci


class CksInstance(InstanceSnapshot):
    node_name: str
    labels: dict[str, str] = Field(default_factory=dict)
    rdma_by_pci: dict[str, str] = Field(default_factory=dict)  # normalized PCI -> RDMA device


def rdma_devices_by_pci(root: HostRoot) -> dict[str, str]:
    """``/sys/class/infiniband/*/device`` -> RDMA device, first name wins (sorted)."""
    out: dict[str, str] = {}
    for dev, pci in root.infiniband_pci_addresses().items():
        out.setdefault(normalize_pci(pci), dev)
    return out
