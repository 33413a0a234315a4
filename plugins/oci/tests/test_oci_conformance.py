"""The shared plugin conformance suite on the BM.GPU.H100.8 sample host.

OCI answers attributes only, as DRANET's OKE provider does, so no NIC may
get a device config.
"""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestOciConformance(PluginConformance):
    plugin_name = "oci"
    has_device_config = False
