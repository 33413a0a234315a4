"""A GCE metadata server emulator, served from a fixture tree.

It answers the way the real server does, closely enough that the plugin
cannot tell the difference (and a test that passes here means something):

* ``Metadata-Flavor: Google`` is required on every request (403 without it,
  and, as on GCE, 403 for a request carrying ``X-Forwarded-For``, the
  server's SSRF defence); the header comes back on every answer, errors and
  injected faults included;
* the tree lives under ``/computeMetadata/v1/``; path segments are
  kebab-case (``instance/network-interfaces/0/ip-aliases``) while recursive
  JSON keys stay camelCase (``networkInterfaces``, ``ipAliases``); keys under
  ``attributes`` are the user's own and are served verbatim;
* a directory answers a listing, one name a line, sub-directories ending in
  ``/``; ``?recursive=true`` answers the whole sub-tree as JSON;
* ``alt=json`` and ``alt=text`` choose the encoding (a recursive
  ``alt=text`` answer is the flattened ``path value`` form).

The default fixture is an ``a3-megagpu-8g`` VM: a primary NIC with an alias
range and an IPv6 /64 (real VMs usually get a /96 of their subnet's range;
the /64 shows the ``0xC0DE`` derivation at its documented size, /64 -> /80),
and eight GPU NICs at MTU 8244, one VPC each, with ``physical_host``
topology.  ``--fixture FILE`` takes the recursive answer's shape,
``{"instance": {...}, "project": {...}}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dranet_cloud.testing import Emulator, Request, Response, render_leaf
from dranet_cloud.testing.fixtures import load_fixture_json
from dranet_cloud.toolkit.errors import ConfigError

from .metadata_source import ENDPOINT_ENV, FLAVOR_HEADER, FLAVOR_VALUE, HOST_ENV

DEFAULT_FIXTURE = "a3-megagpu-8g.json"
BASE = "/computeMetadata/v1"
# Dictionaries whose keys are user data, never case-converted.
_USER_KEYED = frozenset({"attributes", "guestAttributes", "partnerAttributes"})
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_MISSING = object()


def kebab(key: str) -> str:
    """``networkInterfaces`` -> ``network-interfaces``, ``gatewayIpv6`` -> ``gateway-ipv6``."""
    return _CAMEL_BOUNDARY.sub("-", key).lower()


def camel(segment: str) -> str:
    """``network-interfaces`` -> ``networkInterfaces``."""
    head, *rest = segment.split("-")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def load_fixture(fixture: Path | None) -> dict[str, Any]:
    """The fixture tree (the built-in one for ``None``), checked for its shape."""
    tree, where = load_fixture_json("gce", __package__, DEFAULT_FIXTURE, fixture)
    if not isinstance(tree, dict) or not isinstance(tree.get("instance"), dict):
        raise ConfigError(
            f"gce emulator: {where} must have the recursive answer's shape "
            '{"instance": {...}, "project": {...}}'
        )
    tree.setdefault("project", {})
    return tree


def _child(node: Any, segment: str, user_keyed: bool) -> Any:
    if isinstance(node, dict):
        if segment in node:
            return node[segment]
        if not user_keyed:
            return node.get(camel(segment), _MISSING)
        return _MISSING
    if isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
        return node[int(segment)]
    return _MISSING


def lookup(tree: Any, segments: list[str]) -> Any:
    """Walk kebab-case ``segments`` down a camelCase tree; ``_MISSING`` if absent."""
    node, user_keyed = tree, False
    for seg in segments:
        node = _child(node, seg, user_keyed)
        if node is _MISSING:
            return _MISSING
        user_keyed = seg in _USER_KEYED or camel(seg) in _USER_KEYED
    return node


def _is_dir(node: Any) -> bool:
    return isinstance(node, dict) or (
        isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node)
    )


def listing(node: Any, user_keyed: bool) -> list[str]:
    """Directory entries as the server names them."""
    if isinstance(node, dict):
        names = [(k if user_keyed else kebab(k), v) for k, v in node.items()]
    else:
        names = [(str(i), v) for i, v in enumerate(node)]
    return [name + ("/" if _is_dir(child) else "") for name, child in names]


def flatten(node: Any, prefix: str, user_keyed: bool = False) -> Iterator[str]:
    """``alt=text`` for a recursive answer: one ``path value`` line per leaf."""
    if isinstance(node, dict):
        for key, child in node.items():
            name = key if user_keyed else kebab(key)
            yield from flatten(child, f"{prefix}/{name}" if prefix else name, key in _USER_KEYED)
    elif isinstance(node, list) and _is_dir(node):
        for i, child in enumerate(node):
            yield from flatten(child, f"{prefix}/{i}" if prefix else str(i))
    elif isinstance(node, list):
        for value in node:
            yield f"{prefix} {render_leaf(value)}"
    else:
        yield f"{prefix} {render_leaf(node)}"


class GceMetadataHandler:
    """The request handler: a fixture tree served as GCE's metadata server."""

    def __init__(self, tree: dict[str, Any]) -> None:
        self.tree = tree

    def __call__(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response(405, "Method not allowed\n", {"Allow": "GET"})
        if request.headers.get(FLAVOR_HEADER) != FLAVOR_VALUE:
            return Response(
                403,
                f"Your client does not have permission to get URL {request.path} from this "
                f"server. Missing {FLAVOR_HEADER}:{FLAVOR_VALUE} header.\n",
            )
        if "X-Forwarded-For" in request.headers:
            return Response(
                403,
                "Your client does not have permission to get URL "
                f"{request.path} from this server (X-Forwarded-For is not allowed).\n",
            )
        path = request.path
        if path == "/":
            return Response.text("computeMetadata/\n")
        if path.rstrip("/") == "/computeMetadata":
            return Response.text("v1/\n")
        if path != BASE and not path.startswith(BASE + "/"):
            return Response.not_found(path)
        segments = [s for s in path[len(BASE) :].split("/") if s]
        node = lookup(self.tree, segments)
        if node is _MISSING:
            return Response.not_found(path)
        alt = (request.arg("alt") or "").lower()
        if alt not in ("", "json", "text"):
            return Response(400, f"Invalid alt value {alt!r}: use json or text\n")
        recursive = (request.arg("recursive") or "").lower() == "true"
        user_keyed = bool(segments) and (
            segments[-1] in _USER_KEYED or camel(segments[-1]) in _USER_KEYED
        )
        if _is_dir(node):
            if recursive:
                if alt == "text":
                    prefix = ""
                    return self._text("\n".join(flatten(node, prefix, user_keyed)) + "\n")
                return Response.json(node)
            names = listing(node, user_keyed)
            if alt == "json":
                return Response.json(names)
            return self._text("\n".join(names) + "\n")
        if alt == "json":
            return Response.json(node)
        return self._text(render_leaf(node))

    @staticmethod
    def _text(body: str) -> Response:
        return Response(200, body, {}, "application/text")


def env_for(url: str) -> dict[str, str]:
    """Point the plugin at ``url``: host:port via google-auth's variable, a socket via ours."""
    if url.startswith("unix://"):
        return {ENDPOINT_ENV: url}
    return {HOST_ENV: url.split("://", 1)[1]}


def build_emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator:
    """The GCE emulator (not started) for the ``emulator`` hook."""
    tree = load_fixture(fixture)
    return Emulator(
        GceMetadataHandler(tree),
        name="gce",
        listen=listen,
        faults=faults,
        env_for=env_for,
        headers={FLAVOR_HEADER: FLAVOR_VALUE, "Server": "Metadata Server for VM"},
    )
