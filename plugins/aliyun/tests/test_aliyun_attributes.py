"""Attributes under alibaba.dra.net/: eRDMA from the host root, ENI ids from metadata.

The Done-when check ("describe against the emulator with the eRDMA host root
shows erdma true only for the eRDMA PCI devices, and the per-NIC
attributes") runs here through the real CLI and through ProviderHost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_aliyun import plugin
from dranet_cloud_aliyun.attributes import is_erdma
from dranet_cloud_aliyun.snapshot import AliyunInstance

from dranet_cloud.cli.main import main as cli_main
from dranet_cloud.contract.context import ProviderContext, SampleHost
from dranet_cloud.host.attribute_limits import attribute_name_problem, attribute_value_problem
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.wire.models import DeviceIdentifiers

D = "alibaba.dra.net/"
EXPECTED_ENI = {
    "eth0": ("eni-2ze3kx0c9v1qjz8h4t2p", "vsw-2ze9p1s6d4f8g2h7j5k3"),
    "eth1": ("eni-2zeb6w2r8y0u4i1o7p3a", "vsw-2zec4v7b1n9m3q6w8e2r"),
    "eth2": ("eni-2zef0d3g5h7j9k2l4z6x", "vsw-2zet5y8u0i2o4p6a1s3d"),
}
VPC = "vpc-2zeh7b5t9n3m1x8c4q0w"


def _plain(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix(D): next(iter(v.values())) for k, v in attrs.items()}


def _check_describe(devices: list[dict[str, Any]]) -> None:
    by_name = {d["device"]["name"]: _plain(d["attributes"]) for d in devices}
    assert set(by_name) == {"eth0", "eth1", "eth2"}
    # As DRANET: erdma is set (true) on eRDMA NICs only, absent elsewhere.
    assert {n: a.get("erdma") for n, a in by_name.items()} == {
        "eth0": None,
        "eth1": True,
        "eth2": True,
    }
    for name, (eni, vsw) in EXPECTED_ENI.items():
        attrs = by_name[name]
        assert attrs["networkInterfaceId"] == eni
        assert attrs["vswitchId"] == vsw
        assert attrs["vpcId"] == VPC
        assert attrs["instanceType"] == "ecs.ebmgn8is.32xlarge"
        assert (attrs["regionId"], attrs["zoneId"]) == ("cn-beijing", "cn-beijing-l")


@pytest.mark.usefixtures("ecs_environ")
def test_describe_cli_against_the_emulator(
    erdma_sample: SampleHost,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli_main(
        ["describe", "--cloud-provider-hint", "alibaba", "--host-root", str(erdma_sample.root),
         "-o", "json"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["provider"] == "aliyun"
    assert data["instance"]["instance_id"] == "i-2zefwq8k3jx9d7m1n4ab"
    _check_describe(data["devices"])


def test_describe_through_the_host(erdma_host: ProviderHost) -> None:
    host = erdma_host
    devices = [
        {
            "device": dev.to_wire(),
            "attributes": {k: v.to_wire() for k, v in host.device_attributes(dev).items()},
        }
        for dev in host.context.host_root.net_devices()
    ]
    _check_describe(devices)


def test_attributes_are_valid_kubernetes_attributes(erdma_context: ProviderContext) -> None:
    inst = plugin.instance_properties(context=erdma_context, deadline=5.0)
    for dev in erdma_context.host_root.net_devices():
        attrs = plugin.device_attributes(context=erdma_context, instance=inst, device=dev)
        assert attrs
        for name, attr in attrs.items():
            assert name.startswith(D)
            assert attribute_name_problem(name) is None
            assert attribute_value_problem(attr) is None


def test_erdma_follows_the_pci_link_not_the_name(tmp_path: Path) -> None:
    root = (
        HostRootBuilder(tmp_path)
        .nic("eth1", "00:16:3e:00:00:01", pci="0000:00:06.0")
        .nic("eth2", "00:16:3e:00:00:02", pci="0000:00:07.0")
        .nic("ib0", "00:16:3e:00:00:03", pci="0000:3b:00.0")
        # erdma_0 sits on eth2's function; an mlx5 device on ib0's is not eRDMA.
        .infiniband("erdma_0", "0000:00:07.0")
        .infiniband("mlx5_0", "0000:3b:00.0")
        .build()
    )
    hr = HostRoot(root)
    found = {d.name: is_erdma(hr, d) for d in hr.net_devices()}
    assert found == {"eth1": False, "eth2": True, "ib0": False}
    # A PCI address the caller gives wins over the netdev link (DRANET sends both).
    given = DeviceIdentifiers(name="renamed", pci_address="0000:00:07.0")
    assert is_erdma(hr, given)
    # Neither a PCI address nor a netdev: not eRDMA.
    assert not is_erdma(hr, DeviceIdentifiers(name="ghost"))


def test_unknown_nic_gets_only_instance_wide_attributes(erdma_sample: SampleHost) -> None:
    context = ProviderContext(host_root=HostRoot(erdma_sample.root))
    inst = AliyunInstance(instance_type="ecs.g8i.xlarge", region_id="cn-hangzhou")
    # The MAC is no NIC on this node: eth1's sysfs belongs to another NIC (a
    # name is not an identity), so not even its eRDMA function is claimed.
    dev = DeviceIdentifiers(name="eth1", mac_address="00:16:3e:99:99:99")
    attrs = plugin.device_attributes(context=context, instance=inst, device=dev)
    assert attrs is not None
    assert _plain({k: v.to_wire() for k, v in attrs.items()}) == {
        "instanceType": "ecs.g8i.xlarge",
        "regionId": "cn-hangzhou",
    }


def test_overlong_values_are_left_out_not_cut(erdma_sample: SampleHost) -> None:
    context = ProviderContext(host_root=HostRoot(erdma_sample.root))
    inst = AliyunInstance(instance_type="ecs." + "x" * 80, zone_id="cn-beijing-l")
    attrs = plugin.device_attributes(
        context=context, instance=inst, device=DeviceIdentifiers(name="eth0")
    )
    assert attrs is not None
    assert D + "instanceType" not in attrs
    assert attrs[D + "zoneId"].value == "cn-beijing-l"
