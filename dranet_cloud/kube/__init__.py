"""The Kubernetes API: ResourceClaims (leak reclaiming), Nodes, IPAddress objects
(cluster-wide address reservations) and the cluster's identity.

:class:`KubeClient` is the facade every caller uses; importing this package
imports neither lightkube nor httpx2 (a client built on them is made on use).
"""

from __future__ import annotations

from .client import (
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
from .ipaddress import (
    IP_FAMILY_LABEL,
    MANAGED_BY_LABEL,
    IPAddressObject,
    ParentRef,
    canonical_name,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "IP_FAMILY_LABEL",
    "KUBECONFIG_ENV",
    "MANAGED_BY_LABEL",
    "MAX_LIST_RESTARTS",
    "SERVICE_ACCOUNT_DIR",
    "ClaimIdentity",
    "ClaimListing",
    "IPAddressObject",
    "KubeAlreadyExists",
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeInvalid",
    "KubeNotFound",
    "ParentRef",
    "canonical_name",
    "load_config",
]
