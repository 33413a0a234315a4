"""Kubernetes device attributes under ``aws.dra.net/``.

Instance-wide facts (type, region, zone, placement group) go on every NIC so
a claim can select by them; per-ENI facts (network card, device number, ENI,
subnet, VPC, EFA) only on NICs the metadata describes.  ``efa`` is published
as a bool on every known ENI (true when the NIC's PCI function is bound to the
``efa`` driver) so selectors can test it either way without tripping over a
missing attribute.

Every name is a C identifier of at most 32 characters and every string is
cut to 64 bytes, so the host never has to drop one.
"""

from __future__ import annotations

from dranet_cloud.context import ProviderContext
from dranet_cloud.models import AttributeMap, DeviceAttribute, DeviceIdentifiers
from dranet_cloud.nic import resolve_nic

from .snapshot import AwsInstance, Eni

DOMAIN = "aws.dra.net"
EFA_DRIVER = "efa"
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


def eni_attributes(eni: Eni, *, efa: bool | None) -> AttributeMap:
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
    if efa is not None:
        out[_key("efa")] = DeviceAttribute.of(efa)
    return out


def pci_driver(context: ProviderContext, device: DeviceIdentifiers) -> str | None:
    """The kernel driver of the NIC's PCI function, read through the host root.

    The NIC is resolved by MAC, then PCI address, then name, so a PCI-only
    device (an EFA function has no netdev) and a DRA device name both work.
    """
    nic = resolve_nic(context.host_root, device)
    if not nic.pci_address:
        return None
    return nic.driver or context.host_root.pci_driver(nic.pci_address)


def device_attributes(
    context: ProviderContext, instance: AwsInstance, device: DeviceIdentifiers
) -> AttributeMap:
    out = instance_attributes(instance)
    nic = resolve_nic(context.host_root, device)
    eni = instance.eni(nic.mac)
    if eni is not None:
        driver = pci_driver(context, device)
        out.update(eni_attributes(eni, efa=driver == EFA_DRIVER))
    return out
