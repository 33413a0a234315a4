"""Fixtures shared by the AWS plugin's tests: the default fixture tree, a running
IMDS emulator, a context pointed at it, and the sample host root (the common
ones from :class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from dranet_cloud_aws import plugin
from dranet_cloud_aws.emulator import load_fixture
from dranet_cloud_aws.snapshot import ENI_KEYS, PLACEMENT_KEYS, AwsInstance

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import render_leaf
from dranet_cloud.testing.plugin_fixtures import PluginFixtures
from dranet_cloud.wire.models import DeviceIdentifiers

kit = PluginFixtures(plugin)
aws_tree = kit.document("aws_tree", load_fixture(None))
aws_emulator = kit.emulator("aws_emulator")
aws_sample = kit.sample("aws_sample")
aws_context = kit.context(
    "aws_context", emulator="aws_emulator", sample="aws_sample", metadata_deadline=5.0
)
aws_host = kit.host(
    "aws_host", "aws", emulator="aws_emulator", sample="aws_sample", metadata_deadline=5.0
)


def fixture_macs(tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    macs: dict[str, dict[str, Any]] = tree["meta-data"]["network"]["interfaces"]["macs"]
    return macs


@pytest.fixture
def aws_devices(aws_sample: SampleHost) -> list[DeviceIdentifiers]:
    """The sample node's ENA NICs (ens5, ens6; card 1: enp48s0, enp49s0)."""
    return HostRoot(aws_sample.root).net_devices()


def instance_from_tree(tree: dict[str, Any]) -> AwsInstance:
    """Parse a fixture tree the way the loader parses IMDS answers, without a server."""
    meta = tree["meta-data"]
    enis = {
        mac: {key: (render_leaf(keys[key]) if key in keys else None) for key in ENI_KEYS}
        for mac, keys in fixture_macs(tree).items()
    }
    placement = {
        key: (
            render_leaf(meta["placement"][key.split("/", 1)[1]])
            if key.split("/", 1)[1] in meta.get("placement", {})
            else None
        )
        for key in PLACEMENT_KEYS
    }
    return AwsInstance.from_raw(
        endpoint=None,
        document=tree["dynamic"]["instance-identity"]["document"],
        placement=placement,
        enis=enis,
    )


@pytest.fixture
def aws_instance(aws_tree: dict[str, Any]) -> AwsInstance:
    return instance_from_tree(aws_tree)


@pytest.fixture
def aws_macs(aws_tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ENIs of ``aws_tree`` by MAC (edits show up in ``make_instance``)."""
    return fixture_macs(aws_tree)


@pytest.fixture
def make_instance() -> Callable[[dict[str, Any]], AwsInstance]:
    """Parse an edited fixture tree into a snapshot, without a server."""
    return instance_from_tree
