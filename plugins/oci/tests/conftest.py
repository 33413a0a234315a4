"""Fixtures shared by the OCI plugin's tests: the IMDS v2 emulator, the
BM.GPU.H100.8 sample host, and a private copy of the default documents."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_oci.emulator import build_emulator, load_fixture
from dranet_cloud_oci.sample import sample_host

from dranet_cloud.context import SampleHost
from dranet_cloud.testing import Emulator

_DEFAULT_DOCUMENTS = load_fixture(None)


@pytest.fixture
def oci_documents() -> dict[str, Any]:
    """A private deep copy of the default documents (tests may edit it)."""
    return copy.deepcopy(_DEFAULT_DOCUMENTS)


@pytest.fixture
def oci_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def oci_sample(tmp_path: Path) -> SampleHost:
    sample = sample_host(tmp_path / "host", None)
    assert sample is not None
    return sample
