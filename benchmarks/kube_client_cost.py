"""What one KubeClient call costs the node that makes it: client CPU per request and per watch line.

Why: a node sidecar's CPU per allocation is mostly its Kubernetes client
(an IPAddress create, a get or two, a delete, and the watch lines every node
reads); this prints those costs alone, without the cluster benchmark's noise.
The Kubernetes API emulator runs in this process (no latency); every figure
is the CPU time of the calling thread only (``time.thread_time``), so the
emulator's own threads do not count.

* ``create``/``get``/``get-claim``/``delete``: N IPAddress creates, gets, a
  ResourceClaim get and the UID-guarded deletes, one at a time on one client
  (its keep-alive connection reused, as on a node);
* ``list``: a list of the N objects in pages of 100 (per page);
* ``watch line``: a watch on IPAddresses read by one thread while N objects
  are created one at a time, each created only after the last line arrived,
  so each line comes in its own read as on a quiet node; ``lines`` is the
  stream alone, ``+decode`` adds the JSON decode the informer does.

Run: ``python benchmarks/kube_client_cost.py [--calls 2000]`` (inside
``unshare -n`` like every manual run).  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from dranet_cloud.kube import IPADDRESSES, KubeClient, ParentRef
from dranet_cloud.testing.kubernetes import KubernetesEmulator


def per_call(label: str, n: int, call: Callable[[int], object]) -> None:
    """Run ``call(i)`` for i in 0..n-1 and print its thread CPU and wall time per call."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for i in range(n):
        call(i)
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    print(f"{label:>12}: {cpu / n * 1e6:7.0f} us client CPU/call   ({wall / n * 1e6:6.0f} us wall)")


def watch_lines(emu: KubernetesEmulator, client: KubeClient, n: int, decode: bool) -> None:
    """Read ``n`` watch lines, each sent alone; print the reader thread's CPU per line."""
    _, rv = client.list_objects(IPADDRESSES.path(), resource_version="0")
    arrived = threading.Semaphore(0)
    ready = threading.Event()
    cpu: list[float] = []

    def reader() -> None:
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "600"}
        with client.open_stream(
            IPADDRESSES.path(),
            params=params,
            read_timeout=60,
            max_line_bytes=1 << 20,
            deadline=600,
            what="benchmark watch",
        ) as stream:
            ready.set()
            start = 0.0
            for seen, line in enumerate(stream.lines(), 1):
                if decode:
                    msgspec.json.decode(line)
                if seen == 1:
                    start = time.thread_time()  # from the first line: the open is not a line
                if seen == n + 1:
                    cpu.append(time.thread_time() - start)
                    return
                arrived.release()
            raise RuntimeError("the watch ended early")

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the watch did not open")
    tag = "d" if decode else "l"
    for i in range(n + 1):
        emu.add_ip_address(f"10.{200 + (tag == 'd')}.{i // 250}.{i % 250}")
        if i < n and not arrived.acquire(timeout=10):
            raise RuntimeError("a watch line did not arrive")
    thread.join(10)
    label = "+decode" if decode else "lines"
    print(f"{'watch line':>12}: {cpu[0] / n * 1e6:7.0f} us client CPU/line   ({label})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per kind (and lines)")
    args = parser.parse_args()
    n = args.calls
    with tempfile.TemporaryDirectory() as tmp, KubernetesEmulator() as emu:
        emu.add_claim("bench", "claim-1", uid="u-claim-1", node="n1")
        client = KubeClient(str(emu.write_kubeconfig(Path(tmp) / "kubeconfig")))
        parent = ParentRef.resource_claim("bench", "claim-1")
        names = [f"10.100.{i // 250}.{i % 250}" for i in range(n)]
        uids: list[str] = [""] * n
        for _ in range(20):  # warm up: imports, the connection, caches
            client.get_resource_claim("bench", "claim-1")

        def create(i: int) -> None:
            uids[i] = client.create_ip_address(names[i], parent).uid

        print(f"KubeClient against the in-process emulator, {n} calls each")
        per_call("create", n, create)
        per_call("get", n, lambda i: client.get_ip_address(names[i]))
        per_call("get-claim", n, lambda i: client.get_resource_claim("bench", "claim-1"))
        cpu0 = time.thread_time()
        listed = client.list_ip_addresses(page_size=100)
        pages = -(-len(listed) // 100)
        cpu = time.thread_time() - cpu0
        print(f"{'list page':>12}: {cpu / pages * 1e6:7.0f} us client CPU/page   (100 objects)")
        per_call("delete", n, lambda i: client.delete_ip_address(names[i], uids[i]))
        watch_lines(emu, client, n, decode=False)
        watch_lines(emu, client, n, decode=True)
        client.close()


if __name__ == "__main__":
    main()
