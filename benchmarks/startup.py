"""Start-up of the two commands a node runs: ``detect`` and ``serve``, printed as figures.

1. ``dranet-cloud detect --host-root <empty dir>``: a whole process on a bare
   node (no evidence, so no network), from spawn to exit;
2. ``dranet-cloud serve`` on a unix socket (no cloud, local IPAM on SQLite):
   from spawning the process to the first ``200`` answer of ``GET /health``,
   polled every 10 ms.  The kubelet waits this long for the plugin.

Each is the median of ``--runs`` (7) runs.  Figures, not assertions.

Run inside a loopback-only namespace:
    unshare -n bash -c 'ip link set lo up; python benchmarks/startup.py'
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cli() -> list[str]:
    """The ``dranet-cloud`` of this interpreter's environment."""
    exe = Path(sys.executable).with_name("dranet-cloud")
    return [str(exe)] if exe.exists() else [shutil.which("dranet-cloud") or "dranet-cloud"]


def time_detect(root: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [*cli(), "detect", "--host-root", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return (time.perf_counter() - t0) * 1000


def health_ok(sock: Path) -> bool:
    """Whether ``GET /health`` over the unix socket answers 200 now."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(sock))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            head = s.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.1 200")


def time_serve(base: Path, timeout: float = 30.0) -> float:
    tmp = Path(tempfile.mkdtemp(dir=base))  # a fresh store each run
    sock = tmp / "s.sock"
    root = tmp / "root"
    root.mkdir()
    # Split on spaces: mkdtemp's paths have none.
    flags = (
        f"--listen unix://{sock} --cloud-provider-hint none --host-root {root} "
        f"--ipam-db {tmp / 'i.db'} --ipam-range 10.128.0.0/9 --no-access-log"
    )
    args = [*cli(), "serve", *flags.split()]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not health_ok(sock):
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise SystemExit(f"serve exited with {proc.returncode} before ready:\n{err}")
            if time.perf_counter() - t0 > timeout:
                raise SystemExit(f"serve not ready within {timeout} s")
            time.sleep(0.01)
        return (time.perf_counter() - t0) * 1000
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def report(label: str, samples: list[float]) -> None:
    print(
        f"{label:<44} median {statistics.median(samples):8.1f} ms"
        f"   min {min(samples):8.1f}   max {max(samples):8.1f}   (n={len(samples)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        empty = tmp / "empty"
        empty.mkdir()
        time_detect(empty)  # warm the page cache and the bytecode
        report("detect --host-root <empty>", [time_detect(empty) for _ in range(args.runs)])
        report("serve: spawn to first GET /health 200", [time_serve(tmp) for _ in range(args.runs)])


if __name__ == "__main__":
    main()
