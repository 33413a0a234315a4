"""The built-in ``local-ipam`` profile provider for bare metal.

DRANET's maintainers proposed a standalone node-local IPAM webhook that needs
no CNI plugin and owns its checkpoint, so that it can reclaim what a failed
release left behind.  This is that provider: ranges come from the operator
(``--ipam-range``), state lives in the node's IPAM store, and every claim is
keyed by (device, claim UID) so kubelet retries are free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .claims import ClaimReference
from .context import InstanceSnapshot, ProviderContext
from .errors import ConfigError, ProfileDenied
from .hookspecs import hookimpl
from .ipam.base import Owner
from .iprange import IPRange
from .models import DeviceIdentifiers, NetworkConfig
from .subinterface import release_subinterface, subinterface_owner, subinterface_profile

PLUGIN_NAME = "local-ipam"
DEFAULT_PROFILE = "local-ipam"


@dataclass
class LocalIpamConfig:
    """Ranges for every device, and per-device overrides (one per family each)."""

    ranges: list[IPRange] = field(default_factory=list)
    device_ranges: dict[str, list[IPRange]] = field(default_factory=dict)

    @classmethod
    def parse(cls, specs: Sequence[str]) -> LocalIpamConfig:
        """``10.0.0.0/24``, ``2001:db8::/64``, ``10.0.0.10-10.0.0.50`` or ``eth1=CIDR``."""
        cfg = cls()
        for spec in specs:
            device, sep, text = spec.partition("=")
            if not sep:
                device, text = "", spec
            try:
                rng = IPRange.parse(text)
            except ValueError as exc:
                raise ConfigError(f"--ipam-range {spec!r}: {exc}") from None
            bucket = cfg.device_ranges.setdefault(device.strip(), []) if device else cfg.ranges
            if any(r.version == rng.version for r in bucket):
                where = f"device {device}" if device else "all devices"
                raise ConfigError(
                    f"--ipam-range {spec!r}: {where} already has an IPv{rng.version} range; "
                    "give at most one range per family"
                )
            bucket.append(rng)
        return cfg

    def for_device(self, device: DeviceIdentifiers) -> list[IPRange]:
        own = self.device_ranges.get(device.name, [])
        families = {r.version for r in own}
        return sorted(
            own + [r for r in self.ranges if r.version not in families], key=lambda r: r.version
        )

    def __bool__(self) -> bool:
        return bool(self.ranges or self.device_ranges)


class LocalIpamPlugin:
    """Registered by the host or server under :data:`PLUGIN_NAME` when configured."""

    def __init__(self, config: LocalIpamConfig) -> None:
        self.config = config

    @staticmethod
    def owner(device: DeviceIdentifiers, claim_uid: str) -> Owner:
        return subinterface_owner(PLUGIN_NAME, device, claim_uid)

    @hookimpl
    def profile_config(
        self,
        context: ProviderContext,
        instance: InstanceSnapshot | None,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig,
        claim: ClaimReference | None = None,
    ) -> NetworkConfig | None:
        def ranges() -> list[IPRange]:
            found = self.config.for_device(device)
            if not found:
                raise ProfileDenied(
                    f"local-ipam: no range for device {device.label()}; start the server with "
                    f"--ipam-range CIDR or --ipam-range {device.name or 'IFNAME'}=CIDR",
                    status=400,
                )
            return found

        # Any interface type: bare metal may address a passthrough NIC too.
        return subinterface_profile(
            context,
            pool=PLUGIN_NAME,
            device=device,
            claim_uid=claim_uid,
            config=config,
            claim=claim,
            ranges=ranges,
            require_ipvlan=False,
        )

    @hookimpl
    def release_profile_config(
        self,
        context: ProviderContext,
        instance: InstanceSnapshot | None,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig | None,
    ) -> bool:
        return release_subinterface(context, pool=PLUGIN_NAME, device=device, claim_uid=claim_uid)
