"""What cluster scope writes on the Kubernetes API, and what it needs from it.

The marks on the ``IPAddress`` objects this project owns (the manager label,
the claim, node, device and pool in labels and annotations, the parent
reference's kind) are read back by the allocator (:mod:`.allocator`: is this
object ours, for this claim?) and by the cluster-wide sweep
(:mod:`.reclaim`: which claim does it name?), so they live here,
beside :class:`IPAddressApi`, the calls both make: neither of the two
modules imports the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from dranet_cloud.kube.client import ClaimListing
from dranet_cloud.kube.ipaddress import (
    IP_FAMILY_LABEL,
    MANAGED_BY_LABEL,
    IPAddressObject,
    ParentRef,
)
from dranet_cloud.toolkit.iprange import IPRange

__all__ = [
    "BLOCK_LABEL",
    "BLOCK_SIZE",
    "CLAIM_GROUP",
    "CLAIM_RESOURCE",
    "CLAIM_UID_ANNOTATION",
    "CLAIM_UID_LABEL",
    "DEVICE_ANNOTATION",
    "IP_FAMILY_LABEL",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "NODE_ANNOTATION",
    "NODE_LABEL",
    "POOL_ANNOTATION",
    "RANGE_ANNOTATION",
    "IPAddressApi",
    "block_index",
    "block_selector",
    "block_value",
    "range_id",
]

# This project's value: the API server's repair loop leaves objects managed
# by anyone but ipallocator.k8s.io alone.
MANAGED_BY = "dranet-cloud.dra.net"
_PREFIX = "dranet-cloud.dra.net/"
# Labels (selectable: kubectl get ipaddresses -l dranet-cloud.dra.net/node=NODE)
# when the value is a valid label value; the annotations always hold them.
NODE_LABEL = _PREFIX + "node"
CLAIM_UID_LABEL = _PREFIX + "claim-uid"
NODE_ANNOTATION = _PREFIX + "node"
CLAIM_UID_ANNOTATION = _PREFIX + "claim-uid"
DEVICE_ANNOTATION = _PREFIX + "device"  # the NIC's identity: mac:.. (20 bytes on InfiniBand)
POOL_ANNOTATION = _PREFIX + "pool"
RANGE_ANNOTATION = _PREFIX + "range"
# ``<range id>.<block index>``: which 64-address block of which range an object
# lies in, so that a node watches only the blocks it uses (``block in (...)``)
# and never the whole range.  Objects without it (an earlier version's, or
# someone else's in the range) are learned only from the 409 their address
# answers a create with.
BLOCK_LABEL = _PREFIX + "block"
BLOCK_SIZE = 64

CLAIM_GROUP = "resource.k8s.io"
CLAIM_RESOURCE = "resourceclaims"


def range_id(rng: IPRange) -> str:
    """A short stable name of ``rng`` (every node derives the same from the same range)."""
    return hashlib.sha256(str(rng).encode()).hexdigest()[:10]


def block_index(rng: IPRange, value: int) -> int:
    """The block of ``rng`` that the address ``value`` (an integer) lies in."""
    return (value - int(rng.start)) // BLOCK_SIZE


def block_value(rng: IPRange, block: int) -> str:
    """The :data:`BLOCK_LABEL` value of ``block`` of ``rng`` (hex, lower case)."""
    return f"{range_id(rng)}.{block:x}"


def block_selector(rng: IPRange, blocks: Iterable[int]) -> str:
    """The label selector of the objects in ``blocks`` of ``rng``."""
    values = ",".join(block_value(rng, b) for b in sorted(set(blocks)))
    return f"{BLOCK_LABEL} in ({values})"


class IPAddressApi(Protocol):
    """What the allocator needs from the API (:class:`~dranet_cloud.kube.KubeClient`)."""

    def create_ip_address(
        self,
        name: str,
        parent: ParentRef,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        *,
        deadline: float | None = None,
    ) -> IPAddressObject: ...

    def get_ip_address(self, name: str, *, deadline: float | None = None) -> IPAddressObject: ...

    def delete_ip_address(self, name: str, uid: str, *, deadline: float | None = None) -> Any: ...

    def list_ip_addresses(
        self,
        label_selector: str | None = None,
        *,
        deadline: float | None = None,
        cached: bool = False,
    ) -> Sequence[IPAddressObject]: ...

    def list_resource_claims(self, *, deadline: float | None = None) -> ClaimListing: ...

    def get_node(self, name: str, *, deadline: float | None = None) -> dict[str, Any]: ...
