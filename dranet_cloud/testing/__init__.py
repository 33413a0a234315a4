"""Test and emulation kit for dranet-cloud plugins.

* :mod:`.emulator`: a loopback/unix-socket HTTP server (:mod:`.listen`) with
  a request log (:mod:`.messages`) and fault injection (:mod:`.faults`), plus
  helpers to serve nested-JSON metadata trees (:mod:`.metadata_tree`) and
  token sessions (:mod:`.tokens`);
* :mod:`.kubernetes`: a Kubernetes API emulator (ResourceClaims, Nodes,
  Namespaces, IPAddress objects) with real pagination, Status errors, fault
  modes (latency, planned failures, lost replies) and a kubeconfig for it;
* :mod:`.hostroot_builder`: fake node files (DMI, sysfs, procfs) that
  :class:`dranet_cloud.node.hostroot.HostRoot` reads;
* :mod:`.socketguard`: makes any non-loopback connection fail a test run.
* :mod:`.bad_mac` (pytest, not imported here): the shared run behind every
  cloud plugin's "a listed NIC whose MAC is not one" test.
"""

from __future__ import annotations

from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.faults import Faults
from dranet_cloud.testing.hostroot_builder import HostRootBuilder
from dranet_cloud.testing.kubernetes import KubernetesEmulator, kubernetes_emulator
from dranet_cloud.testing.listen import parse_listen
from dranet_cloud.testing.messages import Handler, Headers, LoggedRequest, Request, Response
from dranet_cloud.testing.metadata_tree import (
    MISSING,
    render_leaf,
    render_listing,
    split_path,
    tree_lookup,
    tree_response,
)
from dranet_cloud.testing.socketguard import NonLoopbackConnection, SocketGuard
from dranet_cloud.testing.tokens import TokenIssuer

__all__ = [
    "MISSING",
    "Emulator",
    "Faults",
    "Handler",
    "Headers",
    "HostRootBuilder",
    "KubernetesEmulator",
    "LoggedRequest",
    "NonLoopbackConnection",
    "Request",
    "Response",
    "SocketGuard",
    "TokenIssuer",
    "kubernetes_emulator",
    "parse_listen",
    "render_leaf",
    "render_listing",
    "split_path",
    "tree_lookup",
    "tree_response",
]
