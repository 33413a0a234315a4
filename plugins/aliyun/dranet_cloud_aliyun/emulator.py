"""An emulator of the ECS metadata service in hardened (token) mode.

It serves a JSON tree ``{"meta-data": {...}}`` under ``/latest/`` the way ECS
does: directories as listings (sub-directories end in ``/``), leaves as text,
lists of scalars as a JSON array (ECS prints ``private-ipv4s`` that way).
Every request except the token ``PUT`` must carry a live token: a missing,
unknown or expired one gets 401, which is what makes "no metadata GET without
a token" and "expired tokens are refreshed" testable from the request log.
"""

from __future__ import annotations

import json
from importlib import resources
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
    split_path,
    tree_lookup,
)
from dranet_cloud.toolkit.errors import ConfigError

from .constants import ENDPOINT_ENV, PLUGIN, TOKEN_HEADER, TOKEN_PATH, TOKEN_TTL_HEADER

DEFAULT_FIXTURE = "gpu-instance.json"
SERVED_PREFIX = "/latest/"


def default_tree() -> dict[str, Any]:
    """The built-in GPU instance: a primary ENI and two eRDMA ENIs."""
    text = resources.files(__package__).joinpath("fixtures", DEFAULT_FIXTURE).read_text()
    return load_tree(text, source=f"built-in fixture {DEFAULT_FIXTURE}")


def load_tree(text: str, *, source: str) -> dict[str, Any]:
    """Parse and check a fixture: a JSON object with a ``meta-data`` object."""
    try:
        tree = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{PLUGIN}: {source} is not valid JSON: {exc}") from exc
    if not isinstance(tree, dict) or not isinstance(tree.get("meta-data"), dict):
        raise ConfigError(
            f'{PLUGIN}: {source} must be a JSON object {{"meta-data": {{...}}}} as served '
            "under /latest/ (see dranet_cloud_aliyun/fixtures/gpu-instance.json)"
        )
    return tree


def load_fixture(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{PLUGIN}: cannot read fixture {path}: {exc}") from exc
    return load_tree(text, source=f"fixture {path}")


def _render(node: Any) -> Response:
    if isinstance(node, dict) or (
        isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node)
    ):
        return Response.text(render_listing(node))
    if isinstance(node, list):
        return Response.text(json.dumps([render_leaf(v) for v in node], separators=(",", ":")))
    return Response.text(render_leaf(node))


class EcsMetadataHandler:
    """``Request -> Response`` for the tree; ``issuer`` holds the token state."""

    def __init__(self, tree: dict[str, Any], issuer: TokenIssuer) -> None:
        self.tree = tree
        self.issuer = issuer

    def __call__(self, request: Request) -> Response:
        if request.path.rstrip("/") == TOKEN_PATH:
            return self.issuer.issue(request)
        segments = split_path(request.path, SERVED_PREFIX)
        if segments is None:
            return Response.not_found(request.path)
        if request.method not in ("GET", "HEAD"):
            return Response(405, "metadata is read-only\n", {"Allow": "GET, HEAD"})
        denied = self.issuer.check(request)
        if denied is not None:
            return denied
        node = tree_lookup(self.tree, segments)
        if node is MISSING:
            return Response.not_found(request.path)
        return _render(node)


def build_emulator(
    fixture: Path | None = None, listen: str = "127.0.0.1:0", faults: str | None = None
) -> Emulator:
    """The emulator (not started); its ``env`` points this plugin at it."""
    tree = load_fixture(fixture) if fixture is not None else default_tree()
    try:
        shared = Faults.parse(faults)
    except ValueError as exc:
        raise ConfigError(f"{PLUGIN}: bad emulator fault spec {faults!r}: {exc}") from exc
    issuer = TokenIssuer(
        ttl_header=TOKEN_TTL_HEADER, token_header=TOKEN_HEADER, required=True, faults=shared
    )
    return Emulator(
        EcsMetadataHandler(tree, issuer),
        name=PLUGIN,
        listen=listen,
        faults=shared,
        env_for=lambda url: {ENDPOINT_ENV: url},
    )
