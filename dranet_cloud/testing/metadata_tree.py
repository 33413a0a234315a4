"""Serving a nested-JSON metadata tree the way metadata servers list and print it.

Cloud metadata services answer a path with a directory listing (one name a
line, sub-directories marked) or a leaf printed as text.  A plugin's emulator
keeps its sample metadata as one JSON tree and answers from it with
:func:`tree_response`; :func:`tree_lookup` returns :data:`MISSING` (never
``None``, which is a leaf) for a path that is not there.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from dranet_cloud.testing.messages import Response

__all__ = ["MISSING", "render_leaf", "render_listing", "split_path", "tree_lookup", "tree_response"]


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing.MISSING
"""What :func:`tree_lookup` returns for a path that does not exist."""


def split_path(path: str, prefix: str = "") -> list[str] | None:
    """Segments of ``path`` below ``prefix`` (``None`` when outside it).

    Empty segments (doubled or trailing slashes) are dropped.
    """
    if prefix:
        if not path.startswith(prefix) and path + "/" != prefix:
            return None
        path = path[len(prefix) :]
    return [s for s in path.split("/") if s]


def _is_dir(node: Any) -> bool:
    if isinstance(node, dict):
        return True
    return isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node)


def tree_lookup(tree: Any, segments: Sequence[str]) -> Any:
    """Walk a nested-JSON tree: dict keys by name, list items by index.

    Returns the node, or :data:`MISSING`.
    """
    node = tree
    for seg in segments:
        if seg == "":
            continue
        if isinstance(node, dict):
            if seg not in node:
                return MISSING
            node = node[seg]
        elif isinstance(node, list) and _is_dir(node):
            if not seg.isdigit() or int(seg) >= len(node):
                return MISSING
            node = node[int(seg)]
        else:
            return MISSING
    return node


def render_listing(node: Any, dir_suffix: str = "/") -> str:
    """A directory listing, one name a line; sub-directories end in ``dir_suffix``.

    Dicts list their keys in insertion order, lists of objects their indexes.
    """
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = [(str(i), v) for i, v in enumerate(node)]
    else:
        raise TypeError(f"render_listing needs a dict or list, not {type(node).__name__}")
    return "\n".join(name + (dir_suffix if _is_dir(child) else "") for name, child in items)


def render_leaf(node: Any) -> str:
    """A scalar as metadata servers print it; a list of scalars one per line."""
    if isinstance(node, bool):
        return "true" if node else "false"
    if node is None:
        return ""
    if isinstance(node, list):
        return "\n".join(render_leaf(v) for v in node)
    return str(node)


def tree_response(
    tree: Any, segments: Sequence[str], *, dir_suffix: str = "/", json_leaves: bool = False
) -> Response:
    """Serve ``segments`` of ``tree``: 404, a listing, or a leaf as text.

    ``json_leaves`` serves dict/list leaves as JSON instead (for trees whose
    leaves are documents, like AWS's instance identity document).
    """
    node = tree_lookup(tree, segments)
    if node is MISSING:
        return Response.not_found("/".join(segments))
    if _is_dir(node) and not json_leaves:
        return Response.text(render_listing(node, dir_suffix))
    if isinstance(node, (dict, list)) and json_leaves:
        return Response.json(node)
    return Response.text(render_leaf(node))
