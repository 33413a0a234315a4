"""Names and numbers of Alibaba Cloud ECS that the rest of the plugin shares.

They live in one place because they are facts about ECS (header names, the
metadata address, DMI strings) rather than choices of this plugin, and the
emulator must agree with the client on every one of them.
"""

from __future__ import annotations

import re

PLUGIN = "aliyun"

# DRANET's attribute domain for Alibaba Cloud (pkg/cloudprovider/alibaba).
ATTRIBUTE_DOMAIN = "alibaba.dra.net"

# What `/sys/class/dmi/id/product_name` reads on every ECS instance type,
# bare-metal (ebm*) included.
DMI_PRODUCT_NAME = "Alibaba Cloud ECS"

DEFAULT_ENDPOINT = "http://100.100.100.200"
ENDPOINT_ENV = "DRANET_CLOUD_ALIYUN_METADATA_ENDPOINT"

# The token ("hardened mode") session of the ECS metadata service.
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"
TOKEN_TTL_SECONDS = 21600  # the ECS maximum, and what DRANET asks for

METADATA_ROOT = "/latest/meta-data"

# ECS instance ids: "i-" and lower-case alphanumerics (i-bp1h4adlltjc1d48goaq).
INSTANCE_ID = re.compile(r"^i-[0-9a-z]{4,}$")

# `bonding/mode` of an LACP bond (the kernel prints "802.3ad 4").
LACP_MODE = "802.3ad"

# Prefix of eRDMA devices under /sys/class/infiniband (erdma_0, erdma_1...).
ERDMA_PREFIX = "erdma"
