"""The Kubernetes API: ResourceClaims (leak reclaiming), Nodes, Pods, IPAddress objects
(cluster-wide address reservations), Leases and the cluster's identity.

:class:`KubeClient` is the facade every caller uses; :class:`Informer` keeps a
local copy of a resource by LIST once then WATCH (the one watch loop of the
project) and :class:`LeaseElector` chooses the one owner of work no node owns.
"""

from __future__ import annotations

from dranet_cloud.kube.client import (
    DEFAULT_MAX_BYTES,
    DEFAULT_PAGE_SIZE,
    DEFAULT_TIMEOUT,
    KUBECONFIG_ENV,
    MAX_LIST_RESTARTS,
    SERVICE_ACCOUNT_DIR,
    ClaimIdentity,
    ClaimListing,
    KubeAlreadyExists,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    load_config,
)
from dranet_cloud.kube.informer import (
    IPADDRESSES,
    LEASES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    Informer,
    InformerStats,
    Resource,
)
from dranet_cloud.kube.ipaddress import (
    IP_FAMILY_LABEL,
    MANAGED_BY_LABEL,
    IPAddressObject,
    ParentRef,
    canonical_name,
)
from dranet_cloud.kube.lease import CANDIDATES_ANNOTATION, LeaseElector
from dranet_cloud.kube.stream import LineTooLong

__all__ = [
    "CANDIDATES_ANNOTATION",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "IPADDRESSES",
    "IP_FAMILY_LABEL",
    "KUBECONFIG_ENV",
    "LEASES",
    "MANAGED_BY_LABEL",
    "MAX_LIST_RESTARTS",
    "NODES",
    "PODS",
    "RESOURCE_CLAIMS",
    "SERVICE_ACCOUNT_DIR",
    "ClaimIdentity",
    "ClaimListing",
    "IPAddressObject",
    "Informer",
    "InformerStats",
    "KubeAlreadyExists",
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeInvalid",
    "KubeNotFound",
    "LeaseElector",
    "LineTooLong",
    "ParentRef",
    "Resource",
    "canonical_name",
    "load_config",
]
