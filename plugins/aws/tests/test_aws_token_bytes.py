"""A token that cannot go back in a header ends an explicit aws start cleanly (exit 3)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from dranet_cloud.contract.context import SampleHost
from dranet_cloud.testing.environ import isolated_environ

EXE = [sys.executable, "-m", "dranet_cloud.cli.main"]


@pytest.fixture
def odd_token_imds() -> Iterator[str]:
    """A loopback IMDS that answers every request 200 with a non-ASCII body."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                token = "AQAEA\u00e9\u00fcken\u2603".encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                    % len(token)
                    + token
                )

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    srv.close()


def test_non_ascii_token_exits_3_without_a_traceback(
    odd_token_imds: str, aws_sample: SampleHost
) -> None:
    env = {**isolated_environ(), "AWS_EC2_METADATA_SERVICE_ENDPOINT": odd_token_imds}
    res = subprocess.run(
        [
            *EXE,
            "describe",
            "--cloud-provider-hint",
            "aws",
            "--host-root",
            str(aws_sample.root),
            "--metadata-deadline",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr
    assert "printable ASCII" in res.stderr
