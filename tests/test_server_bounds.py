"""Issue 16: no peer, input or fault can hang, starve or fool the node service.

Every test runs a real server (uvicorn on a unix socket) or a real loopback
peer.  The few time bounds are generous: they fail only when a wait is
unbounded or when ``/health`` queues behind the worker pool, never because
the machine is slow.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sqlite3
import ssl
import stat
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.server.runner import ServeOptions, WebhookServer
from dranet_cloud.testing.drip import DrippingServer
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.toolkit.metadata import MetadataClient, MetadataError, TokenSpec
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

from .waiting import wait_until

# Far above a healthy /health (well under a millisecond), far below the waits
# it must not share: the 2 s database lock wait and the 5 s profile peer.
HEALTH_BOUND = 1.0
# The bound for /health while those waits are under way; checked on
# the median of several round trips, so one scheduling hiccup on a loaded
# machine cannot fail it, while a /health that queued behind the lock or the
# peer (seconds) always does.
HEALTH_MEDIAN_BOUND = 0.05


class SlowProfile:
    """A profile peer that takes up to 5 s (until released)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    @hookimpl
    def profile_config(self) -> NetworkConfig | None:
        self.entered.release()
        self.release.wait(5)
        return None

    @hookimpl
    def release_profile_config(self) -> bool:
        return True


def make_host(tmp_path: Path, *, busy_timeout: float = 5.0, extra: object = None) -> ProviderHost:
    reg = PluginRegistry(load_entry_points=False)
    reg.register(LocalIpamPlugin(LocalIpamConfig.parse(["10.30.0.0/24"])), PLUGIN_NAME)
    routes = {"local-ipam": PLUGIN_NAME}
    if extra is not None:
        reg.register(extra, "slow")
        routes["slow"] = "slow"
    db = tmp_path / "ipam.db"
    host = ProviderHost(
        cloud_provider_hint="none",
        profile_provider="none",
        host_root=str(tmp_path),
        registry=reg,
        ipam_factory=lambda: SqliteStore(db, busy_timeout=busy_timeout),
        profile_routes=routes,
        env={},
    )
    host.start()
    return host


def serve(host: ProviderHost, tmp_path: Path, **opts: object) -> WebhookServer:
    options = ServeOptions(listen=f"unix://{tmp_path}/hook.sock", **opts)  # type: ignore[arg-type]
    return WebhookServer(host, options).start()


def client(server: WebhookServer) -> httpx.Client:
    assert server.bound is not None and server.bound.path is not None
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=server.bound.path), base_url="http://x", timeout=30
    )


def claim(uid: str, profile: str = "local-ipam", **iface: object) -> dict[str, object]:
    return {
        "device": {"name": "eth1"},
        "claim_uid": uid,
        "config": {"profile": profile, "interface": iface},
    }


def timed_health(server: WebhookServer) -> tuple[float, httpx.Response]:
    with client(server) as c:
        start = time.monotonic()
        r = c.get("/health")
        return time.monotonic() - start, r


def health_while_busy(server: WebhookServer, samples: int = 15) -> tuple[float, float]:
    """(median, worst) seconds of ``samples`` /health round trips, each checked 200."""
    times = []
    with client(server) as c:
        for _ in range(samples):
            start = time.monotonic()
            r = c.get("/health")
            times.append(time.monotonic() - start)
            assert r.status_code == 200, r.text
    return statistics.median(times), max(times)


def raw_connect(server: WebhookServer) -> socket.socket:
    assert server.bound is not None and server.bound.path is not None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(server.bound.path)
    return s


@pytest.fixture
def host(tmp_path: Path) -> Iterator[ProviderHost]:
    h = make_host(tmp_path)
    yield h
    h.close()


# --- connections ------------------------------------------------------------------


def test_idle_and_half_sent_connections_are_closed_within_the_timeouts(
    host: ProviderHost, tmp_path: Path
) -> None:
    server = serve(host, tmp_path, request_timeout=0.5, keep_alive_timeout=0.5)
    try:
        silent, partial, kept = raw_connect(server), raw_connect(server), raw_connect(server)
        partial.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        # recv returns b"" once the server closed the connection; the socket's
        # own 10 s timeout raises instead if it never does.
        assert silent.recv(4096) == b""
        assert partial.recv(4096) == b""
        assert kept.recv(4096) == b""
        assert time.monotonic() - start < 0.5 + 1.0
        for s in (silent, partial, kept):
            s.close()
    finally:
        server.stop()


def test_at_the_connection_cap_idle_sockets_give_way_to_health(
    host: ProviderHost, tmp_path: Path
) -> None:
    server = serve(host, tmp_path, max_connections=8, request_timeout=60.0)
    try:
        idle = [raw_connect(server) for _ in range(30)]
        for _ in range(3):
            _, r = timed_health(server)
            assert r.status_code == 200
        assert server.limits.evicted > 0
        assert len(server.limits.open) <= 8
        for s in idle:
            s.close()
    finally:
        server.stop()


# --- /health never waits on the pool -------------------------------------------------


def test_health_answers_while_another_process_locks_the_database(tmp_path: Path) -> None:
    host = make_host(tmp_path, busy_timeout=2.0)
    server = serve(host, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(tmp_path / 'ipam.db')!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        answers: list[httpx.Response] = []
        blocked = [
            threading.Thread(
                target=lambda i=i: answers.append(
                    client(server).post("/GetProfileConfig", json=claim(f"locked-{i}"))
                )
            )
            for i in range(10)  # more than the worker pool
        ]
        for t in blocked:
            t.start()
        time.sleep(0.3)  # the claims are now waiting for the lock
        elapsed, r = timed_health(server)
        assert r.status_code == 200 and r.json() == {
            "cloudProvider": False,
            "profileProvider": True,
        }
        assert elapsed < HEALTH_BOUND, elapsed
        median, worst = health_while_busy(server)
        assert median < HEALTH_MEDIAN_BOUND and worst < HEALTH_BOUND, (median, worst)
        for t in blocked:
            t.join(30)
        # The lock wait is bounded: a clear temporary failure, not a queue.
        assert {a.status_code for a in answers} <= {500, 503}
        assert any("locked" in a.text or "busy" in a.text for a in answers)
    finally:
        holder.kill()
        holder.wait()
        server.stop()
        host.close()


def test_health_answers_while_a_profile_peer_takes_5_seconds(tmp_path: Path) -> None:
    slow = SlowProfile()
    host = make_host(tmp_path, extra=slow)
    server = serve(host, tmp_path, workers=2)
    try:
        callers = [
            threading.Thread(
                target=lambda i=i: client(server).post(
                    "/GetProfileConfig", json=claim(f"slow-{i}", profile="slow")
                )
            )
            for i in range(2)
        ]
        for t in callers:
            t.start()
        for _ in callers:
            assert slow.entered.acquire(timeout=10)  # every worker is now busy
        elapsed, r = timed_health(server)
        assert r.status_code == 200
        assert elapsed < HEALTH_BOUND, elapsed
        median, worst = health_while_busy(server)
        assert median < HEALTH_MEDIAN_BOUND and worst < HEALTH_BOUND, (median, worst)
        slow.release.set()
        for t in callers:
            t.join(30)
    finally:
        slow.release.set()
        server.stop()
        host.close()


# --- the store ---------------------------------------------------------------------


def corrupt_database(path: Path) -> None:
    """A database whose schema opens but whose data pages are garbage."""
    with SqliteStore(path, synchronous="OFF") as store:
        rng = [ip_range_from_cidr("10.0.0.0/16")]
        for i in range(400):
            store.allocate(Owner("p", "d", f"claim-{i:04d}-" + "x" * 60), rng)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with open(path, "r+b") as f:
        for page in range(pages // 2, pages // 2 + 4):
            f.seek(page * page_size)
            f.write(b"\xa5" * page_size)


def test_a_corrupt_database_is_reported_at_start_up_and_by_health(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corrupt_database(tmp_path / "ipam.db")
    host = make_host(tmp_path)
    server = serve(host, tmp_path)
    try:
        assert any("failed its integrity check" in r.getMessage() for r in caplog.records)
        _, r = timed_health(server)
        assert r.status_code == 503
        assert "integrity check" in r.text and str(tmp_path / "ipam.db") in r.text
    finally:
        server.stop()
        host.close()


def test_database_files_are_created_0600(tmp_path: Path) -> None:
    old = os.umask(0)  # the mode must come from the store, not from the umask
    try:
        with SqliteStore(tmp_path / "ipam.db") as store:
            store.allocate(Owner("p", "d", "c"), [ip_range_from_cidr("10.0.0.0/24")])
            files = sorted(tmp_path.glob("ipam.db*"))
            assert {f.name for f in files} >= {"ipam.db", "ipam.db-wal", "ipam.db-shm"}
            for f in files:
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    finally:
        os.umask(old)


def test_concurrent_writes_share_commits_and_all_land(tmp_path: Path) -> None:
    # A long busy timeout: the bounded wait has its own tests; a loaded machine
    # must not turn a slow turn at the lock into a failure of this one.
    store = SqliteStore(tmp_path / "ipam.db", busy_timeout=60.0)
    rng = [ip_range_from_cidr("10.0.0.0/16")]
    got: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    # Held before the threads start, so every thread but the holder's own
    # conflicts with it whatever order the threads run in.
    taken = store.allocate(Owner("p", "d", "0-0"), rng)[0]

    def work(t: int) -> None:
        try:
            for i in range(40):
                got[f"{t}-{i}"] = store.allocate(Owner("p", "d", f"{t}-{i}"), rng)
            # A failing write in a group rolls back alone.
            # (thread 0's address lies outside the dynamic range: nothing can take it)
            store.reserve(Owner("p", "d", f"static-{t}"), [taken if t else "10.1.9.9"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(errors) == 5 and all("already held" in str(e) for e in errors)
    store.close()
    with SqliteStore(tmp_path / "ipam.db") as again:
        held = {a.owner.claim_uid: a.address for a in again.list()}
    assert len(got) == 240 and all(held[k] == v[0] for k, v in got.items())
    assert len(set(held.values())) == len(held)


# --- input limits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (claim("c" * 129), "claim_uid is 129 characters, over the limit of 128"),
        (claim("c" * 500_000), "over the limit of 128"),
        (claim("a b"), "claim_uid"),
        (claim(" "), "claim_uid"),
        (claim("c\n"), "claim_uid"),
        (
            claim("c", addresses=[f"10.30.1.{i}/32" for i in range(17)]),
            "17 addresses, over the limit of 16",
        ),
        (
            claim("c", addresses=[f"10.{i // 256}.{i % 256}.1/32" for i in range(10_000)]),
            "10000 addresses, over the limit of 16",
        ),
        (
            {"device": {"name": "e" * 65}, "claim_uid": "c", "config": {"profile": "local-ipam"}},
            "device.name is 65 characters, over the limit of 64",
        ),
    ],
)
def test_oversized_or_malformed_claim_fields_are_400_naming_the_limit(
    host: ProviderHost, tmp_path: Path, body: dict[str, object], named: str
) -> None:
    server = serve(host, tmp_path)
    try:
        with client(server) as c:
            r = c.post("/GetProfileConfig", json=body)
            assert r.status_code == 400, r.text
            assert named in r.text
            assert len(r.text) < 2000  # the refusal does not echo a huge value
            release = c.post("/ReleaseProfileConfig", json=body)
            assert release.status_code == 400 or "addresses" in named
    finally:
        server.stop()


# --- deadlines of our own clients --------------------------------------------------------


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_dripping_metadata_server_is_cut_off_at_the_deadline(phase: str) -> None:
    with DrippingServer(phase=phase) as drip:
        mc = MetadataClient(drip.url, plugin="fake", timeout=5.0)
        start = time.monotonic()
        with pytest.raises(MetadataError):
            mc.get("/x", deadline=1.0)
        assert time.monotonic() - start < 1.0 + 1.0
        mc.close()


def test_a_non_ascii_token_is_a_clean_provider_error() -> None:
    spec = TokenSpec(path="/token", ttl_header="X-TTL", token_header="X-Token", ttl_seconds=60)

    class TokenServer:
        def __init__(self) -> None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(4)
            self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
            threading.Thread(target=self.serve, daemon=True).start()

        def serve(self) -> None:
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    token = "tökén".encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                        % len(token)
                        + token
                    )

    srv = TokenServer()
    with (
        MetadataClient(srv.url, plugin="fake", token=spec) as mc,
        pytest.raises(ProviderUnavailable, match="printable ASCII"),
    ):
        mc.get("/x")
    srv.sock.close()


# --- logging ---------------------------------------------------------------------------


def test_log_fields_are_escaped_and_capped() -> None:
    assert safe("eth1") == "eth1"
    assert safe("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert safe("") == '""'
    long = safe("x" * 400_000)
    assert long.startswith("x" * 200) and long.endswith("...(+399800 chars)")
    assert "\n" not in safe("\u2028line")


def test_access_log_of_a_forged_claim_stays_one_bounded_line(
    host: ProviderHost, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = serve(host, tmp_path)
    try:
        with client(server) as c:
            forged = "x\nPOST /forged 200 0.1ms claim=y" * 1000
            c.post("/GetProfileConfig", json=claim(forged))
            c.post("/GetProfileConfig", json=claim("c", addresses=["10.30.0.9/32"]))
            c.post("/GetProfileConfig", json=claim("d", addresses=["10.30.0.9/32"]))
        lines = [r.getMessage() for r in caplog.records if r.name.startswith("dranet_cloud")]
        assert any(r.name.endswith("access") for r in caplog.records)
        assert lines and all("\n" not in line and len(line) < 1000 for line in lines), lines
    finally:
        server.stop()


def test_health_body_is_exactly_the_roles(host: ProviderHost, tmp_path: Path) -> None:
    server = serve(host, tmp_path)
    try:
        _, r = timed_health(server)
        assert json.loads(r.content) == {"cloudProvider": False, "profileProvider": True}
    finally:
        server.stop()


# --- listening beyond loopback ------------------------------------------------------------


def test_listening_beyond_loopback_warns(
    host: ProviderHost, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server = WebhookServer(host, ServeOptions(listen="0.0.0.0:0"), close_host=False).start()
    server.stop()
    assert any("beyond loopback" in r.getMessage() for r in caplog.records)
    caplog.clear()
    server = WebhookServer(host, ServeOptions(listen="127.0.0.1:0"), close_host=False).start()
    server.stop()
    assert not any("beyond loopback" in r.getMessage() for r in caplog.records)


def test_tls_cert_and_key_serve_https(host: ProviderHost, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    options = ServeOptions(listen="127.0.0.1:0", tls_cert=str(cert), tls_key=str(key))
    server = WebhookServer(host, options).start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(verify=ctx, trust_env=False) as c:
            r = c.get(server.url + "/health")
        assert r.status_code == 200 and r.json()["profileProvider"] is True
    finally:
        server.stop()


def test_more_sockets_than_file_descriptors_do_not_block_health(tmp_path: Path) -> None:
    sock = tmp_path / "limited.sock"
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "from dranet_cloud.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    argv = [sys.executable, "-c", code, "serve", "--listen", f"unix://{sock}"]
    argv += ["--cloud-provider-hint", "none", "--host-root", str(tmp_path)]
    argv += ["--ipam-db", str(tmp_path / "ipam.db"), "--ipam-range", "10.0.0.0/24"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    idle: list[socket.socket] = []
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # the ready line
        # The default cap (half the 64-fd limit) keeps descriptors free: new
        # connections replace the longest-idle ones instead of hitting EMFILE.
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(str(sock))
            idle.append(s)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=10) as c:
            assert c.get("http://x/health").status_code == 200
    finally:
        for s in idle:
            s.close()
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert len(err) < 20_000  # no log line per refused or evicted connection


def test_health_reports_a_store_that_cannot_be_written_and_recovers(
    host: ProviderHost, tmp_path: Path
) -> None:
    server = serve(host, tmp_path)
    store = host.context.ipam
    assert isinstance(store, SqliteStore)
    try:
        with client(server) as c:
            store._connection().execute("PRAGMA query_only = 1")  # every write now fails
            assert c.post("/GetProfileConfig", json=claim("w1")).status_code == 500
            r = c.get("/health")
            assert r.status_code == 503 and "write" in r.text and "readonly" in r.text
            store._connection().execute("PRAGMA query_only = 0")
            assert c.post("/GetProfileConfig", json=claim("w2")).status_code == 200
            assert c.get("/health").status_code == 200
    finally:
        server.stop()


def test_a_claim_resolves_its_nic_once(
    host: ProviderHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host resolves a claim's NIC once and hands it on with the identifiers:
    the plugin and the IPAM owner read nothing from sysfs again, and nothing
    is kept from one request for the next."""
    from dranet_cloud.node import nic

    resolved: list[str] = []
    real = nic._resolve_nic

    def counting(root: HostRoot, device: DeviceIdentifiers) -> nic.LocalNic:
        resolved.append(device.name)
        return real(root, device)

    monkeypatch.setattr(nic, "_resolve_nic", counting)
    config = NetworkConfig.model_validate({"profile": "local-ipam"})
    host.network_config(DeviceIdentifiers(name="eth1"), "direct", config)
    assert resolved == ["eth1"]  # cloud config, profile and final check: one resolution
    resolved.clear()
    server = serve(host, tmp_path)
    try:
        with client(server) as c:
            for _ in range(2):  # a claim and the kubelet's retry of it
                assert c.post("/GetProfileConfig", json=claim("once")).status_code == 200
    finally:
        server.stop()
    assert resolved == ["eth1", "eth1"]


# --- the store lane: local-ipam claims on the event loop --------------------------------


def _rows(db: Path) -> dict[str, str]:
    """claim UID -> address as another process reads the file (committed rows only)."""
    with sqlite3.connect(db) as other:
        return {
            str(uid): str(addr)
            for uid, addr in other.execute("SELECT claim_uid, address FROM allocations")
        }


def test_concurrent_local_ipam_claims_are_answered_only_once_durable(
    host: ProviderHost, tmp_path: Path
) -> None:
    """Every 200 names an address that is already on disk, and no address twice."""
    server = serve(host, tmp_path)
    seen: dict[str, str] = {}
    problems: list[str] = []

    def claims(t: int) -> None:
        with client(server) as c:
            for i in range(15):
                uid = f"lane-{t}-{i}"
                r = c.post("/GetProfileConfig", json=claim(uid))
                if r.status_code != 200:
                    problems.append(f"{uid}: {r.status_code} {r.text}")
                    continue
                (address,) = r.json()["interface"]["addresses"]
                if _rows(tmp_path / "ipam.db").get(uid) != address:
                    problems.append(f"{uid}: answered {address} before it was committed")
                seen[uid] = address
                again = c.post("/GetProfileConfig", json=claim(uid))  # the kubelet retry
                if again.json()["interface"]["addresses"] != [address]:
                    problems.append(f"{uid}: the retry got {again.text}")

    threads = [threading.Thread(target=claims, args=(t,)) for t in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert problems == []
        assert len(seen) == 120 and len(set(seen.values())) == 120
        lane = server.app._lane
        assert lane is not None and lane.ran_inline > 0  # served on the loop, not a thread
    finally:
        server.stop()


def test_a_failed_group_commit_answers_500_and_hands_nothing_out(
    host: ProviderHost, tmp_path: Path
) -> None:
    store = host.context.ipam
    assert isinstance(store, SqliteStore)
    real = store._commit_batch
    failing = threading.Event()

    def commit(conn: sqlite3.Connection) -> None:
        if not failing.is_set():
            real(conn)
            return
        batch, store._batch = store._batch, None  # what a failed COMMIT leaves behind
        conn.execute("ROLLBACK")
        if batch is not None:
            batch.error = ProviderUnavailable("ipam: disk I/O error (injected)")
            batch.done.set()

    store._commit_batch = commit  # type: ignore[method-assign]
    server = serve(host, tmp_path)
    try:
        with client(server) as c:
            assert c.post("/GetProfileConfig", json=claim("before")).status_code == 200
            failing.set()
            r = c.post("/GetProfileConfig", json=claim("lost"))
            assert r.status_code == 500, r.text
            assert "could not commit" in r.text and "injected" in r.text
            assert "lost" not in _rows(tmp_path / "ipam.db")
            failing.clear()
            r = c.post("/GetProfileConfig", json=claim("lost"))  # the kubelet retries
            assert r.status_code == 200
            assert _rows(tmp_path / "ipam.db")["lost"] == r.json()["interface"]["addresses"][0]
    finally:
        server.stop()


def test_a_claim_the_loop_cannot_serve_at_once_waits_on_a_worker(
    host: ProviderHost, tmp_path: Path
) -> None:
    """Another process holds the write lock for a moment: the loop hands the claim to the
    pool (which may wait), and /health never waits for it."""
    server = serve(host, tmp_path)
    other = sqlite3.connect(tmp_path / "ipam.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        answer: list[httpx.Response] = []
        waiting = threading.Thread(
            target=lambda: answer.append(
                client(server).post("/GetProfileConfig", json=claim("patient"))
            )
        )
        waiting.start()

        def handed_off() -> bool:
            lane = server.app._lane
            return lane is not None and lane.sent_to_pool == 1

        wait_until(handed_off, "the hand-off to a worker")
        elapsed, r = timed_health(server)
        assert r.status_code == 200 and elapsed < HEALTH_BOUND
        other.execute("COMMIT")
        waiting.join(30)
        assert answer and answer[0].status_code == 200
        assert (
            _rows(tmp_path / "ipam.db")["patient"] == answer[0].json()["interface"]["addresses"][0]
        )
    finally:
        other.close()
        server.stop()
