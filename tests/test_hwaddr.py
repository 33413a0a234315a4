"""Hardware addresses: exactly what Go's ``net.ParseMAC`` accepts (golang/go src/net/mac.go).

Each accepted form and each refusal below follows one branch of Go's
function: the length check, the ``:``/``-`` pairs (one separator
throughout), the ``.`` quads, and the 6/8/20-byte sizes.
"""

from __future__ import annotations

import logging

import pytest

from dranet_cloud.toolkit.hwaddr import (
    HardwareAddr,
    InvalidHardwareAddress,
    entry_mac,
    format_bare_hex,
    link_address,
    normalize_mac,
    parse_bare_hex,
    parse_hwaddr,
    parse_published,
    warn_no_usable_nic,
)

MAC48 = "00:00:5e:00:53:01"
EUI64 = "02:00:5e:10:00:00:00:01"
IPOIB = "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00:00:5e:00:53:01", MAC48),
        ("00-00-5e-00-53-01", MAC48),
        ("0000.5e00.5301", MAC48),
        ("02:00:5e:10:00:00:00:01", EUI64),
        ("02-00-5e-10-00-00-00-01", EUI64),
        ("0200.5e10.0000.0001", EUI64),
        (IPOIB, IPOIB),
        (IPOIB.replace(":", "-"), IPOIB),
        ("0000.0000.fe80.0000.0000.0000.0200.5e10.0000.0001", IPOIB),
        ("ab:cd:ef:AB:CD:EF", "ab:cd:ef:ab:cd:ef"),
        ("ab-cd-ef-AB-CD-EF", "ab:cd:ef:ab:cd:ef"),
        ("abcd.efAB.CDEF", "ab:cd:ef:ab:cd:ef"),
        (
            "00:00:10:29:FE:80:00:00:00:00:00:00:B8:3F:D2:03:00:A1:B2:C3",
            "00:00:10:29:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:a1:b2:c3",
        ),
    ],
)
def test_every_go_form_is_accepted_and_written_lower_case_with_colons(
    text: str, expected: str
) -> None:
    address = parse_hwaddr(text)
    assert str(address) == expected == normalize_mac(text)
    assert len(address) == (len(expected) + 1) // 3
    assert address.is_ipoib == (len(address) == 20)


@pytest.mark.parametrize(
    "text",
    [
        # The strings the old parser repaired into MACs.
        "rekharoy:3f:d2:b3:0b:0c",
        "deadbeef-cafe",
        "zz:00:16:3e:2c:8a:10",
        # Shorter than 14 bytes, or no separator where Go looks for one.
        "",
        "00:00:5e",
        "00005e005301",
        "000D3A1B2C3D",
        "00005e0053010203",
        # Length not 3n-1 / 5n-1, or a size Go does not know (7, 16 bytes).
        "00:00:5e:00:53:01:",
        "00:00:5e:00:53:01:02",
        ":".join(["00"] * 16),
        "0000.5e00.5301.",
        "0000.5e00.5301.00",
        "0000.5e00.5301.0000.0000",
        # Separators mixed, misplaced, or of the wrong kind for the form.
        "00-00:5e:00:53:01",
        "00:00-5e-00-53-01",
        "01.02.03.04.05.06",
        "0123:4567:89AF",
        "0123-4567-89AF",
        "01002:03:04:05:06",
        "01:02:03:04:05006",
        "0000.5e00:5301",
        "00.00.00.00.fe.80.00.00.00.00.00.00.02.00.5e.10.00.00.00.01",
        # Not hex digits, though Python's int(x, 16) would take some of them.
        "x1:02:03:04:05:06",
        "+0:00:5e:00:53:01",
        " 0:00:5e:00:53:01",
        "00:00:5e:00:53: 1",
        "0x:00:5e:00:53:01",
        "00:00:5e:00:53:0g",
        "\uff10\uff10:00:5e:00:53:01",
        "00:00:5e:00:53:01\n",
        " 00:00:5e:00:53:01",
    ],
)
def test_what_go_refuses_is_refused_naming_the_text(text: str) -> None:
    with pytest.raises(InvalidHardwareAddress) as err:
        parse_hwaddr(text)
    assert err.value.text == text
    assert str(err.value).startswith("invalid MAC address ")
    with pytest.raises(ValueError):
        normalize_mac(text)


def test_a_refused_string_is_shown_escaped_and_cut_short() -> None:
    with pytest.raises(InvalidHardwareAddress) as err:
        parse_hwaddr("00:00:5e:00:53:01\n\x1b[31m" + "f" * 10_000)
    message = str(err.value)
    assert "\n" not in message and "\x1b" not in message
    assert "\\n" in message and len(message) < 200


def test_bare_hex_is_an_explicit_parser_for_clouds_that_publish_it() -> None:
    assert str(parse_bare_hex("000D3A1B2C3D")) == "00:0d:3a:1b:2c:3d"
    assert format_bare_hex(parse_bare_hex("000d3a1b2c3d")) == "000D3A1B2C3D"
    for bad in ("000D3A1B2C3", "000D3A1B2C3DE", "000D3A1B2C3G", "00:0D:3A:1B:2C:3D", ""):
        with pytest.raises(InvalidHardwareAddress, match="expected 12 hex digits"):
            parse_bare_hex(bad)
    assert str(parse_published("000D3A1B2C3D")) == "00:0d:3a:1b:2c:3d"
    assert str(parse_published("00-0D-3A-1B-2C-3D")) == "00:0d:3a:1b:2c:3d"
    for bad in ("rekharoy:3f:d2:b3:0b:0c", "deadbeef-cafe", "000D3A1B2CZZ"):
        with pytest.raises(InvalidHardwareAddress):
            parse_published(bad)


def test_sysfs_addresses_become_identities_only_when_go_would_parse_them() -> None:
    assert link_address(IPOIB + "\n") == IPOIB
    assert link_address(MAC48) == MAC48
    assert link_address("00:00:00:00:00:00") is None
    assert link_address(":".join(["00"] * 16)) is None  # ip6tnl
    assert link_address("0a:00:00:01") is None  # a 4-byte tunnel address
    assert link_address("") is None and link_address(None) is None
    assert HardwareAddr(bytes(20)).is_zero


def test_a_bad_entry_is_skipped_with_one_warning_naming_it_and_the_document(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        for _reload in range(3):
            got = entry_mac(
                "rekharoy:3f:d2:b3:0b:0c", plugin="t", entry="nics[1].mac", document="doc/"
            )
            assert got is None
    (record,) = caplog.records  # once, not on every reload of the document
    text = record.getMessage()
    assert "nics[1].mac" in text and "doc/" in text and "rekharoy" in text
    assert entry_mac("00:00:5E:00:53:01", plugin="x", entry="e", document="d") == MAC48
    assert entry_mac("000D3A1B2C3D", plugin="azure", entry="e", document="d", bare_hex=True)
    assert entry_mac("000D3A1B2C3D", plugin="aws", entry="e", document="d") is None


def test_a_document_without_a_usable_nic_is_warned_about_once_and_is_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        for _reload in range(3):
            warn_no_usable_nic("t", "the listing", 2)
        warn_no_usable_nic("t", "another listing", 0)
    first, other = (r.getMessage() for r in caplog.records)
    assert "t: the listing names no NIC with a usable MAC (2 entries" in first
    assert "instance's own attributes are still published" in first
    assert "another listing lists no NIC" in other


@pytest.mark.parametrize("size", range(1, 23))
def test_the_fast_path_for_the_canonical_form_agrees_with_the_parser(size: int) -> None:
    """normalize_mac returns a lower-case colon string unparsed; only Go's sizes pass."""
    text = ":".join(f"{(size * 37 + i * 11) % 256:02x}" for i in range(size))
    for candidate in (text, text + "\n", text.upper()):
        try:
            expected: str | None = str(parse_hwaddr(candidate))
        except InvalidHardwareAddress:
            expected = None
        if expected is None:
            with pytest.raises(InvalidHardwareAddress):
                normalize_mac(candidate)
        else:
            assert normalize_mac(candidate) == expected
    assert (size in (6, 8, 20)) == _valid(text)


def _valid(text: str) -> bool:
    try:
        normalize_mac(text)
    except InvalidHardwareAddress:
        return False
    return True
