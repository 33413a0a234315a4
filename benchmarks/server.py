"""BYODP server benchmark: round trips per second over the unix socket.

Starts ``dranet-cloud serve`` (local-ipam on SQLite, ``synchronous=FULL`` as
in production) as a subprocess on a unix socket and drives it the way DRANET's
Go client does (compact JSON, ``Content-Type: application/json``, one
keep-alive HTTP/1.1 connection per client).  The client is a raw socket
client, one process per client, so it costs a few microseconds per request
and the figures are the server's.  Prints:

1. the disk's raw fsync rate (4 KiB write + fsync in the database directory)
   and the IPAM alone (``SqliteStore.allocate`` in this process), the limits
   a server figure should be compared with;
2. ``GET /health`` round trips/s (the HTTP stack alone);
3. ``POST /GetProfileConfig`` for new claims (one durable SQLite write each;
   concurrent ones share a commit);
4. ``POST /GetProfileConfig`` repeated for claims already allocated (the
   kubelet-retry path);
5. ``POST /ReleaseProfileConfig``;

each with one client and with ``--clients`` concurrent clients, the median and
p99 latency, the server's CPU time per request (user + system, from
``/proc/PID/task/*/stat``: all threads, and the event loop's alone) and the
issue's goals beside the measured figures.  The loop's figure is the bound:
the server's Python runs under one lock (the GIL), mostly on the loop, so
concurrent clients cannot get more than about ``1 / (loop CPU per request)``
round trips/s out of it, however many commits they share.  Last, bursts of
``--burst`` (64) new claims sent at once on as many connections, the issue-26
check that a burst the server can absorb gets no 503.  Figures, not
assertions.

Run (no traffic leaves loopback; a unix socket needs no network at all):
``python benchmarks/server.py [--quick] [--clients 8] [--db-dir DIR]``
(``--db-dir /dev/shm`` takes the disk's fsync out of the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

AGENT = "User-Agent: Go-http-client/1.1\r\n"
GOALS = {"health": 3000.0, "retry": 1500.0, "new": 700.0}


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


class RawClient:
    """A minimal keep-alive HTTP/1.1 client over a unix socket (Content-Length bodies only)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if body is None:
            head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{AGENT}\r\n"
            self.sock.sendall(head.encode())
        else:
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{AGENT}"
                f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
            )
            self.sock.sendall(head.encode() + body)
        return self.response()

    def response(self) -> tuple[int, bytes]:
        """Read one answer."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        header, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = header.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buf) < length:
            self._fill()
        payload, self.buf = self.buf[:length], self.buf[length:]
        return status, payload

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buf += data

    def close(self) -> None:
        self.sock.close()


def body(claim: str) -> bytes:
    return json.dumps(
        {
            "device": {"mac_address": "0c:42:a1:00:00:11", "name": "eth1"},
            "claim_uid": claim,
            "config": {"profile": "local-ipam", "interface": {}},
        },
        separators=(",", ":"),
    ).encode()


def worker(
    sock: str, kind: str, tag: str, n: int, count: int, start_at: float
) -> tuple[list[float], float, float]:
    """One client process: ``count`` requests on one keep-alive connection.

    Returns every latency and the wall-clock start and end of the series.
    """
    c = RawClient(sock)
    c.request("GET", "/health")  # connect outside the measurement
    bodies = [body(f"{tag}-{n}-{i}") for i in range(count)]
    path = "/ReleaseProfileConfig" if kind == "release" else "/GetProfileConfig"
    lat = []
    while time.time() < start_at:  # all clients start together
        time.sleep(0.001)
    began = time.time()
    for i in range(count):
        t0 = time.perf_counter()
        if kind == "health":
            status, payload = c.request("GET", "/health")
        else:
            status, payload = c.request("POST", path, bodies[i])
        lat.append(time.perf_counter() - t0)
        if status != 200:
            raise SystemExit(f"unexpected {status}: {payload[:300]!r}")
    ended = time.time()
    c.close()
    return lat, began, ended


def thread_cpu(pid: int) -> dict[str, float]:
    """User + system CPU seconds used so far by each thread of process ``pid``."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[task.name] = (int(fields[11]) + int(fields[12])) / tick
    return out


class CpuUse:
    """The server's CPU seconds per request: all threads, and its busiest thread.

    The busiest thread (the event loop) bounds what concurrency can reach:
    its Python runs under the GIL, and the other threads mostly wait for the
    disk.
    """

    def __init__(self, before: dict[str, float], after: dict[str, float], requests: int):
        used = {t: after[t] - before.get(t, 0.0) for t in after}
        self.total = sum(used.values()) / requests
        self.busiest = max(used.values(), default=0.0) / requests


def run(
    pool: ProcessPoolExecutor,
    sock: Path,
    server_pid: int,
    clients: int,
    per_client: int,
    kind: str,
    tag: str,
) -> tuple[float, list[float], CpuUse]:
    """Round trips/s (first request sent to last answer), every latency (s), and the
    server's CPU per request."""
    start_at = time.time() + 0.3
    futures = [
        pool.submit(worker, str(sock), kind, tag, n, per_client, start_at) for n in range(clients)
    ]
    cpu_before = thread_cpu(server_pid)
    results = [f.result() for f in futures]
    # Connection set-up is included: about one request per client.
    cpu = CpuUse(cpu_before, thread_cpu(server_pid), clients * per_client)
    elapsed = max(r[2] for r in results) - min(r[1] for r in results)
    latencies = [x for r in results for x in r[0]]
    return clients * per_client / elapsed, latencies, cpu


def fsync_rate(directory: str, seconds: float = 1.0) -> float:
    """Raw 4 KiB write + fsync per second in ``directory`` (the disk's durable-write limit)."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"\0" * 4096
    count = 0
    try:
        end = time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < end:
            os.pwrite(fd, block, 0)
            os.fsync(fd)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)


def ipam_alone(directory: str, count: int) -> float:
    """New allocations/s of ``SqliteStore`` itself (synchronous=FULL), no HTTP."""
    from dranet_cloud.ipam import Owner, SqliteStore
    from dranet_cloud.toolkit.iprange import ip_range_from_cidr

    ranges = [ip_range_from_cidr("10.128.0.0/9"), ip_range_from_cidr("fd00:b::/64")]
    with SqliteStore(os.path.join(directory, "ipam-alone.db")) as store:
        start = time.perf_counter()
        for i in range(count):
            store.allocate(Owner("local-ipam", "0c:42:a1:00:00:11", f"alone-{i}"), ranges)
        return count / (time.perf_counter() - start)


def burst(sock: str, size: int, rounds: int) -> tuple[dict[int, int], list[float]]:
    """``rounds`` bursts of ``size`` new claims written at once on ``size`` connections.

    Returns how many answers had each status, and each burst's time from the
    first request written to the last answer read.
    """
    statuses: dict[int, int] = {}
    times: list[float] = []
    for r in range(rounds):
        clients = [RawClient(sock) for _ in range(size)]
        wires = []
        for i in range(size):
            payload = body(f"burst-{r}-{i}")
            wires.append(
                b"POST /GetProfileConfig HTTP/1.1\r\nHost: localhost\r\n"
                + AGENT.encode()
                + b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(payload)
                + payload
            )
        start = time.perf_counter()
        for c, wire in zip(clients, wires, strict=True):
            c.sock.sendall(wire)
        for c in clients:
            status, _payload = c.response()
            statuses[status] = statuses.get(status, 0) + 1
        times.append(time.perf_counter() - start)
        for c in clients:
            c.close()
    return statuses, times


def report(
    label: str, rate: float, lat: list[float], cpu: CpuUse, goal: float | None = None
) -> None:
    ms = sorted(x * 1000 for x in lat)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    verdict = ""
    if goal is not None:
        verdict = f"   goal >= {goal:.0f}: {'met' if rate >= goal else 'NOT met'}"
    print(
        f"  {label:<44} {rate:9.0f} round trips/s   median {statistics.median(ms):6.3f} ms"
        f"   p99 {p99:6.3f} ms   server CPU {cpu.total * 1000:5.3f} ms/request"
        f" (loop {cpu.busiest * 1000:5.3f}){verdict}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--db-dir", default=None, help="directory for the SQLite file")
    ap.add_argument("--burst", type=int, default=64, help="claims sent at once in a burst")
    args = ap.parse_args()
    n = 300 if args.quick else 1500
    with (
        tempfile.TemporaryDirectory(prefix="byodp-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="byodp-bench-db-", dir=args.db_dir) as dbdir,
    ):
        sock = Path(tmp) / "webhook.sock"
        db = Path(dbdir) / "ipam.db"
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
        print(f"disk: {fsync_rate(dbdir):.0f} raw fsyncs/s in {dbdir}")
        print(
            f"IPAM alone (SqliteStore, synchronous=FULL): {ipam_alone(dbdir, n):.0f} allocations/s"
        )
        proc = start_server(sock, db)
        rates: dict[tuple[int, str], float] = {}
        cpus: dict[tuple[int, str], CpuUse] = {}
        try:
            print(f"BYODP server over {sock} (SQLite {db}, synchronous=FULL)\n")
            with ProcessPoolExecutor(args.clients) as pool:
                list(pool.map(time.sleep, [0.2] * args.clients))  # start the client processes
                for clients in (1, args.clients):
                    print(f"{clients} client(s) x {n} requests")
                    tag = f"c{clients}"
                    for label, kind, key in (
                        ("GET /health", "health", "health"),
                        ("POST /GetProfileConfig (new claim)", "new", "new"),
                        ("POST /GetProfileConfig (retry, same claim)", "new", "retry"),
                        ("POST /ReleaseProfileConfig", "release", "release"),
                    ):
                        rate, lat, cpu = run(pool, sock, proc.pid, clients, n, kind, tag)
                        rates[clients, key] = rate
                        cpus[clients, key] = cpu
                        report(label, rate, lat, cpu, GOALS.get(key) if clients == 1 else None)
                    print()
            one, many = rates[1, "new"], rates[args.clients, "new"]
            print(
                f"new claims: {args.clients} clients {many:.0f}/s = {many / one:.2f}x one client "
                f"({one:.0f}/s); goal >= 2x: {'met' if many >= 2 * one else 'NOT met'}"
            )
            loop = cpus[args.clients, "new"].busiest
            print(
                f"bound: with {args.clients} clients the busiest server thread (the event loop) "
                f"spent {loop * 1000:.3f} ms per new claim, so even with no waiting at all the "
                f"server stops near {1 / loop:.0f}/s ({1 / loop / one:.2f}x one client); the rest "
                "of the gap is the loop waiting while a group's fsync holds the store"
            )
            statuses, times = burst(str(sock), args.burst, 5)
            answered = ", ".join(f"{n} x {code}" for code, n in sorted(statuses.items()))
            print(
                f"bursts: 5 x {args.burst} new claims at once on {args.burst} connections: "
                f"{answered}; each burst answered in {min(times) * 1000:.0f}-"
                f"{max(times) * 1000:.0f} ms; goal no 503: "
                f"{'NOT met' if 503 in statuses else 'met'}"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


if __name__ == "__main__":
    main()
