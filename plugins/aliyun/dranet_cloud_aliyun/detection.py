"""Is this node an ECS instance?  DMI first, then one token-protected GET.

DMI costs microseconds and needs no network, so it gates everything; the
metadata service then confirms with the same request DRANET's Go provider
uses (a token, then ``meta-data/instance-id``).  A server that answers but
refuses the token dance or returns something that is not an ECS instance id
is "something else" (``None``); a server that does not answer at all is
``ProviderUnavailable``, raised by the metadata client with the endpoint and
the override variable in its message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dranet_cloud.hostroot import HostRoot
from dranet_cloud.lazylog import LazyLogger

from .constants import DMI_PRODUCT_NAME, METADATA_ROOT, PLUGIN

log = LazyLogger(__name__)

# ECS instance ids: "i-" and lower-case alphanumerics (i-bp1h4adlltjc1d48goaq).
INSTANCE_ID = re.compile(r"^i-[0-9a-z]{4,}$")


def local_evidence(host_root: HostRoot) -> str | None:
    """``DMI product_name=Alibaba Cloud ECS`` when DMI says so, else ``None``."""
    product = host_root.dmi("product_name")
    if product is not None and product.strip() == DMI_PRODUCT_NAME:
        return f"DMI product_name={DMI_PRODUCT_NAME}"
    return None


def confirm(env: Mapping[str, str], timeout: float) -> str | None:
    """One token PUT and one GET of the instance id, together bounded by ``timeout``."""
    from dranet_cloud.metadata import MetadataError, MetadataUnavailable

    from .session import open_client

    with open_client(env, timeout=timeout) as client:
        try:
            instance_id = client.get_text(f"{METADATA_ROOT}/instance-id", deadline=timeout).strip()
        except MetadataUnavailable:
            raise
        except MetadataError as exc:
            # It answered, but not like ECS (no token endpoint, 403, 404...).
            log.info(
                "%s: %s answered but is not the ECS metadata service: %s",
                PLUGIN,
                client.endpoint.describe(),
                exc,
            )
            return None
        if not INSTANCE_ID.match(instance_id):
            log.info(
                "%s: %s answered instance-id %r, which is not an ECS instance id",
                PLUGIN,
                client.endpoint.describe(),
                instance_id[:40],
            )
            return None
        return f"ECS metadata service at {client.endpoint.url} (instance {instance_id})"
