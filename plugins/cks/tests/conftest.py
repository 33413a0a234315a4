"""Fixtures of the CKS plugin's tests: the sample node and the Kubernetes API
emulator serving its Node (from
:class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`)."""

from __future__ import annotations

from dranet_cloud_cks import plugin

from dranet_cloud.testing.plugin_fixtures import PluginFixtures

kit = PluginFixtures(plugin)
cks_sample = kit.sample("cks_sample")
cks_emulator = kit.emulator("cks_emulator")
