"""What an operator runs against a live sidecar: the metrics listener, JSON log fields,
``--require-roles`` and ``ipam backup`` while claims are being served.

Each test drives a real ``dranet-cloud serve`` process (tests/test_server_cli.py's
:class:`ServeProcess`) the way DRANET and Prometheus would.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .test_server_cli import ServeProcess, cli, fast_dir, servers

__all__ = ["fast_dir", "servers"]  # fixtures, used by name


def curl(url: str) -> tuple[int, str]:
    """``curl URL`` as an operator types it (httpx when the machine has no curl)."""
    exe = shutil.which("curl")
    if exe is None:
        r = httpx.get(url, timeout=30)
        return r.status_code, r.text
    res = subprocess.run(
        [exe, "-s", "-w", "\n%{http_code}", url], capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 0, res.stderr
    body, _, code = res.stdout.rpartition("\n")
    return int(code), body


def families(text: str) -> set[str]:
    return {f.name for f in text_string_to_metric_families(text)}


def test_metrics_listener_serves_only_metrics_and_the_socket_still_does(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    live = tmp_path / "live-claims"
    live.write_text("claim-a\n# complete\n")
    server = ServeProcess(
        tmp_path,
        "--metrics-listen=127.0.0.1:0",
        "--gc-interval=1h",
        f"--gc-live-claims={live}",
        "--log-format=json",
    )
    servers.append(server)
    url = server.ready["metrics"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics"), server.ready
    client = server.client()
    assert client.address("claim-a")

    code, text = curl(url)
    assert code == 200
    names = families(text)
    for family in (
        "dranet_cloud_requests",  # counters are listed without _total
        "dranet_cloud_request_duration_seconds",
        "dranet_cloud_ipam_pool_size",
        "dranet_cloud_ipam_pool_used",
        "dranet_cloud_ipam_allocations",
        "dranet_cloud_gc_runs",
        "dranet_cloud_gc_freed",
        "dranet_cloud_build_info",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
    ):
        assert family in names, f"{family} missing from {sorted(names)}"
    assert 'dranet_cloud_requests_total{path="/GetProfileConfig",status="200"} 1.0' in text
    assert "_created" not in text

    base = url.removesuffix("/metrics")
    for path in ("/health", "/openapi.json", "/metrics/", "/GetProfileConfig"):
        assert curl(base + path)[0] == 404, path  # the webhook is not on TCP
    refused = httpx.post(url, content=b"{}", timeout=30)
    assert refused.status_code == 404
    # The unix socket still answers /metrics, and counts the TCP scrape.
    on_socket = client.http.get("/metrics")
    assert on_socket.status_code == 200
    assert 'dranet_cloud_requests_total{path="/metrics",status="200"} 1.0' in on_socket.text
    client.close()
    assert server.terminate() == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=5)  # closed with the server


def test_json_access_lines_carry_path_status_duration_and_claim(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    server = ServeProcess(tmp_path, "--log-format=json")
    servers.append(server)
    client = server.client()
    client.health()
    assert client.address("uid-77")
    assert client.post("/GetProfileConfig", {"device": {"name": "eth1"}}).status_code == 400
    assert client.http.post("/GetDeviceConfig", content=b"x" * (2 << 20)).status_code == 413
    assert client.http.get("/nowhere").status_code == 404  # FastAPI's side, via the middleware
    assert client.http.get("/openapi.json").status_code == 200
    client.close()
    assert server.terminate() == 0
    docs = [json.loads(line) for line in server.stderr().splitlines()]
    access = [d for d in docs if d["logger"] == "dranet_cloud.server.access"]
    assert len(access) == 6, access
    for doc in access:
        assert isinstance(doc["path"], str) and doc["path"].startswith("/")
        assert isinstance(doc["status"], int) and isinstance(doc["duration_ms"], float)
        assert doc["duration_ms"] >= 0 and doc["msg"].startswith(doc["method"] + " ")
        assert f" {doc['status']} " in doc["msg"]  # the message says the same
    by_path = {(d["path"], d["status"]): d for d in access}
    assert by_path[("/GetProfileConfig", 200)]["claim"] == "uid-77"
    assert "claim" not in by_path[("/health", 200)]
    assert ("/nowhere", 404) in by_path and ("/openapi.json", 200) in by_path


def test_require_roles_refuses_a_server_that_disagrees_with_dranet(tmp_path: Path) -> None:
    args = [
        "serve",
        f"--listen=unix://{tmp_path / 'webhook.sock'}",
        "--cloud-provider-hint=none",
        f"--host-root={tmp_path}",
        f"--ipam-db={tmp_path / 'ipam.db'}",
        "--ipam-range=10.5.0.0/24",
    ]
    out = cli(*args, "--require-roles=cloud,profile")
    assert out.returncode == 2
    assert "--require-roles cloud,profile" in out.stderr
    assert "--cloud-provider-hint=webhook --profile-provider=webhook" in out.stderr
    assert "this server has profile" in out.stderr
    assert not (tmp_path / "webhook.sock").exists()  # refused before listening
    bad = cli(*args, "--require-roles=profile,ipam")
    assert bad.returncode == 2 and "expected cloud, profile or cloud,profile" in bad.stderr


def test_backup_while_eight_clients_allocate(
    tmp_path: Path, fast_dir: Path, servers: list[ServeProcess]
) -> None:
    """Every allocation acknowledged before the backup started is in the copy, which is sound."""
    server = ServeProcess(
        tmp_path, "--no-access-log", db=fast_dir / "ipam.db", ranges=("10.64.0.0/16",)
    )
    servers.append(server)
    acknowledged: dict[str, list[str]] = {}
    lock = threading.Lock()
    stop = threading.Event()
    started_backup = threading.Event()

    def worker(n: int) -> int:
        client = server.client()
        count = 0
        try:
            while not stop.is_set():
                claim = f"w{n}-claim-{count}"
                addr = client.address(claim)
                with lock:
                    acknowledged[claim] = addr
                count += 1
                if count >= 25 and started_backup.is_set():
                    break
        finally:
            client.close()
        return count

    target = tmp_path / "backups" / "ipam-backup.db"
    target.parent.mkdir()
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(worker, n) for n in range(8)]
        while len(acknowledged) < 80:  # claims are flowing on every client
            threading.Event().wait(0.01)
        with lock:
            before = dict(acknowledged)  # acknowledged before the backup starts
        started_backup.set()
        out = cli("ipam", "backup", "--ipam-db", str(server.db), "--to", str(target))
        during = len(acknowledged)
        stop.set()
        counts = [f.result(timeout=60) for f in futures]
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["integrity"] == "ok" and report["schema"] >= 2
    assert sum(counts) == len(acknowledged) and during > len(before)  # served meanwhile

    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file
        rows = dict(conn.execute("SELECT claim_uid, address FROM allocations").fetchall())
    finally:
        conn.close()
    assert report["allocations"] == len(rows) >= len(before)
    for claim, addr in before.items():
        assert rows.get(claim) == addr[0], claim
    assert (target.stat().st_mode & 0o777) == 0o600
    assert not [p for p in target.parent.iterdir() if p != target]  # no temporary left

    again = cli("ipam", "backup", "--ipam-db", str(server.db), "--to", str(target))
    assert again.returncode == 2 and "the file exists" in again.stderr
    assert server.terminate() == 0
    missing = cli("ipam", "backup", "--ipam-db", str(tmp_path / "nope.db"), "--to", "x.db")
    assert missing.returncode == 2 and "no IPAM database" in missing.stderr
