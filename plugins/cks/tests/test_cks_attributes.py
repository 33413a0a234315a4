"""CKS: DRANET's attributes from the Node's labels, per-HCA leaf switches, the
Node read through the core's Kubernetes facts source, and failures that name
their fix."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_cks import attributes
from dranet_cloud_cks import labels as L
from dranet_cloud_cks.emulator import DEFAULT_FIXTURE, build_emulator
from dranet_cloud_cks.sample import BACKEND_HCAS, FRONTEND, IB_ONLY_HCA
from dranet_cloud_cks.snapshot import CksInstance

from dranet_cloud.cli.main import main
from dranet_cloud.contract.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator, HostRootBuilder
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.errors import ConfigError, ProviderInitError
from dranet_cloud.wire.models import DeviceIdentifiers

D = "coreweave.dra.net/"
FIXTURE = Path(__file__).parents[1] / "dranet_cloud_cks" / "fixtures" / DEFAULT_FIXTURE
NODE = json.loads(FIXTURE.read_text())
LABELS: dict[str, str] = NODE["metadata"]["labels"]
NODE_WIDE = {
    "fabricFlavor": "infiniband",
    "fabric": "US-EAST-04A-FAB12",
    "superpod": "3",
    "leafgroup": "418223990171",
    "leafgroupName": "41.2-DH3",
    "rack": "41",
    "speedCurrent": "3200G",
    "speedExpected": "3200G",
    "instanceType": "b200-8x",
}


def host_for(sample: SampleHost, env: dict[str, str], hint: str = "cks") -> ProviderHost:
    host = ProviderHost(
        cloud_provider_hint=hint,
        profile_provider="none",
        host_root=str(sample.root),
        env=env,
        options=ProviderOptions(metadata_deadline=5.0),
    )
    host.start()
    return host


@pytest.mark.usefixtures("cks_environ")
def test_describe_shows_dranets_attributes_and_leaf_switches(
    cks_sample: SampleHost,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["describe", "--host-root", str(cks_sample.root), "--cloud-provider-hint", "CKS",
                 "-o", "json"])  # fmt: skip
    assert code == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["provider"] == "cks"
    assert data["instance"]["node_name"] == "g5a2f1c"
    by_name = {d["device"]["name"] or d["device"]["pci_address"]: d for d in data["devices"]}
    assert set(by_name) == {FRONTEND[0], *(f"ibp{i}" for i in range(7)), IB_ONLY_HCA}
    for key, entry in by_name.items():
        attrs = {k.removeprefix(D): v["string"] for k, v in entry["attributes"].items()}
        assert all(k.startswith(D) for k in entry["attributes"])
        assert entry["config"] is None
        if key == FRONTEND[0]:  # RDMA-capable, but not on the backend fabric
            assert "leafSwitch" not in attrs
            assert attrs == NODE_WIDE
            continue
        index = 7 if key == IB_ONLY_HCA else int(key.removeprefix("ibp"))
        assert attrs["leafSwitch"] == LABELS[L.neighbor_label(f"ibp{index}")]
        budget = entry["budget"]
        if key == IB_ONLY_HCA:  # no netdev: DRANET's PCI and RDMA attributes only
            assert budget["dranet"] == 9 and budget["dropped"] == []
            assert attrs == {**NODE_WIDE, "leafSwitch": "L41.2.4"}
        else:  # an IPoIB netdev on a PCI HCA with RDMA: 23 of DRANET's own
            assert budget["dranet"] == 23 and budget["providers"] == 9
            assert budget["dropped"] == [D + "speedCurrent"], "the lowest-ranked goes"
            assert attrs == {**{k: v for k, v in NODE_WIDE.items() if k != "speedCurrent"},
                             "leafSwitch": LABELS[L.neighbor_label(key)]}  # fmt: skip


def test_leaf_switch_by_pci_first_then_ibp_name(tmp_path: Path) -> None:
    root = HostRoot(
        HostRootBuilder(tmp_path)
        .pci_device("0000:3c:00.0", driver="mlx5_core")
        .infiniband("ibp1", "0000:3c:00.0")
        .build()
    )
    ctx = ProviderContext(host_root=root, env={})
    inst = CksInstance(
        provider="cks",
        node_name="n",
        labels=L.relevant(LABELS),
        rdma_by_pci={"3c:00.0": "ibp1"},
    )

    def switch(dev: DeviceIdentifiers) -> str | None:
        got = attributes.device_attributes(ctx, inst, dev).get(D + "leafSwitch")
        return None if got is None else str(got.value)

    # The PCI function's RDMA device wins over the interface name.
    assert switch(DeviceIdentifiers(name="ibp0", pci_address="0000:3C:00.0")) == "L41.2.1"
    assert switch(DeviceIdentifiers(name="", pci_address="0000:3c:00.0")) == "L41.2.1"
    # No RDMA device on the function: an ibp* name is the RDMA device's name.
    assert switch(DeviceIdentifiers(name="ibp6")) == LABELS[L.neighbor_label("ibp6")]
    assert switch(DeviceIdentifiers(name="eth0", pci_address="0000:99:00.0")) is None
    assert switch(DeviceIdentifiers(name="ibp9")) is None  # no label for it


def test_empty_and_oversized_values_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    labels = {**LABELS, "backend.coreweave.cloud/fabric": "x" * 65,
              "node.coreweave.cloud/rack": ""}  # fmt: skip
    with caplog.at_level(logging.WARNING):
        got = attributes.node_values(labels, "ibp0")
    assert D + "fabric" not in got and D + "rack" not in got
    assert got[D + "superpod"] == "3"
    assert "coreweave.dra.net/fabric" in caplog.text and "64 bytes" in caplog.text
    at_limit = {**labels, "backend.coreweave.cloud/fabric": "y" * 64}
    assert attributes.node_values(at_limit, "d")[D + "fabric"]


def test_auto_detection_confirms_from_the_cluster_label(
    cks_sample: SampleHost, cks_emulator: Emulator
) -> None:
    host = host_for(cks_sample, cks_emulator.env, hint="")
    try:
        assert host.cloud == "cks"
        assert host.detection is not None and "cks.coreweave.com/cluster" in host.detection.evidence
    finally:
        host.close()


def test_a_node_without_the_cluster_label_is_not_cks(
    cks_sample: SampleHost, tmp_path: Path
) -> None:
    labels = {k: v for k, v in LABELS.items() if k != L.CKS_CLUSTER_LABEL}
    kube = KubernetesEmulator(env={"NODE_NAME": "g5a2f1c"})
    kube.put({**NODE, "metadata": {**NODE["metadata"], "labels": labels}})
    with kube:
        env = kube.emulator.env
        auto = host_for(cks_sample, env, hint="")
        assert auto.cloud is None, "a non-CKS Kubernetes node is no evidence of CKS"
        auto.close()
        with pytest.raises(ProviderInitError, match=r"cks\.coreweave\.com/cluster"):
            host_for(cks_sample, env)


def test_a_non_cks_node_in_a_cluster_logs_no_warning_at_detection(
    cks_sample: SampleHost, caplog: pytest.LogCaptureFixture
) -> None:
    """The DaemonSet sets NODE_NAME on every node, so every node of every cluster has
    CKS's configured evidence; a Node without the label is the normal answer there,
    not something for the operator to look at on each start of each node."""
    labels = {k: v for k, v in LABELS.items() if k != L.CKS_CLUSTER_LABEL}
    kube = KubernetesEmulator(env={"NODE_NAME": "g5a2f1c"})
    kube.put({**NODE, "metadata": {**NODE["metadata"], "labels": labels}})
    with kube, caplog.at_level(logging.INFO, logger="dranet_cloud.host.detection"):
        auto = host_for(cks_sample, kube.emulator.env, hint="")
        auto.close()
    assert auto.cloud is None
    records = [r for r in caplog.records if r.name == "dranet_cloud.host.detection"]
    assert records and "cks" in records[0].getMessage(), "still said at INFO"
    assert all(r.levelno < logging.WARNING for r in records), [r.getMessage() for r in records]


def test_node_name_comes_from_the_flag_or_node_name(
    cks_sample: SampleHost, cks_emulator: Emulator
) -> None:
    env = {k: v for k, v in cks_emulator.env.items() if k != "NODE_NAME"}
    with pytest.raises(ConfigError, match="NODE_NAME"):
        host_for(cks_sample, env)
    with pytest.raises(ProviderInitError, match="no Node 'elsewhere'"):
        host_for(cks_sample, {**env, "NODE_NAME": "elsewhere"})
    host = ProviderHost(
        cloud_provider_hint="cks",
        host_root=str(cks_sample.root),
        env={**env, "NODE_NAME": "elsewhere"},
        options=ProviderOptions(metadata_deadline=5.0, node_name="g5a2f1c"),
    )
    host.start()  # --node-name wins over NODE_NAME
    host.close()


def test_node_is_read_at_start_and_on_refresh_only(
    cks_sample: SampleHost, cks_emulator: Emulator
) -> None:
    host = host_for(cks_sample, cks_emulator.env)
    try:
        reads = len(cks_emulator.requests("/api/v1/nodes/"))
        assert reads == 1
        for dev in HostRoot(cks_sample.root).net_devices():
            host.device_attributes(dev)
        assert len(cks_emulator.requests("/api/v1/nodes/")) == 1, "served from the snapshot"
        source = host.context.node
        assert source.get(5.0)["metadata"]["name"] == "g5a2f1c"
        assert len(cks_emulator.requests("/api/v1/nodes/")) == 1, "cached between refreshes"
        assert source.labels(5.0, fresh=True)[L.CKS_CLUSTER_LABEL] == "training-east"
        assert len(cks_emulator.requests("/api/v1/nodes/")) == 2
    finally:
        host.close()


def test_transient_api_errors_are_retried_until_the_deadline(
    cks_sample: SampleHost, tmp_path: Path
) -> None:
    kube = KubernetesEmulator(env={"NODE_NAME": "g5a2f1c"})
    kube.put(NODE)
    with kube:
        kube.fail(500, times=2)
        host = host_for(cks_sample, kube.emulator.env)
        assert host.cloud == "cks"
        host.close()
        kube.fail(403, times=50)
        with pytest.raises(ProviderInitError, match="403"):
            host_for(cks_sample, kube.emulator.env)
        assert len(kube.emulator.requests("/api/v1/nodes/")) == 4, "a 403 is not retried"


def test_plugins_that_do_not_ask_never_read_the_node(tmp_path: Path) -> None:
    kube = KubernetesEmulator(env={"NODE_NAME": "g5a2f1c"})
    kube.put(NODE)
    with kube:
        root = HostRootBuilder(tmp_path).dmi(sys_vendor="Supermicro").build()
        host = ProviderHost(cloud_provider_hint="none", host_root=str(root), env=kube.emulator.env)
        host.start()
        host.device_attributes(DeviceIdentifiers(name="eth0"))
        host.close()
        assert kube.emulator.log == []
        assert host.context._node is None


def test_emulator_fixture_may_be_a_list(tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"kind": "NodeList", "apiVersion": "v1",
                                "items": [{**NODE, "kind": "Node"}]}))  # fmt: skip
    emu = build_emulator(path, "127.0.0.1:0", None).start()
    try:
        assert emu.env["NODE_NAME"] == "g5a2f1c"
    finally:
        emu.stop()
    bad = tmp_path / "claim.json"
    bad.write_text(json.dumps({"kind": "ResourceClaim", "metadata": {"name": "c"}}))
    with pytest.raises(ConfigError, match="Node object"):
        build_emulator(bad, "127.0.0.1:0", None)


def test_every_backend_hca_has_a_label_in_the_fixture() -> None:
    for i in range(len(BACKEND_HCAS) + 1):
        assert LABELS[L.neighbor_label(f"ibp{i}")].startswith("L41.2.")


def test_kubeconfig_option_wins_over_kubeconfig_variable(
    cks_sample: SampleHost, cks_emulator: Emulator, tmp_path: Path
) -> None:
    """``--kubeconfig`` (serve has it) reaches the Node reader through the options."""
    env = {**cks_emulator.env, "KUBECONFIG": str(tmp_path / "missing")}
    with pytest.raises(ConfigError, match="no kubeconfig file"):
        host_for(cks_sample, env)
    host = ProviderHost(
        cloud_provider_hint="cks",
        host_root=str(cks_sample.root),
        env=env,
        options=ProviderOptions(metadata_deadline=5.0, kubeconfig=cks_emulator.env["KUBECONFIG"]),
    )
    host.start()
    assert host.cloud == "cks"
    host.close()
