"""The gce.dra.net/ attribute set and its Kubernetes limits."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.attributes import join_within
from dranet_cloud_gce.snapshot import GceInstance, parse_instance

from dranet_cloud.host.attribute_limits import attribute_name_problem, validate_attributes
from dranet_cloud.wire.models import DeviceIdentifiers


def _values(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.value for k, v in attrs.items()}


def test_primary_nic_attributes(gce_instance: GceInstance, gce_devices: list[Any]) -> None:
    attrs = plugin.device_attributes(gce_instance, gce_devices[0])
    assert attrs is not None
    assert _values(attrs) == {
        "gce.dra.net/machineType": "a3-megagpu-8g",
        "gce.dra.net/block": gce_instance.block,
        "gce.dra.net/subBlock": gce_instance.sub_block,
        "gce.dra.net/host": gce_instance.host,
        "gce.dra.net/gpuDirect": "GPUDirect-TCPXO",
        "gce.dra.net/networkName": "default",
        "gce.dra.net/networkProjectNumber": 628944397724,
        "gce.dra.net/ipAliases": "10.24.3.0/24",
    }
    # networkProjectNumber is an int attribute, not a string.
    assert attrs["gce.dra.net/networkProjectNumber"].to_wire() == {"int": 628944397724}


def test_gpu_nic_attributes(gce_instance: GceInstance, gce_devices: list[Any]) -> None:
    for i, device in enumerate(gce_devices[1:], start=1):
        attrs = plugin.device_attributes(gce_instance, device)
        assert attrs is not None
        values = _values(attrs)
        assert values["gce.dra.net/networkName"] == f"a3mega-gpu-{i}"
        assert "gce.dra.net/ipAliases" not in values  # no alias ranges on GPU NICs
        assert values["gce.dra.net/machineType"] == "a3-megagpu-8g"


def test_unknown_nic_gets_instance_attributes_only(gce_instance: GceInstance) -> None:
    device = DeviceIdentifiers(name="eth9", mac_address="42:01:c0:a8:63:02")
    attrs = plugin.device_attributes(gce_instance, device)
    assert attrs is not None
    assert set(attrs) == {
        "gce.dra.net/machineType",
        "gce.dra.net/block",
        "gce.dra.net/subBlock",
        "gce.dra.net/host",
        "gce.dra.net/gpuDirect",
    }


def test_no_gpudirect_for_other_machine_types(gce_tree: dict[str, Any]) -> None:
    gce_tree["instance"]["machineType"] = "projects/1/machineTypes/n2-standard-8"
    inst = parse_instance(gce_tree)
    attrs = plugin.device_attributes(
        inst,
        DeviceIdentifiers(name="eth0", mac_address="42:01:0a:80:00:46"),
    )
    assert attrs is not None
    assert "gce.dra.net/gpuDirect" not in attrs
    assert attrs["gce.dra.net/machineType"].value == "n2-standard-8"


def test_every_attribute_passes_the_api_server_limits(
    gce_instance: GceInstance, gce_devices: list[Any]
) -> None:
    for device in gce_devices:
        attrs = plugin.device_attributes(gce_instance, device)
        assert attrs is not None
        for name in attrs:
            assert attribute_name_problem(name) is None, name
        assert validate_attributes(attrs, plugin="gce", device=device.label()) == attrs


def test_long_alias_list_is_cut_at_an_element_boundary(
    gce_tree: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    aliases = [f"10.{i}.{i}.0/24" for i in range(40, 52)]
    gce_tree["instance"]["networkInterfaces"][0]["ipAliases"] = aliases
    inst = parse_instance(gce_tree)
    with caplog.at_level(logging.WARNING, logger="dranet_cloud_gce"):
        attrs = plugin.device_attributes(
            inst,
            DeviceIdentifiers(name="eth0", mac_address="42:01:0a:80:00:46"),
        )
    assert attrs is not None
    value = attrs["gce.dra.net/ipAliases"].value
    assert len(value.encode()) <= 64
    kept = value.split(",")
    # A prefix of the list, each element whole, and as many as fit.
    assert kept == aliases[: len(kept)]
    assert len(",".join(aliases[: len(kept) + 1]).encode()) > 64
    assert any("alias ranges" in r.getMessage() for r in caplog.records)
    # The device keeps every other attribute.
    assert validate_attributes(attrs, plugin="gce", device="eth0") == attrs
    assert "gce.dra.net/networkName" in attrs


def test_join_within() -> None:
    assert join_within(["a", "b", "c"], limit=3) == "a,b"
    assert join_within(["abcd"], limit=3) == ""
    assert join_within([], limit=3) == ""
    assert join_within(["a", "b"], limit=3) == "a,b"


def test_first_alias_longer_than_the_limit_is_dropped(gce_tree: dict[str, Any]) -> None:
    # Not a valid CIDR list any more, but the guard must hold for any input.
    inst = parse_instance(gce_tree)
    nic0 = inst.nics[0].model_copy(update={"ip_aliases": ["x" * 70]})
    inst = inst.model_copy(update={"nics": [nic0, *inst.nics[1:]]})
    attrs = plugin.device_attributes(inst, DeviceIdentifiers(name="eth0", mac_address=nic0.mac))
    assert attrs is not None
    assert "gce.dra.net/ipAliases" not in attrs


def test_not_a_gce_snapshot() -> None:
    assert plugin.device_attributes(None, DeviceIdentifiers(name="x")) is None
