"""An EC2 instance metadata service (IMDS) emulator, served from a fixture tree.

It answers the way IMDS does, closely enough that real AWS clients (botocore's
IMDS fetchers) read it unchanged:

* IMDSv2 token sessions: ``PUT /latest/api/token`` with
  ``X-aws-ec2-metadata-token-ttl-seconds`` (1-21600, else 400) answers a
  token and echoes the TTL; every GET must carry
  ``X-aws-ec2-metadata-token`` (required by default, as on instances launched
  with ``HttpTokens=required``); a missing, unknown or expired token gets 401.
  A token PUT carrying ``X-Forwarded-For`` is refused with 403 (IMDS's SSRF
  defence) and a GET of the token path with 405;
* directories answer a listing, one name a line, sub-directories with a
  trailing ``/`` (``macs/`` lists ``0e:5c:1a:2b:3c:01/``...); a leaf may be
  asked for with a trailing ``/`` too (botocore asks for
  ``placement/availability-zone/``); list values come one per line;
* ``/latest/dynamic/instance-identity/document`` is the identity document,
  pretty-printed JSON served as text, as IMDS does;
* unknown paths get IMDS's HTML 404 page; answers carry ``Server: EC2ws``.

Fault injection comes from the emulator kit (``expire-tokens-every=2`` makes
every token stop working after two uses).  :class:`ImdsTree` lets a test
change the instance while the emulator runs: :meth:`ImdsTree.attach_eni` is
an ENI hot-attach.

``--fixture FILE`` takes ``{"meta-data": {...}, "dynamic":
{"instance-identity": {"document": {...}}}}``; the default fixture is a
``p5.48xlarge`` with four ENIs on two network cards: the primary, one with
delegated IPv4 and IPv6 prefixes, one with secondary private IPv4 addresses
and one with neither.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

from dranet_cloud.testing import (
    MISSING,
    Emulator,
    Faults,
    Request,
    Response,
    TokenIssuer,
    render_leaf,
    render_listing,
    tree_lookup,
)
from dranet_cloud.testing.fixtures import load_fixture_json
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.hwaddr import normalize_mac

from .metadata_source import (
    ENDPOINT_ENV,
    SDK_ENDPOINT_ENV,
    TOKEN_HEADER,
    TOKEN_PATH,
    TOKEN_TTL_HEADER,
)

DEFAULT_FIXTURE = "p5-sample.json"
MAX_TOKEN_TTL = 21600
SERVER_HEADER = {"Server": "EC2ws"}
_NOT_FOUND_PAGE = """<?xml version="1.0" encoding="iso-8859-1"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
 <head>
  <title>404 - Not Found</title>
 </head>
 <body>
  <h1>404 - Not Found</h1>
 </body>
</html>
"""


def load_fixture(fixture: Path | None) -> dict[str, Any]:
    """The fixture tree (the built-in one for ``None``), checked for its shape."""
    tree, where = load_fixture_json("aws", __package__, DEFAULT_FIXTURE, fixture)
    shape = '{"meta-data": {...}, "dynamic": {"instance-identity": {"document": {...}}}}'
    if not isinstance(tree, dict) or not isinstance(tree.get("meta-data"), dict):
        raise ConfigError(f"aws emulator: {where} must have the shape {shape}")
    doc = tree.get("dynamic", {}).get("instance-identity", {}).get("document")
    if not isinstance(doc, dict):
        raise ConfigError(
            f"aws emulator: {where} lacks dynamic.instance-identity.document; "
            f"expected the shape {shape}"
        )
    return tree


def _not_found() -> Response:
    return Response(404, _NOT_FOUND_PAGE, {}, "text/html")


def _is_dir(node: Any) -> bool:
    return isinstance(node, dict)


class ImdsTree:
    """The request handler: the fixture tree, a token issuer, and test-time edits.

    Thread-safe: the emulator serves from several threads while a test edits.
    """

    def __init__(
        self,
        tree: dict[str, Any],
        *,
        faults: Faults | None = None,
        tokens_required: bool = True,
    ) -> None:
        self.tree = copy.deepcopy(tree)
        self._lock = threading.Lock()
        self.tokens = TokenIssuer(
            ttl_header=TOKEN_TTL_HEADER,
            token_header=TOKEN_HEADER,
            max_ttl=MAX_TOKEN_TTL,
            required=tokens_required,
            faults=faults,
        )

    # --- test-time edits ---------------------------------------------------------

    def _macs(self) -> dict[str, Any]:
        node = self.tree["meta-data"].setdefault("network", {}).setdefault("interfaces", {})
        macs: dict[str, Any] = node.setdefault("macs", {})
        return macs

    def attach_eni(self, mac: str, keys: dict[str, Any]) -> None:
        """Hot-attach an ENI: its keys appear under ``network/interfaces/macs/<mac>/``."""
        mac = normalize_mac(mac)
        with self._lock:
            self._macs()[mac] = {"mac": mac, **copy.deepcopy(keys)}

    def detach_eni(self, mac: str) -> None:
        with self._lock:
            self._macs().pop(normalize_mac(mac), None)

    def set(self, path: str, value: Any) -> None:
        """Set ``meta-data/...`` or ``dynamic/...`` at a slash-separated path."""
        parts = [p for p in path.strip("/").split("/") if p]
        with self._lock:
            node = self.tree
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = copy.deepcopy(value)

    # --- serving -----------------------------------------------------------------------

    def __call__(self, request: Request) -> Response:
        path = request.path
        if path.rstrip("/") == TOKEN_PATH:
            if request.method != "PUT":
                return Response(405, "", {"Allow": "PUT"})
            if "X-Forwarded-For" in request.headers:
                return Response(403, "Forbidden\n")
            return self.tokens.issue(request)
        if request.method not in ("GET", "HEAD"):
            return Response(405, "", {"Allow": "GET"})
        denied = self.tokens.check(request)
        if denied is not None:
            return Response(401, "", {}, "text/plain")
        segments = [s for s in path.split("/") if s]
        if not segments:
            return Response.text("latest")
        if segments[0] != "latest":
            return _not_found()
        if len(segments) == 1:
            return Response.text("dynamic\nmeta-data")
        with self._lock:
            if segments[1] == "meta-data":
                return self._serve(self.tree["meta-data"], segments[2:])
            if segments[1] == "dynamic":
                return self._dynamic(segments[2:])
        return _not_found()

    def _serve(self, root: Any, segments: list[str]) -> Response:
        node = tree_lookup(root, segments)
        if node is MISSING:
            return _not_found()
        if _is_dir(node):
            return Response.text(render_listing(node, "/"))
        return Response.text(render_leaf(node))

    def _dynamic(self, segments: list[str]) -> Response:
        dynamic = self.tree.get("dynamic", {})
        if segments[:2] == ["instance-identity", "document"] and len(segments) == 2:
            doc = dynamic.get("instance-identity", {}).get("document")
            if not isinstance(doc, dict):
                return _not_found()
            return Response.text(json.dumps(doc, indent=2, separators=(",", " : ")))
        node = tree_lookup(dynamic, segments)
        if node is MISSING:
            return _not_found()
        if _is_dir(node):
            # The identity document is a leaf here even though it is a JSON object.
            names = [k + ("/" if _is_dir(v) and k != "document" else "") for k, v in node.items()]
            return Response.text("\n".join(names))
        return Response.text(render_leaf(node))


def env_for(url: str) -> dict[str, str]:
    """Point the plugin (and, for HTTP, botocore and the AWS SDKs) at ``url``."""
    env = {ENDPOINT_ENV: url}
    if not url.startswith("unix://"):
        env[SDK_ENDPOINT_ENV] = url
    return env


def build_emulator(
    fixture: Path | None,
    listen: str,
    faults: str | None,
    *,
    tokens_required: bool = True,
) -> Emulator:
    """The emulator the ``emulator`` hook returns (not started)."""
    tree = load_fixture(fixture)
    try:
        parsed = Faults.parse(faults)
    except ValueError as exc:
        raise ConfigError(f"aws emulator: bad --faults {faults!r}: {exc}") from exc
    handler = ImdsTree(tree, faults=parsed, tokens_required=tokens_required)
    return Emulator(
        handler,
        name="aws",
        listen=listen,
        faults=parsed,
        env_for=env_for,
        headers=SERVER_HEADER,
    )


def imds_tree(emulator: Emulator) -> ImdsTree:
    """The :class:`ImdsTree` behind an emulator built by :func:`build_emulator`."""
    handler = emulator.handler
    if not isinstance(handler, ImdsTree):
        raise TypeError(f"{emulator!r} is not an AWS IMDS emulator")
    return handler
