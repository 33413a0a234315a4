"""Hardware addresses, parsed exactly as Go's ``net.ParseMAC`` parses them.

DRANET reads every hardware address (``mac_address`` it sends, a claim's
``hardwareAddr``, a neighbor's) with Go's ``net.ParseMAC`` (golang/go
``src/net/mac.go``), so this project accepts what that accepts and nothing
else: 6, 8 or 20 bytes (20 is an IP-over-InfiniBand link address: 4 bytes of
flags and queue pair, then the 16-byte port GID) in three spellings,

* ``00:00:5e:00:53:01``: pairs of hex digits joined by ``:``;
* ``00-00-5e-00-53-01``: the same joined by ``-`` (one separator throughout);
* ``0000.5e00.5301``: groups of four hex digits joined by ``.``.

A string that is not one of these is refused with the string itself in the
message (escaped and cut short), never repaired: ``rekharoy:3f:d2:b3:0b:0c``
is not a MAC with a typo, it is not a MAC.  The one other spelling clouds
publish, bare hex digits (Azure IMDS ``000D3A1B2C3D``, Hyper-V's KVP pool),
is read only by :func:`parse_bare_hex`, which the code that reads such a
document calls explicitly; the generic parser refuses it, as Go does.

Every address is then written one way, :class:`HardwareAddr`'s ``str``:
lower-case pairs joined by ``:`` (Go's ``HardwareAddr.String``).  That form
is the identity key (``mac:...``), the cache and IPAM owner key, and what
logs show.
"""

from __future__ import annotations

import logging
import re

from dranet_cloud.toolkit.logsafe import WarnOnce, safe

log = logging.getLogger(__name__)
# A bad entry is warned about once, not again on every snapshot reload.
_bad_entries = WarnOnce(log)

SIZES = (6, 8, 20)
IPOIB_SIZE = 20
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_SHOWN = 64  # characters of a refused string shown in the message
# Already the canonical form (what DRANET sends, what sysfs shows): 6, 8 or 20
# lower-case pairs joined by ":". Every such string is one Go accepts.
_CANONICAL = re.compile(
    r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}(?:(?::[0-9a-f]{2}){2}|(?::[0-9a-f]{2}){14})?"
)


class InvalidHardwareAddress(ValueError):
    """A string that is not a hardware address; ``text`` is what was given."""

    def __init__(self, text: str, expected: str = "") -> None:
        self.text = text
        shown = safe(text, _SHOWN) if text else '""'
        super().__init__(f"invalid MAC address {shown}{f' ({expected})' if expected else ''}")


class HardwareAddr(bytes):
    """The bytes of a hardware address; ``str()`` is the lower-case colon form."""

    def __str__(self) -> str:
        return ":".join(f"{b:02x}" for b in self)

    def __repr__(self) -> str:
        return f"HardwareAddr({str(self)!r})"

    @property
    def is_ipoib(self) -> bool:
        """Whether this is a 20-byte IP-over-InfiniBand link address."""
        return len(self) == IPOIB_SIZE

    @property
    def is_zero(self) -> bool:
        """All bytes zero: a link with no address of its own (a tunnel, a dummy)."""
        return not any(self)


def _pair(data: bytes, at: int, sep: int | None) -> int | None:
    """Go's ``xtoi2(s[at:], sep)``: two hex digits, then ``sep`` unless at the end."""
    rest = data[at:]
    if len(rest) > 2 and rest[2] != sep:
        return None
    if len(rest) < 2 or rest[0] not in _HEX_DIGITS or rest[1] not in _HEX_DIGITS:
        return None
    return int(rest[:2], 16)


def parse_hwaddr(text: str) -> HardwareAddr:
    """Go's ``net.ParseMAC``, step by step, on the string's bytes.

    Raises :class:`InvalidHardwareAddress` (a ``ValueError``) naming ``text``.
    """
    data = text.encode("utf-8", "surrogatepass")
    size = len(data)
    out = bytearray()
    if size < 14:
        raise InvalidHardwareAddress(text)
    if data[2] in b":-":
        if (size + 1) % 3 != 0 or (size + 1) // 3 not in SIZES:
            raise InvalidHardwareAddress(text)
        sep = data[2]
        for at in range(0, size, 3):
            value = _pair(data, at, sep)
            if value is None:
                raise InvalidHardwareAddress(text)
            out.append(value)
    elif data[4] == ord("."):
        if (size + 1) % 5 != 0 or 2 * (size + 1) // 5 not in SIZES:
            raise InvalidHardwareAddress(text)
        for at in range(0, size, 5):
            high = _pair(data[: at + 2], at, None)
            low = _pair(data, at + 2, ord("."))
            if high is None or low is None:
                raise InvalidHardwareAddress(text)
            out += bytes((high, low))
    else:
        raise InvalidHardwareAddress(text)
    return HardwareAddr(out)


def normalize_mac(text: str) -> str:
    """``text`` parsed as Go parses it, in the lower-case colon form."""
    if _CANONICAL.fullmatch(text):
        return text  # the common case, on every request: no byte-by-byte parse
    return str(parse_hwaddr(text))


def is_ipoib(mac: str) -> bool:
    """Whether a canonical (colon-form) address is 20 bytes: an IPoIB link address.

    No cloud's metadata lists a NIC by one (they list Ethernet MACs), so a
    snapshot's silence about it says nothing (see the host's hot-attach rule).
    """
    return mac.count(":") == IPOIB_SIZE - 1


def link_address(raw: str | None) -> str | None:
    """A sysfs ``address`` file as an identity: 6, 8 or 20 bytes (IPoIB), not all zero.

    Anything else (a tunnel's 4- or 16-byte address, an empty file) is no
    hardware address DRANET would send, so such a NIC is known by PCI or name.
    """
    if not raw:
        return None
    try:
        address = parse_hwaddr(raw.strip())
    except ValueError:
        return None
    return None if address.is_zero else str(address)


def parse_bare_hex(text: str, size: int = 6) -> HardwareAddr:
    """Exactly ``2 * size`` hex digits and nothing else (``000D3A1B2C3D``).

    The spelling Azure IMDS and Hyper-V's KVP pool use.  Only code reading
    such a document calls this; :func:`parse_hwaddr` refuses the form.
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data) != 2 * size or not set(data) <= _HEX_DIGITS:
        raise InvalidHardwareAddress(text, f"expected {2 * size} hex digits")
    return HardwareAddr(bytes.fromhex(data.decode("ascii")))


def parse_published(text: str) -> HardwareAddr:
    """A MAC as a cloud that publishes bare hex writes it: 12 hex digits, or a Go form.

    Azure IMDS writes ``000D3A4F2B1C``; DRANET's Azure provider also matches
    a colon or dash spelling, so both are read, and nothing else.
    """
    if len(text) == 12:
        return parse_bare_hex(text)
    try:
        return parse_hwaddr(text)
    except InvalidHardwareAddress:
        raise InvalidHardwareAddress(text, "expected 12 hex digits or a colon/dash form") from None


def format_bare_hex(address: bytes) -> str:
    """The upper-case bare-hex spelling (``000D3A1B2C3D``) clouds publish."""
    return address.hex().upper()


def entry_mac(
    raw: object, *, plugin: str, entry: str, document: str, bare_hex: bool = False
) -> str | None:
    """The MAC of one NIC entry in a cloud's metadata, or ``None`` after one warning.

    A cloud document that lists one NIC with a MAC that does not parse (a
    redacted sample, a proxy's junk) must not cost the node every other
    NIC's facts, nor give that NIC a MAC nobody published: the entry is
    skipped, and the warning (once per process) names it and the document.  ``bare_hex`` also
    reads the 12-hex-digit form, for a cloud that publishes it (Azure).
    """
    text = raw if isinstance(raw, str) else ("" if raw is None else repr(raw))
    try:
        address = parse_published(text) if bare_hex else parse_hwaddr(text)
    except ValueError as exc:
        _bad_entries.warn(
            (plugin, entry, text),
            "%s: %s in %s: %s; entry skipped, the other NICs are used",
            plugin,
            safe(entry, 120),
            document,
            exc,
        )
        return None
    return str(address)


_no_usable = WarnOnce(log)


def warn_no_usable_nic(plugin: str, document: str, entries: int) -> None:
    """Say once that ``document`` names no NIC with a usable MAC; it is no error.

    A cloud's instance document stays valid when its NIC list is empty or
    every entry was skipped (a redacted sample, an operator's paste, a proxy
    that mangles one field): the cloud is still the cloud, and its
    instance-level facts (machine type, zone, topology) still go on every
    device.  Only the per-NIC facts are missing, and the host reloads the
    metadata when a NIC's MAC is unknown to it (rate-limited).  The skipped
    entries were each warned about by :func:`entry_mac`; this line says what
    the whole document means for the node, once per plugin and document,
    without repeating the entries.
    """
    listed = (
        "lists no NIC"
        if entries == 0
        else f"names no NIC with a usable MAC ({entries} entr{'y' if entries == 1 else 'ies'}, "
        "each skipped with a warning)"
    )
    _no_usable.warn(
        (plugin, document),
        "%s: %s %s; the instance's own attributes are still published, no NIC gets per-NIC "
        "facts until the metadata lists it (the NIC's unknown MAC makes the host reload the "
        "metadata, rate-limited)",
        plugin,
        document,
        listed,
    )
