"""IPAddress calls against the Kubernetes API emulator: is the emulator ever the bottleneck?

Starts ``dranet-cloud emulate kubernetes --latency S`` in its own process
(as the cluster benchmark does) and drives it from T client threads, each
with its own :class:`~dranet_cloud.kube.KubeClient`: every thread creates
its share of N IPAddress objects, then deletes them with their UID
precondition; one thread lists them all in between.  Prints, per phase, the
calls per second, p50/p99 latency, and the emulator's and the clients' CPU
time per call, then the call counts the emulator saw (``/emulator/calls``)
and its resident memory.

Run: ``python benchmarks/kube_api.py [--threads 100] [--objects 5000]
[--latency 0.002] [--quick]`` (inside ``unshare -n`` like every manual run).
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import httpx

from dranet_cloud.kube import IPAddressObject, KubeClient, ParentRef
from dranet_cloud.testing.kubernetes import CALLS_PATH


def process_cpu(pid: int) -> float:
    """User + system seconds of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def phase(
    name: str,
    pid: int,
    threads: int,
    work: Callable[[int], list[float]],
) -> None:
    """Run ``work(i)`` on ``threads`` threads at once; print what the calls cost."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def run(i: int) -> None:
        start.wait()
        mine = work(i)
        with lock:
            latencies.extend(mine)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    server0, client0 = process_cpu(pid), time.process_time()
    start.wait()
    began = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - began
    n = len(latencies)
    latencies.sort()
    server = (process_cpu(pid) - server0) / n * 1e6
    client = (time.process_time() - client0) / n * 1e6
    print(
        f"{name:7s} {n:6d} calls in {elapsed:6.2f} s = {n / elapsed:7.0f}/s  "
        f"p50 {latencies[n // 2] * 1000:6.1f} ms  p99 {latencies[int(n * 0.99)] * 1000:6.1f} ms  "
        f"cpu/call: emulator {server:4.0f} us, clients {client:4.0f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.002, help="seconds per API call")
    parser.add_argument("--quick", action="store_true", help="20 threads, 600 objects")
    args = parser.parse_args()
    threads, objects = (20, 600) if args.quick else (args.threads, args.objects)
    per = max(1, objects // threads)
    cmd = [sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "kubernetes"]
    proc = subprocess.Popen([*cmd, "--latency", str(args.latency)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        kubeconfig = ready["env"]["KUBECONFIG"]
        clients = [KubeClient(kubeconfig, timeout=60) for _ in range(threads)]
        made: list[list[IPAddressObject]] = [[] for _ in range(threads)]
        print(
            f"{threads} client threads, {per * threads} objects, "
            f"{args.latency * 1000:g} ms added per call"
        )

        def create(i: int) -> list[float]:
            took = []
            for j in range(per):
                n = i * per + j
                name = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
                t = time.perf_counter()
                obj = clients[i].create_ip_address(name, ParentRef.resource_claim("ns", name))
                took.append(time.perf_counter() - t)
                made[i].append(obj)
            return took

        def list_all(i: int) -> list[float]:
            t = time.perf_counter()
            found = clients[i].list_ip_addresses()
            assert len(found) == per * threads, len(found)
            return [time.perf_counter() - t]

        def delete(i: int) -> list[float]:
            took = []
            for obj in made[i]:
                t = time.perf_counter()
                clients[i].delete_ip_address(obj.name, obj.uid)
                took.append(time.perf_counter() - t)
            return took

        phase("create", proc.pid, threads, create)
        phase("list", proc.pid, 1, list_all)
        phase("delete", proc.pid, threads, delete)
        for c in clients:
            c.close()
        with open(kubeconfig, encoding="utf-8") as f:
            token = json.load(f)["users"][0]["user"]["token"]
        counts = httpx.get(
            ready["url"] + CALLS_PATH, headers={"Authorization": f"Bearer {token}"}
        ).json()
        print(f"calls the emulator saw: {counts['requests'].get('ipaddresses', {})}")
        print(f"objects it served: {counts['objects'].get('ipaddresses', {})}")
        print(f"emulator RSS at the end: {process_rss_mib(proc.pid):.0f} MiB")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


if __name__ == "__main__":
    main()
