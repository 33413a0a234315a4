"""Which cluster a store's claims belong to, checked when ``serve`` starts.

A store records the identity of its claims' cluster (the ``kube-system``
Namespace UID, meta key ``cluster_uid``) only from proof (:mod:`.reclaim`
names the rules).  ``serve``'s own API is one: the kubeconfig (or service
account) a sidecar is deployed with is the node's cluster, so a store that
records none records it at a start whose API answers.  A store that records
another one is the wrong journal or the wrong kubeconfig:

* in cluster scope every address of the journal is an ``IPAddress`` object of
  the recorded cluster, and new ones would be reserved where no node of that
  cluster looks, so the caller refuses to start (:class:`ClusterMismatch`,
  exit 2, naming both UIDs, the kubeconfig, its context and the fix);
* in node scope (``--gc-kubernetes``) only leak reclaiming depends on it, and
  every collection frees nothing until it is fixed; the caller says so.

``adopt`` (``--adopt-cluster``) records the API's cluster over another one:
the operator's word that the node moved.  The check is one GET with a
deadline, made by a thread that may block (never an event loop).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import (
    ClusterMismatch,
    api_where,
    record_cluster,
    recorded_cluster,
)

__all__ = ["ClusterCheck", "check_cluster", "store_path"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterCheck:
    """What one check found: the API's cluster and what the store recorded before it."""

    uid: str
    before: str | None
    recorded: bool  # the store records ``uid`` now and did not before


def store_path(store: Any) -> str:
    """The file a store (or a cluster-scope store's journal) lives in, for messages."""
    journal = getattr(store, "journal", store)
    return str(getattr(journal, "path", "memory"))


def check_cluster(
    store: IpamStore,
    client: Any,
    *,
    what: str,
    adopt: bool = False,
    deadline: float | None = None,
) -> ClusterCheck:
    """Compare ``client``'s cluster with ``store``'s; record it when the store has none.

    ``what`` names the part of ``serve`` that depends on it (``--ipam-scope
    cluster``, ``--gc-kubernetes``).  Raises :class:`ClusterMismatch` for
    another cluster (unless ``adopt``) and the client's
    :class:`~dranet_cloud.kube.KubeError` when the API does not answer.
    """
    uid: str = client.cluster_uid(deadline=deadline)
    known = recorded_cluster(store)
    if known == uid:
        return ClusterCheck(uid, known, recorded=False)
    if known is not None and not adopt:
        raise ClusterMismatch(
            f"serve ({what}): the Kubernetes API ({api_where(client)}) is cluster {uid} "
            f"(kube-system Namespace UID), but the IPAM store {store_path(store)} was written "
            f"against cluster {known}: its addresses and claims are that cluster's. Point "
            "--kubeconfig (or KUBECONFIG, or the kubeconfig's current context) at cluster "
            f"{known}; if this node really moved to cluster {uid}, start once with "
            "--adopt-cluster (then `dranet-cloud ipam gc --kubernetes` frees the old claims' "
            "addresses as they prove gone)"
        )
    if not record_cluster(store, uid):
        return ClusterCheck(uid, known, recorded=False)  # a store that keeps no facts
    log.warning(
        "serve: recorded cluster %s (%s) as the cluster of the IPAM store %s: serve's own API "
        "answered%s; a later `ipam gc` against another cluster frees nothing",
        uid,
        api_where(client),
        store_path(store),
        f", replacing {known} (--adopt-cluster)" if known else "",
    )
    return ClusterCheck(uid, known, recorded=True)
