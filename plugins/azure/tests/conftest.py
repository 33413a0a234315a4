"""Fixtures shared by the Azure plugin's tests: the IMDS emulator, the ND H100
v5 sample host, a private copy of the default instance document and a context
pointed at the emulator (all from
:class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`)."""

from __future__ import annotations

from dranet_cloud_azure import plugin
from dranet_cloud_azure.emulator import load_fixture

from dranet_cloud.testing.plugin_fixtures import PluginFixtures

kit = PluginFixtures(plugin)
azure_document = kit.document("azure_document", load_fixture(None))
azure_emulator = kit.emulator("azure_emulator")
azure_sample = kit.sample("azure_sample")
azure_context = kit.context("azure_context", emulator="azure_emulator")
