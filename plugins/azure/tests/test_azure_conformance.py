"""The shared plugin conformance suite on the ND H100 v5 sample host."""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestAzureConformance(PluginConformance):
    plugin_name = "azure"
    # The IB NICs' own addresses from the KVP pool (Azure hands out no IPVLAN ranges).
    profile_request = {"profile": "azure-ipoib"}
