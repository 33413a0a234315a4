"""Facts about Oracle Cloud that the client, the emulator and the samples share.

They are facts about the platform (the IMDS v2 address and header, the DMI
asset tag, DRANET's attribute names), not choices of this plugin, so they
live in one place where the emulator cannot disagree with the client.
"""

from __future__ import annotations

PLUGIN = "oci"

# What `/sys/class/dmi/id/chassis_asset_tag` reads on every OCI instance,
# VM and bare metal (cloud-init's ds-identify keys on it too).
DMI_CHASSIS_ASSET_TAG = "OracleCloud.com"

DEFAULT_ENDPOINT = "http://169.254.169.254"
ENDPOINT_ENV = "DRANET_CLOUD_OCI_METADATA_ENDPOINT"

# IMDS v2: every request carries this header; v1 paths may be disabled.
AUTH_HEADER = "Authorization"
AUTH_VALUE = "Bearer Oracle"
BASE_PATH = "/opc/v2"
INSTANCE_PATH = f"{BASE_PATH}/instance/"
HOST_PATH = f"{BASE_PATH}/host/"
VNICS_PATH = f"{BASE_PATH}/vnics/"

# DRANET's attribute domain and its five names (pkg/cloudprovider/oke).
ATTRIBUTE_DOMAIN = "oke.dra.net"
HPC_ISLAND_ID = f"{ATTRIBUTE_DOMAIN}/hpcIslandId"
NETWORK_BLOCK_ID = f"{ATTRIBUTE_DOMAIN}/networkBlockId"
LOCAL_BLOCK_ID = f"{ATTRIBUTE_DOMAIN}/localBlockId"
RACK_ID = f"{ATTRIBUTE_DOMAIN}/rackId"
GPU_MEMORY_FABRIC_ID = f"{ATTRIBUTE_DOMAIN}/gpuMemoryFabricId"
# Beyond DRANET: three per-VNIC facts, on the NIC whose MAC is the VNIC's.
VNIC_ID = f"{ATTRIBUTE_DOMAIN}/vnicId"
SUBNET_CIDR_BLOCK = f"{ATTRIBUTE_DOMAIN}/subnetCidrBlock"
VIRTUAL_ROUTER_IP = f"{ATTRIBUTE_DOMAIN}/virtualRouterIp"

# DRANET keeps at most this many characters of an OCID's unique suffix.
OCID_SUFFIX_MAX = 60

TOPOLOGY_FIX = (
    "enable RDMA topology data (TopologyData) for the tenancy, as DRANET asks, so "
    "/opc/v2/host/ carries rdmaTopologyData"
)
