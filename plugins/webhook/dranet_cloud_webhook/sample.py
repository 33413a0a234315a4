"""The webhook's sample host: a bare-metal GPU server whose NICs the example webhook knows.

A BYODP webhook has no cloud DMI marker and no metadata server, so the
sample node is what a vendor's own hardware looks like: a management NIC
and two RDMA-capable NICs.  ``dranet-cloud demo --plugin webhook`` runs it
against the example webhook (:mod:`.emulator`), which supplies the
attributes, the MTU and the addresses.  Variants: ``None`` or
``bare-metal``.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

# The NICs of the sample node: a bare-metal GPU server with a management NIC
# and two RDMA-capable NICs the webhook knows about.
SAMPLE_NICS = (
    ("eth0", "0c:42:a1:00:00:10", 1500, "0000:01:00.0", "igb"),
    ("eth1", "0c:42:a1:00:00:11", 9000, "0000:41:00.0", "mlx5_core"),
    ("eth2", "0c:42:a1:00:00:12", 9000, "0000:c1:00.0", "mlx5_core"),
)
SAMPLE_CLAIM_DEVICE = "eth1"


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    if variant not in (None, "bare-metal"):
        return None
    builder = HostRootBuilder(dest).dmi(
        sys_vendor="Supermicro", product_name="SYS-821GE-TNHR", bios_vendor="American Megatrends"
    )
    for name, mac, mtu, pci, driver in SAMPLE_NICS:
        builder.nic(name, mac, mtu=mtu, pci=pci, driver=driver)
    root = builder.build()
    return SampleHost(
        root=root,
        description="bare-metal GPU server (Supermicro) with two mlx5 NICs; the webhook "
        "supplies attributes, MTU and addresses",
        claim_device=SAMPLE_CLAIM_DEVICE,
    )
