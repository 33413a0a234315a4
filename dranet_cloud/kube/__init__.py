"""Reads from the Kubernetes API: ResourceClaims (leak reclaiming) and Nodes.

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
    KubeClient,
    KubeError,
    KubeNotFound,
    load_config,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TIMEOUT",
    "KUBECONFIG_ENV",
    "MAX_LIST_RESTARTS",
    "SERVICE_ACCOUNT_DIR",
    "ClaimIdentity",
    "ClaimListing",
    "KubeClient",
    "KubeError",
    "KubeNotFound",
    "load_config",
]
