"""Fixtures shared by the Azure plugin's tests: the IMDS emulator, the ND H100
v5 sample host, and a way to write custom hosts and documents."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_azure.emulator import build_emulator, load_fixture
from dranet_cloud_azure.sample import sample_host

from dranet_cloud.context import SampleHost
from dranet_cloud.testing import Emulator

_DEFAULT_DOCUMENT = load_fixture(None)


@pytest.fixture
def azure_document() -> dict[str, Any]:
    """A private deep copy of the default instance document (tests may edit it)."""
    return copy.deepcopy(_DEFAULT_DOCUMENT)


@pytest.fixture
def azure_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def azure_sample(tmp_path: Path) -> SampleHost:
    sample = sample_host(tmp_path / "host", None)
    assert sample is not None
    return sample
