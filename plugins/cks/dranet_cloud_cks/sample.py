"""A fake CKS B200 node matching the emulator's default Node fixture.

* DMI of the server maker (CKS nodes carry no cloud marker in DMI);
* eight backend InfiniBand HCAs (ConnectX, ``mlx5_core``) whose RDMA devices
  and IPoIB netdevs are both named ``ibp0``..``ibp7``, as on CKS; the Node
  has a leaf-switch label for each;
* one frontend Ethernet NIC with an RDMA device ``mlx5_8`` that is not on the
  backend fabric, so it gets no ``leafSwitch`` (DRANET's example DeviceClass
  relies on exactly that);
* one more HCA with no netdev (as with DRANET's ``--move-ib-interfaces=false``),
  which still gets its leaf switch through its PCI address.

Variants: ``None`` only.  The claim device is ``None``: CKS has no profile role.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from .emulator import load_fixture
from .labels import NEIGHBOR_PREFIX, NEIGHBOR_SUFFIX

BACKEND_HCAS = (
    "0000:1a:00.0",
    "0000:3c:00.0",
    "0000:4d:00.0",
    "0000:5e:00.0",
    "0000:9c:00.0",
    "0000:bc:00.0",
    "0000:cc:00.0",
)
IB_ONLY_HCA = "0000:dc:00.0"  # ibp7: RDMA device only, its netdev not shown
FRONTEND = ("enp6s0f0np0", "0000:06:00.0", "mlx5_8", "b8:3f:d2:4a:19:c0")


def ipoib_address(index: int) -> str:
    """A 20-byte IPoIB hardware address (QPN + port GID), as the kernel prints it."""
    return f"00:00:10:49:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:4a:19:{index:02x}"


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    if variant is not None:
        return None
    node = load_fixture(None)
    labels = node["metadata"]["labels"]
    switches = sorted(
        k.removeprefix(NEIGHBOR_PREFIX).removesuffix(NEIGHBOR_SUFFIX)
        for k in labels
        if k.startswith(NEIGHBOR_PREFIX)
    )
    b = HostRootBuilder(dest)
    b.dmi(
        sys_vendor="Supermicro",
        product_name="SYS-A22GA-NBRT",
        board_vendor="Supermicro",
        chassis_vendor="Supermicro",
    )
    name, pci, rdma, mac = FRONTEND
    b.nic(name, mac, mtu=9000, pci=pci, driver="mlx5_core").infiniband(rdma, pci)
    b.file(f"/sys/bus/pci/devices/{pci}/numa_node", "0\n")
    for index, pci in enumerate((*BACKEND_HCAS, IB_ONLY_HCA)):
        ib = f"ibp{index}"
        if pci != IB_ONLY_HCA:
            b.nic(ib, ipoib_address(index), mtu=4092, pci=pci, driver="mlx5_core")
        else:
            b.pci_device(pci, driver="mlx5_core")
        b.infiniband(ib, pci)
        b.file(f"/sys/bus/pci/devices/{pci}/numa_node", f"{index * 2 // 8}\n")
    root = b.build()
    return SampleHost(
        root=root,
        description=(
            f"CKS node {node['metadata']['name']} ({labels.get('node.kubernetes.io/instance-type')}"
            f"): backend HCAs ibp0-ibp{len(BACKEND_HCAS)} (leaf-switch labels for "
            f"{', '.join(switches)}; ibp{len(BACKEND_HCAS)} without a netdev), frontend {name} "
            f"with RDMA device {rdma} off the fabric"
        ),
        claim_device=None,
    )
