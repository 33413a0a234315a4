"""The webhook's instance snapshot: where it is and what ``/health`` declared."""

from __future__ import annotations

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.wire.models import Capabilities

CLOUD_ROLE = "cloud"
PROFILE_ROLE = "profile"


class WebhookInstance(InstanceSnapshot):
    """A live webhook: its URL and the capabilities it declared at start-up.

    The host asks :meth:`serving_roles` so that a role the webhook did not
    declare is never routed to it (and never reaches the network).
    """

    provider: str = "webhook"
    url: str
    capabilities: Capabilities

    def known_macs(self) -> frozenset[str] | None:
        # A webhook does not enumerate NICs: an unknown MAC must not trigger
        # a refresh of this snapshot.
        return None

    def serving_roles(self) -> frozenset[str]:
        roles: set[str] = set()
        if self.capabilities.cloud_provider:
            roles.add(CLOUD_ROLE)
        if self.capabilities.profile_provider:
            roles.add(PROFILE_ROLE)
        return frozenset(roles)
