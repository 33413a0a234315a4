"""The shared plugin conformance suite, run against the AWS emulator and sample host."""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestAwsConformance(PluginConformance):
    plugin_name = "aws"


class TestAwsXenConformance(PluginConformance):
    """The Xen-era sample host (no ``Amazon EC2`` vendor) must be recognised too."""

    plugin_name = "aws"
    sample_variant = "xen"


class TestAwsTrn2Conformance(PluginConformance):
    """A trn2 node: its own IMDS fixture, 16 EFA functions with device groups."""

    plugin_name = "aws"
    sample_variant = "trn2"
