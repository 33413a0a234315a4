"""Fixtures shared by the GCE plugin's tests: the default fixture tree, a parsed
snapshot, a running emulator and a context pointed at it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.emulator import build_emulator, load_fixture
from dranet_cloud_gce.instance import GceInstance, parse_instance

from dranet_cloud.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.models import DeviceIdentifiers
from dranet_cloud.testing import Emulator

_DEFAULT_TREE = load_fixture(None)


@pytest.fixture
def gce_tree() -> dict[str, Any]:
    """A private deep copy of the default fixture (tests may edit it)."""
    return copy.deepcopy(_DEFAULT_TREE)


@pytest.fixture
def gce_instance(gce_tree: dict[str, Any]) -> GceInstance:
    return parse_instance(gce_tree, endpoint="http://127.0.0.1:1")


@pytest.fixture
def gce_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def gce_context(gce_emulator: Emulator) -> ProviderContext:
    return ProviderContext(
        env=gce_emulator.env,
        options=ProviderOptions(metadata_deadline=5.0),
        ipam_factory=MemoryStore,
    )


@pytest.fixture
def ipam_context() -> ProviderContext:
    """No emulator: a context with a fresh in-memory IPAM (profile tests)."""
    return ProviderContext(env={}, ipam_factory=MemoryStore)


def fixture_devices(tree: dict[str, Any]) -> list[DeviceIdentifiers]:
    """eth0..eth8 as the node would report them, MACs from the fixture."""
    return [
        DeviceIdentifiers(name=f"eth{i}", mac_address=nic["mac"])
        for i, nic in enumerate(tree["instance"]["networkInterfaces"])
    ]


@pytest.fixture
def gce_devices(gce_tree: dict[str, Any]) -> list[DeviceIdentifiers]:
    return fixture_devices(gce_tree)


@pytest.fixture
def gce_sample(tmp_path: Path) -> SampleHost:
    """The plugin's sample a3-megagpu-8g node root (eth0..eth8 on PCI functions)."""
    host = plugin.sample_host(tmp_path / "gce-host", None)
    assert host is not None
    return host
