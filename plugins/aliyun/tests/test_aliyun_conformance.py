"""The shared plugin conformance suite, on both sample hosts.

The default (eRDMA) host claims an IPVLAN child on eth1; the bond host on
bond0, where the cloud config itself asks for the subinterface.
"""

from __future__ import annotations

from dranet_cloud.testing.conformance import PluginConformance


class TestAliyunConformance(PluginConformance):
    plugin_name = "aliyun"


class TestAliyunBondConformance(PluginConformance):
    plugin_name = "aliyun"
    sample_variant = "bond"
