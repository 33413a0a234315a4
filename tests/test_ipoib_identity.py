"""A 20-byte IPoIB address is a NIC identity like a 6-byte MAC.

DRANET sends an InfiniBand NIC's link address (20 bytes) as ``mac_address``.
``serve`` resolves the NIC by it, in any of Go's spellings, as by its
interface name or DRA device name; ``--ipam-range mac=`` selects by it; the
IPAM owner is keyed by it; a ``mac_address`` Go would refuse is a 400 naming
the string.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dranet_cloud.cli.common import parse_device
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import dra_pci_name, resolve_nic
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.dranet_wire import get_profile_config, served_local_ipam
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.wire.models import DeviceIdentifiers

IB0 = "00:00:10:29:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:a1:b2:c3"
IB1 = "00:00:10:2a:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:a1:b2:c4"
PCI0, PCI1 = "0000:41:00.0", "0000:42:00.0"
DOTTED0 = "0000.1029.fe80.0000.0000.0000.b83f.d203.00a1.b2c3"
CONFIG = {"profile": "local-ipam", "interface": {}}


def ib_node(root: Path) -> HostRoot:
    return HostRoot(
        HostRootBuilder(root)
        .nic("eth0", "42:01:0a:00:00:02", pci="0000:00:04.0", driver="gve")
        .nic("ibs12", IB0, mtu=4092, pci=PCI0, driver="mlx5_core")
        .nic("ibs13", IB1, mtu=4092, pci=PCI1, driver="mlx5_core")
        .infiniband("mlx5_0", PCI0)
        .infiniband("mlx5_1", PCI1)
        .build()
    )


def test_every_spelling_and_name_of_an_ib_nic_is_one_identity(tmp_path: Path) -> None:
    root = ib_node(tmp_path / "n")
    forms = [
        DeviceIdentifiers(mac_address=IB0),
        DeviceIdentifiers(mac_address=IB0.upper().replace(":", "-")),
        DeviceIdentifiers(mac_address=DOTTED0),
        DeviceIdentifiers(name="ibs12"),
        DeviceIdentifiers(name=dra_pci_name(PCI0)),
        DeviceIdentifiers(name="ibs12", mac_address=IB0, pci_address=PCI0),
    ]
    nics = [resolve_nic(root, d) for d in forms]
    assert {n.identity for n in nics} == {"mac:" + IB0}
    assert {n.ifname for n in nics} == {"ibs12"}
    # The CLI's --device takes it too, and completes the identifiers.
    got = parse_device(f"mac={DOTTED0}", root)
    assert got == DeviceIdentifiers(name="ibs12", mac_address=IB0, pci_address=PCI0)
    for bad in ("rekharoy:3f:d2:b3:0b:0c", "deadbeef-cafe", "zz:00:16:3e:2c:8a:10"):
        with pytest.raises(ConfigError, match=f"invalid MAC address {bad}"):
            parse_device(f"name=ibs12,mac={bad}", root)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ProviderHost, httpx.Client]]:
    root = ib_node(tmp_path / "n")
    with served_local_ipam(
        tmp_path, [f"mac={DOTTED0}=10.40.0.0/24", "10.41.0.0/24"], root.root
    ) as served:
        yield served


def test_serve_resolves_an_ib_nic_by_its_20_byte_address(
    served: tuple[ProviderHost, httpx.Client],
) -> None:
    host, client = served
    answers = set()
    for device in (
        {"mac_address": IB0, "pci_address": PCI0, "name": "ibs12"},
        {"mac_address": IB0.replace(":", "-"), "name": ""},
        {"name": "ibs12"},
        {"name": dra_pci_name(PCI0)},
    ):
        body = {"device": device, "claim_uid": "claim-ib", "config": CONFIG}
        answers.add(tuple(get_profile_config(client, body)["interface"]["addresses"]))
    (addresses,) = answers
    assert addresses[0].startswith("10.40.0.")  # the mac= range of the 20-byte address
    other = {"device": {"mac_address": IB1, "name": ""}, "claim_uid": "claim-ib", "config": CONFIG}
    assert get_profile_config(client, other)["interface"]["addresses"][0].startswith("10.41.0.")
    owners = {a.owner.device for a in host.context.ipam.list()}
    assert owners == {"mac:" + IB0, "mac:" + IB1}
    for bad in ("rekharoy:3f:d2:b3:0b:0c", "deadbeef-cafe", "zz:00:16:3e:2c:8a:10"):
        body = {"device": {"mac_address": bad, "name": ""}, "claim_uid": "c", "config": CONFIG}
        r = client.post("/GetProfileConfig", json=body)
        assert r.status_code == 400 and f"invalid MAC address {bad}" in r.text, r.text
