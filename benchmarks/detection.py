"""Detection and host overhead, printed as figures.

Reference: cloud-init's ds-identify (a shell script) decides from the node's
DMI files in about 10 ms per run.  In-process detection here should be far
below that: well under 1 ms with no evidence (no network at all), a few ms
with one confirmation against a loopback emulator.  The goal for a whole
`dranet-cloud detect` process (Python start-up, plugin discovery, detection,
output) is at most 5x ds-identify's whole run on the same fake root; both are
run here, interleaved so that machine load hits both alike, and printed side
by side.  ds-identify comes from Debian's cloud-init package
(`apt-get install cloud-init`, or `apt-get download cloud-init && dpkg-deb -x
cloud-init_*.deb DIR`); point --ds-identify at it when it is not installed in
/usr/lib/cloud-init.  --cli measures another installation's `dranet-cloud`
(e.g. a venv installed from wheels, as in the container image).

Run inside a loopback-only namespace:
    unshare -n bash -c 'ip link set lo up; python benchmarks/detection.py'
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.wire.models import NetworkConfig


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
    ap.add_argument("--process-runs", type=int, default=30, help="whole-process runs of each")
    ap.add_argument("--ds-identify", default=None, help="path of cloud-init's ds-identify")
    ap.add_argument("--cli", default=None, help="a dranet-cloud executable to measure")
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
            from dranet_cloud.contract.context import ProviderContext
            from dranet_cloud.host.detection import detect
            from dranet_cloud.node.hostroot import HostRoot

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

        whole_process(args, bare)


def find_ds_identify(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("DS_IDENTIFY"), "/usr/lib/cloud-init/ds-identify"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def ds_identify_root(root: Path) -> dict[str, str]:
    """The files ds-identify reads besides DMI, and the variables that move it into ``root``."""
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro\n")
    (root / "etc/cloud").mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(PATH_ROOT=str(root), DI_LOG=str(root / "run/ds-identify.log"))
    return env


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system, children included) milliseconds of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    proc.returncode = 0  # reaped by wait4 above
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def whole_process(args: argparse.Namespace, bare: Path) -> None:
    console = Path(args.cli) if args.cli else Path(sys.executable).with_name("dranet-cloud")
    cmd = (
        [str(console)] if console.is_file() else [sys.executable, "-m", "dranet_cloud.cli.main"]
    ) + ["detect", "--host-root", str(bare), "-o", "json"]
    subprocess.run(cmd, check=True, capture_output=True)  # fails loudly if detect fails
    ds = find_ds_identify(args.ds_identify)
    ds_env = ds_identify_root(bare) if ds else None
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(args.process_runs):
        # Interleaved, so that load from anything else on the machine hits both alike.
        ours.append(run_measured(cmd))
        if ds is not None:
            theirs.append(run_measured([ds, "--force"], ds_env))
    name = Path(cmd[0]).name
    report(f"whole `{name} detect` process, no evidence: wall", [w for w, _ in ours])
    report(f"whole `{name} detect` process, no evidence: cpu", [c for _, c in ours])
    if ds is None:
        print(
            "ds-identify not found: install cloud-init (apt-get install cloud-init) or pass "
            "--ds-identify PATH; no ratio printed"
        )
        return
    report("whole cloud-init ds-identify run, same root: wall", [w for w, _ in theirs])
    report("whole cloud-init ds-identify run, same root: cpu", [c for _, c in theirs])
    for label, idx in (("wall", 0), ("cpu", 1)):
        mine = statistics.median(x[idx] for x in ours)
        ref = statistics.median(x[idx] for x in theirs)
        best = min(x[idx] for x in ours) / max(min(x[idx] for x in theirs), 1e-3)
        verdict = "within" if mine / ref <= 5 else "OVER"
        print(
            f"ratio dranet-cloud / ds-identify ({label}): median {mine / ref:.1f}x, "
            f"best-of-n {best:.1f}x ({verdict} the 5x goal)"
        )


if __name__ == "__main__":
    main()
