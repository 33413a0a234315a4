"""Node-local IPAM: one address per family per owner, durable across restarts.

The API is :class:`~dranet_cloud.ipam.base.IpamStore` (:class:`MemoryStore`,
:class:`SqliteStore`): ``allocate`` answers one host CIDR (/32, /128) per
range, IPv4 first, idempotent per owner; ``reserve`` raises
``AddressConflict`` when another owner holds an address.  Bad requests (two
ranges of one family, an unparsable address, ``collect()`` with no criterion)
raise :class:`InvalidIpamRequest`, a ``ConfigError`` and ``ValueError``.
"""

from __future__ import annotations

from dranet_cloud.ipam.base import Allocation, IpamStore, Owner
from dranet_cloud.ipam.node.memory import MemoryStore
from dranet_cloud.ipam.node.sqlite import (
    DEFAULT_IPAM_DB,
    IPAM_DB_ENV,
    SqliteStore,
    open_store,
    resolve_db_path,
)
from dranet_cloud.ipam.requests import InvalidIpamRequest

__all__ = [
    "DEFAULT_IPAM_DB",
    "IPAM_DB_ENV",
    "Allocation",
    "InvalidIpamRequest",
    "IpamStore",
    "MemoryStore",
    "Owner",
    "SqliteStore",
    "open_store",
    "resolve_db_path",
]
