"""The OCI plugin's test fixtures, all from the one factory every plugin uses."""

from __future__ import annotations

from dranet_cloud_oci import plugin
from dranet_cloud_oci.emulator import load_fixture

from dranet_cloud.testing.plugin_fixtures import PluginFixtures

kit = PluginFixtures(plugin)
# The three documents IMDS v2 serves ({"instance", "host", "vnics"}), a deep copy per test.
oci_documents = kit.document("oci_documents", load_fixture(None))
# IMDS v2 on 127.0.0.1 and a context pointed at it; the BM.GPU.H100.8 sample node.
oci_emulator = kit.emulator("oci_emulator")
oci_context = kit.context("oci_context", emulator="oci_emulator")
oci_sample = kit.sample("oci_sample")
