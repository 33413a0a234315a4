"""``dranet-cloud health``: a probe for the sidecar that costs almost nothing.

Kubelet runs a startup or liveness probe every few seconds on every node.
The previous recipe started Python and imported httpx and pydantic (0.65 s a
probe); this one sends ``GET /health`` over a raw socket (unix or TCP) and
imports only the standard library modules the CLI already needs.  Exit 0
when the server answers 200 with a JSON object, 1 otherwise (the reason on
stderr), 2 for a malformed ``--listen``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any

from dranet_cloud.cli.argtypes import seconds_type
from dranet_cloud.cli.helptext import add_command
from dranet_cloud.cli.output import error_text
from dranet_cloud.toolkit.errors import ConfigError

DEFAULT_LISTEN = "unix:///run/dranet/webhook.sock"
MAX_RESPONSE_BYTES = 64 * 1024


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "health",
        """probe a running `dranet-cloud serve` (GET /health); cheap enough for kubelet

        Send GET /health to a running `dranet-cloud serve` over a raw socket and print its JSON
        answer. Exit 0 when it answers 200 with a JSON object, 1 otherwise (the reason on
        stderr), 2 for a malformed --listen.

        dranet-cloud health                      # the default socket
        dranet-cloud health --listen 127.0.0.1:9177 --timeout 1
        """,
    )
    p.add_argument(
        "--listen",
        default=os.environ.get("DRANET_CLOUD_LISTEN", DEFAULT_LISTEN),
        metavar="ADDR",
        help=f"the server's unix:///path or HOST:PORT (env DRANET_CLOUD_LISTEN, "
        f"default {DEFAULT_LISTEN})",
    )
    p.add_argument(
        "--timeout",
        type=seconds_type(3600),
        default=2.0,
        metavar="SECONDS",
        help="end-to-end deadline for connect, request and answer (default 2)",
    )
    p.set_defaults(func=run)


def _connect(listen: str, timeout: float) -> socket.socket:
    raw = listen.strip()
    if raw.startswith("unix://"):
        path = raw[len("unix://") :]
        if not path.startswith("/"):
            raise ConfigError(f"--listen {listen!r}: write a unix socket as unix:///abs/path.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except BaseException:
            sock.close()
            raise
        return sock
    host, sep, port = raw.removeprefix("http://").rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--listen {listen!r}: expected unix:///path.sock or HOST:PORT")
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)


def probe(listen: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """``GET /health`` on ``listen``: (status, body), under one deadline."""
    deadline = time.monotonic() + timeout
    with _connect(listen, timeout) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while len(data) <= MAX_RESPONSE_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete answer within {timeout:g} s")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise ValueError(f"not an HTTP answer: {data[:80].decode('ascii', 'backslashreplace')}")
    if b"transfer-encoding: chunked" in head.lower():
        body = _dechunk(body)
    return int(status_line[1]), body


def _dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_text, _, rest = body.partition(b"\r\n")
        size = int(size_text.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


def run(args: argparse.Namespace) -> int:
    try:
        status, body = probe(args.listen, args.timeout)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"unhealthy: {args.listen}: {error_text(exc)}\n")
        return 1
    text = body.decode("utf-8", "replace").strip()
    if status != 200 or not text.startswith("{"):
        sys.stderr.write(f"unhealthy: {args.listen}: HTTP {status} {text[:200]}\n")
        return 1
    sys.stdout.write(text + "\n")
    return 0
