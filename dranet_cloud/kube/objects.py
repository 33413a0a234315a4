"""Reading the JSON of Kubernetes API objects: the checks every reader repeats.

An answer that is not the shape expected raises ``ValueError`` with the
caller's wording; the client turns it into a
:class:`~dranet_cloud.kube.KubeError` naming the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def of_kind(doc: Any, kind: str, what: str) -> Mapping[str, Any]:
    """``doc`` as an object of ``kind``; no ``kind`` at all is fine (a list item has none).

    ``what`` names the object in the error when ``doc`` is not a JSON object.
    """
    if not isinstance(doc, Mapping):
        raise ValueError(f"{what} is not a JSON object")
    got = doc.get("kind")
    if got not in (None, kind):
        raise ValueError(f"expected an {kind}, got kind {str(got)[:60]!r}")
    return doc


def metadata_string(doc: Any, key: str, missing: str) -> str:
    """``metadata.<key>`` of ``doc``, a non-empty string; else ``ValueError(missing)``."""
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    value = meta.get(key) if isinstance(meta, Mapping) else None
    if not isinstance(value, str) or not value:
        raise ValueError(missing)
    return value
