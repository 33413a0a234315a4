"""One plugin run with a metadata document that lists a NIC whose MAC is not one.

Every cloud plugin promises the same thing for such an entry: it is skipped
with exactly one warning naming it, never fetched, and the other NICs are
described.  :func:`describe_with_bad_entry` does the run (document to a
fixture file, the plugin's own emulator on loopback, ``describe`` in process)
so each plugin's test states only its cloud's facts: where the bad entry
goes in its document and what the good NICs must keep.  Tests take the
``describe_bad_entry`` fixture (registered for the repository by its root
``conftest.py``), which binds the run to the test's ``tmp_path`` and ``caplog``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from .cli import attributes_by_name, describe_in_process
from .emulator import Emulator

BuildEmulator = Callable[[Path, str, None], Emulator]


@dataclass(frozen=True)
class BadEntryRun:
    """What ``describe -o json`` gave and what was logged about the bad entry."""

    data: dict[str, Any]
    warning: str  # the one warning whose text names the bad entry
    fetched: list[str]  # emulator request paths that name it (the promise: none)
    logged: str  # everything captured at WARNING and above

    def attribute(self, key: str) -> dict[str, Any]:
        """``{device name: value of attribute key or None}``."""
        return attributes_by_name(self.data, key)

    @property
    def macs(self) -> dict[str, Any]:
        """``{device name: its mac_address or None}``."""
        return {d["device"]["name"]: d["device"].get("mac_address") for d in self.data["devices"]}


def describe_with_bad_entry(
    cloud: str,
    build_emulator: BuildEmulator,
    document: Any,
    bad: str,
    host_root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> BadEntryRun:
    """Serve ``document`` from the plugin's emulator and describe ``host_root``.

    Fails the test unless exactly one warning names ``bad``.
    """
    fixture = tmp_path / f"{cloud}-bad-entry.json"
    fixture.write_text(json.dumps(document))
    caplog.set_level(logging.WARNING)
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        data = describe_in_process(cloud, emu.env, host_root)
        fetched = [r.path for r in emu.log if bad in r.path]
    (warning,) = [r.getMessage() for r in caplog.records if bad in r.getMessage()]
    return BadEntryRun(data=data, warning=warning, fetched=fetched, logged=caplog.text)


class DescribeBadEntry(Protocol):
    """:func:`describe_with_bad_entry` bound to one test's ``tmp_path`` and ``caplog``."""

    def __call__(
        self, cloud: str, build_emulator: BuildEmulator, document: Any, bad: str, host_root: Path
    ) -> BadEntryRun: ...


@pytest.fixture
def describe_bad_entry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> DescribeBadEntry:
    """``describe_bad_entry(cloud, build_emulator, document, bad, host_root)``."""

    def run(
        cloud: str, build_emulator: BuildEmulator, document: Any, bad: str, host_root: Path
    ) -> BadEntryRun:
        return describe_with_bad_entry(
            cloud, build_emulator, document, bad, host_root, tmp_path, caplog
        )

    return run
