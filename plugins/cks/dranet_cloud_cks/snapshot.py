"""The CKS instance snapshot: the Node's labels this plugin reads, and the
node's RDMA devices by PCI address (read once, like DRANET, when the
snapshot is loaded)."""

from __future__ import annotations

from pydantic import Field

from dranet_cloud.context import ProviderContext
from dranet_cloud.errors import ProviderUnavailable
from dranet_cloud.hostroot import HostRoot
from dranet_cloud.models import AttributeMap, DeviceAttribute, DeviceIdentifiers
from dranet_cloud.nic import resolve_nic
from dranet_cloud.snapshot import InstanceSnapshot

from . import labels as L

PLUGIN = "cks"


class CksInstance(InstanceSnapshot):
    node_name: str
    labels: dict[str, str] = Field(default_factory=dict)
    rdma_by_pci: dict[str, str] = Field(default_factory=dict)  # normalized PCI -> RDMA device

    def rdma_device(self, context: ProviderContext, device: DeviceIdentifiers) -> str | None:
        """The device's RDMA device: by its PCI function, else an ``ibp*`` interface name.

        The NIC is resolved by MAC, then PCI address, then name, so a gen1 DRA
        device name (``pci-0000-1a-00-0``) and a PCI-only device find it too.
        """
        nic = resolve_nic(context.host_root, device)
        pci = nic.pci_address
        found = self.rdma_by_pci.get(L.normalize_pci(pci)) if pci else None
        ifname = nic.ifname or ""
        if found is None and ifname.startswith(L.IB_NAME_PREFIX):
            found = ifname
        return found

    def device_attributes(
        self, context: ProviderContext, device: DeviceIdentifiers
    ) -> AttributeMap:
        label = device.label()
        values = L.node_values(self.labels, label)
        switch = L.leaf_switch(self.labels, self.rdma_device(context, device), label)
        if switch is not None:
            values[L.qualified(L.LEAF_SWITCH)] = switch
        return {k: DeviceAttribute(string=v) for k, v in values.items()}


def rdma_devices_by_pci(root: HostRoot) -> dict[str, str]:
    """``/sys/class/infiniband/*/device`` -> RDMA device, first name wins (sorted)."""
    out: dict[str, str] = {}
    for dev, pci in root.infiniband_pci_addresses().items():
        out.setdefault(L.normalize_pci(pci), dev)
    return out


def load_instance(context: ProviderContext, deadline: float) -> CksInstance:
    """Read the Node (fresh: at start and on every refresh) and check it is CKS."""
    source = context.node
    all_labels = source.labels(deadline, fresh=True)
    if not L.is_cks(all_labels):
        raise ProviderUnavailable(
            f"cks: {source.describe()} has no {L.CKS_CLUSTER_LABEL} label, so it is not a "
            "CoreWeave CKS node; use another --cloud-provider-hint, or check NODE_NAME"
        )
    return CksInstance(
        provider=PLUGIN,
        endpoint=source.describe(),
        node_name=source.node_name or "",
        labels=L.relevant(all_labels),
        rdma_by_pci=rdma_devices_by_pci(context.host_root),
    )
