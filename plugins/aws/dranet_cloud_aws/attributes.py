"""Kubernetes device attributes under ``aws.dra.net/`` and DRANET's
``resource.aws.com/`` EFA device groups.

Instance-wide facts (type, region, zone, placement group) go on every device
so a claim can select by them; per-ENI facts (network card, device number,
ENI, subnet, VPC) only on NICs the metadata describes.  An ENA NIC whose ENI
also has an EFA function gets ``efaPciAddress``, that function's address (see
:mod:`.efa`): a netdev is never itself an EFA, so no attribute says it is.
EFA functions (no netdev) get the Neuron device groups on Trainium nodes.

Every name is a C identifier of at most 32 characters and every string is
cut to 64 bytes, so the host never has to drop one for its shape.  A device
may carry only so many attributes next to DRANET's own, so
:data:`RANKING` says which survive first: the device groups (schedulers
align Neuron and EFA devices by them), then what selects a NIC, then what
only describes it.
"""

from __future__ import annotations

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.node.nic import LocalNic, resolve_nic
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute, DeviceIdentifiers

from . import efa
from .snapshot import AwsInstance, Eni

DOMAIN = "aws.dra.net"
_MAX_STRING = 64


def _key(name: str) -> str:
    return f"{DOMAIN}/{name}"


def _string(value: str) -> DeviceAttribute:
    raw = value.encode()
    if len(raw) > _MAX_STRING:
        value = raw[:_MAX_STRING].decode(errors="ignore")
    return DeviceAttribute(string=value)


def instance_attributes(instance: AwsInstance) -> AttributeMap:
    out: AttributeMap = {}
    doc = instance.identity
    for name, value in (
        ("instanceType", doc.instance_type),
        ("region", doc.region),
        ("availabilityZone", doc.availability_zone),
        ("availabilityZoneId", instance.availability_zone_id),
        ("placementGroup", instance.placement_group),
    ):
        if value:
            out[_key(name)] = _string(value)
    if instance.partition_number is not None:
        out[_key("placementPartition")] = DeviceAttribute.of(instance.partition_number)
    return out


def eni_attributes(eni: Eni, *, efa_pci: str | None = None) -> AttributeMap:
    out: AttributeMap = {_key("networkCard"): DeviceAttribute.of(eni.network_card)}
    if eni.device_number is not None:
        out[_key("deviceNumber")] = DeviceAttribute.of(eni.device_number)
    for name, value in (
        ("interfaceId", eni.interface_id),
        ("subnetId", eni.subnet_id),
        ("vpcId", eni.vpc_id),
    ):
        if value:
            out[_key(name)] = _string(value)
    if efa_pci:
        out[_key("efaPciAddress")] = _string(efa_pci)
    return out


def device_group_attributes(
    context: ProviderContext, instance: AwsInstance, nic: LocalNic
) -> AttributeMap:
    """DRANET's EFA device groups, for an ``efa``-bound function on a Neuron instance."""
    root = context.host_root
    pci = nic.pci_address
    if pci is None or not efa.is_neuron_instance(instance.identity.instance_type):
        return {}
    if (nic.driver or root.pci_driver(pci)) != efa.EFA_DRIVER:
        return {}
    map_type = root.dmi("product_name") or instance.identity.instance_type or ""
    return {k: DeviceAttribute(string=v) for k, v in efa.device_groups(map_type, pci).items()}


def device_attributes(
    context: ProviderContext, instance: AwsInstance, device: DeviceIdentifiers
) -> AttributeMap:
    nic = resolve_nic(context.host_root, device)
    out = device_group_attributes(context, instance, nic)
    out.update(instance_attributes(instance))
    eni = instance.eni(nic.mac)
    pci = nic.pci_address
    if eni is not None:
        sibling = None
        if pci is not None and context.host_root.pci_driver(pci) != efa.EFA_DRIVER:
            sibling = efa.sibling_efa(context.host_root, pci)
        out.update(eni_attributes(eni, efa_pci=sibling))
    return out


# Most useful first; see the module docstring and the ``attribute_ranking`` hook.
RANKING = [
    f"{efa.GROUP_DOMAIN}/",
    _key("networkCard"),
    _key("instanceType"),
    _key("placementGroup"),
    _key("availabilityZone"),
    _key("efaPciAddress"),
    _key("subnetId"),
    _key("interfaceId"),
    _key("placementPartition"),
    _key("vpcId"),
    _key("deviceNumber"),
    _key("availabilityZoneId"),
    _key("region"),
]
