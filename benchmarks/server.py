"""BYODP server benchmark: round trips per second over the unix socket.

Starts ``dranet-cloud serve`` (local-ipam on SQLite, ``synchronous=FULL`` as
in production) as a subprocess on a unix socket and drives it the way DRANET's
Go client does (compact JSON, ``Content-Type: application/json``, one
keep-alive connection per client).  Prints:

1. ``GET /health`` round trips/s (the HTTP stack alone);
2. ``POST /GetProfileConfig`` for new claims (one SQLite write + fsync each);
3. ``POST /GetProfileConfig`` repeated for claims already allocated (the
   kubelet-retry path: one read transaction, no new allocation);
4. ``POST /ReleaseProfileConfig``;

each with one client and with ``--clients`` concurrent clients, plus the
median and p99 latency.  Figures, not assertions.

Run: ``python benchmarks/server.py [--quick] [--db-dir DIR]`` (``--db-dir
/dev/shm`` takes the disk's fsync out of the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
HEADERS = {"User-Agent": "Go-http-client/1.1", "Content-Type": "application/json"}


def start_server(sock: Path, db: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "dranet_cloud.cli.main",
        "serve",
        "--listen",
        f"unix://{sock}",
        "--cloud-provider-hint",
        "none",
        "--host-root",
        str(sock.parent),
        "--ipam-db",
        str(db),
        "--ipam-range",
        "10.128.0.0/9",
        "--ipam-range",
        "fd00:b::/64",
        "--no-access-log",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(60) or not proc.stdout.readline():
        proc.kill()
        raise SystemExit("the server did not start")
    return proc


def body(claim: str) -> bytes:
    return json.dumps(
        {
            "device": {"mac_address": "0c:42:a1:00:00:11", "name": "eth1"},
            "claim_uid": claim,
            "config": {"profile": "local-ipam", "interface": {}},
        },
        separators=(",", ":"),
    ).encode()


def client(sock: Path) -> httpx.Client:
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock)),
        base_url="http://unix",
        headers=HEADERS,
        timeout=60,
    )


def request(c: httpx.Client, kind: str, claim: str) -> httpx.Response:
    if kind == "health":
        return c.get("/health")
    path = "/ReleaseProfileConfig" if kind == "release" else "/GetProfileConfig"
    return c.post(path, content=body(claim))


def worker(sock: str, kind: str, tag: str, n: int, count: int) -> list[float]:
    """One client process: ``count`` requests on one keep-alive connection."""
    lat = []
    with client(Path(sock)) as c:
        c.get("/health")  # connect outside the measurement
        for i in range(count):
            t0 = time.perf_counter()
            r = request(c, kind, f"{tag}-{n}-{i}")
            lat.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise SystemExit(f"unexpected {r.status_code}: {r.text}")
    return lat


def run(
    pool: ProcessPoolExecutor, sock: Path, clients: int, per_client: int, kind: str, tag: str
) -> tuple[float, list[float]]:
    """Total round trips/s and every request's latency (s).

    Each client is its own process, so the figure is the server's, not the
    client's GIL.
    """
    start = time.perf_counter()
    futures = [pool.submit(worker, str(sock), kind, tag, n, per_client) for n in range(clients)]
    latencies = [x for f in futures for x in f.result()]
    elapsed = time.perf_counter() - start
    return clients * per_client / elapsed, latencies


def report(label: str, rate: float, lat: list[float]) -> None:
    ms = sorted(x * 1000 for x in lat)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"  {label:<44} {rate:9.0f} round trips/s   median {statistics.median(ms):6.2f} ms"
        f"   p99 {p99:6.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--db-dir", default=None, help="directory for the SQLite file")
    args = ap.parse_args()
    n = 100 if args.quick else 400
    with (
        tempfile.TemporaryDirectory(prefix="byodp-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="byodp-bench-db-", dir=args.db_dir) as dbdir,
    ):
        sock = Path(tmp) / "webhook.sock"
        db = Path(dbdir) / "ipam.db"
        proc = start_server(sock, db)
        try:
            print(f"BYODP server over {sock} (SQLite {db}, synchronous=FULL)")
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")

            with ProcessPoolExecutor(args.clients) as pool:
                # Start every client process outside the measurement.
                list(pool.map(time.sleep, [0.2] * args.clients))
                for clients in (1, args.clients):
                    print(f"{clients} client(s) x {n} requests")
                    tag = f"c{clients}"
                    for label, kind in (
                        ("GET /health", "health"),
                        ("POST /GetProfileConfig (new claim)", "new"),
                        ("POST /GetProfileConfig (retry, same claim)", "new"),
                        ("POST /ReleaseProfileConfig", "release"),
                    ):
                        report(label, *run(pool, sock, clients, n, kind, tag))
                    print()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


if __name__ == "__main__":
    main()
