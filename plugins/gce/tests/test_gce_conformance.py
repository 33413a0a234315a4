"""The shared plugin conformance suite, run against the GCE emulator and sample host."""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestGceConformance(PluginConformance):
    plugin_name = "gce"


class TestGceA3Conformance(PluginConformance):
    plugin_name = "gce"
    sample_variant = "a3-megagpu-8g"
