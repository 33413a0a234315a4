"""Running the ``dranet-cloud`` command as a real process in tests.

Plugins' tests check the command line end to end (exit codes, JSON output,
messages on stderr).  A subprocess escapes the in-process socket guard, so
it runs with :func:`isolated_environ` plus only the variables the test
passes: a developer's own endpoint variables never reach it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dranet_cloud.contract.context import ProviderOptions
from dranet_cloud.host.assembly import HostConfig, build_host, describe_document
from dranet_cloud.testing.environ import isolated_environ

EXE = (sys.executable, "-m", "dranet_cloud.cli.main")


def run_cli(
    *args: str, env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``dranet-cloud ARGS`` with ``env`` on top of an isolated environment."""
    return subprocess.run(
        [*EXE, *args],
        capture_output=True,
        text=True,
        env={**isolated_environ(), **env},
        timeout=timeout,
    )


def describe_json(env: Mapping[str, str], host_root: Path, *extra: str) -> dict[str, Any]:
    """``describe -o json`` of a host root; fails the test unless it exits 0."""
    res = run_cli("describe", "--host-root", str(host_root), "-o", "json", *extra, env=env)
    assert res.returncode == 0, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def describe_in_process(cloud: str, env: Mapping[str, str], host_root: Path) -> dict[str, Any]:
    """What ``describe -o json --cloud-provider-hint CLOUD`` prints, without a subprocess.

    For tests that also read what was logged (``caplog``) and must stay fast.
    """

    host = build_host(
        HostConfig(
            cloud_provider_hint=cloud,
            host_root=str(host_root),
            env=dict(env),
            options=ProviderOptions(metadata_deadline=5.0),
        )
    )
    try:
        return describe_document(host)
    finally:
        host.close()


def attributes_by_name(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``{device name: value of attribute key or None}`` from ``describe -o json``."""
    return {
        d["device"]["name"]: next(iter(d["attributes"].get(key, {None: None}).values()))
        for d in data["devices"]
    }


@contextmanager
def emulate_process(plugin: str, *args: str) -> Iterator[dict[str, Any]]:
    """``dranet-cloud emulate PLUGIN ARGS`` as a real process; yields its ready line.

    The ready line is ``{"url", "env"}``; the process is terminated on exit
    and must have exited cleanly.
    """
    proc = subprocess.Popen(
        [*EXE, "emulate", plugin, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=isolated_environ(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "emulate printed nothing"
        ready: dict[str, Any] = json.loads(line)
        yield ready
    finally:
        proc.terminate()
        proc.wait(timeout=10)
