"""Is this node a CKS node?  Configuration first, then the Node's label.

Local evidence does no I/O beyond two file checks: it asks whether this
node's Kubernetes name and an API configuration are known
(:func:`.metadata_source.endpoint_from`).  That is configuration, not
hardware (CKS nodes carry no DMI marker), so it ranks after every cloud's
DMI evidence.  Confirmation is DRANET's own test: read the Node and check
that its ``cks.coreweave.com/cluster`` label is non-empty, so a Kubernetes
node elsewhere is not taken for CKS.  Kept apart from the core's Kubernetes
modules, which auto-detection must not pay to import on every node.
"""

from __future__ import annotations

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.contract.hookspecs import CONFIGURED_EVIDENCE

from .labels import CKS_CLUSTER_LABEL, PLUGIN
from .metadata_source import endpoint_from


def local_evidence(context: ProviderContext) -> str | None:
    where = endpoint_from(context)
    return f"{CONFIGURED_EVIDENCE}Kubernetes {where} (CKS if labelled so)" if where else None


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One fresh read of the Node, bounded by ``timeout``: CKS when the label is set.

    Under the rule of :func:`dranet_cloud.contract.confirm.confirm_probe`: no answer
    from the API raises (the core's Node reader, naming the fix); a Node
    without the label is a Kubernetes node elsewhere, logged at INFO (every
    node of every cluster has this configuration, so it is no warning) and
    ``None``.
    """

    def probe() -> str:
        node = context.node
        cluster = node.labels(timeout, fresh=True).get(CKS_CLUSTER_LABEL)
        if not cluster:
            raise NotThisCloud(f"{node.describe()} has no {CKS_CLUSTER_LABEL} label")
        return f"{node.describe()}: {CKS_CLUSTER_LABEL}={cluster}"

    return confirm_probe(PLUGIN, probe)
