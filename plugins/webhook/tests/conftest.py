"""Fixtures for the webhook plugin's tests: a real example webhook as the peer.

Every server binds 127.0.0.1 or a unix socket; no test reaches further.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dranet_cloud_webhook import plugin
from dranet_cloud_webhook.client import close_pooled_clients
from dranet_cloud_webhook.example_server import (
    Behaviour,
    ExampleServer,
    ExampleWebhook,
    TlsServerFiles,
)

from dranet_cloud.contract.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.plugin_fixtures import PluginFixtures

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_SCRIPT = REPO / "plugins" / "webhook" / "examples" / "example_webhook.py"


@pytest.fixture(autouse=True)
def _fresh_pool() -> Iterator[None]:
    """Each test starts and ends without pooled clients from another test."""
    close_pooled_clients()
    yield
    close_pooled_clients()


@pytest.fixture()
def short_dir() -> Iterator[Path]:
    """A short directory for unix sockets (sun_path is limited to 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="wh", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["tcp", "unix"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


ServerFactory = Callable[..., ExampleServer]


@pytest.fixture()
def serve(short_dir: Path) -> Iterator[ServerFactory]:
    """Start example webhooks: ``serve(transport="tcp", tls=None, **behaviour)``."""
    started: list[ExampleServer] = []

    def start(
        transport: str = "tcp", tls: TlsServerFiles | None = None, **kw: Any
    ) -> ExampleServer:
        listen = "127.0.0.1:0"
        if transport == "unix":
            listen = f"unix://{short_dir}/wh{len(started)}.sock"
        server = ExampleServer(ExampleWebhook(Behaviour(**kw)), listen, tls).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def make_context(
    url: str | None, env: dict[str, str] | None = None, **settings: str
) -> ProviderContext:
    """A context pointing at ``url`` with ``webhook.<key>`` settings."""
    options = ProviderOptions(
        webhook_url=url,
        settings={f"webhook.{k}": v for k, v in settings.items()},
    )
    return ProviderContext(options=options, env=env or {})


@pytest.fixture()
def context_for() -> Callable[..., ProviderContext]:
    return make_context


# The webhook's peer is the example server (below), not the emulator kit, so
# the factory makes only the sample node.
kit = PluginFixtures(plugin)
webhook_sample = kit.sample("webhook_sample")


@pytest.fixture()
def sample_root(webhook_sample: SampleHost) -> Path:
    return webhook_sample.root


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(cwd: Path, name: str, cn: str, ext: str) -> None:
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd,
    )  # fmt: skip
    (cwd / f"{name}.ext").write_text(ext)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
        cwd=cwd,
    )  # fmt: skip


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A throw-away CA, a server certificate for 127.0.0.1 and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("tls")
    for ca in ("ca", "other-ca"):
        _openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
            "-subj", f"/CN=dranet-cloud test {ca}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d,
        )  # fmt: skip
    common = "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    _issue(
        d, "server", "127.0.0.1",
        common + "subjectAltName=IP:127.0.0.1\nkeyUsage=digitalSignature\n"
        "extendedKeyUsage=serverAuth\n",
    )  # fmt: skip
    _issue(
        d, "client", "dranet-node",
        common + "keyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    )  # fmt: skip
    return TlsFiles(
        ca=d / "ca.pem",
        server_cert=d / "server.pem",
        server_key=d / "server.key",
        client_cert=d / "client.pem",
        client_key=d / "client.key",
        other_ca=d / "other-ca.pem",
    )


# --- the CLI, as an operator runs it ------------------------------------------


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def _clean_env(extra: dict[str, str] | None) -> dict[str, str]:
    env = isolated_environ()
    env.update(extra or {})
    return env


@pytest.fixture()
def cli_process() -> Callable[..., CliResult]:
    """Run ``dranet-cloud ARGS`` in a fresh process (10 s cap: the issue's bound)."""

    def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "dranet_cloud.cli.main", *args],
            env=_clean_env(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture()
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliResult]:
    """Run ``dranet-cloud ARGS`` in this process (same code path, no start-up cost).

    ``stderr`` holds what the CLI printed plus every WARNING-or-worse log
    record, as an operator would see them on the terminal.
    """
    from dranet_cloud.cli.main import main

    def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> CliResult:
        for key in list(os.environ):
            if key.startswith(("DRANET_CLOUD_", "GCE_")):
                monkeypatch.delenv(key)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        logs = io.StringIO()
        handler = logging.StreamHandler(logs)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        capsys.readouterr()
        try:
            code = main(list(args))
        finally:
            root.removeHandler(handler)
        out, err = capsys.readouterr()
        return CliResult(code, out, err + logs.getvalue())

    return run


@pytest.fixture()
def background() -> Iterator[Callable[..., Any]]:
    """Start a long-running command; returns the JSON line it prints when ready."""
    procs: list[subprocess.Popen[str]] = []

    def start(*argv: str, env: dict[str, str] | None = None) -> Any:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=_clean_env(env),
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"{argv} exited before printing its ready line"
        return json.loads(line)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=5)


@pytest.fixture()
def example_process(background: Callable[..., Any]) -> Callable[..., str]:
    """Run ``examples/example_webhook.py`` as a separate process; returns its URL."""

    def start(*args: str) -> str:
        return str(background(sys.executable, str(EXAMPLE_SCRIPT), *args)["url"])

    return start


@pytest.fixture()
def gce_node(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, str]]:
    """The GCE plugin's own emulator and sample host (through its hooks only)."""
    reg = PluginRegistry()
    if "gce" not in reg.names():
        pytest.skip("the gce plugin is not installed")
    sample = reg.call("gce", "sample_host", dest=tmp_path / "gce-host", variant=None)
    emu = reg.call("gce", "emulator", fixture=None, listen="127.0.0.1:0", faults=None)
    if sample is None or emu is None:
        pytest.skip("the gce plugin ships no emulator/sample host yet")
    with emu:
        yield dict(emu.env), sample.root, sample.claim_device or "eth0"
