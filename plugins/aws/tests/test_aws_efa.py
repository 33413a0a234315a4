"""EFA: DRANET's Neuron device groups on a trn2 node, the ENA/EFA sibling rule,
and a p5 node where no netdev claims to be EFA."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_aws import efa
from dranet_cloud_aws.emulator import build_emulator
from dranet_cloud_aws.sample import TRN2_CARD1_ENA, build_sample_host

from dranet_cloud.cli.main import main
from dranet_cloud.contract.context import ProviderOptions, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator, HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers

# lookup/neuron/trn2.json of aws-neuron/connected-device-maps-over-efa-for-neuron
# at 2eb56e4, as published (Neuron device ID -> EFA BDF): a second copy, so a
# bad regeneration of the packaged data file fails here.
TRN2_PUBLIC = {
    "0": "0000:c9:00.0", "1": "0000:b4:00.0", "2": "0000:b3:00.0", "3": "0000:ca:00.0",
    "4": "0000:6c:00.0", "5": "0000:57:00.0", "6": "0000:56:00.0", "7": "0000:6d:00.0",
    "8": "0000:98:00.0", "9": "0000:83:00.0", "10": "0000:82:00.0", "11": "0000:99:00.0",
    "12": "0000:f5:00.0", "13": "0000:e0:00.0", "14": "0000:df:00.0", "15": "0000:f6:00.0",
}  # fmt: skip
GROUPS = [f"resource.aws.com/devicegroup{n}_id" for n in (1, 4, 8, 16)]


def expected_groups(bdf: str) -> dict[str, str]:
    """The module's rule, written out independently of the plugin's code."""
    neuron = next(int(k) for k, v in TRN2_PUBLIC.items() if v == bdf)
    out = {GROUPS[0]: bdf}
    for attr, size in zip(GROUPS[1:], (4, 8, 16), strict=True):
        lo = neuron // size * size
        members = sorted({TRN2_PUBLIC[str(i)] for i in range(lo, lo + size)})
        out[attr] = hashlib.sha256(",".join(members).encode()).hexdigest()[:16]
    return out


def test_device_groups_match_the_public_map() -> None:
    for bdf in TRN2_PUBLIC.values():
        assert efa.device_groups("trn2.48xlarge", bdf) == expected_groups(bdf)
        # trn2e/trn2u share the trn2 map.
        assert efa.device_groups("trn2u.48xlarge", bdf) == expected_groups(bdf)
    g16 = {efa.device_groups("trn2.48xlarge", b)[GROUPS[3]] for b in TRN2_PUBLIC.values()}
    g4 = {efa.device_groups("trn2.48xlarge", b)[GROUPS[1]] for b in TRN2_PUBLIC.values()}
    assert len(g16) == 1 and len(g4) == 4
    assert efa.device_groups("trn2.48xlarge", "0000:00:05.0") == {}
    assert efa.device_groups("p5.48xlarge", "0000:c9:00.0") == {}
    assert efa.device_groups("trn2.48xlarge", "c9:00.0") == {}, "DRANET wants a full BDF"


def test_trn1_two_neuron_devices_share_an_efa() -> None:
    got = efa.device_groups("trn1.32xlarge", "0000:10:1a.0")
    members = sorted({"0000:10:1a.0", "0000:a0:1a.0"})  # Neuron 0-3 on trn1
    assert got[GROUPS[1]] == hashlib.sha256(",".join(members).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    ("instance_type", "neuron"),
    [("trn2.48xlarge", True), ("inf2.xlarge", True), ("Trn1n.32xlarge", True),
     ("p5.48xlarge", False), ("t3.micro", False), ("", False), (None, False)],
)  # fmt: skip
def test_neuron_instance_test(instance_type: str | None, neuron: bool) -> None:
    assert efa.is_neuron_instance(instance_type) is neuron


def test_packaged_data_names_its_source() -> None:
    from importlib import resources

    data = json.loads(resources.files("dranet_cloud_aws").joinpath(efa.DATA_FILE).read_text())
    prov = data["provenance"]
    assert prov["module"].endswith("aws-neuron/connected-device-maps-over-efa-for-neuron")
    assert len(prov["commit"]) == 40 and prov["license"] == "Apache-2.0"
    assert data["maps"]["trn2"] == [TRN2_PUBLIC[str(i)] for i in range(16)]


def test_sibling_rule(tmp_path: Path) -> None:
    b = HostRootBuilder(tmp_path)
    b.nic("ens5", "0e:00:00:00:00:01", pci="0000:00:05.0", driver="ena")
    b.nic("enp48s0", "0e:00:00:00:00:02", pci="0000:30:00.0", driver="ena")
    b.pci_device("0000:30:01.0", driver="efa")
    b.nic("enp64s0", "0e:00:00:00:00:03", pci="0000:40:00.0", driver="ena")
    b.pci_device("0000:40:00.1", driver="efa").pci_device("0000:40:02.0", driver="efa")
    b.nic("enp80s0", "0e:00:00:00:00:04", pci="0000:50:00.0", driver="ena")
    b.pci_device("0000:50:01.0", driver="efa").pci_device("0000:50:02.0", driver="efa")
    root = HostRoot(b.build())
    assert efa.sibling_efa(root, "0000:00:05.0") is None
    assert efa.sibling_efa(root, "0000:30:00.0") == "0000:30:01.0"  # the only one on the bus
    assert efa.sibling_efa(root, "0000:40:00.0") == "0000:40:00.1"  # the same slot wins
    assert efa.sibling_efa(root, "0000:50:00.0") is None, "two candidates: no guess"


@pytest.fixture
def trn2_sample(tmp_path: Path) -> SampleHost:
    sample = build_sample_host(tmp_path / "host", "trn2")
    assert sample is not None and sample.fixture is not None
    return sample


@pytest.fixture
def trn2_emulator(trn2_sample: SampleHost) -> Iterator[Emulator]:
    emu = build_emulator(trn2_sample.fixture, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


def test_trn2_node_every_efa_function_gets_the_four_groups(
    trn2_sample: SampleHost, trn2_emulator: Emulator
) -> None:
    host = ProviderHost(
        cloud_provider_hint="aws",
        host_root=str(trn2_sample.root),
        env=trn2_emulator.env,
        options=ProviderOptions(metadata_deadline=5.0),
        ipam=MemoryStore(),
    )
    host.start()
    try:
        root = host.context.host_root
        functions = efa.efa_functions(root)
        assert sorted(functions) == sorted(TRN2_PUBLIC.values())
        for pci in functions:
            attrs = host.device_attributes(DeviceIdentifiers(pci_address=pci))
            got = {k: v.value for k, v in attrs.items() if k in GROUPS}
            assert got == expected_groups(pci), pci
            assert attrs["aws.dra.net/instanceType"].value == "trn2.48xlarge"
            assert host.attribute_budget(DeviceIdentifiers(pci_address=pci))["dropped"] == []
        for nic in root.net_devices():  # ENA netdevs: no groups, never EFA
            attrs = host.device_attributes(nic)
            assert not any(k in GROUPS for k in attrs)
            assert "aws.dra.net/efa" not in attrs
            assert root.pci_driver(nic.pci_address or "") == "ena"
        card1 = next(d for d in root.net_devices() if d.pci_address == TRN2_CARD1_ENA)
        assert host.device_attributes(card1)["aws.dra.net/networkCard"].value == 1
    finally:
        host.close()


def test_describe_an_efa_function_by_pci_address(
    trn2_sample: SampleHost, trn2_emulator: Emulator, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in trn2_emulator.env.items():
        monkeypatch.setenv(key, value)
    bdf = TRN2_PUBLIC["5"]
    code = main(["describe", "--host-root", str(trn2_sample.root), "--device", f"pci={bdf}",
                 "-o", "json"])  # fmt: skip
    assert code == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    (entry,) = data["devices"]
    attrs = {k: v["string"] for k, v in entry["attributes"].items() if k in GROUPS}
    assert attrs == expected_groups(bdf)
    # An EFA function: PCI + rdma attributes of DRANET's own, no link ones.
    assert entry["budget"]["dranet"] == 9


def test_p5_node_has_efa_functions_but_no_efa_netdev(tmp_path: Path) -> None:
    sample = build_sample_host(tmp_path / "p5", None)
    assert sample is not None
    root = HostRoot(sample.root)
    assert len(efa.efa_functions(root)) == 4
    for nic in root.net_devices():
        assert root.pci_driver(nic.pci_address or "") == "ena", nic.name
        assert nic.pci_address not in efa.efa_functions(root)
    for pci in efa.efa_functions(root):
        assert not root.listdir(f"/sys/bus/pci/devices/{pci}/net"), "EFA has no netdev"
        assert pci in root.infiniband_pci_addresses().values()
