"""The API server's attribute limits, enforced by the host before publishing."""

from __future__ import annotations

import logging

import pytest

from dranet_cloud.host.attribute_limits import (
    attribute_name_problem,
    attribute_value_problem,
    validate_attributes,
)
from dranet_cloud.wire.models import DeviceAttribute


@pytest.mark.parametrize(
    "name",
    [
        "dra.net/webhook-attr",
        "gce.dra.net/ip.aliases",
        "x/" + "a" * 33,
        "Bad_Domain/x",
        "a" * 64 + ".com/x",
        "/x",
        "9lives",
    ],
)
def test_invalid_names(name: str) -> None:
    assert attribute_name_problem(name) is not None


@pytest.mark.parametrize(
    "name", ["dra.net/webhook_attr", "gce.dra.net/machineType", "rdma", "a" * 32]
)
def test_valid_names(name: str) -> None:
    assert attribute_name_problem(name) is None


def test_value_limits() -> None:
    assert attribute_value_problem(DeviceAttribute(string="x" * 64)) is None
    assert "65 bytes" in (attribute_value_problem(DeviceAttribute(string="x" * 65)) or "")
    assert attribute_value_problem(DeviceAttribute(version="1.2.3-rc.1+b5")) is None
    assert attribute_value_problem(DeviceAttribute(version="1.2")) is not None


def test_validate_drops_with_warning_naming_plugin_device_attribute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attrs = {
        "dra.net/webhook-attr": DeviceAttribute(string="x"),
        "dra.net/long": DeviceAttribute(string="y" * 65),
        "dra.net/ok": DeviceAttribute(int=1),
    }
    with caplog.at_level(logging.WARNING):
        kept = validate_attributes(attrs, plugin="webhook", device="eth1")
    assert list(kept) == ["dra.net/ok"]
    text = caplog.text
    assert "webhook" in text and "eth1" in text
    assert "dra.net/webhook-attr" in text and "C identifier" in text
    assert "dra.net/long" in text and "64-byte" in text


def test_cap_at_32() -> None:
    attrs = {f"dra.net/a{i}": DeviceAttribute(int=i) for i in range(40)}
    assert len(validate_attributes(attrs, plugin="p", device="d")) == 32


@pytest.mark.parametrize(
    "name",
    ["dra.net/x\n", "dra.net\n/x", "x\n", "dra.net/x\r", "dra.net/\uff58", "dra.net/x\x00"],
)
def test_whole_string_is_checked_so_a_trailing_newline_is_refused(name: str) -> None:
    assert attribute_name_problem(name) is not None


@pytest.mark.parametrize("version", ["1.2.3\n", "1.2.3\n4", "\u0661.2.3", "1.2.3-\n"])
def test_versions_must_be_semver_as_a_whole(version: str) -> None:
    assert attribute_value_problem(DeviceAttribute(version=version)) is not None


def test_ints_must_fit_int64() -> None:
    assert attribute_value_problem(DeviceAttribute.of(2**63 - 1)) is None
    assert attribute_value_problem(DeviceAttribute.of(-(2**63))) is None
    for bad in (2**63, -(2**63) - 1, 10**30):
        assert "64-bit" in (attribute_value_problem(DeviceAttribute.of(bad)) or "")
    assert attribute_value_problem(DeviceAttribute.model_validate({"ints": [1, 2**64]}))
