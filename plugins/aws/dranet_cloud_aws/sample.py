"""Fake EC2 host roots that match the emulator's fixtures.

They look like the nodes they name: every ENI is an ENA netdev bound to the
``ena`` driver; EFA is a separate PCI function bound to ``efa``, with no
netdev and no MAC, and an RDMA device ``rdmap<bus>s<slot>`` in
``/sys/class/infiniband``.  The NICs' MACs are read from the fixture, so the
sample host and the emulator cannot drift apart.  Variants:

* ``None`` / ``"nitro"``: a ``p5.48xlarge`` (DMI ``sys_vendor`` ``Amazon
  EC2``).  The two network-card-0 ENIs are plain ENA on bus 0; the two
  card-1 ENIs are EFA interfaces: an ENA function and its EFA function on
  their own bus; two more EFA functions are EFA-only interfaces (no ENA);
* ``"xen"``: the same ENIs with the Xen-era evidence instead (no ``Amazon
  EC2`` vendor, ``/sys/hypervisor/uuid`` starting with ``ec2``);
* ``"trn2"``: a ``trn2.48xlarge`` (its own fixture, ``trn2-sample.json``):
  three ENA ENIs and the 16 EFA functions at the PCI addresses the Neuron
  device map names, so each gets DRANET's four device-group attributes.

The claim device is the ENI with delegated prefixes.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing import HostRootBuilder

from . import efa
from .emulator import load_fixture

VARIANTS = (None, "nitro", "xen", "trn2")
TRN2_FIXTURE = "trn2-sample.json"
XEN_UUID = "ec2e1f6a-93b4-4c1d-8a7e-5f0b2c9d3e41"
NITRO_UUID = "EC2A7B19-4C3D-2E1F-0A9B-8C7D6E5F4A3B"

# p5: where each card-1 ENI's ENA function sits, its EFA beside it; EFA-only functions.
P5_EFA_INTERFACES = (("0000:30:00.0", "0000:30:01.0"), ("0000:31:00.0", "0000:31:01.0"))
P5_EFA_ONLY = ("0000:32:01.0", "0000:33:01.0")
TRN2_CARD1_ENA = "0000:27:00.0"


def nic_name(pci: str) -> str:
    """systemd's predictable name: ``ens<slot>`` on bus 0, else ``enp<bus>s<slot>``."""
    _domain, bus, rest = pci.split(":")
    slot = int(rest.split(".")[0], 16)
    return f"ens{slot}" if int(bus, 16) == 0 else f"enp{int(bus, 16)}s{slot}"


def rdma_name(pci: str) -> str:
    """The EFA RDMA device's name as the kernel makes it (``rdmap48s1``)."""
    _domain, bus, rest = pci.split(":")
    return f"rdmap{int(bus, 16)}s{int(rest.split('.')[0], 16)}"


def fixture_path(variant: str | None) -> Path | None:
    if variant != "trn2":
        return None
    return Path(str(resources.files(__package__).joinpath("fixtures", TRN2_FIXTURE)))


def _efa_function(builder: HostRootBuilder, pci: str, numa: int) -> None:
    builder.pci_device(pci, driver=efa.EFA_DRIVER).infiniband(rdma_name(pci), pci)
    builder.file(f"/sys/bus/pci/devices/{pci}/numa_node", f"{numa}\n")


def build_sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """Write the host root under ``dest``; ``None`` for an unknown variant."""
    if variant not in VARIANTS:
        return None
    fixture = fixture_path(variant)
    tree = load_fixture(fixture)
    meta = tree["meta-data"]
    macs: dict[str, dict[str, object]] = meta["network"]["interfaces"]["macs"]
    instance_type = str(meta.get("instance-type", ""))
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
            product_name=instance_type,
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
    card1 = iter(P5_EFA_INTERFACES if variant != "trn2" else ((TRN2_CARD1_ENA, None),))
    claim: str | None = None
    names: list[str] = []
    efas: list[str] = []
    for index, (mac, keys) in enumerate(ordered):
        if int(str(keys.get("network-card", 0))) == 0:
            pci, sibling = f"0000:00:{5 + index:02x}.0", None
        else:
            pci, sibling = next(card1)
        name = nic_name(pci)
        names.append(name)
        builder.nic(name, mac, mtu=9001, pci=pci, driver="ena")
        builder.file(f"/sys/bus/pci/devices/{pci}/numa_node", "0\n")
        if sibling is not None:
            _efa_function(builder, sibling, 1)
            efas.append(sibling)
        if claim is None and keys.get("ipv4-prefix"):
            claim = name
    if variant == "trn2":
        wiring = efa.neuron_to_efa(instance_type) or []
        extra = [(pci, i * 2 // len(wiring)) for i, pci in enumerate(wiring)]
    else:
        extra = [(pci, 1) for pci in P5_EFA_ONLY]
    for pci, numa in extra:
        _efa_function(builder, pci, numa)
        efas.append(pci)
    root = builder.build()
    evidence = "Xen hypervisor uuid ec2..." if variant == "xen" else "DMI sys_vendor Amazon EC2"
    return SampleHost(
        root=root,
        description=(
            f"{instance_type} node ({evidence}): ENA NICs {', '.join(names)} (driver ena); "
            f"{len(efas)} EFA functions (driver efa, no netdev); {claim} has delegated prefixes"
        ),
        claim_device=claim,
        fixture=fixture,
    )
