"""Small in-process plugins for host tests: a cloud backed by a real loopback
emulator, a profile-only allocator and an enricher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.providers.subinterface import subinterface_owner
from dranet_cloud.testing import Emulator, Request, Response, tree_response
from dranet_cloud.toolkit.errors import ProfileDenied
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.toolkit.metadata import MetadataClient, resolve_endpoint
from dranet_cloud.wire.models import (
    DeviceAttribute,
    DeviceIdentifiers,
    InterfaceConfig,
    NetworkConfig,
)

ENDPOINT_VAR = "FAKECLOUD_ENDPOINT"


class FakeInstance(InstanceSnapshot):
    nics: dict[str, int] = {}

    def known_macs(self) -> frozenset[str]:
        return frozenset(self.nics)


class FakeCloud:
    """Evidence: DMI sys_vendor 'FakeCloud'.  Metadata: {"nics": {mac: mtu}}."""

    def __init__(self, name: str = "fakecloud", vendor: str = "FakeCloud") -> None:
        self.name = name
        self.vendor = vendor
        self.loads = 0

    def _client(self, context: ProviderContext) -> MetadataClient:
        ep = resolve_endpoint(context.env, "http://192.0.2.1", [ENDPOINT_VAR])
        return MetadataClient(ep, plugin=self.name, timeout=0.5)

    @hookimpl
    def local_evidence(self, context: ProviderContext) -> str | None:
        vendor = context.host_root.dmi("sys_vendor")
        return f"DMI sys_vendor={vendor}" if vendor == self.vendor else None

    @hookimpl
    def confirm_environment(self, context: ProviderContext, timeout: float) -> str | None:
        with self._client(context) as client:
            client.get("/ping", deadline=timeout)
            return f"{client.endpoint.url} answered"

    @hookimpl
    def instance_properties(self, context: ProviderContext, deadline: float) -> FakeInstance:
        self.loads += 1
        with self._client(context) as client:
            tree = client.get_json("/meta", deadline=deadline)
            return FakeInstance(provider=self.name, endpoint=client.endpoint.url, nics=tree["nics"])

    @hookimpl
    def device_attributes(
        self, context: ProviderContext, instance: FakeInstance | None, device: DeviceIdentifiers
    ) -> dict[str, DeviceAttribute] | None:
        if instance is None or device.mac not in instance.nics:
            return None
        return {
            "fake.dra.net/mtu": DeviceAttribute.of(instance.nics[device.mac]),
            "fake.dra.net/bad-name": DeviceAttribute.of("dropped by the host"),
            "fake.dra.net/long": DeviceAttribute.of("x" * 65),
        }

    @hookimpl
    def device_config(
        self, context: ProviderContext, instance: FakeInstance, device: DeviceIdentifiers
    ) -> NetworkConfig | None:
        if device.mac not in instance.nics:
            return None
        return NetworkConfig(
            interface=InterfaceConfig(mtu=instance.nics[device.mac]),
            routes=[{"destination": "10.0.0.0/24", "scope": 253, "table": 100}],
        )  # type: ignore[list-item]


def fake_emulator(nics: dict[str, int], faults: str | None = None) -> Emulator:
    tree: dict[str, Any] = {"meta": None, "ping": "pong"}

    def handler(req: Request) -> Response:
        if req.path == "/meta":
            return Response.json({"nics": nics})
        return tree_response(tree, req.path.strip("/").split("/"))

    return Emulator(handler, name="fake", faults=faults, env_for=lambda url: {ENDPOINT_VAR: url})


class FakeProfile:
    """Allocates from 10.99.0.0/24 for ipvlan claims; denies profile 'forbidden'.

    Like every test peer, its hooks name only the arguments they read: pluggy passes a
    hook implementation just the subset of the spec's arguments it asks for.
    """

    @hookimpl
    def profile_config(
        self,
        context: ProviderContext,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig,
    ) -> NetworkConfig | None:
        if config.profile == "forbidden":
            raise ProfileDenied("profile 'forbidden' is not allowed here", status=409)
        addrs = context.ipam.allocate(
            subinterface_owner(context, "fakeprofile", device, claim_uid),
            [ip_range_from_cidr("10.99.0.0/24")],
        )
        return NetworkConfig(interface=InterfaceConfig(addresses=addrs))

    @hookimpl
    def release_profile_config(
        self, context: ProviderContext, device: DeviceIdentifiers, claim_uid: str
    ) -> bool:
        if claim_uid == "explode":
            raise RuntimeError("backend gone")
        context.ipam.release(subinterface_owner(context, "fakeprofile", device, claim_uid))
        return True


class FakeEnricher:
    @hookimpl
    def device_attributes(
        self, context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
    ) -> dict[str, DeviceAttribute]:
        return {"vendor.example.com/firmware": DeviceAttribute(version="2.1.0")}


def dmi_root(tmp: Path, vendor: str, nics: dict[str, str] | None = None) -> Path:
    from dranet_cloud.testing import HostRootBuilder

    b = HostRootBuilder(tmp).dmi(sys_vendor=vendor)
    for name, mac in (nics or {}).items():
        b.nic(name, mac)
    return b.build()
