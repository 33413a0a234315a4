"""EFA facts: Neuron device groups, and which EFA function sits beside an ENA NIC.

**Device groups.**  On Trainium/Inferentia instances a pod that takes Neuron
devices must take the EFA devices wired to them.  DRANET publishes, on every
PCI function bound to the ``efa`` driver, four string attributes that a
ResourceClaim can match across the Neuron and EFA drivers:

* ``resource.aws.com/devicegroup1_id``: the EFA function's own PCI address;
* ``devicegroup4_id``, ``devicegroup8_id``, ``devicegroup16_id``: the first
  16 hex digits of SHA-256 over the comma-joined, sorted, de-duplicated EFA
  addresses of the Neuron devices in the same group of 4, 8 or 16 (group =
  Neuron device ID // size) as the Neuron device wired to this EFA.

The wiring is per instance type and comes from the public Go module
``aws-neuron/connected-device-maps-over-efa-for-neuron``, which DRANET
imports; its facts are in ``efa_device_groups.json`` (provenance inside).
DRANET's gate is its own: the IMDS instance type starts ``trn`` or ``inf``
(letters before the first digit), and the map is chosen by DMI
``product_name`` as the module does (this plugin falls back to the IMDS
instance type when DMI is unreadable; on a real node they are the same).  An
instance type with no map (every ``inf*`` today) gets no groups, as in
DRANET.

**The EFA sibling of an ENA NIC.**  EFA is a separate PCI function bound to
``efa``, with no netdev and no MAC; an ENA netdev is bound to ``ena``, so no
netdev is ever "an EFA".  An ENI attached as an EFA interface shows the ENA
function and an EFA function on the same PCI bus.  :func:`sibling_efa` names
that EFA function for an ENA NIC: the ``efa`` function in the same PCI slot
if there is one, else the only ``efa`` function on the same bus; when several
share the bus and none shares the slot it answers nothing rather than guess.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from dranet_cloud.node.hostroot import HostRoot

EFA_DRIVER = "efa"
GROUP_DOMAIN = "resource.aws.com"
GROUP_SIZES = (1, 4, 8, 16)
DATA_FILE = "efa_device_groups.json"
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$")


def group_attribute(size: int) -> str:
    return f"{GROUP_DOMAIN}/devicegroup{size}_id"


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files(__package__).joinpath(DATA_FILE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def is_neuron_instance(instance_type: str | None) -> bool:
    """DRANET's test: the letters before the first digit are ``trn`` or ``inf``."""
    prefix = re.split(r"[0-9]", (instance_type or "").lower(), maxsplit=1)[0]
    return prefix in ("trn", "inf")


def neuron_to_efa(instance_type: str) -> list[str] | None:
    """EFA address of Neuron device 0, 1, 2... on ``instance_type``; ``None`` without a map."""
    name = _data()["instanceTypes"].get(instance_type)
    if name is None:
        return None
    maps: dict[str, list[str]] = _data()["maps"]
    return maps.get(name)


def _group_hash(bdfs: list[str]) -> str:
    joined = ",".join(sorted(set(bdfs)))
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def device_groups(instance_type: str, efa_bdf: str) -> dict[str, str]:
    """The four ``resource.aws.com/devicegroup*_id`` values for one EFA function.

    Empty when the instance type has no map or the address is not in it.
    """
    if not _BDF.match(efa_bdf):
        return {}
    wiring = neuron_to_efa(instance_type)
    if not wiring:
        return {}
    bdf = efa_bdf.lower()
    if bdf not in wiring:
        return {}
    neuron = wiring.index(bdf)  # trn1 wires two Neuron devices to one EFA: same groups
    out = {group_attribute(1): bdf}
    for size in GROUP_SIZES[1:]:
        first = neuron // size * size
        members = wiring[first : first + size]
        out[group_attribute(size)] = _group_hash(members)
    return out


def efa_functions(root: HostRoot) -> list[str]:
    """PCI addresses of every function bound to ``efa``, sorted."""
    return [
        pci for pci in root.listdir("/sys/bus/pci/devices") if root.pci_driver(pci) == EFA_DRIVER
    ]


def _slot(bdf: str) -> tuple[str, str]:
    head, _, _function = bdf.lower().rpartition(".")
    domain_bus, _, _device = head.rpartition(":")
    return domain_bus, head


def sibling_efa(root: HostRoot, ena_pci: str) -> str | None:
    """The EFA function beside the ENA function ``ena_pci`` (see the module doc)."""
    bus, slot = _slot(ena_pci)
    same_bus = [p for p in efa_functions(root) if p != ena_pci.lower() and _slot(p)[0] == bus]
    same_slot = [p for p in same_bus if _slot(p)[1] == slot]
    if len(same_slot) == 1:
        return same_slot[0]
    if not same_slot and len(same_bus) == 1:
        return same_bus[0]
    return None
