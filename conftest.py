"""Session-wide safety net: no test may reach a non-loopback address.

The socket guard is installed before any test module is imported, so even a
connection attempted at import time is blocked before anything is sent.  A
test that triggered the guard fails, even when the code under test swallowed
the error (a probe that treats "unreachable" as "not this cloud").  Tests of
the guard itself take the ``socket_guard`` fixture and ``reset()`` it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dranet_cloud.testing.socketguard import SocketGuard

# Fixtures the kit offers every test of the repository (core and plugins).
pytest_plugins = ["dranet_cloud.testing.bad_mac"]

_GUARD = SocketGuard()


def pytest_configure(config: pytest.Config) -> None:
    _GUARD.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    _GUARD.uninstall()


@pytest.fixture
def socket_guard() -> SocketGuard:
    """The session's guard (to inspect or ``reset()`` its violations)."""
    return _GUARD


@pytest.fixture(autouse=True)
def _no_network_traffic() -> Iterator[None]:
    _GUARD.reset()
    yield
    seen = _GUARD.reset()
    if seen:
        pytest.fail(
            "test tried to reach non-loopback addresses (blocked by the socket guard): "
            + ", ".join(seen),
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Attempts outside any test (collection, imports, session fixtures).
    seen = _GUARD.reset()
    if seen:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "socket guard blocked non-loopback connections outside tests: " + ", ".join(seen),
                red=True,
            )
