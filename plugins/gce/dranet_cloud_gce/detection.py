"""Local evidence of GCE from DMI, read without any network I/O.

The same three facts cloud-init's ``ds-identify`` uses: the product name is
the usual one, but Google does not promise it, so the BIOS vendor and the
``GoogleCloud-`` serial count as well.
"""

from __future__ import annotations

from dranet_cloud.hostroot import HostRoot

PRODUCT_NAME = "Google Compute Engine"
BIOS_VENDOR = "Google"
SERIAL_PREFIX = "GoogleCloud-"


def dmi_evidence(root: HostRoot) -> str | None:
    """A short description of the DMI field that says GCE, or ``None``."""
    product = root.dmi("product_name")
    if product == PRODUCT_NAME:
        return f"DMI product_name={PRODUCT_NAME}"
    if root.dmi("bios_vendor") == BIOS_VENDOR:
        return f"DMI bios_vendor={BIOS_VENDOR}"
    serial = root.dmi("product_serial")
    if serial and serial.startswith(SERIAL_PREFIX):
        return f"DMI product_serial starts with {SERIAL_PREFIX}"
    return None
