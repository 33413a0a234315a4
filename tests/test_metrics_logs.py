"""``/metrics`` as Prometheus reads it, JSON log lines, the start-up line and the health probe.

One real ``dranet-cloud serve`` process on a unix socket: curl (when the
machine has it, else httpx) fetches ``/metrics`` the way an operator would and
prometheus-client's own parser reads the answer.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.server.metrics import ServerMetrics
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.toolkit.errors import ProviderUnavailable

CLI = [sys.executable, "-m", "dranet_cloud.cli.main"]


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    sock = tmp_path / "run" / "webhook.sock"
    (tmp_path / "run").mkdir()
    log = tmp_path / "serve.log"
    live = tmp_path / "live-claims"
    live.write_text("claim-a\n")
    argv = [
        *CLI,
        "serve",
        "--listen",
        f"unix://{sock}",
        "--host-root",
        str(tmp_path),
        "--ipam-db",
        str(tmp_path / "ipam.db"),
        "--ipam-range",
        "10.5.0.0/29",
        "--gc-interval",
        "1h",
        "--gc-live-claims",
        str(live),
        "--log-format",
        "json",
    ]
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=isolated_environ())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"serve exited: {log.read_text()}"
        yield {"sock": sock, "log": log, "proc": proc, "ready": json.loads(line)}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def fetch_metrics(sock: Path) -> str:
    curl = shutil.which("curl")
    if curl:
        res = subprocess.run(
            [curl, "-sf", "--unix-socket", str(sock), "http://x/metrics"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert res.returncode == 0, res.stderr
        return res.stdout
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
        r = http.get("http://x/metrics")
        assert r.status_code == 200
        return r.text


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_logs_and_health_of_a_running_server(served: dict[str, Any]) -> None:
    sock: Path = served["sock"]
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
        assert http.get("http://x/health").status_code == 200
        body = {
            "device": {"mac_address": "0c:42:a1:00:00:11", "name": "eth1"},
            "claim_uid": "claim-a",
            "config": {"profile": "local-ipam", "interface": {}},
        }
        r = http.post("http://x/GetProfileConfig", json=body)
        assert r.status_code == 200, r.text
        held = r.json()["interface"]["addresses"][0]
        conflict = dict(body, claim_uid="claim-b")
        conflict["config"] = {"profile": "local-ipam", "interface": {"addresses": [held]}}
        assert http.post("http://x/GetProfileConfig", json=conflict).status_code == 409
        assert http.get("http://x/nowhere").status_code == 404

    text = fetch_metrics(sock)
    got = samples(text)
    assert got[("dranet_cloud_requests_total", (("path", "/health"), ("status", "200")))] == 1
    assert got[("dranet_cloud_requests_total", (("path", "/GetProfileConfig"), ("status", "409")))]
    assert got[("dranet_cloud_requests_total", (("path", "other"), ("status", "404")))] == 1
    assert (
        got[("dranet_cloud_request_duration_seconds_count", (("path", "/GetProfileConfig"),))] == 2
    )
    rng = (("range", "10.5.0.1-10.5.0.6"),)
    assert got[("dranet_cloud_ipam_pool_size", rng)] == 6
    assert got[("dranet_cloud_ipam_pool_used", rng)] == 1
    assert got[("dranet_cloud_ipam_pool_free", rng)] == 5
    assert got[("dranet_cloud_ipam_allocations", (("pool", "local-ipam"),))] == 1
    assert got[("dranet_cloud_gc_runs_total", ())] == 0
    assert got[("dranet_cloud_gc_freed_total", ())] == 0
    denied = (("error", "AddressConflict"), ("hook", "profile_config"), ("plugin", "local-ipam"))
    assert got[("dranet_cloud_plugin_errors_total", denied)] == 1
    # What issue 27's scrape config and dashboards read.
    [info] = [k for k in got if k[0] == "dranet_cloud_build_info"]
    assert dict(info[1])["version"].startswith("0.") and dict(info[1])["python"].startswith("3.")
    assert got[info] == 1
    assert got[("process_resident_memory_bytes", ())] > 10 << 20
    assert got[("process_open_fds", ())] > 0
    assert "_created" not in text
    assert got[("dranet_cloud_server_connections", ())] >= 1
    assert got[("dranet_cloud_server_buffered_bytes", ())] >= 0
    closed = ("dranet_cloud_server_connections_closed_total", (("reason", "answers_unread"),))
    assert got[closed] == 0

    # The cheap probe sees the same server.
    probe = subprocess.run(
        [*CLI, "health", "--listen", f"unix://{sock}"],
        capture_output=True,
        text=True,
        env=isolated_environ(),
        timeout=30,
    )
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout) == {"cloudProvider": False, "profileProvider": True}

    proc = served["proc"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    lines = served["log"].read_text().splitlines()
    assert lines
    docs = [json.loads(line) for line in lines]  # every line parses
    assert all(d["ts"].endswith("Z") and "T" in d["ts"] for d in docs)
    start = next(d["msg"] for d in docs if "serve on" in d["msg"])
    for part in ("dranet-cloud 0.", "profile=none", "database=", "ipam.db", "10.5.0.0/29"):
        assert part in start, start
    assert "gc=every 1h from live claims" in start


class Flaky:
    """A cloud plugin whose metadata server never answers."""

    @hookimpl
    def instance_properties(self, context: Any, deadline: float) -> Any:
        raise ProviderUnavailable("flaky: metadata server at http://127.0.0.1:9 did not answer")


def test_plugin_errors_are_counted_by_plugin_and_hook() -> None:
    reg = PluginRegistry(load_entry_points=False)
    reg.register(Flaky(), "flaky")
    host = ProviderHost(cloud_provider_hint="none", registry=reg, ipam=MemoryStore())
    host.start()
    metrics = ServerMetrics(host)
    with pytest.raises(ProviderUnavailable):
        reg.call("flaky", "instance_properties", context=host.context, deadline=0.1)
    got = samples(metrics.exposition().decode())
    key = (("error", "ProviderUnavailable"), ("hook", "instance_properties"), ("plugin", "flaky"))
    assert got[("dranet_cloud_plugin_errors_total", key)] == 1
    host.close()


def test_both_log_formats_carry_timestamps() -> None:
    import logging

    from dranet_cloud.toolkit.log_format import JsonFormatter, TextFormatter

    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "dranet_cloud.x", logging.WARNING, __file__, 1, "a %s\nline", ("two",), sys.exc_info()
        )
    text = TextFormatter().format(record)
    stamp, level, rest = text.split(" ", 2)
    assert stamp.endswith("Z") and stamp[4] == "-" and "T" in stamp
    assert level == "WARNING" and rest.startswith("dranet_cloud.x: a two") and "boom" in text
    doc = json.loads(JsonFormatter().format(record))
    assert doc["ts"] == stamp and doc["msg"] == "a two\nline" and "ValueError" in doc["exc"]
