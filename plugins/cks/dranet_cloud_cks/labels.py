"""What DRANET's CKS provider (PR #302) reads from the Node and publishes.

Facts only, no I/O: label names, attribute names, and the rules; the
metadata source (:mod:`.metadata_source`), the snapshot and the attribute
logic (:mod:`.attributes`) all read them from here.

* The node is CKS when the label ``cks.coreweave.com/cluster`` is non-empty.
* Every device gets ``coreweave.dra.net/<attr>`` from the node labels in
  :data:`NODE_ATTRIBUTES` (strings; empty labels are skipped).
* A device whose RDMA device is known gets ``leafSwitch`` from the label
  ``backend.coreweave.cloud/neighbors.expected.<rdmaDevice>.device``.  The
  RDMA device is the ``/sys/class/infiniband/<dev>`` whose ``device`` link
  points at the device's PCI function; without one, an interface name that
  starts with ``ibp`` is taken as the RDMA device's name.
* A value over 64 bytes is dropped (the API server's limit), not cut.
* No device config: the labels say nothing about addresses or routes.
"""

from __future__ import annotations

from collections.abc import Mapping

PLUGIN = "cks"
DOMAIN = "coreweave.dra.net"
CKS_CLUSTER_LABEL = "cks.coreweave.com/cluster"
NEIGHBOR_PREFIX = "backend.coreweave.cloud/neighbors.expected."
NEIGHBOR_SUFFIX = ".device"
IB_NAME_PREFIX = "ibp"
MAX_VALUE_BYTES = 64

# attribute name (under DOMAIN) -> Node label
NODE_ATTRIBUTES: dict[str, str] = {
    "fabricFlavor": "backend.coreweave.cloud/flavor",
    "fabric": "backend.coreweave.cloud/fabric",
    "superpod": "backend.coreweave.cloud/superpod",
    "leafgroup": "backend.coreweave.cloud/leafgroup",
    "leafgroupName": "backend.coreweave.cloud/leafgroup-name",
    "rack": "node.coreweave.cloud/rack",
    "speedCurrent": "backend.coreweave.cloud/speed.current",
    "speedExpected": "backend.coreweave.cloud/speed.expected",
    "instanceType": "node.kubernetes.io/instance-type",
}
LEAF_SWITCH = "leafSwitch"

# Most useful first (the host keeps these when a device's budget is short):
# the leaf switch is what a DeviceClass selects backend HCAs by; then the
# fabric location from coarse to fine; then descriptions.
RANKING = [
    f"{DOMAIN}/{n}"
    for n in (
        LEAF_SWITCH,
        "fabricFlavor",
        "fabric",
        "superpod",
        "leafgroup",
        "rack",
        "leafgroupName",
        "instanceType",
        "speedExpected",
        "speedCurrent",
    )
]


def qualified(name: str) -> str:
    return f"{DOMAIN}/{name}"


def neighbor_label(rdma_device: str) -> str:
    return f"{NEIGHBOR_PREFIX}{rdma_device}{NEIGHBOR_SUFFIX}"


def is_cks(labels: Mapping[str, str]) -> bool:
    return bool(labels.get(CKS_CLUSTER_LABEL))


def relevant(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels this plugin reads (the rest of a Node's labels stay out of the snapshot)."""
    wanted = set(NODE_ATTRIBUTES.values()) | {CKS_CLUSTER_LABEL}
    return {
        k: v
        for k, v in labels.items()
        if k in wanted or (k.startswith(NEIGHBOR_PREFIX) and k.endswith(NEIGHBOR_SUFFIX))
    }


def normalize_pci(address: str | None) -> str:
    """DRANET's key for a PCI address: lower case, without a ``0000:`` domain."""
    return (address or "").lower().removeprefix("0000:")
