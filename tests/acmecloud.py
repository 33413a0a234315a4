"""``acmecloud``: a cloud plugin as a vendor writes one from docs/plugin-api.md,
with the mistakes a vendor made, one per instance.

``tests/test_conformance_kit.py`` installs one of the instances below as the
``acmecloud`` entry point of a throw-away distribution (the host's normal
load path) and runs the conformance suite on it, exactly as a vendor's test
module would, to show that each mistake fails the suite with a message that
says why.  :data:`GOOD` passes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dranet_cloud.contract.confirm import confirm_probe
from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.testing import Emulator, HostRootBuilder, Request, Response
from dranet_cloud.toolkit.metadata import MetadataClient, resolve_endpoint
from dranet_cloud.wire.models import DeviceAttribute, DeviceIdentifiers, NetworkConfig

ENDPOINT_VAR = "ACMECLOUD_METADATA_ENDPOINT"
INSTANCE_PATH = "/acme/v1/instance"
NICS = {
    "eth0": ("02:ac:00:00:00:01", "0000:00:04.0"),
    "eth1": ("02:ac:00:00:00:02", "0000:00:05.0"),
}


class AcmeInstance(InstanceSnapshot):
    nics: dict[str, int] = {}  # MAC -> MTU
    listed: list[str] | None = None  # what known_macs() answers, when set

    def known_macs(self) -> frozenset[str]:
        return frozenset(self.nics if self.listed is None else self.listed)


@dataclass(eq=False)  # pluggy keys plugins by identity
class AcmeCloud:
    """A cloud plugin: DMI ``sys_vendor=AcmeCloud``; its metadata is one JSON document.

    The fields are the places a vendor got wrong (their defaults are right).
    """

    confirm_path: str = INSTANCE_PATH
    mtu: int = 9000
    known: list[str] | None = None  # known_macs(), when not the metadata's NICs
    attribute: str = "acmecloud.example.com/isPrimary"
    route: dict[str, Any] = field(
        default_factory=lambda: {"destination": "10.8.0.0/16", "gateway": "10.8.0.1"}
    )
    neighbor: dict[str, Any] = field(
        default_factory=lambda: {"destination": "10.8.0.1", "hardwareAddr": "02:ac:ff:00:00:01"}
    )

    def _client(self, context: ProviderContext, timeout: float) -> MetadataClient:
        endpoint = resolve_endpoint(context.env, "http://192.0.2.80", [ENDPOINT_VAR])
        return MetadataClient(endpoint, plugin="acmecloud", timeout=timeout)

    @hookimpl
    def plugin_settings(self) -> list[Any]:
        return []

    @hookimpl
    def local_evidence(self, context: ProviderContext) -> str | None:
        vendor = context.host_root.dmi("sys_vendor")
        return "DMI sys_vendor=AcmeCloud" if vendor == "AcmeCloud" else None

    @hookimpl
    def confirm_environment(self, context: ProviderContext, timeout: float) -> str | None:
        def probe() -> str:
            with self._client(context, timeout) as client:
                doc = client.get_json(self.confirm_path, deadline=timeout)
                return f"AcmeCloud metadata at {client.endpoint.url} (instance {doc['id']})"

        return confirm_probe("acmecloud", probe)

    @hookimpl
    def instance_properties(self, context: ProviderContext, deadline: float) -> AcmeInstance:
        with self._client(context, context.options.request_timeout) as client:
            doc = client.get_json(INSTANCE_PATH, deadline=deadline)
            return AcmeInstance(
                provider="acmecloud",
                endpoint=client.endpoint.url,
                nics={nic["mac"]: nic["mtu"] for nic in doc["nics"]},
                listed=self.known,
            )

    # An implementation names only the arguments it uses (docs/plugin-api.md).
    @hookimpl
    def device_attributes(
        self, instance: AcmeInstance | None, device: DeviceIdentifiers
    ) -> dict[str, DeviceAttribute] | None:
        if instance is None or device.mac not in instance.nics:
            return None
        return {self.attribute: DeviceAttribute.of(device.mac == NICS["eth0"][0])}

    @hookimpl
    def device_config(
        self, instance: AcmeInstance, device: DeviceIdentifiers
    ) -> NetworkConfig | None:
        if device.mac not in instance.nics:
            return None
        return NetworkConfig.model_validate(
            {
                "interface": {"mtu": self.mtu},
                "routes": [self.route],
                "neighbors": [self.neighbor],
            }
        )

    @hookimpl
    def emulator(self, fixture: Path | None, listen: str, faults: str | None) -> Emulator:
        doc = {"id": "acme-7", "nics": [{"mac": mac, "mtu": 9000} for mac, _ in NICS.values()]}

        def handler(req: Request) -> Response:
            return Response.json(doc) if req.path == INSTANCE_PATH else Response.not_found()

        return Emulator(
            handler,
            name="acmecloud",
            listen=listen,
            faults=faults,
            env_for=lambda url: {ENDPOINT_VAR: url},
        )

    @hookimpl
    def sample_host(self, dest: Path, variant: str | None) -> SampleHost | None:
        if variant is not None:
            return None
        builder = HostRootBuilder(dest).dmi(sys_vendor="AcmeCloud")
        for name, (mac, pci) in NICS.items():
            builder.nic(name, mac, mtu=9000, pci=pci, driver="virtio_net")
        return SampleHost(builder.build(), "an AcmeCloud VM with two NICs")


class MisspeltHook(AcmeCloud):
    """Ranks its attributes, but the hook's name has a typo: pluggy alone would
    register it silently and never call it."""

    @hookimpl
    def attribute_rankng(self) -> list[str]:
        return [self.attribute]


class NoDeviceConfig(AcmeCloud):
    """A cloud with no claim-independent baseline per NIC: no device_config hook at all."""

    device_config = None  # type: ignore[assignment]  # the hook left out, as plugin-api.md allows


class UndeclaredHostFile(AcmeCloud):
    """Reads its NICs' MTU from a node file, /etc/acme/mtu, but declares no
    ``host_paths``: a pod mounting what the plugin declares (the core's /sys)
    would not see the file."""

    @hookimpl
    def device_config(
        self, context: ProviderContext, instance: AcmeInstance, device: DeviceIdentifiers
    ) -> NetworkConfig | None:
        if device.mac not in instance.nics:
            return None
        mtu = int(context.host_root.read_text("/etc/acme/mtu") or 1500)
        return NetworkConfig.model_validate({"interface": {"mtu": mtu}})

    @hookimpl
    def sample_host(self, dest: Path, variant: str | None) -> SampleHost | None:
        sample = super().sample_host(dest, variant)
        if sample is not None:
            HostRootBuilder(dest).file("/etc/acme/mtu", "9000\n").build()
        return sample


GOOD = AcmeCloud()
NO_DEVICE_CONFIG = NoDeviceConfig()
TYPO_IN_CONFIRM_PATH = AcmeCloud(confirm_path="/acme/v1/instnace")
MTU_70000 = AcmeCloud(mtu=70000)
EMPTY_KNOWN_MACS = AcmeCloud(known=[])
HYPHEN_IN_ATTRIBUTE = AcmeCloud(attribute="acmecloud.example.com/is-primary")
ROUTE_AND_NEIGHBOR_DRANET_REFUSES = AcmeCloud(
    route={"destination": "10.8.0.0/16"}, neighbor={"destination": "10.8.0.1"}
)
MISSPELT_HOOK = MisspeltHook()
UNDECLARED_HOST_FILE = UndeclaredHostFile()
