"""``LazyLogger``: logging is imported and configured only when a line is logged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dranet_cloud import lazylog


@pytest.fixture()
def calls() -> Iterator[list[str]]:
    seen: list[str] = []
    lazylog.defer(lambda: seen.append("configured"))
    yield seen
    lazylog.apply_pending()  # leave nothing pending for other tests


def test_nothing_logged_nothing_configured(calls: list[str]) -> None:
    lazylog.LazyLogger("dranet_cloud.test")  # creating one configures nothing
    assert calls == []


def test_first_line_configures_once_before_it_is_emitted(
    calls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    log = lazylog.LazyLogger("dranet_cloud.test")
    with caplog.at_level(logging.INFO, logger="dranet_cloud.test"):
        log.warning("first %s", "line")
        log.info("second")
    assert calls == ["configured"]
    assert [r.getMessage() for r in caplog.records] == ["first line", "second"]
    assert caplog.records[0].levelno == logging.WARNING
    assert caplog.records[0].name == "dranet_cloud.test"


def test_apply_if_imported_configures_when_logging_is_loaded(calls: list[str]) -> None:
    lazylog.apply_if_imported()  # this test module imported logging
    assert calls == ["configured"]
    lazylog.apply_pending()
    assert calls == ["configured"]
