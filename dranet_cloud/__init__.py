"""dranet-cloud: what the cloud knows about a node's NICs, for DRANET.

Plugins import :data:`hookimpl` from :mod:`dranet_cloud.contract.hookspecs`; the host
is :class:`dranet_cloud.host.provider_host.ProviderHost`.
"""

__version__ = "0.2.0"
