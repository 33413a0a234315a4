"""Is this node an ECS instance?  DMI first, then one token-protected GET.

DMI costs microseconds and needs no network, so it gates everything; the
metadata service then confirms with the same request DRANET's Go provider
uses (a token, then ``meta-data/instance-id``).  A server that answers but
refuses the token dance or returns something that is not an ECS instance id
is "something else" (``None``); a server that does not answer at all is
``ProviderUnavailable``, raised by the metadata client with the endpoint and
the override variable in its message (the rule of
:func:`dranet_cloud.contract.confirm.confirm_probe`).
"""

from __future__ import annotations

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.logsafe import safe

from .constants import DMI_PRODUCT_NAME, INSTANCE_ID, METADATA_ROOT, PLUGIN
from .metadata_source import open_client


def local_evidence(context: ProviderContext) -> str | None:
    """``DMI product_name=Alibaba Cloud ECS`` when DMI says so, else ``None``."""
    product = context.host_root.dmi("product_name")
    if product is not None and product.strip() == DMI_PRODUCT_NAME:
        return f"DMI product_name={DMI_PRODUCT_NAME}"
    return None


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One token PUT and one GET of the instance id, together bounded by ``timeout``."""

    def probe() -> str:
        with open_client(context, timeout=timeout) as client:
            path = f"{METADATA_ROOT}/instance-id"
            instance_id = client.get_text(path, deadline=timeout).strip()
            if not INSTANCE_ID.match(instance_id):
                raise NotThisCloud(
                    f"{client.url_for(path)} answered {safe(instance_id, 40)!r}, "
                    "which is not an ECS instance id"
                )
            return f"ECS metadata service at {client.endpoint.url} (instance {instance_id})"

    return confirm_probe(PLUGIN, probe)
