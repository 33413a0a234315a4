"""One plugin run with a metadata document that lists a NIC whose MAC is not one.

Every cloud plugin promises the same thing for such an entry: it is skipped
with exactly one warning naming it, never fetched, and the other NICs are
described.  :func:`describe_with_bad_entry` does the run (document to a
fixture file, the plugin's own emulator on loopback, ``describe`` in process)
so each plugin's test states only its cloud's facts: where the bad entry
goes in its document and what the good NICs must keep.  Tests take the
``describe_bad_entry`` fixture (registered for the repository by its root
``conftest.py``), which binds the run to the test's ``tmp_path`` and ``caplog``.

When the bad entry is the document's *only* NIC, the promise goes further:
the instance document is still fine, so the cloud is still detected, an
explicit hint still starts, and the instance-level attributes still go on
every device; only the per-NIC facts are missing.
:func:`run_without_usable_nic` checks that through the real command line
(``detect``, ``detect --cloud-provider-hint CLOUD``, ``describe
--cloud-provider-hint CLOUD``, each a process), fixture
``without_usable_nic``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from dranet_cloud.testing.cli import attributes_by_name, describe_in_process, run_cli
from dranet_cloud.testing.emulator import Emulator

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


@dataclass(frozen=True)
class NoUsableNicRun:
    """The three commands' JSON answers, and the stderr lines naming the bad entry."""

    detected: dict[str, Any]  # `detect -o json`: auto-detection on the host root
    hinted: dict[str, Any]  # `detect --cloud-provider-hint CLOUD -o json`
    described: dict[str, Any]  # `describe --cloud-provider-hint CLOUD -o json`
    warnings: list[str]  # the lines of describe's stderr that name the bad entry
    stderr: str  # describe's whole stderr

    def attribute(self, key: str) -> dict[str, Any]:
        """``{device name: value of attribute key or None}`` from ``describe``."""
        return attributes_by_name(self.described, key)


def run_without_usable_nic(
    cloud: str,
    build_emulator: BuildEmulator,
    document: Any,
    bad: str,
    host_root: Path,
    tmp_path: Path,
) -> NoUsableNicRun:
    """Serve ``document`` (whose NIC list has no usable entry) and run the three commands.

    Fails the test unless each exits 0 and answers ``cloud``; ``bad`` is the
    skipped entry's text, which each process must name in exactly one line.
    """
    fixture = tmp_path / f"{cloud}-no-usable-nic.json"
    fixture.write_text(json.dumps(document))
    base = ("--host-root", str(host_root), "-o", "json")
    hint = ("--cloud-provider-hint", cloud)
    answers: list[dict[str, Any]] = []
    stderr = ""
    with build_emulator(fixture, "127.0.0.1:0", None) as emu:
        for args in (("detect", *base), ("detect", *base, *hint), ("describe", *base, *hint)):
            res = run_cli(*args, env=emu.env)
            assert res.returncode == 0, f"{' '.join(args)} exited {res.returncode}: {res.stderr}"
            answers.append(json.loads(res.stdout))
            named = [line for line in res.stderr.splitlines() if bad in line]
            assert len(named) == 1, f"{' '.join(args)}: expected one line naming {bad!r}: {named}"
            stderr = res.stderr
    detected, hinted, described = answers
    for what, answer in (("detect", detected), ("detect with the hint", hinted)):
        assert answer["provider"] == cloud, f"{what} answered {answer}"
    assert described["provider"] == cloud, described
    warnings = [line for line in stderr.splitlines() if bad in line]
    return NoUsableNicRun(detected, hinted, described, warnings, stderr)


class WithoutUsableNic(Protocol):
    """:func:`run_without_usable_nic` bound to one test's ``tmp_path``."""

    def __call__(
        self, cloud: str, build_emulator: BuildEmulator, document: Any, bad: str, host_root: Path
    ) -> NoUsableNicRun: ...


@pytest.fixture
def without_usable_nic(tmp_path: Path) -> WithoutUsableNic:
    """``without_usable_nic(cloud, build_emulator, document, bad, host_root)``."""

    def run(
        cloud: str, build_emulator: BuildEmulator, document: Any, bad: str, host_root: Path
    ) -> NoUsableNicRun:
        return run_without_usable_nic(cloud, build_emulator, document, bad, host_root, tmp_path)

    return run
