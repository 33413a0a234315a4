"""Is this node an OCI instance?  DMI first, then the request DRANET makes.

The chassis asset tag costs microseconds and needs no network, so it gates
everything.  Confirmation is DRANET's probe, ``GET /opc/v2/instance/`` with
``Authorization: Bearer Oracle``; an answer that is not an instance document
with an OCID is "something else" (``None``); no answer at all is
``ProviderUnavailable`` from the client, naming the endpoint and the
override variable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dranet_cloud.lazylog import LazyLogger

from .constants import DMI_CHASSIS_ASSET_TAG, INSTANCE_PATH, PLUGIN

if TYPE_CHECKING:
    from dranet_cloud.context import ProviderContext

log = LazyLogger(__name__)


def local_evidence(context: ProviderContext) -> str | None:
    """``DMI chassis_asset_tag=OracleCloud.com`` when DMI says so, else ``None``."""
    return context.host_root.dmi_evidence("chassis_asset_tag", DMI_CHASSIS_ASSET_TAG)


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One GET of the instance document, bounded by ``timeout``."""
    from dranet_cloud.metadata import MetadataError, MetadataUnavailable

    from .metadata_source import open_client

    with open_client(context, timeout=timeout) as client:
        try:
            document = client.get_json(INSTANCE_PATH)
        except MetadataUnavailable:
            raise
        except MetadataError as exc:
            log.info(
                "%s: %s answered but is not OCI IMDS v2: %s",
                PLUGIN,
                client.endpoint.describe(),
                exc,
            )
            return None
        instance_id = document.get("id") if isinstance(document, dict) else None
        if not isinstance(instance_id, str) or not instance_id.startswith("ocid1.instance."):
            log.info(
                "%s: %s answered %s without an instance OCID",
                PLUGIN,
                client.endpoint.describe(),
                INSTANCE_PATH,
            )
            return None
        return f"OCI IMDS v2 at {client.endpoint.url} (instance {instance_id[-12:]})"
