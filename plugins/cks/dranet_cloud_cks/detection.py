"""The CKS plugin's local evidence, with no I/O beyond two file checks.

Kept apart from the core's Kubernetes modules (which auto-detection must not
pay to import on every node): it only asks whether this node's Kubernetes
name is known (``--node-name`` or ``NODE_NAME``) and whether an API
configuration is at hand (``--kubeconfig``, ``KUBECONFIG``, or the pod's
service account).  That is configuration, not hardware, so it ranks after
every cloud's DMI evidence; the confirmation then reads the Node.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dranet_cloud.hookspecs import CONFIGURED_EVIDENCE

if TYPE_CHECKING:
    from dranet_cloud.context import ProviderContext

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def local_evidence(context: ProviderContext) -> str | None:
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
    return f"{CONFIGURED_EVIDENCE}Kubernetes Node {name} via {via} (CKS if labelled so)"
