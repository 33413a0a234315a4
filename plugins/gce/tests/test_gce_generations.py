"""Both DRANET generations against a real ``serve`` server running the GCE plugin.

A gen2 GetProfileConfig (the whole ResourceClaim, the interface name) and a
gen1 one (``claim_uid``, the DRA device name ``pci-…``, gen1 spelling) for
the same NIC and claim get the same addresses from the NIC's alias and
0xC0DE ranges, retries included; a release by UID frees them.  The newer
DRANET profile name ``gce-managed`` is served the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dranet_cloud_gce import plugin

from dranet_cloud.contract.context import ProviderOptions
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import SqliteStore
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.dranet_wire import (
    get_profile_config,
    resource_claim,
    served_on_unix_socket,
)
from dranet_cloud.wire.models import DeviceIdentifiers

UID = "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


@pytest.fixture
def served(tmp_path: Path, gce_emulator: Emulator) -> Iterator[tuple[ProviderHost, httpx.Client]]:
    sample = plugin.sample_host(tmp_path / "host", None)
    assert sample is not None
    host = ProviderHost(
        cloud_provider_hint="gce",
        host_root=str(sample.root),
        env=gce_emulator.env,
        options=ProviderOptions(metadata_deadline=5.0),
        ipam_factory=lambda: SqliteStore(tmp_path / "ipam.db"),
    )
    host.start()
    with served_on_unix_socket(host, tmp_path) as client:
        yield host, client
    host.close()


def _nic(host: ProviderHost) -> DeviceIdentifiers:
    """A sample NIC with a MAC and a PCI address that the metadata knows."""
    for dev in host.context.host_root.net_devices():
        if dev.mac and dev.pci_address and host.device_config(dev) is not None:
            return dev
    raise AssertionError("the GCE sample host has no PCI NIC known to the metadata")


@pytest.mark.parametrize("profile", ["gce-subinterface", "gce-managed"])
def test_gen1_and_gen2_get_the_same_addresses_and_release_frees_them(
    served: tuple[ProviderHost, httpx.Client], profile: str
) -> None:
    host, client = served
    nic = _nic(host)
    assert nic.pci_address is not None
    dra_name = "pci-" + nic.pci_address.replace(":", "-").replace(".", "-")
    gen2_device = {"mac_address": nic.mac, "pci_address": nic.pci_address, "name": nic.name}
    gen1_device = {**gen2_device, "name": dra_name}
    # DRANET sends merge(user, cloud) as context: the cloud's baseline plus the claim.
    cloud = host.device_config(nic)
    assert cloud is not None
    context2 = {**cloud.to_wire(), "profile": profile}
    context2["interface"] = {**context2["interface"], "type": "IPVLAN"}
    context1 = {**context2, "interface": {**context2["interface"], "type": "ipvlan"}}
    gen2 = {
        "device": gen2_device,
        "claim": resource_claim(UID, device=dra_name),
        "config": context2,
    }
    gen1 = {"device": gen1_device, "claim_uid": UID, "config": context1}

    first = get_profile_config(client, gen2)
    addresses = first["interface"]["addresses"]
    assert addresses and len(addresses) <= 2
    assert get_profile_config(client, gen2) == first
    assert get_profile_config(client, gen1) == first
    assert get_profile_config(client, gen1) == first
    assert sorted(a.address for a in host.context.ipam.list()) == sorted(addresses)

    final = {**context2, "interface": {**context2["interface"], "addresses": addresses}}
    r = client.post(
        "/ReleaseProfileConfig", json={"device": gen2_device, "claim_uid": UID, "config": final}
    )
    assert r.status_code == 200, r.text
    assert host.context.ipam.list() == []
