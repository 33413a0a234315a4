"""Running the BYODP app on uvicorn: sockets, readiness, signals, garbage collection.

Signals are what an operator of a DaemonSet expects.  SIGTERM (or SIGINT) stops
accepting connections, lets in-flight requests finish (up to
``shutdown_timeout``), stops the garbage collector, removes the unix socket it
created and closes the IPAM store.  uvicorn re-raises the signal it caught
once it is done; the runner's own handler absorbs it so that the clean-up
above still runs and the process exits 0.  SIGHUP is logged and ignored: the
log goes to stderr, so there is nothing to re-open, and its default action
would end the daemon without clean-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import resource
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn

from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, SelectorCheck
from dranet_cloud.server.api_health import ApiCheck, ApiHealth
from dranet_cloud.server.app import DEFAULT_MAX_BODY_BYTES, DEFAULT_WORKERS, create_app
from dranet_cloud.server.collector import CollectorSettings, PeriodicCollector
from dranet_cloud.server.listen import DEFAULT_SOCKET_MODE, BoundSocket, ListenAddress, bind
from dranet_cloud.server.metrics import ServerMetrics
from dranet_cloud.server.metrics_listener import MetricsListener
from dranet_cloud.server.protocol import ConnectionLimits, protocol_class, quiet_accept_errors
from dranet_cloud.toolkit.errors import ConfigError

log = logging.getLogger(__name__)

ReadyCallback = Callable[[str, dict[str, Any]], None]


@dataclass
class ServeOptions:
    """Everything ``dranet-cloud serve`` adds to the provider flags."""

    listen: str
    socket_mode: int = DEFAULT_SOCKET_MODE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    gc: CollectorSettings | None = None  # periodic leak reclaiming, when asked for
    shutdown_timeout: int | None = 25
    # Longer than DRANET's request spacing, so Go's pooled connections are rarely
    # closed under it; an idle unix-socket connection costs nothing.
    keep_alive_timeout: float = 60.0
    # From a connection's first byte (or its accept) to the end of its request.
    request_timeout: float = 10.0
    # None: derived from the open-file limit (see default_max_connections).
    max_connections: int | None = None
    workers: int = DEFAULT_WORKERS
    tls_cert: str | None = None
    tls_key: str | None = None
    access_log: bool = True
    # HOST:PORT of a TCP listener answering only GET /metrics (off when None).
    metrics_listen: str | None = None
    # The Kubernetes API checked at start and until it answers (cluster scope, --gc-kubernetes).
    api_check: ApiCheck | None = None
    # How often --ipam-range selectors that match no NIC are looked for again.
    selector_recheck: float = 30.0


def local_ipam_selectors(host: ProviderHost) -> SelectorCheck | None:
    """The built-in local-ipam's selector check, when it has per-device selectors."""
    check = getattr(host.registry.get_plugin(PLUGIN_NAME), "selectors", None)
    return check if isinstance(check, SelectorCheck) and check.selectors else None


def default_max_connections() -> int:
    """Half the open-file limit, within 16-4096: the rest is for the store, plugins, logs."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft // 2))


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling us when it really accepts connections."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        quiet_accept_errors(asyncio.get_running_loop())
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self._on_started()


class WebhookServer:
    """One server: a started host behind the BYODP app on one socket.

    ``run()`` blocks in the main thread until SIGTERM/SIGINT; ``start()`` and
    ``stop()`` run it in a background thread (tests, benchmarks).
    """

    def __init__(
        self,
        host: ProviderHost,
        options: ServeOptions,
        *,
        on_ready: ReadyCallback | None = None,
        close_host: bool = True,
    ) -> None:
        self.host = host
        self.options = options
        self.on_ready = on_ready
        self.close_host = close_host
        self.address = ListenAddress.parse(options.listen)
        self.collector: PeriodicCollector | None = None
        if options.gc is not None:
            self.collector = PeriodicCollector(lambda: host.context.ipam, options.gc)
        if (options.tls_cert is None) != (options.tls_key is None):
            raise ConfigError("--tls-cert and --tls-key go together; pass both or neither")
        if options.request_timeout <= 0 or options.keep_alive_timeout <= 0:
            raise ConfigError("the request and idle timeouts must be positive")
        self.limits = ConnectionLimits(
            max_connections=options.max_connections or default_max_connections(),
            request_timeout=options.request_timeout,
            idle_timeout=options.keep_alive_timeout,
        )
        self.app = create_app(
            host,
            max_body_bytes=options.max_body_bytes,
            access_log=options.access_log,
            workers=options.workers,
        )
        if host.profile_routes or self.collector is not None:
            # Open the store now: a bad --ipam-db fails start-up, not every claim.
            _ = host.context.ipam
        self.api_health: ApiHealth | None = None
        if options.api_check is not None:
            source = options.gc.source if options.gc is not None else None
            self.api_health = ApiHealth.for_server(host.context.ipam, options.api_check, source)
            # A journal of another cluster refuses to start here (cluster scope).
            self.api_health.check_at_start()
            self.app.health_warnings.append(self.api_health.warnings)
        self.selectors = selectors = local_ipam_selectors(host)
        if selectors is not None:
            selectors.check(host.context.host_root)  # a typo is a WARNING at start-up
            self.app.health_warnings.append(lambda: selectors.warnings)
        self._stop_rechecks = threading.Event()
        self._recheck_thread: threading.Thread | None = None
        # Prometheus /metrics and per-request counters wrap the protocol app.
        self.metrics = ServerMetrics(host, lambda: self.collector, lambda: self.limits)
        if self.api_health is not None:
            self.metrics.registry.register(self.api_health.metrics())
        self.asgi = self.metrics.wrap(self.app)
        self.metrics_listener: MetricsListener | None = None
        if options.metrics_listen is not None:
            self.metrics_listener = MetricsListener(options.metrics_listen, self.address)
            self.asgi = self.metrics_listener.wrap(self.asgi)
        self.bound: BoundSocket | None = None
        self._server: _Uvicorn | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._finished = False

    @property
    def url(self) -> str:
        if self.bound is None:
            raise RuntimeError("the server is not listening yet")
        return self.bound.url

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT/metrics`` of ``--metrics-listen``, once bound (else ``None``)."""
        listener = self.metrics_listener
        return listener.url if listener is not None and listener.bound is not None else None

    def _prepare(self) -> _Uvicorn:
        opts = self.options
        self.bound = bind(self.address, socket_mode=opts.socket_mode)
        if self.metrics_listener is not None:
            try:
                self.metrics_listener.bind()
            except BaseException:
                self.bound.cleanup()
                raise
        if opts.tls_cert is not None and self.bound.url.startswith("http://"):
            self.bound.url = "https://" + self.bound.url.removeprefix("http://")
        if self.address.uds is None and not _is_loopback(self.address.host):
            log.warning(
                "BYODP server: listening on %s, beyond loopback; the webhook has no "
                "authentication, so anyone who can reach it can allocate and release addresses%s. "
                "Prefer a unix socket (--listen unix:///run/dranet/webhook.sock) or 127.0.0.1",
                self.bound.url,
                "" if opts.tls_cert else " and read the traffic (no --tls-cert)",
            )
        config = uvicorn.Config(
            self.asgi,
            http=protocol_class(self.limits),
            loop="auto",  # uvloop when installed
            lifespan="off",
            ws="none",  # no upgrades: the protocol answers HTTP/1.1 only
            log_config=None,
            access_log=False,
            timeout_keep_alive=math.ceil(opts.keep_alive_timeout),  # the protocol's is exact
            timeout_graceful_shutdown=opts.shutdown_timeout,
            server_header=False,
            date_header=False,
            # DRANET talks to us directly; X-Forwarded-* headers are nobody's to trust.
            proxy_headers=False,
            ssl_certfile=opts.tls_cert,
            ssl_keyfile=opts.tls_key,
        )
        self._server = _Uvicorn(config, self._started)
        return self._server

    def _started(self) -> None:
        caps = self.host.capabilities().to_wire()
        log.info(
            "BYODP server on %s: cloud=%s profile=%s profiles=%s",
            self.url,
            self.host.cloud or "none",
            self.host.profile or "none",
            ",".join(sorted(self.host.profile_routes)) or "none",
        )
        if self.metrics_url is not None:
            log.info("Prometheus metrics on %s (GET /metrics only)", self.metrics_url)
        if self.collector is not None:
            self.collector.start()
        if self.api_health is not None:
            self.api_health.start()
        if self.selectors is not None:
            self._recheck_thread = threading.Thread(
                target=self._recheck_selectors, name="ipam-range-selectors", daemon=True
            )
            self._recheck_thread.start()
        self._ready.set()
        if self.on_ready is not None:
            self.on_ready(self.url, caps)

    def _recheck_selectors(self) -> None:
        """Look for the NICs of unmatched ``--ipam-range`` selectors, off the event loop."""
        selectors = self.selectors
        while selectors is not None and not self._stop_rechecks.wait(self.options.selector_recheck):
            try:
                selectors.check(self.host.context.host_root)
            except Exception:  # a sysfs read failing must not end the checks
                log.exception("local-ipam: checking the --ipam-range selectors failed")

    def _serve(self, server: _Uvicorn) -> None:
        assert self.bound is not None
        try:
            sockets = [self.bound.sock]
            if self.metrics_listener is not None and self.metrics_listener.bound is not None:
                sockets.append(self.metrics_listener.bound.sock)
            server.run(sockets=sockets)
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self.api_health is not None:
            self.api_health.stop()
        if self.collector is not None:
            self.collector.stop()
        self._stop_rechecks.set()
        if self._recheck_thread is not None:
            self._recheck_thread.join(timeout=5.0)
        if self.bound is not None:
            self.bound.cleanup()
        if self.metrics_listener is not None:
            self.metrics_listener.cleanup()
        self.app.close()
        if self.close_host:
            self.host.close()
        log.info("BYODP server stopped")

    # --- main thread ------------------------------------------------------------

    def run(self) -> int:
        """Serve until SIGTERM or SIGINT; returns the process exit code (0)."""
        server = self._prepare()

        def request_exit(signum: int, frame: FrameType | None) -> None:
            # Before uvicorn installs its handlers, and when it re-raises the
            # signal after a graceful stop: ask for (or acknowledge) the exit.
            server.should_exit = True

        def hangup(signum: int, frame: FrameType | None) -> None:
            # A terminal closing or an operator's `kill -HUP` must not end the node's
            # webhook (the default action would, leaving the socket behind).  The log
            # goes to stderr, which needs no re-opening, so there is nothing to reload.
            log.info("BYODP server: SIGHUP received and ignored (nothing to reload)")

        previous = {
            sig: signal.signal(sig, request_exit) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, hangup)
        try:
            self._serve(server)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    # --- background thread -----------------------------------------------------

    def start(self, timeout: float = 30.0) -> WebhookServer:
        """Serve in a thread; returns once the socket accepts requests."""
        server = self._prepare()

        def target() -> None:
            try:
                self._serve(server)
            except BaseException as exc:  # reported by start()
                self._failure = exc
                self._ready.set()

        self._thread = threading.Thread(target=target, name="byodp-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._failure is not None:
            self.stop()
            raise RuntimeError(
                f"BYODP server did not start on {self.options.listen}: "
                f"{self._failure or 'timed out'}"
            )
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop: in-flight requests finish, then clean-up runs."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with contextlib.suppress(Exception):
            self._cleanup()

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
