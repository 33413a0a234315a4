"""A fake ``a3-megagpu-8g`` host root that matches the emulator's default fixture.

The NICs' MACs are read from the fixture itself, so the sample host and the
emulator cannot drift apart.  Names, PCI addresses and the ``gve`` driver are
what a Container-Optimized OS node of that machine type shows.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from .emulator import load_fixture

VARIANTS = (None, "a3-megagpu-8g")
PRIMARY_PCI = "0000:00:04.0"
GPU_NIC_PCI = (
    "0000:06:00.0",
    "0000:07:00.0",
    "0000:0c:00.0",
    "0000:0d:00.0",
    "0000:86:00.0",
    "0000:87:00.0",
    "0000:8c:00.0",
    "0000:8d:00.0",
)
SERIAL = "GoogleCloud-3F1D6A0B27C94E8E9A5D0C4B2E71F6A8"


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """Write the host root under ``dest``; ``None`` for an unknown variant."""
    if variant not in VARIANTS:
        return None
    tree = load_fixture(None)
    nics = tree["instance"]["networkInterfaces"]
    builder = HostRootBuilder(dest).dmi(
        sys_vendor="Google",
        product_name="Google Compute Engine",
        product_serial=SERIAL,
        bios_vendor="Google",
        board_vendor="Google",
        chassis_vendor="Google",
    )
    pcis = (PRIMARY_PCI, *GPU_NIC_PCI)
    for index, nic in enumerate(nics):
        builder.nic(
            f"eth{index}",
            nic["mac"],
            mtu=int(nic.get("mtu", 1460)),
            pci=pcis[index] if index < len(pcis) else None,
            driver="gve" if index < len(pcis) else None,
        )
    root = builder.build()
    return SampleHost(
        root=root,
        description=(
            f"a3-megagpu-8g node: DMI says Google Compute Engine; eth0 primary NIC "
            f"(alias range + IPv6) and eth1-eth{len(nics) - 1} GPU NICs, gve driver"
        ),
        claim_device="eth0",
    )
