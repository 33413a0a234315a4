"""An OCI IMDS v2 emulator, served from the documents the cloud serves.

It answers the way IMDS v2 does, closely enough that a test passing here
means something:

* every request needs ``Authorization: Bearer Oracle`` (401 without it);
* a request carrying ``Forwarded``, ``X-Forwarded-For`` or
  ``X-Forwarded-Host`` is refused (403), as IMDS v2 refuses proxied calls;
* ``/opc/v2/<key>/`` (with or without the slash) answers the fixture's
  ``<key>`` as JSON; deeper paths walk it (``/opc/v2/instance/shape`` answers
  the text ``BM.GPU.H100.8``); a key the fixture lacks is 404, which is how
  a tenancy without topology data looks for ``host/``.

The fixture is ``{"instance": …, "host": …, "vnics": […]}``, each value as
``/opc/v2/<key>/`` serves it on a real node, so an operator can paste
theirs.  The built-in one is a ``BM.GPU.H100.8`` with RDMA topology data and
its primary VNIC; its sixteen RDMA NICs are not VNICs.
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
    split_path,
    tree_lookup,
)
from dranet_cloud.testing.fixtures import load_fixture_json
from dranet_cloud.toolkit.errors import ConfigError

from .constants import AUTH_HEADER, AUTH_VALUE, BASE_PATH, ENDPOINT_ENV, PLUGIN

DEFAULT_FIXTURE = "bm-gpu-h100-8.json"
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host")


def load_fixture(fixture: Path | None) -> dict[str, Any]:
    """The documents (the built-in ones for ``None``), checked for their shape."""
    doc, where = load_fixture_json(PLUGIN, __package__, DEFAULT_FIXTURE, fixture)
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("instance"), dict)
        or not isinstance(doc.get("host", {}), dict)
        or not isinstance(doc.get("vnics", []), list)
    ):
        raise ConfigError(
            f"{PLUGIN} emulator: {where} must be "
            '{"instance": {...}, "host": {...}, "vnics": [...]}, each value as '
            f"{BASE_PATH}/<key>/ serves it (host and vnics may be left out)"
        )
    return doc


class OpcHandler:
    """``Request -> Response`` over the fixture's documents."""

    def __init__(self, documents: dict[str, Any]) -> None:
        self.documents = documents

    def __call__(self, request: Request) -> Response:
        segments = split_path(request.path, BASE_PATH + "/")
        if not segments:
            return Response.not_found(request.path)
        if request.method not in ("GET", "HEAD"):
            return Response(405, "", {"Allow": "GET"})
        if request.headers.get(AUTH_HEADER) != AUTH_VALUE:
            return Response.json(
                {"code": "NotAuthenticated", "message": "Authorization header is required"},
                status=401,
            )
        if any(h in request.headers for h in FORWARDING_HEADERS):
            return Response.json(
                {"code": "NotAuthorized", "message": "Forwarded requests are not allowed"},
                status=403,
            )
        node = tree_lookup(self.documents, segments)
        if node is MISSING:
            return Response.json(
                {"code": "NotFound", "message": f"{request.path} not found"}, status=404
            )
        if isinstance(node, (dict, list)):
            return Response(200, json.dumps(node, indent=2), {}, "application/json")
        return Response.text(render_leaf(node))


def build_emulator(
    fixture: Path | None = None, listen: str = "127.0.0.1:0", faults: str | None = None
) -> Emulator:
    """The emulator (not started); its ``env`` points this plugin at it.

    ``faults`` is the emulator kit's spec string (``ValueError`` when bad).
    """
    documents = load_fixture(fixture)
    return Emulator(
        OpcHandler(documents),
        name=PLUGIN,
        listen=listen,
        faults=faults,  # a bad spec is a ValueError, a usage error in the CLI
        env_for=lambda url: {ENDPOINT_ENV: url},
    )
