"""``serve --metrics-listen HOST:PORT``: ``/metrics`` on TCP for Prometheus, nothing else.

The webhook itself stays on its unix socket: it has no authentication, and
anyone who reaches it can allocate and release addresses.  Prometheus scrapes
over TCP, so the metrics get a listener of their own that answers ``GET`` (and
``HEAD``) ``/metrics`` and 404 for every other path and method; the unix
socket keeps serving ``/metrics`` as before.

Both sockets are served by the one uvicorn server (same connection limits,
timeouts and shutdown); a request is told apart by the local port it arrived
on (``scope["server"]``).  A listener bound to ``0.0.0.0`` sees each
connection under the address it was made to, never ``0.0.0.0``, so the port
is the reliable part, and start-up refuses a webhook listener on the same
port.
"""

from __future__ import annotations

from dranet_cloud.server.listen import BoundSocket, ListenAddress, bind_tcp
from dranet_cloud.server.middleware import ASGIApp, Receive, Scope, Send, _send_text
from dranet_cloud.toolkit.errors import ConfigError

METRICS_PATH = "/metrics"


class MetricsListener:
    """The TCP listener for ``/metrics`` and the ASGI gate in front of the server's app."""

    def __init__(self, text: str, webhook: ListenAddress) -> None:
        if text.strip().startswith("unix://"):
            raise ConfigError(
                f"--metrics-listen {text!r}: the metrics listener is TCP (HOST:PORT, such as "
                "0.0.0.0:9178); the unix socket of --listen already serves /metrics"
            )
        self.address = ListenAddress.parse(text, flag="--metrics-listen")
        if webhook.uds is None and self.address.port and webhook.port == self.address.port:
            raise ConfigError(
                f"--metrics-listen {text!r} and --listen use the same port {webhook.port}; "
                "give the metrics listener a port of its own"
            )
        self.bound: BoundSocket | None = None
        self.port = 0  # the bound port (a request on it is a scrape)

    def bind(self) -> BoundSocket:
        self.bound = bind_tcp(self.address.host, self.address.port, flag="--metrics-listen")
        self.port = int(self.bound.sock.getsockname()[1])
        return self.bound

    @property
    def url(self) -> str:
        if self.bound is None:
            raise RuntimeError("the metrics listener is not bound yet")
        return self.bound.url + METRICS_PATH

    def cleanup(self) -> None:
        if self.bound is not None:
            self.bound.cleanup()

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """``app`` behind a gate: on the metrics port only ``GET``/``HEAD /metrics`` pass."""

        async def gate(scope: Scope, receive: Receive, send: Send) -> None:
            server = scope.get("server")
            on_metrics_port = (
                self.port != 0
                and isinstance(server, (tuple, list))
                and len(server) == 2
                and server[1] == self.port
            )
            if not on_metrics_port or scope.get("type") != "http":
                await app(scope, receive, send)
                return
            if scope.get("path") == METRICS_PATH and scope.get("method") in ("GET", "HEAD"):
                await app(scope, receive, send)
                return
            await _send_text(
                send,
                404,
                "404 page not found: this listener (--metrics-listen) serves only GET /metrics",
            )

        return gate
