"""The Kubernetes API: ResourceClaims (leak reclaiming), Nodes, Pods, IPAddress objects
(cluster-wide address reservations), Leases and the cluster's identity.

:class:`KubeClient` is the facade every caller uses; :class:`Informer` keeps a
local copy of a resource by LIST once then WATCH (the one watch loop of the
project) and :class:`LeaseElector` chooses the one owner of work no node owns.
"""

from __future__ import annotations

from dranet_cloud.kube.client import (
    ClaimIdentity,
    KubeAlreadyExists,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    load_config,
)
from dranet_cloud.kube.informer import IPADDRESSES, NODES, PODS, Informer, Resource
from dranet_cloud.kube.ipaddress import IPAddressObject, ParentRef, canonical_name
from dranet_cloud.kube.lease import CANDIDATES_ANNOTATION, LeaseElector
from dranet_cloud.kube.stream import LineTooLong

__all__ = [
    "CANDIDATES_ANNOTATION",
    "IPADDRESSES",
    "NODES",
    "PODS",
    "ClaimIdentity",
    "IPAddressObject",
    "Informer",
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
