"""Is this node a GCE VM?  DMI first, then one GET of the metadata root.

Local evidence is the same three DMI facts cloud-init's ``ds-identify`` uses:
the product name is the usual one, but Google does not promise it, so the
BIOS vendor and the ``GoogleCloud-`` serial count as well.  Nothing here
touches the network or imports more than the standard library until
:func:`confirm` runs.

Confirmation follows the rule of :func:`dranet_cloud.contract.confirm.confirm_probe`:
a server that does not answer raises ``ProviderUnavailable``; one that
answers without ``Metadata-Flavor: Google`` raises ``MetadataSpoofed`` (the
reason then reads in the detection result); one that carries the header but
lists no ``instance/`` is some other server (``None``).
"""

from __future__ import annotations

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext

from .metadata_source import BASE_PATH, FLAVOR_HEADER, FLAVOR_VALUE, open_client
from .snapshot import PLUGIN

PRODUCT_NAME = "Google Compute Engine"
BIOS_VENDOR = "Google"
SERIAL_PREFIX = "GoogleCloud-"


def local_evidence(context: ProviderContext) -> str | None:
    """A short description of the DMI field that says GCE, or ``None``."""
    root = context.host_root
    product = root.dmi("product_name")
    if product == PRODUCT_NAME:
        return f"DMI product_name={PRODUCT_NAME}"
    if root.dmi("bios_vendor") == BIOS_VENDOR:
        return f"DMI bios_vendor={BIOS_VENDOR}"
    serial = root.dmi("product_serial")
    if serial and serial.startswith(SERIAL_PREFIX):
        return f"DMI product_serial starts with {SERIAL_PREFIX}"
    return None


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One GET of the metadata root listing, bounded by ``timeout``."""

    def probe() -> str:
        with open_client(context, timeout=timeout) as client:
            listing = client.get_text(BASE_PATH)
            url = client.endpoint.url
        names = {line.strip() for line in listing.splitlines()}
        if "instance/" not in names:
            raise NotThisCloud(f"{url} answered with the flavor header but lists no instance/")
        return f"GCE metadata server at {url} answered with {FLAVOR_HEADER}: {FLAVOR_VALUE}"

    return confirm_probe(PLUGIN, probe)
