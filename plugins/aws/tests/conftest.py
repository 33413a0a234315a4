"""Fixtures shared by the AWS plugin's tests: the default fixture tree, a running
IMDS emulator, a context pointed at it, and the sample host root."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_aws.emulator import build_emulator, load_fixture
from dranet_cloud_aws.sample import build_sample_host
from dranet_cloud_aws.snapshot import ENI_KEYS, PLACEMENT_KEYS, AwsInstance

from dranet_cloud.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.hostroot import HostRoot
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.models import DeviceIdentifiers
from dranet_cloud.testing import Emulator, render_leaf

_DEFAULT_TREE = load_fixture(None)


@pytest.fixture
def aws_tree() -> dict[str, Any]:
    """A private deep copy of the default fixture (tests may edit it)."""
    return copy.deepcopy(_DEFAULT_TREE)


def fixture_macs(tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    macs: dict[str, dict[str, Any]] = tree["meta-data"]["network"]["interfaces"]["macs"]
    return macs


@pytest.fixture
def aws_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def aws_sample(tmp_path: Path) -> SampleHost:
    sample = build_sample_host(tmp_path / "host", None)
    assert sample is not None
    return sample


@pytest.fixture
def aws_context(aws_emulator: Emulator, aws_sample: SampleHost) -> ProviderContext:
    return ProviderContext(
        host_root=HostRoot(aws_sample.root),
        env=aws_emulator.env,
        options=ProviderOptions(metadata_deadline=5.0),
        ipam_factory=MemoryStore,
    )


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
