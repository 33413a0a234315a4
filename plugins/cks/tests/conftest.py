"""Fixtures of the CKS plugin's tests: the sample node and the Kubernetes API
emulator serving its Node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dranet_cloud_cks.emulator import build_emulator
from dranet_cloud_cks.sample import sample_host

from dranet_cloud.context import SampleHost
from dranet_cloud.testing import Emulator


@pytest.fixture
def cks_sample(tmp_path: Path) -> SampleHost:
    sample = sample_host(tmp_path / "host", None)
    assert sample is not None
    return sample


@pytest.fixture
def cks_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()
