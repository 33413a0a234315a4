"""The built-in ``local-ipam`` profile provider for bare metal.

DRANET's maintainers proposed a standalone node-local IPAM webhook that needs
no CNI plugin and owns its checkpoint, so that it can reclaim what a failed
release left behind.  This is that provider: ranges come from the operator
(``--ipam-range``), state lives in the node's IPAM store, and every claim is
keyed by (device, claim UID) so kubelet retries are free.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.ipam.base import Owner
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import (
    LocalNic,
    decode_dra_name,
    described_nic,
    local_nics,
    normalize_pci,
    resolve_nic,
)
from dranet_cloud.providers.subinterface import (
    inside_ranges,
    release_subinterface,
    subinterface_owner,
    subinterface_profile,
)
from dranet_cloud.toolkit.errors import ConfigError, ProfileDenied
from dranet_cloud.toolkit.hwaddr import normalize_mac
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

log = logging.getLogger(__name__)

PLUGIN_NAME = "local-ipam"
# How many of the node's NIC names an unmatched-selector warning lists.
_NAMES_SHOWN = 12


SELECTOR_KINDS = ("mac", "pci", "name")
SELECTOR_HELP = (
    "CIDR or START-END for every device, or per device: IFNAME=RANGE (an interface "
    "name or a DRA device name such as pci-0000-00-05-0), mac=MAC=RANGE, "
    "pci=0000:00:05.0=RANGE or name=IFNAME=RANGE"
)

Selector = tuple[str, str]  # (kind, value): ("mac", "42:01:..."), ("pci", ...), ("name", "eth1")


def parse_selector(text: str, spec: str) -> Selector:
    """``eth1``, ``pci-0000-00-05-0``, ``mac=..``, ``pci=..`` or ``name=..`` as a selector.

    A DRA device name is decoded, so ``pci-0000-00-05-0=`` selects the PCI
    function whatever its interface is called, and ``eth1=`` selects the NIC
    named eth1 whatever name DRANET sends for it.
    """
    kind, sep, value = text.partition("=")
    kind = kind.strip().lower()
    if not sep:
        kind, value = "name", text
    value = value.strip()
    if kind not in SELECTOR_KINDS or not value:
        raise ConfigError(f"--ipam-range {spec!r}: expected {SELECTOR_HELP}")
    if kind == "mac":
        try:
            return "mac", normalize_mac(value)
        except ValueError as exc:
            raise ConfigError(f"--ipam-range {spec!r}: {exc}") from None
    if kind == "pci":
        pci = normalize_pci(value)
        if pci is None:
            raise ConfigError(
                f"--ipam-range {spec!r}: {value!r} is not a PCI address like 0000:00:05.0"
            )
        return "pci", pci
    dra_pci, dra_if = decode_dra_name(value)
    if dra_pci is not None:
        return "pci", dra_pci
    return "name", dra_if or value


def _split_spec(spec: str) -> tuple[str, str]:
    """(selector text, range text); the selector is empty for a range for every device."""
    head, sep, rest = spec.partition("=")
    if not sep:
        return "", spec
    if head.strip().lower() in SELECTOR_KINDS and "=" in rest:
        value, _, text = rest.rpartition("=")
        return f"{head}={value}", text
    return head, rest


@dataclass
class LocalIpamConfig:
    """Ranges for every device, and per-device overrides (one per family each).

    A device override is selected by MAC, PCI address or name (an interface
    name or a decoded DRA device name); when several match one NIC, the MAC
    selector wins, then the PCI one, then the name.
    """

    ranges: list[IPRange] = field(default_factory=list)
    device_ranges: dict[Selector, list[IPRange]] = field(default_factory=dict)

    @classmethod
    def parse(cls, specs: Sequence[str]) -> LocalIpamConfig:
        """Each spec: a range for every device, or ``SELECTOR=RANGE`` (:data:`SELECTOR_HELP`)."""
        cfg = cls()
        for spec in specs:
            selector_text, text = _split_spec(spec)
            selector = parse_selector(selector_text, spec) if selector_text.strip() else None
            try:
                rng = IPRange.parse(text)
            except ValueError as exc:
                raise ConfigError(f"--ipam-range {spec!r}: {exc}") from None
            bucket = cfg.device_ranges.setdefault(selector, []) if selector else cfg.ranges
            if any(r.version == rng.version for r in bucket):
                where = f"device {selector[0]}={selector[1]}" if selector else "all devices"
                raise ConfigError(
                    f"--ipam-range {spec!r}: {where} already has an IPv{rng.version} range; "
                    "give at most one range per family"
                )
            bucket.append(rng)
        return cfg

    def all_ranges(self) -> list[IPRange]:
        """Every range, each once: what /metrics counts and cluster scope watches."""
        return list(
            dict.fromkeys([*self.ranges, *(r for d in self.device_ranges.values() for r in d)])
        )

    def _own(self, nic: LocalNic) -> list[IPRange]:
        """The NIC's own ranges: MAC selector first, then PCI, then names."""
        wanted: list[Selector] = []
        if nic.mac:
            wanted.append(("mac", nic.mac))
        if nic.pci_address:
            wanted.append(("pci", nic.pci_address))
        wanted += [("name", n) for n in nic.names]
        own: list[IPRange] = []
        for selector in wanted:
            for rng in self.device_ranges.get(selector, []):
                if all(r.version != rng.version for r in own):
                    own.append(rng)
        return own

    def unchecked_names(self, nic: LocalNic) -> list[str]:
        """Name selectors that cannot be checked against ``nic``, which has none of its own.

        A NIC the node's files do not show, sent without its interface name
        (a gen1 DRA device name ``pci-...``, a PCI address only): any
        ``IFNAME=`` selector may be its range, so the default would be a guess.
        """
        if nic.found or nic.ifname is not None or self._own(nic):
            return []
        return sorted(value for kind, value in self.device_ranges if kind == "name")

    def for_nic(self, nic: LocalNic) -> list[IPRange]:
        """The NIC's ranges, one per family, its own before the defaults."""
        own = self._own(nic)
        families = {r.version for r in own}
        return sorted(
            own + [r for r in self.ranges if r.version not in families], key=lambda r: r.version
        )

    def for_device(
        self, device: DeviceIdentifiers, host_root: HostRoot | None = None
    ) -> list[IPRange]:
        """:meth:`for_nic` for the NIC ``device`` resolves to under ``host_root``."""
        nic = resolve_nic(host_root, device) if host_root is not None else described_nic(device)
        return self.for_nic(nic)

    def __bool__(self) -> bool:
        return bool(self.ranges or self.device_ranges)


def selector_text(selector: Selector) -> str:
    """A selector as the operator wrote it: ``eth1=``, ``mac=..=``, ``pci=..=``."""
    kind, value = selector
    return f"{value}=" if kind == "name" else f"{kind}={value}="


def _nic_selectors(nic: LocalNic) -> set[Selector]:
    out: set[Selector] = {("name", n) for n in nic.names}
    if nic.mac:
        out.add(("mac", nic.mac))
    if nic.pci_address:
        out.add(("pci", nic.pci_address))
    return out


class SelectorCheck:
    """Which ``--ipam-range`` selectors match no NIC of the node, said until they do.

    ``--ipam-range eht1=10.7.0.0/24`` is accepted (a NIC may appear later: a
    VF created after start, a hot-plugged NIC, a passthrough NIC handed back),
    but a typo must not pass in silence while claims on ``eth1`` get the
    default range.  So each unmatched selector is a WARNING when first found
    (at start-up) and a ``/health`` warning for as long as it stays so; when
    it starts matching (a re-check, or a claim on the NIC it names) one line
    says so and the warning goes.  A selector that stops matching later (its
    NIC moved into a pod) is warned about again.  Memory is bounded by the
    configured selectors.
    """

    def __init__(self, config: LocalIpamConfig) -> None:
        self.selectors = tuple(config.device_ranges)
        self._lock = threading.Lock()
        self._unmatched: dict[Selector, str] = {}  # selector -> its warning

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings of the selectors unmatched at the last look (for ``/health``)."""
        with self._lock:
            return tuple(self._unmatched.values())

    def check(self, host_root: HostRoot) -> tuple[str, ...]:
        """Compare the selectors with the NICs under ``host_root`` now; log what changed."""
        if not self.selectors:
            return ()

        nics = local_nics(host_root)
        present: set[Selector] = set()
        for nic in nics:
            present |= _nic_selectors(nic)
        names = sorted({n.ifname for n in nics if n.ifname})
        for selector in self.selectors:
            if selector in present:
                self._matched(selector, "a NIC under the host root")
            else:
                self._missing(selector, host_root, names)
        return self.warnings

    def seen(self, nic: LocalNic) -> None:
        """A claim resolved ``nic`` on the node: the selectors it matches are matched."""
        if not nic.found or not self._unmatched:  # the usual case: one dict test
            return
        for selector in _nic_selectors(nic) & set(self._unmatched):
            self._matched(selector, f"NIC {nic.label()} (a claim on it)")

    def _matched(self, selector: Selector, where: str) -> None:
        with self._lock:
            if self._unmatched.pop(selector, None) is None:
                return
        # A WARNING like the one it clears, so that it shows at the default log level.
        log.warning(
            "local-ipam: --ipam-range selector %s now matches %s; its range applies there "
            "(the earlier warning is cleared)",
            selector_text(selector),
            where,
        )

    def _missing(self, selector: Selector, host_root: HostRoot, names: list[str]) -> None:
        with self._lock:
            if selector in self._unmatched:
                return
            kind, value = selector
            close = difflib.get_close_matches(value, names, n=1) if kind == "name" else []
            hint = f"did you mean {close[0]}=? " if close else ""
            shown = ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")
            text = (
                f"local-ipam: --ipam-range selector {selector_text(selector)} matches no NIC of "
                f"this node (interfaces under {host_root.root}/sys/class/net: {shown or 'none'}); "
                f"{hint}claims on other NICs get the default range. Fix the selector, or ignore "
                "this if the NIC appears later (a VF created after start, a hot-plugged NIC)"
            )
            self._unmatched[selector] = text
        log.warning("%s", text)


class LocalIpamPlugin:
    """Registered by the host or server under :data:`PLUGIN_NAME` when configured."""

    def __init__(
        self, config: LocalIpamConfig, *, allow_static_outside_ranges: bool = False
    ) -> None:
        self.config = config
        self.selectors = SelectorCheck(config)
        configured = [*config.ranges, *(r for rs in config.device_ranges.values() for r in rs)]
        self._check_static = (
            None
            if allow_static_outside_ranges
            else inside_ranges(PLUGIN_NAME, configured, "--ipam-allow-static-outside-ranges")
        )

    @staticmethod
    def owner(context: ProviderContext, device: DeviceIdentifiers, claim_uid: str) -> Owner:
        return subinterface_owner(context, PLUGIN_NAME, device, claim_uid)

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
            nic = resolve_nic(context.host_root, device)
            self.selectors.seen(nic)
            unchecked = self.config.unchecked_names(nic)
            if unchecked:
                raise ProfileDenied(
                    f"local-ipam: device {device.label()} is not under host root "
                    f"{context.host_root.root}, so its interface name is unknown and the "
                    f"selector(s) {', '.join(n + '=' for n in unchecked)} cannot be checked; "
                    "rather than guess the default range: point --host-root at the node's "
                    "/sys, or select this NIC with mac=MAC= or pci=ADDRESS=",
                    status=500,
                )
            found = self.config.for_nic(nic)
            if not found:
                selector = (
                    nic.ifname
                    or (f"mac={nic.mac}" if nic.mac else None)
                    or (f"pci={nic.pci_address}" if nic.pci_address else "IFNAME")
                )
                raise ProfileDenied(
                    f"local-ipam: no range for device {device.label()}; start the server with "
                    f"--ipam-range CIDR or --ipam-range {selector}=CIDR",
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
            check_static=self._check_static,
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
