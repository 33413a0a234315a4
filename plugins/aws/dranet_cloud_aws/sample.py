"""Fake EC2 host roots that match the emulator's default fixture.

The NICs' MACs are read from the fixture itself, so the sample host and the
emulator cannot drift apart.  The ENIs on network card 1 are bound to the
``efa`` driver, the card-0 ones to ``ena``.  Variants:

* ``None`` / ``"nitro"``: DMI ``sys_vendor`` ``Amazon EC2`` (every current
  instance type);
* ``"xen"``: no ``Amazon EC2`` vendor, but ``/sys/hypervisor/uuid`` starting
  with ``ec2`` and matching ``product_uuid``/``product_serial`` (older Xen
  instance types).

The claim device is the ENI with delegated prefixes.
"""

from __future__ import annotations

from pathlib import Path

from dranet_cloud.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from .emulator import load_fixture

VARIANTS = (None, "nitro", "xen")
XEN_UUID = "ec2e1f6a-93b4-4c1d-8a7e-5f0b2c9d3e41"
NITRO_UUID = "EC2A7B19-4C3D-2E1F-0A9B-8C7D6E5F4A3B"


def nic_name(index: int) -> str:
    """``ens5``, ``ens6``...: what ENA NICs are called on Amazon Linux and Ubuntu."""
    return f"ens{5 + index}"


def pci_address(index: int) -> str:
    return f"0000:00:{5 + index:02x}.0"


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """Write the host root under ``dest``; ``None`` for an unknown variant."""
    if variant not in VARIANTS:
        return None
    tree = load_fixture(None)
    meta = tree["meta-data"]
    macs: dict[str, dict[str, object]] = meta["network"]["interfaces"]["macs"]
    builder = HostRootBuilder(dest)
    if variant == "xen":
        builder.dmi(
            sys_vendor="Xen",
            product_name="HVM domU",
            product_uuid=XEN_UUID.upper(),
            product_serial=XEN_UUID,
            bios_vendor="Xen",
        ).hypervisor_uuid(XEN_UUID)
    else:
        builder.dmi(
            sys_vendor="Amazon EC2",
            product_name=str(meta.get("instance-type", "")),
            product_uuid=NITRO_UUID,
            bios_vendor="Amazon EC2",
            board_vendor="Amazon EC2",
            chassis_vendor="Amazon EC2",
            chassis_asset_tag="Amazon EC2",
        )
    ordered = sorted(
        macs.items(),
        key=lambda kv: (
            int(str(kv[1].get("network-card", 0))),
            int(str(kv[1].get("device-number", 0))),
        ),
    )
    claim: str | None = None
    efa: list[str] = []
    for index, (mac, keys) in enumerate(ordered):
        name = nic_name(index)
        driver = "efa" if int(str(keys.get("network-card", 0))) > 0 else "ena"
        if driver == "efa":
            efa.append(name)
        builder.nic(name, mac, mtu=9001, pci=pci_address(index), driver=driver)
        if claim is None and keys.get("ipv4-prefix"):
            claim = name
    root = builder.build()
    evidence = "Xen hypervisor uuid ec2..." if variant == "xen" else "DMI sys_vendor Amazon EC2"
    return SampleHost(
        root=root,
        description=(
            f"{meta.get('instance-type')} node ({evidence}): {len(ordered)} ENIs "
            f"{nic_name(0)}-{nic_name(len(ordered) - 1)}, EFA driver on {', '.join(efa)}; "
            f"{claim} has delegated prefixes"
        ),
        claim_device=claim,
    )
