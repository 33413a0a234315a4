"""Is this node an OCI instance?  DMI first, then the request DRANET makes.

The chassis asset tag costs microseconds and needs no network, so it gates
everything.  Confirmation is DRANET's probe, ``GET /opc/v2/instance/`` with
``Authorization: Bearer Oracle``; an answer that is not an instance document
with an OCID is "something else" (``None``); no answer at all is
``ProviderUnavailable`` from the client, naming the endpoint and the
override variable: the rule of :func:`dranet_cloud.contract.confirm.confirm_probe`.
"""

from __future__ import annotations

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext

from .constants import DMI_CHASSIS_ASSET_TAG, INSTANCE_PATH, PLUGIN
from .metadata_source import open_client


def local_evidence(context: ProviderContext) -> str | None:
    """``DMI chassis_asset_tag=OracleCloud.com`` when DMI says so, else ``None``."""
    return context.host_root.dmi_evidence("chassis_asset_tag", DMI_CHASSIS_ASSET_TAG)


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One GET of the instance document, bounded by ``timeout``."""

    def probe() -> str:
        with open_client(context, timeout=timeout) as client:
            document = client.get_json(INSTANCE_PATH)
            instance_id = document.get("id") if isinstance(document, dict) else None
            if not isinstance(instance_id, str) or not instance_id.startswith("ocid1.instance."):
                raise NotThisCloud(
                    f"{client.endpoint.describe()} answered {INSTANCE_PATH} without an "
                    "instance OCID: not OCI IMDS v2"
                )
            return f"OCI IMDS v2 at {client.endpoint.url} (instance {instance_id[-12:]})"

    return confirm_probe(PLUGIN, probe)
