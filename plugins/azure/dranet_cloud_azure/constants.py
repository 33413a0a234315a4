"""Facts about Azure that the client, the emulator and the sample hosts share.

They are facts about the platform (the IMDS address, its header and API
version, the DMI asset tag, DRANET's attribute names), not choices of this
plugin, so they live in one place where the emulator cannot disagree with
the client.
"""

from __future__ import annotations

PLUGIN = "azure"

# What `/sys/class/dmi/id/chassis_asset_tag` reads on every Azure VM
# (cloud-init's ds-identify keys on it too).
DMI_CHASSIS_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"

DEFAULT_ENDPOINT = "http://169.254.169.254"
ENDPOINT_ENV = "DRANET_CLOUD_AZURE_METADATA_ENDPOINT"

# IMDS refuses a request without this header (400), which is also how it
# tells itself apart from a proxy forwarding someone else's request.
METADATA_HEADER = "Metadata"
METADATA_HEADER_VALUE = "true"
# The version DRANET's Go provider pins; the one whose compute document
# carries interconnectGroupId/interconnectSubgroupId.
API_VERSION = "2025-11-11"
INSTANCE_PATH = "/metadata/instance"

# DRANET's attribute domain and its four names (pkg/cloudprovider/azure).
ATTRIBUTE_DOMAIN = "azure.dra.net"
VM_SIZE = f"{ATTRIBUTE_DOMAIN}/vmSize"
PLACEMENT_GROUP_ID = f"{ATTRIBUTE_DOMAIN}/placementGroupId"
INTERCONNECT_GROUP_ID = f"{ATTRIBUTE_DOMAIN}/interconnectGroupId"
INTERCONNECT_SUBGROUP_ID = f"{ATTRIBUTE_DOMAIN}/interconnectSubgroupId"
# Per NIC (DRANET PR #335): IMDS ipv4.subnet[0] as "<address>/<prefix>".
IPV4_SUBNET = f"{ATTRIBUTE_DOMAIN}/ipv4Subnet"
# Beyond DRANET: the accelerated-networking pairing (see pairing.py).
ACCELERATED_NETWORKING = f"{ATTRIBUTE_DOMAIN}/acceleratedNetworking"
ACCELERATED_NETWORKING_VF = f"{ATTRIBUTE_DOMAIN}/acceleratedNetworkingVf"

# Driver of Hyper-V's synthetic NIC, the one that owns the IP configuration.
NETVSC_DRIVER = "hv_netvsc"

# DRANET's per-NIC tables: 100 + the NIC's index in the IMDS interface list.
ROUTE_TABLE_BASE = 100
