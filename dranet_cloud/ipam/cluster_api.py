"""What cluster scope writes on the Kubernetes API, and what it needs from it.

The marks on the ``IPAddress`` objects this project owns (the manager label,
the claim, node, device and pool in labels and annotations, the parent
reference's kind) are read back by the allocator (:mod:`.cluster`: is this
object ours, for this claim?) and by the cluster-wide sweep
(:mod:`.cluster_reclaim`: which claim does it name?), so they live here,
beside :class:`IPAddressApi`, the calls both make: neither of the two
modules imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..kube.ipaddress import IP_FAMILY_LABEL, MANAGED_BY_LABEL

if TYPE_CHECKING:
    from ..kube.client import ClaimListing
    from ..kube.ipaddress import IPAddressObject, ParentRef

__all__ = [
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

CLAIM_GROUP = "resource.k8s.io"
CLAIM_RESOURCE = "resourceclaims"


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
        self, label_selector: str | None = None, *, deadline: float | None = None
    ) -> Sequence[IPAddressObject]: ...

    def list_ip_address_names(self, *, deadline: float | None = None) -> Sequence[str]: ...

    def list_resource_claims(self, *, deadline: float | None = None) -> ClaimListing: ...
