"""The ``azure-ipoib`` profile: an InfiniBand NIC's IPv4 address from the Hyper-V KVP pool.

On ND- and HB-series VMs Azure does not list the InfiniBand NICs in IMDS; the
host pushes their addresses into the guest's KVP pool
(``/var/lib/hyperv/.kvp_pool_0``) under the key ``IPoIB_Data``, as
``NUMPAIRS:<N>|<MAC>:<IPv4>|...`` with each MAC written as 12 hex digits.
That MAC is six bytes of the IPoIB netdev's 20-byte hardware address: bytes
12-14 and 17-19 (the GID's port GUID without its ``ff:fe`` filler), the
mapping Microsoft's own DRANET webhook (Azure/azure-ipoib-ipam-cni) uses.

A claim whose config names ``azure-ipoib`` gets that address, with the
configured prefix length (16 by default, as Microsoft's webhook), on the IB
NIC itself (``Passthrough``): the address belongs to the NIC, so an IPVLAN
child cannot carry it.  Release frees nothing (the host owns the mapping).

Differences from Microsoft's webhook, on purpose:

* it reads ``N`` pairs and checks there are exactly ``N`` (theirs takes
  ``N = 1`` only, so an eight-NIC VM whose pool lists eight pairs is served
  here and refused there);
* it re-reads the pool when a cached read is older than
  ``azure.kvp_reread`` seconds (the daemon rewrites records in place, so
  size and mtime prove nothing); theirs reads at start and on SIGHUP;
* an unreadable, truncated or malformed pool is a 500 (DRANET fails the
  prepare and the kubelet retries), and a NIC with no pair is a 400 naming
  the NIC and the file; theirs answers 404 to both.

Settings (``--set azure.KEY=VALUE``): ``ipoib_prefix_length`` (1-32, default
16), ``kvp_pool`` (the pool's node path, under ``--host-root``, default
``/var/lib/hyperv/.kvp_pool_0``), ``kvp_reread`` (seconds, default 5).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.toolkit.errors import ConfigError, ProfileDenied, ProviderUnavailable
from dranet_cloud.toolkit.hwaddr import IPOIB_SIZE, HardwareAddr, parse_bare_hex, parse_hwaddr
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.models import (
    TYPE_IPVLAN,
    TYPE_PASSTHROUGH,
    DeviceIdentifiers,
    InterfaceConfig,
    NetworkConfig,
)

from .constants import PLUGIN
from .kvp import DEFAULT_POOL_PATH, KvpPoolError, decode_pool, read_pool

PROFILE = "azure-ipoib"
KVP_KEY = "IPoIB_Data"
SETTING_PREFIX_LENGTH = f"{PLUGIN}.ipoib_prefix_length"
SETTING_POOL = f"{PLUGIN}.kvp_pool"
SETTING_REREAD = f"{PLUGIN}.kvp_reread"
DEFAULT_PREFIX_LENGTH = 16
DEFAULT_REREAD = 5.0
_MAX_SHOWN_PAIRS = 8


def kvp_mac(address: HardwareAddr) -> HardwareAddr:
    """The 6-byte MAC the KVP pool uses for a 20-byte IPoIB address (bytes 12-14, 17-19)."""
    if len(address) != IPOIB_SIZE:
        raise ValueError(f"{address} is not a {IPOIB_SIZE}-byte IPoIB address")
    return HardwareAddr(address[12:15] + address[17:20])


def parse_ipoib_data(value: str, where: str) -> dict[str, ipaddress.IPv4Address]:
    """``{MAC (colon form): IPv4}`` from ``NUMPAIRS:<N>|<MAC>:<IPv4>|...``.

    Every part is checked: ``N`` is a decimal count equal to the number of
    pairs, each MAC is 12 hex digits, each address a dotted IPv4 address, and
    no MAC is listed twice.  A value cut short (the daemon mid-rewrite, a
    truncated file) fails one of these, so it is an error, never a shorter map.
    """
    head, *pairs = value.split("|")
    label, sep, count = head.partition(":")
    if label != "NUMPAIRS" or not sep or not count.isascii() or not count.isdigit():
        raise KvpPoolError(f"{where} does not start with NUMPAIRS:<N>: {safe(value, 80)}")
    if int(count) != len(pairs):
        raise KvpPoolError(
            f"{where} announces {int(count)} pairs but lists {len(pairs)}: {safe(value, 80)}"
        )
    out: dict[str, ipaddress.IPv4Address] = {}
    for index, pair in enumerate(pairs):
        raw_mac, sep, raw_ip = pair.partition(":")
        try:
            mac = str(parse_bare_hex(raw_mac))
            if not sep:
                raise ValueError("no ':' between MAC and address")
            ip = ipaddress.IPv4Address(raw_ip)
        except ValueError as exc:
            raise KvpPoolError(f"{where}, pair {index} {safe(pair, 60)}: {exc}") from None
        if mac in out:
            raise KvpPoolError(f"{where} lists MAC {mac} twice")
        out[mac] = ip
    return out


@dataclass(frozen=True)
class _Read:
    at: float
    pairs: dict[str, ipaddress.IPv4Address] | None
    error: str | None


class PoolReader:
    """One pool file, re-read when the last read is older than the interval."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._last: _Read | None = None

    def pairs(self, interval: float) -> dict[str, ipaddress.IPv4Address]:
        """The pool's pairs; :class:`KvpPoolError` when it cannot be read or parsed."""
        with self._lock:
            last = self._last
            if last is None or time.monotonic() - last.at >= interval:
                last = self._last = self._read()
        if last.pairs is None:
            raise KvpPoolError(last.error or f"{self.path}: unreadable")
        return last.pairs

    def _read(self) -> _Read:
        now = time.monotonic()
        try:
            records = decode_pool(read_pool(Path(self.path)), self.path)
            values = [v for k, v in records if k.lower() == KVP_KEY.lower()]
            if not values:
                raise KvpPoolError(
                    f"{self.path} has no {KVP_KEY} record yet (the host has not pushed the "
                    "InfiniBand addresses, or this is not an InfiniBand VM)"
                )
            # The last record wins, as the daemon appends a key it had not seen.
            return _Read(now, parse_ipoib_data(values[-1], f"{KVP_KEY} in {self.path}"), None)
        except KvpPoolError as exc:
            return _Read(now, None, str(exc))


_READERS: dict[str, PoolReader] = {}
_READERS_LOCK = threading.Lock()


def _reader(path: str) -> PoolReader:
    with _READERS_LOCK:
        reader = _READERS.get(path)
        if reader is None:
            if len(_READERS) >= 64:
                _READERS.clear()
            reader = _READERS[path] = PoolReader(path)
        return reader


@dataclass(frozen=True)
class IpoibSettings:
    prefix_length: int
    pool: str  # the node path
    reread: float


def settings(context: ProviderContext) -> IpoibSettings:
    """The profile's settings, checked (:class:`ConfigError` names the bad one)."""
    options = context.options
    raw_prefix = options.setting(SETTING_PREFIX_LENGTH) or str(DEFAULT_PREFIX_LENGTH)
    raw_reread = options.setting(SETTING_REREAD) or str(DEFAULT_REREAD)
    pool = options.setting(SETTING_POOL) or DEFAULT_POOL_PATH
    try:
        prefix = int(raw_prefix.strip())
        reread = float(raw_reread.strip())
    except ValueError:
        prefix, reread = -1, -1.0
    if not 1 <= prefix <= 32:
        raise ConfigError(f"--set {SETTING_PREFIX_LENGTH}={raw_prefix}: expected 1 to 32")
    if not 0 < reread <= 3600:
        raise ConfigError(f"--set {SETTING_REREAD}={raw_reread}: expected 0 < seconds <= 3600")
    if not pool.startswith("/"):
        raise ConfigError(
            f"--set {SETTING_POOL}={pool}: expected an absolute node path (read under --host-root)"
        )
    return IpoibSettings(prefix, pool, reread)


def _ipoib_address(context: ProviderContext, device: DeviceIdentifiers) -> tuple[str, HardwareAddr]:
    """(label, 20-byte address) of the NIC ``device`` resolves to; a 400 when it has none."""
    nic = resolve_nic(context.host_root, device)
    label = safe(nic.label() if nic.found else device.label())
    address = parse_hwaddr(nic.mac) if nic.mac else None
    if address is None or not address.is_ipoib:
        raise ProfileDenied(
            f"{PLUGIN}: profile {PROFILE!r} addresses InfiniBand NICs (a 20-byte IPoIB hardware "
            f"address), and device {label} has "
            f"{'the ' + str(len(address)) + '-byte address ' + str(address) if address else 'none'}"
            "; claim an IB NIC (ib0-ib7 on an ND-series VM) or drop the profile",
            status=400,
        )
    return label, address


def profile_config(
    context: ProviderContext, device: DeviceIdentifiers, config: NetworkConfig
) -> NetworkConfig:
    """The IB NIC's address from the KVP pool, as ``<IPv4>/<prefix>`` on the NIC itself."""
    if config.profile != PROFILE:
        raise ProfileDenied(
            f"{PLUGIN}: unknown profile {safe(config.profile or '', 80)}; the Azure plugin "
            f"serves {PROFILE!r}",
            status=404,
        )
    if config.interface.type == TYPE_IPVLAN:
        raise ProfileDenied(
            f"{PLUGIN}: profile {PROFILE!r} gives the InfiniBand NIC its own address, which an "
            "IPVLAN child cannot carry; drop interface.type IPVLAN from the claim",
            status=400,
        )
    conf = settings(context)
    label, address = _ipoib_address(context, device)
    path = str(context.host_root.path(conf.pool))
    try:
        pairs = _reader(path).pairs(conf.reread)
    except KvpPoolError as exc:
        raise ProviderUnavailable(
            f"{PLUGIN}: profile {PROFILE!r} for device {label}: {exc}; DRANET retries the claim"
        ) from None
    mac = str(kvp_mac(address))
    ip = pairs.get(mac)
    if ip is None:
        listed = ", ".join(sorted(pairs)[:_MAX_SHOWN_PAIRS]) or "none"
        raise ProfileDenied(
            f"{PLUGIN}: device {label} has no IPoIB address in {path}: {KVP_KEY} lists no "
            f"pair for its KVP MAC {mac} (bytes 12-14 and 17-19 of {address}); it lists "
            f"{len(pairs)}: {listed}",
            status=400,
        )
    return NetworkConfig(
        interface=InterfaceConfig(type=TYPE_PASSTHROUGH, addresses=[f"{ip}/{conf.prefix_length}"])
    )
