"""The shared plugin conformance suite, against the Kubernetes API emulator
serving the sample CKS Node."""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestCksConformance(PluginConformance):
    plugin_name = "cks"
    has_device_config = False  # DRANET's CKS provider has none either
