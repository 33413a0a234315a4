"""Detection and host overhead, printed as figures.

Reference: cloud-init's ds-identify decides from the same DMI files in about
10 ms per run.  In-process detection here should be far below that: well under
1 ms with no evidence (no network at all), a few ms with one confirmation
against a loopback emulator.  Also printed: a whole `dranet-cloud detect`
process, and the host's own overhead per network_config call.

Run inside a loopback-only namespace:
    unshare -n bash -c 'ip link set lo up; python benchmarks/detection.py'
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dranet_cloud.host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.models import NetworkConfig
from dranet_cloud.plugins import PluginRegistry
from dranet_cloud.testing import HostRootBuilder


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def report(label: str, samples: list[float]) -> None:
    samples = sorted(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(
        f"{label:<58} median {statistics.median(samples):8.3f} ms   p99 {p99:8.3f} ms"
        f"   (n={len(samples)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--plugin", default="gce", help="plugin whose emulator/sample host to use")
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    reg = PluginRegistry()  # plugins loaded once, as a daemon would

    with tempfile.TemporaryDirectory() as tmp:
        bare = HostRootBuilder(Path(tmp) / "bare").dmi(sys_vendor="Supermicro").build()

        def detect_bare() -> None:
            det = ProviderHost(host_root=str(bare), registry=reg, env={}).start()
            assert det.provider == "none"

        report("host start, no local evidence (no network)", timed(detect_bare, args.runs))

        sample = reg.call(args.plugin, "sample_host", dest=Path(tmp) / "node", variant=None)
        emu = reg.call(args.plugin, "emulator", fixture=None, listen="127.0.0.1:0", faults=None)
        emu.start()
        try:
            from dranet_cloud.context import ProviderContext
            from dranet_cloud.detection import detect
            from dranet_cloud.hostroot import HostRoot

            def detect_evidence() -> None:
                ctx = ProviderContext(host_root=HostRoot(sample.root), env=dict(emu.env))
                assert detect(reg, ctx).provider == args.plugin

            report(
                f"detection, {args.plugin} evidence + 1 loopback confirmation",
                timed(detect_evidence, max(20, args.runs // 4)),
            )

            host = ProviderHost(
                host_root=str(sample.root), registry=reg, env=dict(emu.env), ipam=MemoryStore()
            )
            host.start()
            dev = host.context.host_root.net_devices()[0]
            host.device_config(dev)
            user = NetworkConfig.model_validate({"interface": {"name": "net0"}})
            report(
                "host network_config, cached device, no profile",
                timed(lambda: host.network_config(dev, "c", user), args.runs * 5),
            )
        finally:
            emu.stop()

        cmd = [
            sys.executable,
            "-m",
            "dranet_cloud.cli.main",
            "detect",
            "--host-root",
            str(bare),
            "-o",
            "json",
        ]
        report(
            "whole `dranet-cloud detect` process, no evidence",
            timed(lambda: subprocess.run(cmd, check=True, capture_output=True), 10),
        )
        print("reference: cloud-init ds-identify, ~10 ms per run on the same DMI files")


if __name__ == "__main__":
    main()
