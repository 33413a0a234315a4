"""GetProfileConfig round trips against the example webhook, over TCP and a unix socket.

Runs the example BYODP server in its own process (so client and server do
not share a GIL), then drives the webhook plugin's real client path
(``profile_config`` hook: pooled keep-alive client, JSON encode, status
mapping, NetworkConfig validation) and prints round trips per second and
p50/p99 latency for each transport::

    python benchmarks/webhook.py [--requests 2000] [--claims 64] [--threads 1]

Claims cycle over ``--claims`` UIDs, so after the first pass every call is
a kubelet-style retry answered from the webhook's allocation table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from dranet_cloud_webhook import plugin
from dranet_cloud_webhook.client import close_pooled_clients

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

EXAMPLE = Path(__file__).resolve().parent.parent / "plugins/webhook/examples/example_webhook.py"
CONFIG = NetworkConfig.model_validate({"profile": "bench", "interface": {"type": "IPVLAN"}})


@contextmanager
def example_webhook(listen: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--listen", listen],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the example webhook did not start")
        yield str(json.loads(line)["url"])
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def run(url: str, requests: int, claims: int, threads: int) -> dict[str, float]:
    context = ProviderContext(options=ProviderOptions(webhook_url=url), env={})
    instance = plugin.instance_properties(context, deadline=5.0)
    devices = [DeviceIdentifiers(name=f"eth{i % 8}") for i in range(claims)]

    def one(i: int) -> float:
        k = i % claims
        start = time.perf_counter()
        result = plugin.profile_config(context, instance, devices[k], f"claim-{k}", CONFIG)
        elapsed = time.perf_counter() - start
        assert result is not None and result.interface.addresses
        return elapsed

    for i in range(min(claims, requests)):  # warm-up: allocate every claim once
        one(i)
    began = time.perf_counter()
    if threads == 1:
        latencies = [one(i) for i in range(requests)]
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            latencies = list(pool.map(one, range(requests)))
    wall = time.perf_counter() - began
    latencies.sort()
    close_pooled_clients()
    return {
        "rps": requests / wall,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="whbench", dir="/tmp") as tmp:
        targets = {"tcp": "127.0.0.1:0", "unix": f"unix://{tmp}/bench.sock"}
        print(
            f"GetProfileConfig via the webhook plugin, {args.requests} requests, "
            f"{args.claims} claims, {args.threads} thread(s)"
        )
        print(f"{'transport':<10} {'round trips/s':>14} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for name, listen in targets.items():
            with example_webhook(listen) as url:
                r = run(url, args.requests, args.claims, args.threads)
            print(
                f"{name:<10} {r['rps']:>14.0f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
                f"{r['mean_ms']:>8.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
