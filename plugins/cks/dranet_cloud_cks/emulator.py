"""The CKS "metadata server" is the Kubernetes API: the core's API emulator
serving this node's Node object.

``--fixture FILE`` takes a Node (``kubectl get node NAME -o json``) or a
List holding one; the default is ``fixtures/b200-node.json``, a CKS B200 node
with its fabric labels and one leaf-switch label per backend HCA.  The
emulator's ``env`` holds ``KUBECONFIG`` (a file with its bearer token) and
``NODE_NAME`` (the fixture's first Node), which is what this plugin reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.fixtures import load_fixture_json
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.errors import ConfigError

DEFAULT_FIXTURE = "b200-node.json"


def load_fixture(fixture: Path | None) -> dict[str, Any]:
    """The Node object of the fixture (the built-in one for ``None``)."""
    doc, where = load_fixture_json("cks", __package__, DEFAULT_FIXTURE, fixture)
    if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List"):
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        doc = next((i for i in items if i.get("kind", "Node") == "Node"), None)
    if not isinstance(doc, dict) or doc.get("kind", "Node") != "Node":
        raise ConfigError(f"cks emulator: {where} must be a Node object or a List holding one")
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"cks emulator: the Node in {where} has no metadata.name")
    return {**doc, "kind": "Node"}


def build_emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator:
    node = load_fixture(fixture)
    kube = KubernetesEmulator(
        listen=listen, faults=faults, env={"NODE_NAME": node["metadata"]["name"]}
    )
    kube.put(node)
    return kube.emulator
