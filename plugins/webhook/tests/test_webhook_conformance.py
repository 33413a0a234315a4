"""The shared plugin conformance suite, run against the example webhook (emulator hook)."""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestWebhookConformance(PluginConformance):
    plugin_name = "webhook"
