"""A claim's device goes down the layers once: server, host, provider, IPAM store.

The import-graph test proves that no module *imports* upward; this one proves
that a real request does not *call* back up either.  At the two places a
claim's work ends (the NIC's resolution and the store's write) the call stack
is read frame by frame, each project frame named by its layer, and the layers
must come in the order the import graph holds, none of them entered twice.
The NIC is resolved from sysfs once per request: the host resolves it and
hands the resolved device on, so the provider and the IPAM owner reuse it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.ipam.node.sqlite import SqliteStore
from dranet_cloud.node import nic
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.dranet_wire import get_profile_config, resource_claim, served_local_ipam

from .test_import_graph import LAYERS

MAC = "42:01:0a:00:00:05"
UID = "3a1c7e52-9d0b-4f61-8a2e-5b7c9d1e0f23"
DEVICE = {"mac_address": MAC, "pci_address": "0000:00:05.0", "name": "eth1"}
CONFIG = {"profile": "local-ipam", "interface": {"type": "IPVLAN"}}
# A plugin sits between the host that calls it and the toolkits it calls.
ORDER = [*LAYERS[: LAYERS.index("providers") + 1], "plugin", *LAYERS[LAYERS.index("host") :]]


def layers_on_stack() -> list[str]:
    """The layers of the project frames calling this one, outermost first, each
    run of frames in one layer counted once."""
    names: list[str] = []
    frame = sys._getframe(1)
    while frame is not None:
        names.append(frame.f_globals.get("__name__", ""))
        frame = frame.f_back  # type: ignore[assignment]
    path: list[str] = []
    for name in reversed(names):
        parts = name.split(".")
        if parts[0] == "dranet_cloud" and len(parts) > 1 and parts[1] != "testing":
            layer = parts[1]
        elif parts[0].startswith("dranet_cloud_"):
            layer = "plugin"
        else:
            continue  # the standard library, uvicorn, pluggy, this test
        if not path or path[-1] != layer:
            path.append(layer)
    return path


def recorder(seen: list[list[str]], inner: Callable[..., Any]) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(layers_on_stack())
        return inner(*args, **kwargs)

    return record


def test_the_stack_reader_names_layers_once_per_run() -> None:
    def deepest() -> list[str]:
        return layers_on_stack()

    assert deepest() == []  # only this test's frames: no project layer


def test_a_profile_claim_goes_down_the_layers_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = HostRootBuilder(tmp_path / "root").nic("eth1", MAC, pci="0000:00:05.0").build()
    resolutions: list[list[str]] = []
    writes: list[list[str]] = []
    monkeypatch.setattr(nic, "_resolve_nic", recorder(resolutions, nic._resolve_nic))
    monkeypatch.setattr(SqliteStore, "allocate", recorder(writes, SqliteStore.allocate))
    with served_local_ipam(tmp_path, ["10.30.0.0/24"], host_root=root) as (_host, client):
        body = {"device": DEVICE, "claim": resource_claim(UID), "config": CONFIG}
        answer = get_profile_config(client, body)
    assert answer["interface"]["addresses"]
    assert len(resolutions) == 1, resolutions  # the host's one resolution, reused below it
    assert len(writes) == 1
    for path in (*resolutions, *writes):
        assert path[0] == "server", path
        assert len(path) == len(set(path)), f"came back to a layer it had left: {path}"
        ranks = [ORDER.index(layer) for layer in path]
        assert ranks == sorted(ranks, reverse=True), f"called upward: {path}"
    # local-ipam is a built-in provider: the store is written from the provider layer.
    assert writes == [["server", "host", "providers"]], writes
    assert resolutions == [["server", "host", "node"]], resolutions
