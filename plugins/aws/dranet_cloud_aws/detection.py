"""Local evidence that the node is an EC2 instance, from DMI and the Xen hypervisor.

The rules are cloud-init's ``ds-identify`` rules for EC2, which decide
without network in milliseconds:

* Nitro instances report DMI ``sys_vendor`` ``Amazon EC2``;
* older Xen instances have ``/sys/hypervisor/uuid`` starting with ``ec2``, or
  DMI ``product_uuid`` and ``product_serial`` that both start with ``ec2`` and
  are the same string ignoring case (a Xen guest elsewhere has unrelated
  values there).
"""

from __future__ import annotations

from dranet_cloud.hostroot import HostRoot

NITRO_SYS_VENDOR = "Amazon EC2"


def local_evidence(host_root: HostRoot) -> str | None:
    """A short description of the EC2 evidence in the node's files, or ``None``."""
    vendor = host_root.dmi("sys_vendor")
    if vendor is not None and vendor.strip() == NITRO_SYS_VENDOR:
        return f"DMI sys_vendor={NITRO_SYS_VENDOR}"
    hv_uuid = host_root.read_text("/sys/hypervisor/uuid")
    if hv_uuid and hv_uuid.lower().startswith("ec2"):
        return f"/sys/hypervisor/uuid={hv_uuid} (Xen EC2)"
    uuid = (host_root.dmi("product_uuid") or "").strip()
    serial = (host_root.dmi("product_serial") or "").strip()
    if (
        uuid.lower().startswith("ec2")
        and serial.lower().startswith("ec2")
        and uuid.lower() == serial.lower()
    ):
        return f"DMI product_uuid=product_serial={uuid} (Xen EC2)"
    return None
