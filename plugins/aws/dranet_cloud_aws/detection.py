"""Local evidence that the node is an EC2 instance, from DMI and the Xen hypervisor.

The rules are cloud-init's ``ds-identify`` rules for EC2, which decide
without network in milliseconds:

* Nitro instances report DMI ``sys_vendor`` ``Amazon EC2``;
* older Xen instances have ``/sys/hypervisor/uuid`` starting with ``ec2``, or
  DMI ``product_uuid`` and ``product_serial`` that both start with ``ec2`` and
  are the same string ignoring case (a Xen guest elsewhere has unrelated
  values there).

Confirmation is one token PUT and one GET of the instance identity document
(DRANET's ``OnAWS`` in pkg/cloudprovider/aws/aws.go reads the same
document), under the rule of :func:`dranet_cloud.contract.confirm.confirm_probe`:
no answer raises, an answer that is not EC2's (a 404, a refused token
without ``aws.allow_imdsv1``, a document without an ``i-`` instance id) is
``None``.
"""

from __future__ import annotations

import json

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.logsafe import safe

from .metadata_source import DOCUMENT_PATH, open_client
from .snapshot import PLUGIN

NITRO_SYS_VENDOR = "Amazon EC2"


def local_evidence(context: ProviderContext) -> str | None:
    """A short description of the EC2 evidence in the node's files, or ``None``."""
    host_root = context.host_root
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


def confirm(context: ProviderContext, timeout: float) -> str | None:
    """One token and one GET of the identity document, together bounded by ``timeout``."""

    def probe() -> str:
        with open_client(context, timeout=timeout) as session:
            raw = session.get(DOCUMENT_PATH)
            where = f"{session.endpoint.url}{DOCUMENT_PATH}"
            if raw is None:
                raise NotThisCloud(f"{where} answered 404")
            try:
                doc = json.loads(raw)
            except ValueError:
                raise NotThisCloud(f"{where} is not JSON") from None
            instance_id = doc.get("instanceId") if isinstance(doc, dict) else None
            if not isinstance(instance_id, str) or not instance_id.startswith("i-"):
                raise NotThisCloud(f"{where} holds no EC2 instance id ({safe(instance_id, 40)})")
            return (
                f"IMDSv{session.version} at {session.endpoint.describe()}: {instance_id} "
                f"({doc.get('instanceType', '?')} in {doc.get('availabilityZone', '?')})"
            )

    return confirm_probe(PLUGIN, probe)
