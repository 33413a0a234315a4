"""An Azure IMDS emulator, served from the instance document.

It answers the way IMDS does, closely enough that a test passing here means
something:

* every request needs ``Metadata: true`` (400 without it) and is refused
  when it carries ``X-Forwarded-For`` (IMDS's defence against being reached
  through a proxy);
* every request needs a known ``api-version`` (400 with the newest versions
  otherwise, as IMDS answers);
* the tree lives under ``/metadata/instance``; sub-paths walk it
  (``/metadata/instance/network/interface/0/macAddress``), list items by
  index;
* ``format=json`` (the default) answers JSON; ``format=text`` answers a leaf
  as text and a directory as a listing (sub-directories ending in ``/``),
  which is what DRANET's detection probe asks for.

The fixture is what ``GET /metadata/instance?api-version=…&format=json``
returns on a real VM, ``{"compute": {...}, "network": {"interface": [...]}}``,
so an operator can paste a node's answer.  The built-in one is a
``Standard_ND96isr_H100_v5``: one accelerated Ethernet NIC (dual stack); its
eight InfiniBand VFs are not IMDS NICs, as on the real size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dranet_cloud.testing import (
    MISSING,
    Emulator,
    Request,
    Response,
    render_leaf,
    render_listing,
    split_path,
    tree_lookup,
)
from dranet_cloud.testing.fixtures import load_fixture_json
from dranet_cloud.toolkit.errors import ConfigError

from .constants import API_VERSION, ENDPOINT_ENV, INSTANCE_PATH, METADATA_HEADER, PLUGIN

DEFAULT_FIXTURE = "nd96isr-h100-v5.json"
# A few of the versions IMDS accepts, newest first (it lists them in its 400s).
API_VERSIONS = (API_VERSION, "2025-04-07", "2024-07-17", "2023-07-01", "2021-02-01")


def load_fixture(fixture: Path | None) -> dict[str, Any]:
    """The instance document (the built-in one for ``None``), checked for its shape."""
    doc, where = load_fixture_json(PLUGIN, __package__, DEFAULT_FIXTURE, fixture)
    network = doc.get("network") if isinstance(doc, dict) else None
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("compute"), dict)
        or not isinstance(network, dict)
        or not isinstance(network.get("interface"), list)
    ):
        raise ConfigError(
            f"{PLUGIN} emulator: {where} must be what GET {INSTANCE_PATH}?api-version="
            f'{API_VERSION}&format=json returns: {{"compute": {{...}}, "network": '
            '{"interface": [...]}}'
        )
    return doc


def _bad_request(message: str, **extra: Any) -> Response:
    return Response.json({"error": f"Bad request. {message}", **extra}, status=400)


def _is_dir(node: Any) -> bool:
    return isinstance(node, dict) or (
        isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node)
    )


class ImdsHandler:
    """``Request -> Response`` over one instance document."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def __call__(self, request: Request) -> Response:
        segments = split_path(request.path, INSTANCE_PATH)
        if segments is None or (segments and request.path[len(INSTANCE_PATH)] != "/"):
            return Response.not_found(request.path)
        if request.method not in ("GET", "HEAD"):
            return Response(405, "", {"Allow": "GET"})
        if request.headers.get(METADATA_HEADER, "").lower() != "true":
            return _bad_request("Required metadata header not specified")
        if "X-Forwarded-For" in request.headers:
            return _bad_request("Request contains a forwarding header, which is not allowed")
        version = request.arg("api-version")
        if version not in API_VERSIONS:
            why = "was not specified" if version is None else "is invalid"
            return _bad_request(
                f"api-version {why} in the request. For more information refer to aka.ms/azureimds",
                **{"newest-versions": list(API_VERSIONS[:3])},
            )
        node = tree_lookup(self.document, segments)
        if node is MISSING:
            return Response.not_found(request.path)
        fmt = request.arg("format", "json")
        if fmt == "text":
            text = render_listing(node) if _is_dir(node) else render_leaf(node)
            return Response.text(text)
        if fmt != "json":
            return _bad_request(f"format {fmt!r} is not supported; use json or text")
        return Response(200, json.dumps(node), {}, "application/json; charset=utf-8")


def build_emulator(
    fixture: Path | None = None, listen: str = "127.0.0.1:0", faults: str | None = None
) -> Emulator:
    """The emulator (not started); its ``env`` points this plugin at it.

    ``faults`` is the emulator kit's spec string (``ValueError`` when bad).
    """
    document = load_fixture(fixture)
    return Emulator(
        ImdsHandler(document),
        name=PLUGIN,
        listen=listen,
        faults=faults,  # a bad spec is a ValueError, a usage error in the CLI
        env_for=lambda url: {ENDPOINT_ENV: url},
    )
