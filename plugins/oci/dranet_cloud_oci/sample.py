"""A fake ``BM.GPU.H100.8`` node matching the emulator's default fixture.

* ``eth0``: the front-end NIC (``mlx5_core``, ``0000:1f:00.0``) carrying the
  primary VNIC, the only one ``/opc/v2/vnics/`` lists;
* ``rdma0``-``rdma15``: the sixteen RoCE ports of the eight dual-port
  ConnectX-7 NICs (``mlx5_0``-``mlx5_15``) of the cluster network, at MTU
  4220; they are not VNICs, so they get the host's topology attributes only.

There is no claim device: OCI has no profile role (DRANET's OKE provider
answers attributes only).
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from .constants import DMI_CHASSIS_ASSET_TAG

ETH0 = ("eth0", "04:3f:72:d0:1a:20", "0000:1f:00.0")
RDMA_BUSES = ("0c", "2a", "41", "58", "86", "a5", "bd", "d5")
RDMA_NICS = tuple(
    (
        f"rdma{2 * i + port}",
        f"a0:88:c2:1b:{0x40 + i:02x}:{0x10 + port:02x}",
        f"0000:{bus}:00.{port}",
        f"mlx5_{2 * i + port}",
    )
    for i, bus in enumerate(RDMA_BUSES)
    for port in (0, 1)
)


def bm_gpu_h100_8_host(dest: Path) -> SampleHost:
    name, mac, pci = ETH0
    builder = (
        HostRootBuilder(dest)
        .dmi(
            sys_vendor="Oracle Corporation",
            product_name="BM.GPU.H100.8",
            bios_vendor="American Megatrends International, LLC.",
            chassis_vendor="Oracle Corporation",
            chassis_asset_tag=DMI_CHASSIS_ASSET_TAG,
        )
        .nic(name, mac, mtu=9000, pci=pci, driver="mlx5_core")
    )
    for nic, nic_mac, nic_pci, rdma in RDMA_NICS:
        builder.nic(nic, nic_mac, mtu=4220, pci=nic_pci, driver="mlx5_core")
        builder.infiniband(rdma, nic_pci)
    root = builder.build()
    return SampleHost(
        root=root,
        description=(
            "OCI BM.GPU.H100.8: eth0 (primary VNIC) and sixteen RoCE ports rdma0-rdma15 "
            "(ConnectX-7, cluster network)"
        ),
        claim_device=None,
    )


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """The variant's host root written under ``dest``; ``None`` for unknown variants."""
    key = (variant or "default").strip().lower()
    if key in ("default", "bm-gpu-h100-8"):
        return bm_gpu_h100_8_host(dest)
    return None
