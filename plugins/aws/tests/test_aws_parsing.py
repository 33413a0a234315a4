"""Pure logic: IMDS value parsing, local evidence and endpoint selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from dranet_cloud_aws.detection import local_evidence
from dranet_cloud_aws.metadata_source import endpoint_from
from dranet_cloud_aws.snapshot import AwsInstance, Eni, parse_listing, split_lines

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.toolkit.metadata import Endpoint

# --- parsing ----------------------------------------------------------------------


def test_listing_strips_directory_slashes_and_blank_lines() -> None:
    assert parse_listing("0e:5c:1a:2b:3c:01/\n0E:5C:1A:2B:3C:02/\n\n") == [
        "0e:5c:1a:2b:3c:01",
        "0E:5C:1A:2B:3C:02",
    ]
    assert parse_listing(None) == []
    assert split_lines(" 10.0.0.5 \r\n10.0.0.6") == ["10.0.0.5", "10.0.0.6"]


def test_eni_from_raw_normalizes_and_splits() -> None:
    eni = Eni.from_raw(
        "0E-5C-1A-2B-3C-09",
        {
            "device-number": "3",
            "network-card": "1",
            "interface-id": "eni-0123",
            "local-ipv4s": "10.0.1.5\n10.0.1.6\n10.0.1.7",
            "subnet-ipv4-cidr-block": "10.0.0.0/20",
            "subnet-ipv6-cidr-blocks": "2600:1f16:1:2::/64",
            "vpc-ipv4-cidr-blocks": "10.0.0.0/16\n100.64.0.0/16",
            "ipv4-prefix": "10.0.1.16/28\n10.0.1.32/28",
            "ipv6-prefix": "2600:1f16:1:2:abcd::/80",
            "ipv6s": None,
        },
    )
    assert eni.mac == "0e:5c:1a:2b:3c:09"
    assert (eni.network_card, eni.device_number) == (1, 3)
    assert eni.primary_ipv4 == "10.0.1.5"
    assert eni.secondary_ipv4s == ["10.0.1.6", "10.0.1.7"]
    assert eni.vpc_ipv4_cidr_blocks == ["10.0.0.0/16", "100.64.0.0/16"]
    assert eni.ipv4_prefixes == ["10.0.1.16/28", "10.0.1.32/28"]
    assert eni.ipv6_prefixes == ["2600:1f16:1:2:abcd::/80"]
    assert eni.ipv6s == []
    assert not eni.is_primary


def test_eni_from_raw_drops_garbage_and_defaults_the_card() -> None:
    eni = Eni.from_raw(
        "0e:5c:1a:2b:3c:0a",
        {
            "device-number": "zero",
            "network-card": None,  # single-card instance types omit the key
            "local-ipv4s": "10.0.1.5\nnot-an-ip",
            "ipv4-prefix": "10.0.1.16/28\n10.0.1.999/28",
        },
    )
    assert eni.device_number is None and eni.network_card == 0
    assert eni.local_ipv4s == ["10.0.1.5"]
    assert eni.ipv4_prefixes == ["10.0.1.16/28"]


def test_instance_known_macs_are_normalized_and_lookup_accepts_go_spellings() -> None:
    inst = AwsInstance.from_raw(
        endpoint="http://127.0.0.1:1",
        document={"instanceId": "i-1", "instanceType": "p5.48xlarge", "region": "us-east-2"},
        placement={"placement/partition-number": "3", "placement/group-name": None},
        enis={"0E:5C:1A:2B:3C:01": {"device-number": "0"}},
    )
    assert inst.known_macs() == frozenset({"0e:5c:1a:2b:3c:01"})
    assert inst.eni("0E-5C-1A-2B-3C-01") is not None
    assert inst.eni("0e5c1a2b3c01") is None  # AWS never publishes bare hex: not a MAC here
    assert inst.eni("not a mac") is None
    assert inst.partition_number == 3 and inst.placement_group is None
    assert inst.identity.instance_type == "p5.48xlarge"


# --- local evidence ------------------------------------------------------------------


def _evidence(root: Path) -> str | None:
    return local_evidence(ProviderContext(host_root=HostRoot(root), env={}))


def _root(tmp_path: Path, **dmi: str) -> HostRootBuilder:
    return HostRootBuilder(tmp_path / "root").dmi(**dmi)


def test_nitro_vendor_is_evidence(tmp_path: Path) -> None:
    root = _root(tmp_path, sys_vendor="Amazon EC2").build()
    assert _evidence(root) == "DMI sys_vendor=Amazon EC2"


def test_xen_hypervisor_uuid_is_evidence(tmp_path: Path) -> None:
    root = _root(tmp_path, sys_vendor="Xen").hypervisor_uuid("ec2a1b2c-0000-1111").build()
    evidence = _evidence(root)
    assert evidence is not None and "hypervisor" in evidence


def test_xen_uuid_and_serial_must_match_ignoring_case(tmp_path: Path) -> None:
    same = _root(
        tmp_path, sys_vendor="Xen", product_uuid="EC2ABCDE-1234", product_serial="ec2abcde-1234"
    ).build()
    assert _evidence(same) is not None
    other = (
        HostRootBuilder(tmp_path / "other")
        .dmi(sys_vendor="Xen", product_uuid="EC2ABCDE-1234", product_serial="ec2ffff-9999")
        .build()
    )
    assert _evidence(other) is None
    # A Xen guest elsewhere whose uuid happens to start with "ec2" but has no serial.
    lone = HostRootBuilder(tmp_path / "lone").dmi(sys_vendor="Xen", product_uuid="ec2aa").build()
    assert _evidence(lone) is None


def test_other_clouds_and_bare_metal_are_not_evidence(tmp_path: Path) -> None:
    gce = _root(tmp_path, sys_vendor="Google", product_name="Google Compute Engine").build()
    assert _evidence(gce) is None
    assert _evidence(tmp_path / "nothing-here") is None


# --- endpoint -----------------------------------------------------------------------


def endpoint_for(env: dict[str, str], **settings: str) -> Endpoint:
    """The endpoint the plugin's session uses for ``env`` and ``--set`` ``settings``."""
    options = ProviderOptions(settings=dict(settings))
    return endpoint_from(env, endpoint_mode=options.setting("aws.endpoint_mode"))


def test_default_endpoint_is_ipv4_link_local() -> None:
    ep = endpoint_for({})
    assert ep.url == "http://169.254.169.254" and ep.is_default


@pytest.mark.parametrize(
    ("env", "settings"),
    [
        ({"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"}, {}),
        ({}, {"aws.endpoint_mode": "ipv6"}),
    ],
)
def test_ipv6_mode_selects_the_nitro_ipv6_endpoint(
    env: dict[str, str], settings: dict[str, str]
) -> None:
    assert endpoint_for(env, **settings).url == "http://[fd00:ec2::254]"


def test_setting_overrides_the_sdk_mode_variable() -> None:
    env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"}
    assert endpoint_for(env, **{"aws.endpoint_mode": "ipv4"}).url == "http://169.254.169.254"


def test_overrides_win_ours_before_the_sdk_variable() -> None:
    sdk = endpoint_for({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:8111/"})
    assert sdk.url == "http://127.0.0.1:8111"
    assert sdk.source.startswith("AWS_EC2_METADATA_SERVICE_ENDPOINT=")
    both = endpoint_for(
        {
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:8111",
            "DRANET_CLOUD_AWS_METADATA_ENDPOINT": "unix:///run/imds.sock",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6",
        }
    )
    assert both.url == "unix:///run/imds.sock"
