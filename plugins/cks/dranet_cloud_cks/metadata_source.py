"""The CKS metadata source: this node's own Kubernetes Node object.

CKS has no instance metadata server; a node's facts are labels on its Node,
read through the core's Kubernetes facts source (``context.node``, on the
same bounded client as leak reclaiming).  Two parts of the plugin skeleton
therefore look different here, on purpose:

* :func:`endpoint_from` takes the whole context, not only the environment:
  the node's name may come from ``--node-name`` and the API from
  ``--kubeconfig``, which are options.  It says where the Node would be read
  from without any I/O, which is all local evidence may do.
* there is no ``open_client``: the client is the core's
  :class:`dranet_cloud.kube.node.NodeSource` (``context.node``), which owns
  the name, the credentials, the retries and the cache; a wrapper here
  would only return it.

Only the standard library is imported at module level (not even
:mod:`.labels`): local evidence calls :func:`endpoint_from` on every node
start.
"""

from __future__ import annotations

import os

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable

from .labels import CKS_CLUSTER_LABEL, PLUGIN, is_cks, relevant
from .snapshot import CksInstance, rdma_devices_by_pci

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def endpoint_from(context: ProviderContext) -> str | None:
    """``Node NAME via …`` when a node name and an API configuration are at hand.

    The name is ``--node-name``, else ``NODE_NAME``; the API is
    ``--kubeconfig``, else ``KUBECONFIG``, else the pod's service account
    (``KUBERNETES_SERVICE_HOST`` and its token file).  ``None`` when either
    is missing: then there is no Node to read.
    """
    name = context.options.node_name or context.env.get("NODE_NAME")
    if not name:
        return None
    kubeconfig = context.options.kubeconfig or context.env.get("KUBECONFIG")
    if kubeconfig:
        via = f"kubeconfig {kubeconfig}"
    elif os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.isfile(SERVICE_ACCOUNT_TOKEN):
        via = "the pod's service account"
    else:
        return None
    return f"Node {name} via {via}"


def load_instance(context: ProviderContext, deadline: float) -> CksInstance:
    """Read the Node (fresh: at start and on every refresh) and check it is CKS."""
    source = context.node
    all_labels = source.labels(deadline, fresh=True)
    if not is_cks(all_labels):
        raise ProviderUnavailable(
            f"{PLUGIN}: {source.describe()} has no {CKS_CLUSTER_LABEL} label, so it is not a "
            "CoreWeave CKS node; use another --cloud-provider-hint, or check NODE_NAME"
        )
    return CksInstance(
        provider=PLUGIN,
        endpoint=source.describe(),
        node_name=source.node_name or "",
        labels=relevant(all_labels),
        rdma_by_pci=rdma_devices_by_pci(context.host_root),
    )
