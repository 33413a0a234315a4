"""``dranet-cloud serve`` as a real process, driven the way DRANET's Go daemon drives it.

DRANET's webhook client (Go ``net/http`` over the unix socket) sends ``GET
/health`` once at start-up and then compact JSON bodies with
``Content-Type: application/json``; :class:`GoLikeClient` does exactly that.
"""

from __future__ import annotations

import json
import os
import random
import re
import selectors
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from dranet_cloud.testing import Emulator, Request, Response
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .argv import serve_argv
from .waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dranet_cloud.cli.main"]
GO_HEADERS = {
    "User-Agent": "Go-http-client/1.1",
    "Content-Type": "application/json",
    "Accept-Encoding": "gzip",
}


def go_json(doc: Any) -> bytes:
    """``encoding/json`` output: compact, keys in struct order (dicts keep ours)."""
    return json.dumps(doc, separators=(",", ":")).encode()


class GoLikeClient:
    """What DRANET's webhook profile provider does, over a unix socket."""

    def __init__(self, sock: Path) -> None:
        self.http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(sock)),
            base_url="http://unix",
            headers=GO_HEADERS,
            timeout=30,
        )

    def health(self) -> dict[str, bool]:
        r = self.http.get("/health")
        assert r.status_code == 200, r.text
        caps: dict[str, bool] = r.json()
        return caps

    def post(self, path: str, doc: Any) -> httpx.Response:
        return self.http.post(path, content=go_json(doc))

    def profile(
        self, claim: str, device: str = "eth1", *, release: bool = False, **iface: Any
    ) -> httpx.Response:
        body = {
            "device": {"mac_address": "0c:42:a1:00:00:11", "name": device},
            "claim_uid": claim,
            "config": {"profile": "local-ipam", "interface": iface},
        }
        return self.post("/ReleaseProfileConfig" if release else "/GetProfileConfig", body)

    def address(self, claim: str, device: str = "eth1") -> list[str]:
        r = self.profile(claim, device)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        doc = r.json()
        assert set(doc) == {"interface"} and set(doc["interface"]) == {"addresses"}
        addrs: list[str] = doc["interface"]["addresses"]
        return addrs

    def close(self) -> None:
        self.http.close()


class ServeProcess:
    """``dranet-cloud serve`` in a subprocess, ready once it printed its JSON line."""

    def __init__(
        self,
        tmp: Path,
        *extra: str,
        listen: str | None = None,
        ranges: tuple[str, ...] = ("10.5.0.0/24",),
        db: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.sock = tmp / "run" / "webhook.sock"
        self.db = db or tmp / "ipam.db"
        self.stderr_path = tmp / f"serve-{len(list(tmp.glob('serve-*')))}.log"
        argv = [
            *CLI,
            "serve",
            "--listen",
            listen or f"unix://{self.sock}",
            "--cloud-provider-hint",
            "none",
            "--host-root",
            str(tmp),
            "--ipam-db",
            str(self.db),
        ]
        for rng in ranges:
            argv += ["--ipam-range", rng]
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [*argv, *extra],
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=REPO,
                env=isolated_environ(**(env or {})),
            )
        self.ready = self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.proc.kill()
            raise AssertionError(f"serve did not get ready: {self.stderr()}")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise AssertionError(f"serve exited {self.proc.returncode}: {self.stderr()}")
        ready: dict[str, Any] = json.loads(line)
        return ready

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def client(self) -> GoLikeClient:
        return GoLikeClient(self.sock)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def servers() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.kill()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=REPO)


def listed_claims(db: Path) -> list[str]:
    out = cli("ipam", "list", "--ipam-db", str(db), "-o", "json")
    assert out.returncode == 0, out.stderr
    return [a["claim_uid"] for a in json.loads(out.stdout)]


def test_go_client_flow_survives_kill_9(tmp_path: Path, servers: list[ServeProcess]) -> None:
    first = ServeProcess(tmp_path)
    servers.append(first)
    assert first.ready == {
        "url": f"unix://{first.sock}",
        "capabilities": {"cloudProvider": False, "profileProvider": True},
    }
    client = first.client()
    assert client.health() == {"cloudProvider": False, "profileProvider": True}
    addr = client.address("claim-1")
    assert len(addr) == 1 and addr[0].startswith("10.5.0.") and addr[0].endswith("/32")
    assert client.address("claim-1") == addr  # a kubelet retry allocates nothing new
    client.close()

    first.kill()  # SIGKILL: no clean-up, the socket file stays behind
    assert first.sock.exists()

    second = ServeProcess(tmp_path)
    servers.append(second)
    client = second.client()
    assert client.health()["profileProvider"] is True
    assert client.address("claim-1") == addr
    other = client.address("claim-2")
    assert other != addr and other[0].startswith("10.5.0.")
    client.close()
    assert second.terminate() == 0


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs directory when there is one: the property under test is not fsync's speed."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="byodp-test-") as tmp:
        yield Path(tmp)


def test_eight_clients_hundred_claims_never_share_an_address(
    tmp_path: Path, fast_dir: Path, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(
        tmp_path,
        "--no-access-log",
        db=fast_dir / "ipam.db",
        ranges=("10.64.0.0/16", "fd00:64::/64"),
    )
    servers.append(server)

    def worker(n: int) -> list[list[str]]:
        client = server.client()
        try:
            return [client.address(f"w{n}-claim-{i}") for i in range(100)]
        finally:
            client.close()

    with ThreadPoolExecutor(8) as pool:
        results = [addr for chunk in pool.map(worker, range(8)) for addr in chunk]
    assert len(results) == 800
    v4 = [a[0] for a in results]
    v6 = [a[1] for a in results]
    assert all(a.startswith("10.64.") for a in v4) and all(a.startswith("fd00:64::") for a in v6)
    assert len(set(v4)) == 800 and len(set(v6)) == 800
    assert server.terminate() == 0
    assert len(listed_claims(server.db)) == 1600  # one row per family per claim


def test_release_static_conflict_and_gc_while_serving(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(tmp_path)
    servers.append(server)
    client = server.client()
    # The static address first: a random allocation could otherwise take it.
    static = client.profile("static-a", addresses=["10.5.0.250/24"])
    assert static.status_code == 200
    clash = client.profile("static-b", addresses=["10.5.0.250/24"])
    assert clash.status_code == 409
    assert "10.5.0.250" in clash.text and "static-a" in clash.text
    client.address("keep")
    client.address("drop")
    client.address("leak")
    assert sorted(listed_claims(server.db)) == ["drop", "keep", "leak", "static-a"]

    released = client.profile("drop", release=True)
    assert released.status_code == 200
    assert sorted(listed_claims(server.db)) == ["keep", "leak", "static-a"]
    assert client.profile("drop", release=True).status_code == 200  # already released

    # `ipam gc` on the same file while the server runs: "leak" is not live.
    live = tmp_path / "live"
    live.write_text("keep\nstatic-a\n# complete\n")
    gc = cli(
        "ipam",
        "gc",
        "--ipam-db",
        str(server.db),
        "--live-claims",
        str(live),
        "--grace=0s",
        "-ojson",
    )
    assert gc.returncode == 0, gc.stderr
    assert [a["claim_uid"] for a in json.loads(gc.stdout)] == ["leak"]
    assert sorted(listed_claims(server.db)) == ["keep", "static-a"]
    # The server keeps working on the collected file.
    assert client.address("leak")[0].startswith("10.5.0.")
    client.close()
    assert server.terminate() == 0


def test_periodic_gc_with_a_live_claims_file(tmp_path: Path, servers: list[ServeProcess]) -> None:
    live = tmp_path / "live"
    live.write_text("")  # as a failed `kubectl ... > live` leaves it
    server = ServeProcess(
        tmp_path, "--gc-interval", "0.2s", "--gc-live-claims", str(live), "--gc-grace", "0s"
    )
    servers.append(server)
    client = server.client()
    client.address("keep")
    client.address("old")
    wait_until(lambda: "live claims file" in server.stderr(), "a collection to run")
    assert "is empty, which proves nothing" in server.stderr()
    assert sorted(listed_claims(server.db)) == ["keep", "old"]
    live.write_text("keep\n")  # unmarked: may be cut short
    wait_until(lambda: "does not end with the line" in server.stderr(), "another collection")
    assert sorted(listed_claims(server.db)) == ["keep", "old"]
    live.write_text("keep\n# complete\n")
    wait_until(lambda: "old" not in listed_claims(server.db), "the collector to free 'old'")
    assert listed_claims(server.db) == ["keep"]
    client.close()
    assert server.terminate() == 0
    assert "ipam gc freed 10.5.0." in server.stderr()


def gc_runs(client: GoLikeClient) -> float:
    """The collector's completed runs, from the server's own /metrics."""
    text = client.http.get("/metrics").text
    found = re.search(r"^dranet_cloud_gc_runs_total (\S+)$", text, re.M)
    assert found is not None, text[:400]
    return float(found.group(1))


def test_gc_kubernetes_frees_leaks_within_two_runs_and_never_a_live_claim(
    tmp_path: Path, fast_dir: Path, servers: list[ServeProcess]
) -> None:
    """gen1 claims (UID only) of pods of this node come and go while the collector runs
    every 0.25 s.

    A leaked claim (its pod and claim deleted, its release lost) must be free
    after the collector's next runs, proven by a GET of the name this node's
    pods view gave its UID; a claim that is never deleted must never lose its
    address, and no run lists every claim of the cluster.
    """
    with KubernetesEmulator() as kube:
        server = ServeProcess(
            tmp_path,
            "--no-access-log",
            "--gc-interval",
            "0.25s",
            "--gc-kubernetes",
            "--node-name",
            "node-1",
            "--kubeconfig",
            str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
            "--gc-grace",
            "0s",
            db=fast_dir / "ipam.db",
            ranges=("10.80.0.0/16",),
        )
        servers.append(server)
        live: set[str] = set()
        leaked: set[str] = set()
        released: set[str] = set()
        lock = threading.Lock()
        stop_at = time.monotonic() + 2.0
        claims = "/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/"

        def resolved(name: str) -> bool:
            """The view read the claim by name (the kubelet's pod came well before)."""
            return any(r.path == claims + name for r in kube.emulator.requests())

        def churn(worker: int) -> int:
            client = server.client()
            rnd = random.Random(worker)
            made = 0
            try:
                while time.monotonic() < stop_at:
                    name = f"w{worker}-{made}"
                    made += 1
                    uid = kube.add_claim("team", name)["metadata"]["uid"]
                    kube.add_pod("team", f"{name}-pod", node="node-1", claims=(("nic", name),))
                    assert client.address(uid)[0].startswith("10.80.")
                    fate = rnd.random()
                    if fate < 0.4:
                        with lock:
                            live.add(uid)
                        continue
                    wait_until(lambda n=name: resolved(n), f"the view resolved {name}")
                    assert kube.delete_pod("team", f"{name}-pod")
                    assert kube.delete_claim("team", name)
                    if fate < 0.7:  # DRANET's release never came
                        with lock:
                            leaked.add(uid)
                    else:
                        assert client.profile(uid, release=True).status_code == 200
                        with lock:
                            released.add(uid)
            finally:
                client.close()
            return made

        with ThreadPoolExecutor(4) as pool:
            made = sum(pool.map(churn, range(4)))
        wait_until(lambda: set(listed_claims(server.db)) == live, "every leak freed")
        client = server.client()
        runs = gc_runs(client)
        wait_until(lambda: gc_runs(client) >= runs + 2, "two more collections")
        client.close()
        held = set(listed_claims(server.db))
        assert server.terminate() == 0
        listed = kube.calls("resourceclaims").get("list", 0)
    log = server.stderr()
    print(f"{made} claims, {len(leaked)} leaked, {len(live)} live, {runs:g} collections")
    assert leaked and live and released
    assert held == live  # every leak freed, every live claim kept
    assert listed == 0  # no list of every claim: each leak was proven by its GET
    freed = set(re.findall(r"ipam gc freed 10\.80\.\S+ held by local-ipam/[^/\s]+/(\S+) ", log))
    assert leaked <= freed  # by the collector (a release may lose a race with it)


def test_gc_kubernetes_with_gen2_claims_checks_each_name(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    """gen2 DRANET sends the ResourceClaim: the collector GETs each by namespace/name."""
    with KubernetesEmulator() as kube:
        server = ServeProcess(
            tmp_path,
            "--gc-interval",
            "0.2s",
            "--gc-kubernetes",
            "--kubeconfig",
            str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
            "--gc-grace",
            "0s",
            env={"NODE_NAME": "node-1"},  # as the manifest sets it
        )
        servers.append(server)
        client = server.client()
        uids = {}
        for name in ("a", "b", "c"):
            claim = kube.add_claim("team", name, pods=[(f"{name}-0", f"p-{name}")])
            uids[name] = claim["metadata"]["uid"]
            body = {
                "device": {"mac_address": "0c:42:a1:00:00:11", "name": "eth1"},
                "claim": claim,
                "config": {"profile": "local-ipam", "interface": {}},
            }
            assert client.post("/GetProfileConfig", body).status_code == 200
        listed = cli("ipam", "list", "--ipam-db", str(server.db), "-o", "json")
        rows = {x["claim_uid"]: x for x in json.loads(listed.stdout)}
        assert rows[uids["a"]]["claim"] == "team/a" and rows[uids["a"]]["pods"] == ["a-0"]
        kube.delete_claim("team", "b")
        kube.delete_claim("team", "c")
        kube.add_claim("team", "c")  # same name, new UID
        wait_until(lambda: listed_claims(server.db) == [uids["a"]], "b and the old c freed")
        client.close()
        assert server.terminate() == 0
        paths = {r.path for r in kube.emulator.requests()}
    assert paths == {
        f"/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/{n}" for n in "abc"
    } | {
        "/api/v1/namespaces/kube-system",  # which cluster: checked once an hour
        "/api/v1/pods",  # the watch of node-1's pods (none uses these claims)
    }
    assert "ipam gc freed" in server.stderr() and "(claim team/b (uid" in server.stderr()


def test_socket_mode_and_removal_on_sigterm(tmp_path: Path, servers: list[ServeProcess]) -> None:
    server = ServeProcess(tmp_path)
    servers.append(server)
    assert stat.S_ISSOCK(os.stat(server.sock).st_mode)
    assert stat.S_IMODE(os.stat(server.sock).st_mode) == 0o660
    assert server.terminate() == 0
    assert not server.sock.exists()

    custom = ServeProcess(tmp_path, "--socket-mode", "0600")
    servers.append(custom)
    assert stat.S_IMODE(os.stat(custom.sock).st_mode) == 0o600
    assert custom.terminate() == 0
    assert not custom.sock.exists()


def test_sigterm_lets_in_flight_requests_finish(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    """A proxied profile call is held upstream while the server gets SIGTERM."""
    pytest.importorskip("dranet_cloud_webhook")
    arrived, proceed = threading.Event(), threading.Event()

    def upstream(req: Request) -> Response:
        if req.path == "/health":
            return Response.json({"cloudProvider": False, "profileProvider": True})
        arrived.set()
        proceed.wait(30)
        return Response.json({"interface": {"addresses": ["192.0.2.9/32"]}})

    up_sock = tmp_path / "upstream.sock"
    with Emulator(upstream, name="upstream", listen=f"unix://{up_sock}"):
        server = ServeProcess(
            tmp_path,
            "--profile-provider",
            "webhook",
            "--webhook-url",
            f"unix://{up_sock}",
            "--set",
            "webhook.timeout=30",
            ranges=(),
        )
        servers.append(server)
        client = server.client()
        answers: list[httpx.Response] = []
        body = {
            "device": {"name": "eth1"},
            "claim_uid": "c1",
            "config": {"profile": "upstream", "interface": {}},
        }
        caller = threading.Thread(
            target=lambda: answers.append(client.post("/GetProfileConfig", body))
        )
        caller.start()
        assert arrived.wait(30)
        server.proc.send_signal(signal.SIGTERM)

        def refused() -> bool:  # shutdown has begun once new connections are refused
            probe = GoLikeClient(server.sock)
            try:
                probe.http.get("/health")
            except httpx.TransportError:
                return True
            finally:
                probe.close()
            return False

        wait_until(refused, "the server to stop accepting connections")
        assert server.proc.poll() is None  # still draining the request in flight
        proceed.set()
        caller.join(30)
        assert server.proc.wait(30) == 0
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json() == {"interface": {"addresses": ["192.0.2.9/32"]}}
    assert not server.sock.exists()
    client.close()


def test_access_log_lines_and_tcp_listen(tmp_path: Path, servers: list[ServeProcess]) -> None:
    server = ServeProcess(tmp_path, listen="127.0.0.1:0")
    servers.append(server)
    url = server.ready["url"]
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    with httpx.Client(base_url=url, headers=GO_HEADERS) as http:
        r = http.post(
            "/GetProfileConfig",
            content=go_json(
                {
                    "device": {"name": "eth1"},
                    "claim_uid": "uid-77",
                    "config": {"profile": "local-ipam", "interface": {}},
                }
            ),
        )
        assert r.status_code == 200
        bad = http.post("/GetProfileConfig", content=b'{"device":{"name":"eth1"}}')
        assert bad.status_code == 400 and "the request has neither" in bad.text
        huge = http.post("/GetDeviceConfig", content=b"x" * (2 << 20))
        assert huge.status_code == 413
    assert server.terminate() == 0
    lines = [ln for ln in server.stderr().splitlines() if "dranet_cloud.server.access" in ln]
    assert len(lines) == 3
    fields = lines[0].split(": ", 1)[1].split(" ")
    assert fields[:3] == ["POST", "/GetProfileConfig", "200"]
    assert fields[3].endswith("ms") and fields[4] == "claim=uid-77"
    assert lines[1].split(": ", 1)[1].split(" ")[2] == "400"
    assert lines[2].split(": ", 1)[1].startswith("POST /GetDeviceConfig 413 ")


def test_bad_flags_fail_fast(tmp_path: Path) -> None:
    base = [*serve_argv(tmp_path), "--host-root", str(tmp_path)]
    out = cli(
        "serve",
        "--listen",
        "nowhere",
        "--cloud-provider-hint",
        "none",
        "--host-root",
        str(tmp_path),
    )
    assert out.returncode == 2 and "--listen 'nowhere'" in out.stderr
    out = cli(*base, "--gc-kubernetes")
    assert out.returncode == 2 and "--gc-interval" in out.stderr
    out = cli(*base, "--gc-interval", "soon", "--gc-kubernetes")
    assert out.returncode == 2 and "--gc-interval 'soon'" in out.stderr
    base += ["--gc-interval", "10m"]
    out = cli(*base, "--gc-older-than", "24h")
    assert out.returncode == 2 and "--gc-older-than was removed" in out.stderr
    out = cli(*base)
    assert (
        out.returncode == 2
        and "--gc-interval: say how to prove claims gone: --gc-kubernetes" in out.stderr
    )
    out = cli(*base, "--gc-kubernetes", "--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 2 and "--gc-kubernetes needs this node's" in out.stderr
    assert "--node-name NAME or set NODE_NAME" in out.stderr  # refused, not a silent fall-back
    base += ["--node-name", "node-1"]
    out = cli(*base, "--gc-kubernetes", "--kubeconfig", str(tmp_path / "missing"))
    assert out.returncode == 2 and "no kubeconfig file at" in out.stderr
    assert not (tmp_path / "s.sock").exists()
