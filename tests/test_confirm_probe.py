"""The one rule behind every plugin's ``confirm``: no answer raises, a wrong answer is ``None``."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from dranet_cloud.contract.confirm import NotThisCloud, confirm_probe
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.metadata import (
    MetadataError,
    MetadataNotADocument,
    MetadataNotFound,
    MetadataSpoofed,
    MetadataUnavailable,
)


def _raises(exc: Exception) -> Callable[[], str]:
    def probe() -> str:
        raise exc

    return probe


def test_an_answer_is_passed_through() -> None:
    assert confirm_probe("acme", lambda: "Acme IMDS at http://127.0.0.1:1") == (
        "Acme IMDS at http://127.0.0.1:1"
    )


@pytest.mark.parametrize(
    "exc",
    [
        MetadataUnavailable("acme: nothing answered at http://127.0.0.1:1 (set ACME_ENDPOINT)"),
        MetadataSpoofed("acme: answered without the header 'Flavor: Acme'", status=200),
        ConfigError("acme: ACME_ENDPOINT is not a URL"),
    ],
    ids=["nothing-answered", "impostor", "bad-configuration"],
)
def test_no_answer_an_impostor_or_a_bad_setting_raises(exc: Exception) -> None:
    with pytest.raises(type(exc)) as info:
        confirm_probe("acme", _raises(exc))
    assert info.value is exc


@pytest.mark.parametrize(
    "exc",
    [
        MetadataNotFound("acme: GET http://127.0.0.1:1/x answered 404", status=404),
        MetadataError("acme: PUT http://127.0.0.1:1/token answered HTTP 403", status=403),
        MetadataNotADocument("acme: GET http://127.0.0.1:1/x answered a web page", status=200),
        NotThisCloud("http://127.0.0.1:1/id answered 'x', not an Acme instance id"),
    ],
    ids=["404", "token-refused", "web-page", "wrong-content"],
)
@pytest.mark.parametrize("warn", [False, True])
def test_an_answer_from_another_server_is_none_and_logged(
    exc: Exception, warn: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dranet_cloud.contract.confirm")
    assert confirm_probe("acme", _raises(exc), warn=warn) is None
    (record,) = caplog.records
    assert record.levelno == (logging.WARNING if warn else logging.INFO)
    assert record.getMessage() == f"acme: not confirmed: {exc}"
