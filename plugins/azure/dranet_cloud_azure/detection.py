"""Is this node an Azure VM?  DMI first, then the request DRANET makes.

The chassis asset tag costs microseconds and needs no network, so it gates
everything.  Confirmation is DRANET's own probe, ``GET
/metadata/instance?api-version=…&format=text`` with ``Metadata: true``; an
answer that is not IMDS's listing of ``compute``/``network`` is "something
else" (``None``), no answer at all is ``ProviderUnavailable`` from the
client, naming the endpoint and the override variable: the rule of
:func:`dranet_cloud.contract.confirm.confirm_probe`.
"""

from __future__ import annotations

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.logsafe import safe

from .constants import API_VERSION, DMI_CHASSIS_ASSET_TAG, INSTANCE_PATH, PLUGIN
from .metadata_source import open_client


def local_evidence(context: ProviderContext) -> str | None:
    """``DMI chassis_asset_tag=…`` when DMI says Azure, else ``None``."""
    return context.host_root.dmi_evidence("chassis_asset_tag", DMI_CHASSIS_ASSET_TAG)


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One GET of the instance listing, bounded by ``timeout``."""

    def probe() -> str:
        with open_client(context, timeout=timeout) as client:
            listing = client.get_text(
                INSTANCE_PATH, params={"api-version": API_VERSION, "format": "text"}
            )
            names = {line.strip().rstrip("/") for line in listing.splitlines()}
            if "compute" not in names:
                raise NotThisCloud(
                    f"{client.endpoint.describe()} answered {safe(listing, 80)!r}, "
                    "not Azure IMDS's instance listing"
                )
            return f"Azure IMDS at {client.endpoint.url} (api-version {API_VERSION})"

    return confirm_probe(PLUGIN, probe)
