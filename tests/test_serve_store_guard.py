"""Issue 26 against a real ``serve``: a lost or empty store, static addresses outside the ranges."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from . import test_server_cli
from .test_metrics_logs import samples
from .test_server_cli import CLI, REPO, GoLikeClient, ServeProcess

servers = test_server_cli.servers  # the fixture that kills what a test left running


def serve_once(tmp: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """``serve`` on ``db`` expected to refuse to start (it would run forever otherwise)."""
    argv = [*CLI, "serve", "--listen", f"unix://{tmp}/s2.sock", "--cloud-provider-hint"]
    argv += ["none", "--host-root", str(tmp), "--ipam-db", str(db)]
    argv += ["--ipam-range", "10.5.0.0/24"]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=60)


def store_gauges(client: GoLikeClient) -> tuple[float, float]:
    """``dranet_cloud_ipam_store_healthy`` and ``..._degraded`` from ``/metrics``."""
    got = samples(client.http.get("/metrics").text)
    return got[("dranet_cloud_ipam_store_healthy", ())], got[
        ("dranet_cloud_ipam_store_degraded", ())
    ]


def started(servers: list[ServeProcess], tmp: Path, *extra: str, **kw: Any) -> ServeProcess:
    """A running ``serve`` the ``servers`` fixture kills at the end of the test."""
    serve = ServeProcess(tmp, *extra, **kw)
    servers.append(serve)
    return serve


def test_deleting_the_db_files_under_serve_turns_health_503_and_fails_claims(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    serve = started(servers, tmp_path)
    client = serve.client()
    first = client.address("claim-1")
    assert first and client.http.get("/health").status_code == 200
    assert store_gauges(client) == (1, 0)
    for name in ("ipam.db", "ipam.db-wal", "ipam.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    health = client.http.get("/health")
    assert health.status_code == 503, health.text
    assert "ipam.db was deleted" in health.text
    assert store_gauges(client) == (0, 0)
    new = client.profile("claim-2")
    assert new.status_code == 500 and "was deleted" in new.text, new.text
    retry = client.profile("claim-1")  # nothing acknowledged from a file nobody will read
    assert retry.status_code == 500, retry.text
    client.close()
    assert serve.terminate() == 0
    # A restart refuses to start afresh where the marker says a store lived.
    restart = serve_once(tmp_path, tmp_path / "ipam.db")
    assert restart.returncode == 2, restart.stderr
    assert "--ipam-db-create" in restart.stderr and "a store lived there" in restart.stderr


def test_an_empty_db_file_is_refused_without_ipam_db_create(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    db = tmp_path / "ipam.db"
    db.write_bytes(b"")
    refused = serve_once(tmp_path, db)
    assert refused.returncode == 2, refused.stderr
    assert "is empty (0 bytes)" in refused.stderr and "--ipam-db-create" in refused.stderr
    listed = subprocess.run(
        [*CLI, "ipam", "list", "--ipam-db", str(db)], capture_output=True, text=True, cwd=REPO
    )
    assert listed.returncode == 2 and "is empty (0 bytes)" in listed.stderr
    client = started(servers, tmp_path, "--ipam-db-create", db=db).client()
    assert client.address("claim-1")[0].startswith("10.5.0.")
    client.close()


def test_static_addresses_outside_every_range_are_refused_unless_allowed(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    client = started(servers, tmp_path / "a", ranges=("10.5.0.0/24", "fd00:5::/120")).client()
    for address in ("8.8.8.8/32", "10.6.0.1/24", "fd00:6::1/64"):
        r = client.profile("claim-s", addresses=[address])
        assert r.status_code == 400, r.text
        assert address in r.text and "10.5.0.1-10.5.0.254" in r.text
        assert "--ipam-allow-static-outside-ranges" in r.text
    r = client.profile("claim-z", addresses=["0.0.0.0/0"])
    assert r.status_code == 400 and "not a host address" in r.text, r.text
    inside = client.profile("claim-in", addresses=["10.5.0.7/24"])
    assert inside.status_code == 200, inside.text
    assert json.loads(inside.text)["interface"]["addresses"] == ["10.5.0.7/24"]
    client.close()

    client = started(servers, tmp_path / "b", "--ipam-allow-static-outside-ranges").client()
    assert client.profile("claim-s", addresses=["8.8.8.8/32"]).status_code == 200
    # A /0 is never a host address, flag or not.
    r = client.profile("claim-z", addresses=["::/0"])
    assert r.status_code == 400 and "not a host address" in r.text, r.text
    client.close()
