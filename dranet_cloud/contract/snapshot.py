"""The base class of a cloud plugin's instance snapshot.

It is a pydantic model, so it lives apart from :mod:`dranet_cloud.contract.context`:
auto-detection needs the context (host root, options) but never a snapshot,
and must not pay for importing pydantic.  ``dranet_cloud.contract.context`` still
re-exports :class:`InstanceSnapshot` (lazily) for plugins that import it
from there.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class InstanceSnapshot(BaseModel):
    """Base class of what a cloud plugin loads from its metadata server.

    Plugins subclass it with their own fields.  The host only relies on the
    methods below; ``describe`` prints ``model_dump(mode="json")``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    provider: str
    endpoint: str | None = None

    def known_macs(self) -> frozenset[str] | None:
        """Normalized MACs of the NICs this snapshot describes.

        ``None`` means the plugin does not enumerate NICs (a webhook), so an
        unknown MAC never triggers a metadata refresh.
        """
        return None

    def serving_roles(self) -> frozenset[str] | None:
        """Roles the live provider can serve, or ``None`` for all it implements.

        A webhook narrows its roles to what ``/health`` declared.
        """
        return None

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
