"""Fixtures of the CKS plugin's tests: the sample node and the Kubernetes API
emulator serving its Node (from
:class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`)."""

from __future__ import annotations

import pytest
from dranet_cloud_cks import plugin

from dranet_cloud.testing import Emulator
from dranet_cloud.testing.plugin_fixtures import PluginFixtures

kit = PluginFixtures(plugin)
cks_sample = kit.sample("cks_sample")
cks_emulator = kit.emulator("cks_emulator")


@pytest.fixture
def cks_environ(cks_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment points at the emulator: the CLI's main() reads it there."""
    for key, value in cks_emulator.env.items():
        monkeypatch.setenv(key, value)
