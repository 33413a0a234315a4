"""What one KubeClient call costs the node that makes it: client CPU per request and per watch line.

Why: a node sidecar's CPU per allocation is mostly its Kubernetes client
(an IPAddress create, a get or two, a delete, and the watch lines every node
reads); this prints those costs alone, without the cluster benchmark's noise.
The Kubernetes API emulator (``dranet-cloud emulate kubernetes``, no
latency) runs in a process of its own, so its threads neither count nor
contend for this process's GIL; every figure is the CPU time of the calling
thread only (``time.thread_time``).

* ``create``/``get``/``get-claim``/``delete``: N IPAddress creates, gets, a
  ResourceClaim get and the UID-guarded deletes, one at a time on one client
  (its keep-alive connection reused, as on a node);
* ``list``: a list of the N objects in pages of 100 (per page);
* ``watch line``: a watch on IPAddresses read by one thread while another
  process creates N objects 1 ms apart, so each line comes in a read of its
  own as on a quiet node; ``lines`` is the stream alone, ``+decode`` adds
  the JSON decode the informer does.

Run: ``python benchmarks/kube_client_cost.py [--calls 2000]`` (inside
``unshare -n`` like every manual run).  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import msgspec

from dranet_cloud.kube import IPADDRESSES, KubeClient, ParentRef

GAP = 0.001  # s between two watch events: each arrives in a read of its own, as on a node
# Run in its own process: creates argv[2] IPAddresses named 10.argv[3].x.y, GAP apart.
PRODUCER = """
import sys, time
from dranet_cloud.kube import KubeClient, ParentRef
parent = ParentRef.resource_claim("bench", "claim-1")
with KubeClient(sys.argv[1]) as client:
    for i in range(int(sys.argv[2])):
        client.create_ip_address(f"10.{sys.argv[3]}.{i // 250}.{i % 250}", parent)
        time.sleep(float(sys.argv[4]))
"""


def per_call(label: str, n: int, call: Callable[[int], object]) -> None:
    """Run ``call(i)`` for i in 0..n-1 and print its thread CPU and wall time per call."""
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    for i in range(n):
        call(i)
    cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
    print(f"{label:>12}: {cpu / n * 1e6:7.0f} us client CPU/call   ({wall / n * 1e6:6.0f} us wall)")


def watch_lines(kubeconfig: str, client: KubeClient, n: int, mode: str) -> None:
    """Read ``n`` watch lines sent ``GAP`` seconds apart; print the reader thread's CPU per line.

    The reader only reads (no signal back per line), so its CPU is the stream's.
    ``mode``: ``lines`` (the client's stream) or ``+decode`` (and the JSON decode).
    """
    _, rv = client.list_objects(IPADDRESSES.path(), resource_version="0")
    ready = threading.Event()
    cpu: list[float] = []
    decode = mode == "+decode"

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
                elif seen == n + 1:
                    cpu.append(time.thread_time() - start)
                    return
            raise RuntimeError("the watch ended early")

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the watch did not open")
    tag = {"lines": "200", "+decode": "201"}[mode]
    subprocess.run(
        [sys.executable, "-c", PRODUCER, kubeconfig, str(n + 1), tag, str(GAP)],
        check=True,
        timeout=600,
    )
    thread.join(30)
    if not cpu:
        raise RuntimeError("the watch lines did not all arrive")
    print(f"{'watch line':>12}: {cpu[0] / n * 1e6:7.0f} us client CPU/line   ({mode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per kind (and lines)")
    args = parser.parse_args()
    n = args.calls
    fixture = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "claim-1", "namespace": "bench", "uid": "u-claim-1"},
                "spec": {"devices": {"requests": []}},
            }
        ],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json") as objects:
        json.dump(fixture, objects)
        objects.flush()
        cmd = [sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "kubernetes"]
        proc = subprocess.Popen([*cmd, "--fixture", objects.name], stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            kubeconfig = json.loads(proc.stdout.readline())["env"]["KUBECONFIG"]
            measure(kubeconfig, n)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def measure(kubeconfig: str, n: int) -> None:
    client = KubeClient(kubeconfig)
    parent = ParentRef.resource_claim("bench", "claim-1")
    names = [f"10.100.{i // 250}.{i % 250}" for i in range(n)]
    uids: list[str] = [""] * n
    for _ in range(20):  # warm up: imports, the connection, caches
        client.get_resource_claim("bench", "claim-1")

    def create(i: int) -> None:
        uids[i] = client.create_ip_address(names[i], parent).uid

    print(f"KubeClient against the emulator in its own process, {n} calls each")
    per_call("create", n, create)
    per_call("get", n, lambda i: client.get_ip_address(names[i]))
    per_call("get-claim", n, lambda i: client.get_resource_claim("bench", "claim-1"))
    cpu0 = time.thread_time()
    listed = client.list_ip_addresses(page_size=100)
    pages = -(-len(listed) // 100)
    cpu = time.thread_time() - cpu0
    print(f"{'list page':>12}: {cpu / pages * 1e6:7.0f} us client CPU/page   (100 objects)")
    per_call("delete", n, lambda i: client.delete_ip_address(names[i], uids[i]))
    for mode in ("lines", "+decode"):
        watch_lines(kubeconfig, client, n, mode)
    client.close()


if __name__ == "__main__":
    main()
