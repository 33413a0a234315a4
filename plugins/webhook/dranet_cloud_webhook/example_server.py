"""An example BYODP webhook server, standard library only.

It is both a reference for operators writing their own webhook and the real
peer the tests talk to (over TCP, TLS and a unix socket).  It serves:

* ``GET /health``: ``{"cloudProvider": true, "profileProvider": true}``;
* ``POST /GetDeviceAttributes``: a few ``example.com/*`` attributes;
* ``POST /GetDeviceConfig``: an MTU for every NIC;
* ``POST /GetProfileConfig``: an in-memory per-(device, claim) IPAM, one
  IPv4 and one IPv6 address per claim, idempotent for kubelet retries; static
  addresses asked for in the claim's config are reserved, and one already
  held by another claim is a 409;
* ``POST /ReleaseProfileConfig``: frees the claim's addresses, 200 even when
  there is nothing to free.

Switches make it misbehave the ways real webhooks do (bad JSON, hyphenated
attribute names, slow answers, forced statuses, capabilities off, broken
``/health``).  ``GET /debug/calls`` counts requests per path, so tests can
prove a role that was not declared is never called.

Run: ``python -m dranet_cloud_webhook.example_server --listen 127.0.0.1:0``
(or ``unix:///run/webhook.sock``); it prints ``{"url": ...}`` when ready.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 1 << 20
_KNOWN_STATUSES = frozenset(s.value for s in HTTPStatus)
CAPABILITY_PATHS = {
    "/GetDeviceAttributes": "cloud",
    "/GetDeviceConfig": "cloud",
    "/GetProfileConfig": "profile",
    "/ReleaseProfileConfig": "profile",
}


@dataclass
class Behaviour:
    """What the example webhook does; every misbehaviour is opt-in."""

    cloud: bool = True
    profile: bool = True
    health: str = "ok"  # ok | down | not-json | body
    health_body: str | None = None  # raw /health body when health == "body"
    bad_json: bool = False  # every POST answers a malformed JSON body
    hyphen_attr: bool = False  # add dra.net/webhook-attr (rejected by the API server)
    bad_attr_value: bool = False  # add an entry that is not a DeviceAttribute
    invalid_config: bool = False  # GetProfileConfig answers addresses as a string, not a list
    slow: float = 0.0  # seconds to wait before answering a POST
    status_profile: int | None = None  # force this status on GetProfileConfig
    status_release: int | None = None  # force this status on ReleaseProfileConfig
    profiles: frozenset[str] | None = None  # known profile names (None = any)
    mtu: int = 8896
    rack: str = "rack-7"
    ipv4_pool: str = "10.99.0.0/24"
    ipv6_pool: str = "fd00:99::/64"


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"


def _json(status: int, doc: Any) -> Answer:
    return Answer(status, json.dumps(doc, separators=(",", ":")).encode())


def _text(status: int, message: str) -> Answer:
    # Go's http.Error answers plain text with a trailing newline; do the same.
    return Answer(status, (message + "\n").encode(), "text/plain; charset=utf-8")


@dataclass
class ExampleWebhook:
    """The webhook's logic, independent of any HTTP server."""

    behaviour: Behaviour = field(default_factory=Behaviour)
    calls: Counter[str] = field(default_factory=Counter)
    requests: list[tuple[str, Any]] = field(default_factory=list)
    _allocations: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    _used: dict[str, tuple[str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- dispatch -----------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes) -> Answer:
        path = path.split("?", 1)[0]
        with self._lock:
            self.calls[path] += 1
        if method == "GET" and path == "/health":
            return self._health()
        if method == "GET" and path == "/debug/calls":
            with self._lock:
                return _json(200, dict(self.calls))
        if method == "GET" and path == "/debug/allocations":
            with self._lock:
                return _json(200, {f"{d}/{c}": a for (d, c), a in self._allocations.items()})
        role = CAPABILITY_PATHS.get(path)
        if role is None:
            return _text(404, f"example webhook: no such endpoint {method} {path}")
        if method != "POST":
            return _text(405, f"example webhook: {path} takes POST")
        try:
            doc = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return _text(400, f"example webhook: {path}: request body is not JSON")
        with self._lock:
            self.requests.append((path, doc))
        if self.behaviour.slow > 0:
            time.sleep(self.behaviour.slow)
        if not getattr(self.behaviour, role):
            return _text(404, f"example webhook: the {role} role is disabled")
        if self.behaviour.bad_json:
            return Answer(200, b'{"interface": {"mtu": 9000,')
        if path == "/GetDeviceAttributes":
            return self._attributes(doc)
        if path == "/GetDeviceConfig":
            return self._device_config(doc)
        if path == "/GetProfileConfig":
            return self._profile(doc)
        return self._release(doc)

    # -- handlers ------------------------------------------------------------

    def _health(self) -> Answer:
        b = self.behaviour
        if b.health == "down":
            return _text(503, "example webhook: backend IPAM is not ready")
        if b.health == "not-json":
            return Answer(200, b"OK", "text/plain")
        if b.health == "body":
            return Answer(200, (b.health_body or "").encode())
        return _json(200, {"cloudProvider": b.cloud, "profileProvider": b.profile})

    def _attributes(self, doc: Any) -> Answer:
        if _device_key(doc) is None:
            return _text(400, _NOT_A_DEVICE)
        attrs: dict[str, Any] = {
            "example.com/rack": {"string": self.behaviour.rack},
            "example.com/linkSpeedGbps": {"int": 200},
            "example.com/rdma": {"bool": True},
        }
        if doc.get("name"):  # empty for a PCI function with no netdev (EFA)
            attrs["example.com/nicName"] = {"string": doc["name"]}
        if self.behaviour.hyphen_attr:
            attrs["dra.net/webhook-attr"] = {"string": "set-by-webhook"}
        if self.behaviour.bad_attr_value:
            attrs["example.com/broken"] = {"int": 1, "string": "two values"}
        return _json(200, attrs)

    def _device_config(self, doc: Any) -> Answer:
        if _device_key(doc) is None:
            return _text(400, _NOT_A_DEVICE)
        return _json(200, {"interface": {"mtu": self.behaviour.mtu}})

    def _profile(self, doc: Any) -> Answer:
        b = self.behaviour
        request = _profile_request(doc)
        if isinstance(request, Answer):
            return request
        device, claim, config = request
        if b.status_profile is not None:
            return _text(
                b.status_profile,
                f"example webhook: GetProfileConfig forced to answer {b.status_profile} "
                f"for claim {claim}",
            )
        profile = config.get("profile") or ""
        if b.profiles is not None and profile not in b.profiles:
            return _text(404, f"example webhook: unknown profile {profile!r}")
        if b.invalid_config:
            return _json(200, {"interface": {"addresses": "10.99.0.9/32"}})
        interface = config.get("interface") or {}
        static = interface.get("addresses") or []
        with self._lock:
            owner = (device, claim)
            held = self._allocations.get(owner)
            if held is None:
                result = self._reserve(owner, static) if static else self._allocate(owner)
                if isinstance(result, Answer):
                    return result
                held = self._allocations[owner] = result
        return _json(200, {"interface": {"addresses": list(held)}})

    def _reserve(self, owner: tuple[str, str], addresses: Sequence[str]) -> list[str] | Answer:
        wanted: list[str] = []
        for raw in addresses:
            try:
                addr = ipaddress.ip_interface(raw)
            except ValueError:
                return _text(400, f"example webhook: static address {raw!r} is not a CIDR")
            host = f"{addr.ip}/{addr.max_prefixlen}"
            holder = self._used.get(host)
            if holder is not None and holder != owner:
                return _text(
                    409,
                    f"example webhook: static address {host} is already used by claim "
                    f"{holder[1]} on {holder[0]}",
                )
            wanted.append(host)
        for host in wanted:
            self._used[host] = owner
        # Answer the addresses exactly as the claim wrote them: DRANET
        # de-duplicates addresses by exact string, so 10.99.0.200/24 in the
        # claim and /32 in the answer would become two addresses.
        return list(addresses)

    def _allocate(self, owner: tuple[str, str]) -> list[str] | Answer:
        out: list[str] = []
        for pool in (self.behaviour.ipv4_pool, self.behaviour.ipv6_pool):
            net = ipaddress.ip_network(pool)
            for offset in range(2, min(net.num_addresses - 1, 1 << 16)):
                host = f"{net.network_address + offset}/{net.max_prefixlen}"
                if host not in self._used:
                    break
            else:
                for h in out:
                    del self._used[h]
                return _text(409, f"example webhook: pool {pool} is exhausted")
            self._used[host] = owner
            out.append(host)
        return out

    def _release(self, doc: Any) -> Answer:
        if self.behaviour.status_release is not None:
            return _text(
                self.behaviour.status_release,
                f"example webhook: ReleaseProfileConfig forced to answer "
                f"{self.behaviour.status_release}",
            )
        request = _profile_request(doc)
        if isinstance(request, Answer):
            return request
        device, claim, _ = request
        with self._lock:
            for addr in self._allocations.pop((device, claim), []):
                self._used.pop(_host(addr), None)
        return _json(200, {})

    def allocations(self) -> dict[tuple[str, str], list[str]]:
        with self._lock:
            return {k: list(v) for k, v in self._allocations.items()}


_NOT_A_DEVICE = (
    "example webhook: body is not DeviceIdentifiers (a mac_address, pci_address or name "
    "is required)"
)


def _device_key(doc: Any) -> str | None:
    """MAC, else PCI address, else name: DRANET's name for a NIC changes between
    generations and calls (and is empty for a device with no netdev), so it
    is the last thing to key allocations by."""
    if not isinstance(doc, dict):
        return None
    for key, prefix in (("mac_address", "mac:"), ("pci_address", "pci:"), ("name", "name:")):
        value = doc.get(key)
        if isinstance(value, str) and value.strip():
            return prefix + value.strip().lower()
    return None


def _host(addr: str) -> str:
    """``10.0.0.5/24`` -> ``10.0.0.5/32``: the key an address is held under."""
    ip = ipaddress.ip_interface(addr)
    return f"{ip.ip}/{ip.max_prefixlen}"


def _claim_uid(doc: dict[str, Any]) -> str | Answer:
    """The claim UID of either generation: ``claim.metadata.uid`` (gen2) or ``claim_uid``."""
    uid = doc.get("claim_uid")
    claim = doc.get("claim")
    if claim is not None:
        meta = claim.get("metadata") if isinstance(claim, dict) else None
        from_claim = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(from_claim, str) or not from_claim:
            return _text(400, "example webhook: claim.metadata.uid is required")
        if uid and uid != from_claim:
            return _text(400, "example webhook: claim_uid differs from claim.metadata.uid")
        uid = from_claim
    if not isinstance(uid, str) or not uid:
        return _text(400, "example webhook: claim (gen2) or claim_uid (gen1) is required")
    return uid


def _profile_request(doc: Any) -> tuple[str, str, dict[str, Any]] | Answer:
    if not isinstance(doc, dict):
        return _text(400, "example webhook: body must be a JSON object")
    key = _device_key(doc.get("device"))
    if key is None:
        return _text(400, _NOT_A_DEVICE)
    claim = _claim_uid(doc)
    if isinstance(claim, Answer):
        return claim
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        return _text(400, "example webhook: config must be a NetworkConfig object")
    return key, claim, config


# --- HTTP serving ------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a production webhook would
    timeout = 60  # an idle kept-alive connection is dropped after a minute
    server: _Server

    def setup(self) -> None:
        super().setup()  # the connection's timeout is set: a silent client ends here
        self.handshake_failed = False
        if isinstance(self.connection, ssl.SSLSocket):
            # The TLS handshake runs in this connection's thread, not in accept():
            # a client that connects and never speaks must not stall the server
            # (accept, and so shutdown, waited on such a handshake forever).
            try:
                self.connection.do_handshake()
            except OSError:  # a refused certificate, a plain-HTTP client, a timeout
                self.handshake_failed = True

    def handle(self) -> None:
        if not self.handshake_failed:
            super().handle()

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        length = self.headers.get("Content-Length")
        body = b""
        if length:
            if not length.isdigit() or int(length) > MAX_REQUEST_BYTES:
                self._write(_text(413, "example webhook: request body too large"))
                self.close_connection = True
                return
            body = self.rfile.read(int(length))
        elif self.command == "POST" and self.headers.get("Transfer-Encoding"):
            self._write(_text(411, "example webhook: send a Content-Length"))
            self.close_connection = True
            return
        self._write(self.server.webhook.handle(self.command, self.path, body))

    def _write(self, answer: Answer) -> None:
        # Head and body go out in ONE write: two small writes on a kept-alive
        # TCP connection meet Nagle's algorithm and the peer's delayed ACK,
        # which adds ~40 ms to every answer.
        self.log_request(answer.status)
        phrase = HTTPStatus(answer.status).phrase if answer.status in _KNOWN_STATUSES else ""
        head = (
            f"{self.protocol_version} {answer.status} {phrase}\r\n"
            f"Server: {self.version_string()}\r\n"
            f"Date: {self.date_time_string()}\r\n"
            f"Content-Type: {answer.content_type}\r\n"
            f"Content-Length: {len(answer.body)}\r\n"
        )
        if self.close_connection:
            head += "Connection: close\r\n"
        self.wfile.write(head.encode("latin-1") + b"\r\n" + answer.body)

    def address_string(self) -> str:
        addr = self.client_address
        return str(addr[0]) if isinstance(addr, tuple) and addr else "unix"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("example webhook: %s - %s", self.address_string(), format % args)


class _Server(socketserver.BaseServer):
    webhook: ExampleWebhook


class _TcpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    webhook: ExampleWebhook

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN (a DNS query); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _TcpServer6(_TcpServer):
    address_family = socket.AF_INET6


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    webhook: ExampleWebhook


def parse_tcp_listen(listen: str) -> tuple[str, int]:
    """``127.0.0.1:PORT``, ``[::1]:PORT`` or ``localhost:PORT``: loopback only.

    A node-local webhook has no business on a network interface; bind a unix
    socket or loopback, and let the daemon on the same node reach it.
    """
    host, sep, port_s = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not port_s.isdigit():
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT or unix:///path")
    if host in ("", "localhost"):
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"--listen {listen!r}: the example webhook binds loopback or a unix socket"
        )
    return host, int(port_s)


@dataclass(frozen=True)
class TlsServerFiles:
    cert: str
    key: str
    client_ca: str | None = None  # require client certificates signed by this CA


class ExampleServer:
    """The example webhook on a TCP port or a unix socket, served from a thread.

    ``listen`` is ``HOST:PORT`` (port 0 picks a free one) or ``unix:///path``.
    """

    def __init__(
        self,
        webhook: ExampleWebhook | None = None,
        listen: str = "127.0.0.1:0",
        tls: TlsServerFiles | None = None,
    ) -> None:
        self.webhook = webhook or ExampleWebhook()
        self.listen = listen
        self.tls = tls
        self._server: _TcpServer | _UnixServer | None = None
        self._thread: threading.Thread | None = None
        self._socket_path: str | None = None
        self.url = ""

    def start(self) -> ExampleServer:
        server: _TcpServer | _UnixServer
        if self.listen.startswith("unix://"):
            path = self.listen[len("unix://") :]
            if os.path.exists(path):
                os.unlink(path)  # a stale socket from a previous run
            server = _UnixServer(path, _Handler)
            self._socket_path = path
            self.url = f"unix://{path}"
        else:
            host, port = parse_tcp_listen(self.listen)
            server_class = _TcpServer6 if ":" in host else _TcpServer
            server = server_class((host, port), _Handler)
            bound_port = int(server.server_address[1])
            scheme = "https" if self.tls else "http"
            shown = f"[{host}]" if ":" in host else host
            self.url = f"{scheme}://{shown}:{bound_port}"
            if self.tls:
                ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                ctx.load_cert_chain(self.tls.cert, self.tls.key)
                if self.tls.client_ca:
                    ctx.verify_mode = ssl.CERT_REQUIRED
                    ctx.load_verify_locations(self.tls.client_ca)
                server.socket = ctx.wrap_socket(
                    server.socket, server_side=True, do_handshake_on_connect=False
                )
        server.webhook = self.webhook
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._socket_path and os.path.exists(self._socket_path):
            os.unlink(self._socket_path)

    def __enter__(self) -> ExampleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def behaviour_from_args(args: argparse.Namespace) -> Behaviour:
    health = "ok"
    if args.health_down:
        health = "down"
    elif args.health_not_json:
        health = "not-json"
    elif args.health_body is not None:
        health = "body"
    return Behaviour(
        cloud=not args.no_cloud,
        profile=not args.no_profile,
        health=health,
        health_body=args.health_body,
        bad_json=args.bad_json,
        hyphen_attr=args.hyphen_attr,
        bad_attr_value=args.bad_attr_value,
        invalid_config=args.invalid_config,
        slow=args.slow,
        status_profile=args.status_profile,
        status_release=args.status_release,
        profiles=frozenset(args.profiles.split(",")) if args.profiles else None,
        mtu=args.mtu,
        ipv4_pool=args.ipv4_pool,
        ipv6_pool=args.ipv6_pool,
    )


def _pool(text: str) -> str:
    """An argparse type: a pool CIDR exactly (``10.99.0.1/24`` names the network it meant)."""
    try:
        return str(ipaddress.ip_network(text.strip()))
    except ValueError as exc:
        if "host bits set" not in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
        meant = ipaddress.ip_network(text.strip(), strict=False)
        raise argparse.ArgumentTypeError(
            f"{text} has host bits set: did you mean {meant}?"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Example BYODP webhook for dranet-cloud")
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT or unix:///path.sock")
    p.add_argument("--no-cloud", action="store_true", help="declare cloudProvider=false")
    p.add_argument("--no-profile", action="store_true", help="declare profileProvider=false")
    health = p.add_mutually_exclusive_group()
    health.add_argument("--health-down", action="store_true", help="/health answers 503")
    health.add_argument("--health-not-json", action="store_true", help="/health answers 'OK'")
    health.add_argument("--health-body", help="/health answers this raw body with 200")
    p.add_argument("--bad-json", action="store_true", help="POST answers are malformed JSON")
    p.add_argument(
        "--hyphen-attr", action="store_true", help="add the invalid name dra.net/webhook-attr"
    )
    p.add_argument(
        "--bad-attr-value", action="store_true", help="add an entry that is not an attribute"
    )
    p.add_argument(
        "--invalid-config", action="store_true", help="profile answers a config Go cannot decode"
    )
    p.add_argument("--slow", type=float, default=0.0, metavar="SECONDS", help="delay POSTs")
    p.add_argument("--status-profile", type=int, help="force this status on GetProfileConfig")
    p.add_argument("--status-release", type=int, help="force this status on Release")
    p.add_argument("--profiles", help="comma-separated known profile names (default: any)")
    p.add_argument("--mtu", type=int, default=8896)
    p.add_argument("--ipv4-pool", type=_pool, default="10.99.0.0/24")
    p.add_argument("--ipv6-pool", type=_pool, default="fd00:99::/64")
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--tls-key", help="private key of --tls-cert (PEM)")
    p.add_argument("--tls-client-ca", help="require client certificates signed by this CA")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    tls = None
    if args.tls_cert:
        tls = TlsServerFiles(args.tls_cert, args.tls_key or args.tls_cert, args.tls_client_ca)
    server = ExampleServer(ExampleWebhook(behaviour_from_args(args)), args.listen, tls).start()
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sys.stdout.write(json.dumps({"url": server.url}) + "\n")
    sys.stdout.flush()
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
