"""Fixtures shared by the GCE plugin's tests: the default fixture tree, a parsed
snapshot, a running emulator, a context pointed at it and the sample node
(the common ones from :class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`)."""

from __future__ import annotations

from typing import Any

import pytest
from dranet_cloud_gce import plugin
from dranet_cloud_gce.emulator import load_fixture
from dranet_cloud_gce.snapshot import GceInstance, parse_instance

from dranet_cloud.testing.plugin_fixtures import PluginFixtures
from dranet_cloud.wire.models import DeviceIdentifiers

kit = PluginFixtures(plugin)
gce_tree = kit.document("gce_tree", load_fixture(None))
gce_emulator = kit.emulator("gce_emulator")
gce_sample = kit.sample("gce_sample", directory="gce-host")
gce_context = kit.context("gce_context", emulator="gce_emulator", metadata_deadline=5.0)
# No emulator: a context with a fresh in-memory IPAM (profile tests).
ipam_context = kit.context("ipam_context")


@pytest.fixture
def gce_instance(gce_tree: dict[str, Any]) -> GceInstance:
    return parse_instance(gce_tree, endpoint="http://127.0.0.1:1")


def fixture_devices(tree: dict[str, Any]) -> list[DeviceIdentifiers]:
    """eth0..eth8 as the node would report them, MACs from the fixture."""
    return [
        DeviceIdentifiers(name=f"eth{i}", mac_address=nic["mac"])
        for i, nic in enumerate(tree["instance"]["networkInterfaces"])
    ]


@pytest.fixture
def gce_devices(gce_tree: dict[str, Any]) -> list[DeviceIdentifiers]:
    return fixture_devices(gce_tree)
