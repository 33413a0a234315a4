"""Fixtures shared by the tests that talk to the Kubernetes API emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator


@pytest.fixture
def kube() -> Iterator[KubernetesEmulator]:
    """A running Kubernetes API emulator with no objects."""
    with KubernetesEmulator() as emu:
        yield emu


@pytest.fixture
def kube_client(kube: KubernetesEmulator) -> Iterator[KubeClient]:
    """A client configured by the emulator's kubeconfig, 5 s per call."""
    with KubeClient(str(kube.write_kubeconfig()), timeout=5) as client:
        yield client
