"""Parsing what the ECS metadata service prints into the snapshot."""

from __future__ import annotations

import pytest
from dranet_cloud_aliyun.metadata_source import parse_mac_listing
from dranet_cloud_aliyun.snapshot import AliyunInstance, AliyunNic, parse_address_list

from dranet_cloud.wire.models import DeviceIdentifiers


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('["10.0.0.5"]', ["10.0.0.5"]),
        ('["10.0.0.5","10.0.0.6"]', ["10.0.0.5", "10.0.0.6"]),
        # ECS prints ipv6s without quotes: not JSON, still a list.
        ("[2408:4005:3cf:7e00:fb1d:22c4:8a0e:5b31]", ["2408:4005:3cf:7e00:fb1d:22c4:8a0e:5b31"]),
        ("[2408:4005::1, 2408:4005::2]", ["2408:4005::1", "2408:4005::2"]),
        ("10.0.0.5\n10.0.0.6\n", ["10.0.0.5", "10.0.0.6"]),
        ('"10.0.0.5"', ["10.0.0.5"]),
        ("[]", []),
        ("", []),
        (None, []),
        # Not an address: dropped, the rest kept; duplicates collapsed.
        ('["10.0.0.5","bogus","10.0.0.5"]', ["10.0.0.5"]),
        # Non-canonical IPv6 spelling comes back canonical.
        ("[2408:4005:3CF:7E00:0000::1]", ["2408:4005:3cf:7e00::1"]),
    ],
)
def test_address_lists_in_every_ecs_spelling(raw: str | None, expected: list[str]) -> None:
    assert parse_address_list(raw) == expected


def test_mac_listing_skips_junk_and_keeps_server_spelling() -> None:
    listing = "00:16:3e:2c:8a:10/\n00:16:3E:2C:8A:11/\n../etc/\n\n"
    assert parse_mac_listing(listing) == ["00:16:3e:2c:8a:10", "00:16:3E:2C:8A:11"]
    assert parse_mac_listing(None) == []


def test_nic_from_values_normalizes_and_types_fields() -> None:
    nic = AliyunNic.from_values(
        "00:16:3E:2C:8A:11",
        {
            "network-interface-id": " eni-2zeb6w2r8y0u4i1o7p3a\n",
            "primary-ip-address": "172.16.33.10",
            "netmask": "255.255.240.0",
            "gateway": "172.16.47.253",
            "private-ipv4s": '["172.16.33.10","172.16.33.11"]',
            "ipv6s": "[2408:4005:3cf:7e11::b6a8]",
            "vswitch-cidr-block": None,
            "vpc-id": "",
        },
    )
    assert nic.mac == "00:16:3e:2c:8a:11"
    assert nic.network_interface_id == "eni-2zeb6w2r8y0u4i1o7p3a"
    assert nic.vpc_id is None  # empty answer = not set
    assert nic.ipv4_addresses() == ["172.16.33.10", "172.16.33.11"]
    assert nic.ipv6s == ["2408:4005:3cf:7e11::b6a8"]
    # No vswitch-cidr-block: the subnet comes from primary IP and netmask.
    assert str(nic.ipv4_subnet()) == "172.16.32.0/20"


def test_instance_matches_devices_by_normalized_mac() -> None:
    nic = AliyunNic.from_values("00:16:3e:2c:8a:10", {"vpc-id": "vpc-1"})
    inst = AliyunInstance(nics={nic.mac: nic})
    assert inst.known_macs() == frozenset({"00:16:3e:2c:8a:10"})
    assert inst.nic_for(DeviceIdentifiers(name="eth0", mac_address="00-16-3E-2C-8A-10")) is nic
    assert inst.nic_for(DeviceIdentifiers(name="eth9", mac_address="00:16:3e:00:00:01")) is None
    assert inst.nic_for(DeviceIdentifiers(name="bond0")) is None
