"""``dranet-cloud serve``: the provider host as a BYODP webhook for DRANET's Go daemon.

Only ``register`` runs for other sub-commands; FastAPI and uvicorn (the
``dranet-cloud[server]`` extra) are imported when ``serve`` itself runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import ssl
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from dranet_cloud import __version__
from dranet_cloud.cli.argtypes import whole_number_type
from dranet_cloud.cli.common import add_provider_flags, host_config, seconds
from dranet_cloud.cli.gc_flags import (
    LIVE_CLAIMS_HELP,
    add_budget_flag,
    add_kubeconfig_flag,
    build_source,
    parse_grace,
    removed_older_than,
)
from dranet_cloud.cli.helptext import add_command
from dranet_cloud.host.assembly import build_host
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import resolve_db_path
from dranet_cloud.ipam.cluster.reclaimer import Reclaimer, lease_namespace
from dranet_cloud.server.collector import CollectorSettings
from dranet_cloud.server.listen import ListenAddress
from dranet_cloud.server.middleware import ACCESS_LOGGER
from dranet_cloud.toolkit.errors import ConfigError

DEFAULT_LISTEN = "unix:///run/dranet/webhook.sock"


def _octal_mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an octal mode such as 0660") from None
    if not 0 <= mode <= 0o777:
        raise argparse.ArgumentTypeError(f"{text!r} is not a permission mode (0000-0777)")
    return mode


ROLES = ("cloud", "profile")


def _roles(text: str) -> frozenset[str]:
    names = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in names if r not in ROLES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected cloud, profile or cloud,profile (the roles GET /health reports)"
        )
    return frozenset(names)


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "serve",
        """serve the provider host as a BYODP webhook for DRANET

        Answer DRANET's webhook protocol (GET /health, POST /GetDeviceAttributes,
        /GetDeviceConfig, /GetProfileConfig, /ReleaseProfileConfig) with this node's plugins and
        the built-in local-ipam profile provider. Prints one JSON line {"url", "capabilities"}
        on stdout when it accepts requests.

        dranet-cloud serve --listen unix:///run/dranet/webhook.sock
        dranet-cloud serve --ipam-range 10.0.0.0/24 --gc-interval 10m --gc-kubernetes
        dranet-cloud serve --listen 127.0.0.1:9177 --cloud-provider-hint gce --require-roles cloud
        """,
    )
    p.add_argument(
        "--listen",
        default=os.environ.get("DRANET_CLOUD_LISTEN", DEFAULT_LISTEN),
        metavar="ADDR",
        help="unix:///path/to.sock or HOST:PORT (env DRANET_CLOUD_LISTEN, "
        f"default {DEFAULT_LISTEN})",
    )
    p.add_argument(
        "--socket-mode",
        type=_octal_mode,
        default=0o660,
        metavar="MODE",
        help="permission bits of the unix socket (default 0660)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=whole_number_type(1),
        default=1 << 20,
        metavar="N",
        help="refuse request bodies larger than this with 413 (default 1048576)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=whole_number_type(0, 86400, unit="seconds"),
        default=25,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight requests may take to finish (default 25)",
    )
    p.add_argument(
        "--request-timeout",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="a connection must deliver a whole request (headers and body) within this "
        "long of its first byte, or of being accepted; one whose answers stay unread this "
        "long is closed too (default 10)",
    )
    p.add_argument(
        "--idle-timeout",
        type=seconds,
        default=60.0,
        metavar="SECONDS",
        help="close a kept-alive connection idle this long between requests (default 60)",
    )
    p.add_argument(
        "--max-connections",
        type=whole_number_type(1),
        default=None,
        metavar="N",
        help="open connections at most; at the cap a new one replaces the longest-idle one "
        "(default: half the open-file limit, at most 4096)",
    )
    p.add_argument(
        "--tls-cert",
        default=None,
        metavar="FILE",
        help="serve https with this PEM certificate chain (needs --tls-key); DRANET's client "
        "verifies it against the system CAs",
    )
    p.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key for --tls-cert")
    p.add_argument(
        "--metrics-listen",
        default=None,
        metavar="HOST:PORT",
        help="also serve GET /metrics (and nothing else) on this TCP address for Prometheus, "
        "such as 0.0.0.0:9178 (default: off; the webhook's own socket serves /metrics too)",
    )
    p.add_argument(
        "--lease-namespace",
        default=None,
        metavar="NS",
        help="with --ipam-scope cluster and --gc-kubernetes: the namespace of the Lease "
        "dranet-cloud-ipam-reclaimer that elects the one sidecar reclaiming the objects of "
        "vanished nodes (default: the pod's namespace from POD_NAMESPACE, else kube-system)",
    )
    p.add_argument(
        "--ipam-watch-jitter",
        default="5s",
        metavar="DURATION",
        help="with --ipam-scope cluster: each watch's first list starts after a random delay "
        "up to this, so a rollout of every node does not list at once (default 5s)",
    )
    p.add_argument(
        "--require-roles",
        type=_roles,
        default=None,
        metavar="ROLES",
        help="refuse to start unless this server's roles are exactly these (cloud, profile or "
        "cloud,profile): the roles DRANET's flags assume, so a manifest that sets both cannot "
        "start a sidecar that disagrees with them",
    )
    p.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="do not log one line per request",
    )
    g = p.add_argument_group(
        "IPAM garbage collection",
        "DRANET never retries a release; the server frees the addresses of claims that "
        "the Kubernetes API proves gone.",
    )
    g.add_argument(
        "--gc-interval",
        default=None,
        metavar="DURATION",
        help="reclaim leaked allocations this often (30s, 10m, 1h); needs --gc-kubernetes",
    )
    g.add_argument(
        "--gc-kubernetes",
        action="store_true",
        help="free an allocation only when the Kubernetes API proves its claim gone; "
        "watches this node's pods (needs --node-name or NODE_NAME; get, list and watch on "
        "pods, get and list on resourceclaims.resource.k8s.io, get on the kube-system "
        "namespace)",
    )
    add_kubeconfig_flag(g)
    add_budget_flag(g, "--gc-budget")
    g.add_argument(
        "--gc-grace",
        default="2m",
        metavar="DURATION",
        help="keep allocations younger than this before the evidence was taken (default 2m)",
    )
    g.add_argument("--gc-live-claims", default=None, metavar="FILE", help=LIVE_CLAIMS_HELP)
    g.add_argument(
        "--gc-unsafe-free-by-age",
        default=None,
        metavar="DURATION",
        help="UNSAFE: free every allocation older than this, live or not; a claim that runs "
        "longer loses its address to another pod",
    )
    g.add_argument("--gc-older-than", default=None, help=argparse.SUPPRESS)
    g.add_argument(
        "--adopt-cluster",
        action="store_true",
        help="the node moved to another cluster: record the API's cluster (kube-system "
        "Namespace UID) as the IPAM store's at start, instead of refusing to start (cluster "
        "scope) or freeing nothing (--gc-kubernetes) because the store recorded another one",
    )
    add_provider_flags(p, ipam=True)
    p.set_defaults(func=run)


def _duration(flag: str, text: str | None) -> timedelta | None:
    return None if text is None else parse_grace(flag, text)


def _print_ready(url: str, capabilities: dict[str, Any], metrics: str | None = None) -> None:
    doc: dict[str, Any] = {"url": url, "capabilities": capabilities}
    if metrics is not None:
        doc["metrics"] = metrics
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def require_roles(host: ProviderHost, required: frozenset[str] | None) -> None:
    """``--require-roles``: the server's roles are exactly the ones DRANET was told to use.

    DRANET's ``--profile-provider=webhook`` exits at start-up when ``/health``
    reports no profile role, and ``--cloud-provider-hint=webhook`` without a
    cloud role runs DRANET with no cloud facts and no error; a role DRANET
    was not told about is never asked for.  Refusing here names the mismatch
    in the sidecar's log before DRANET ever starts.
    """
    if required is None:
        return
    caps = host.capabilities()
    have = {
        r for r, on in (("cloud", caps.cloud_provider), ("profile", caps.profile_provider)) if on
    }
    if have == required:
        return
    dranet = {
        "cloud": "--cloud-provider-hint=webhook",
        "profile": "--profile-provider=webhook",
    }
    raise ConfigError(
        f"serve: --require-roles {','.join(sorted(required))} (DRANET runs with "
        f"{' '.join(dranet[r] for r in sorted(required))}) but this server has "
        f"{','.join(sorted(have)) or 'no role'} (cloud={host.cloud or 'none'}, "
        f"profile={host.profile or 'none'}, profiles="
        f"{','.join(sorted(host.profile_routes)) or 'none'}); deploy the manifest made for "
        "this kind of node (README, Deploying next to DRANET), or fix the cloud plugin's "
        "flags"
    )


def refuse_without_role(host: ProviderHost) -> None:
    """A server with neither role would answer every DRANET call with 400: refuse to start."""
    caps = host.capabilities()
    if not caps.cloud_provider and not caps.profile_provider:
        raise ConfigError(
            "serve: this server would have no role (no cloud plugin was detected or named and "
            "no profile provider is set); pass --cloud-provider-hint NAME for the cloud role, "
            "--ipam-range CIDR (local-ipam) or --profile-provider NAME for the profile role"
        )


def log_start(args: argparse.Namespace, host: ProviderHost) -> None:
    """One line with everything an operator checks first in a sidecar's log."""
    database = "memory (lost at exit)" if args.ipam_memory else resolve_db_path(args.ipam_db)
    sources = [
        "kubernetes" if args.gc_kubernetes else "",
        f"live claims {args.gc_live_claims}" if args.gc_live_claims else "",
        f"unsafe age {args.gc_unsafe_free_by_age}" if args.gc_unsafe_free_by_age else "",
    ]
    gc = (
        f"every {args.gc_interval} from {' and '.join(x for x in sources if x)}"
        f" grace {args.gc_grace or 'default'}"
        if args.gc_interval
        else "off"
    )
    logging.getLogger("dranet_cloud.server").info(
        "dranet-cloud %s serve on %s: cloud=%s profile=%s profiles=%s database=%s ranges=%s "
        "scope=%s gc=%s",
        __version__,
        args.listen,
        host.cloud or "none",
        host.profile or "none",
        ",".join(sorted(host.profile_routes)) or "none",
        database,
        ",".join(args.ipam_range) or "none",
        args.ipam_scope,
        gc,
    )


def run(args: argparse.Namespace) -> int:
    ListenAddress.parse(args.listen)  # a typo fails before any plugin starts
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together; pass both or neither")
    for flag, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        if path is not None and not os.access(path, os.R_OK):
            raise ConfigError(f"{flag} {path}: cannot read the file; pass a PEM file")
    if args.tls_cert is not None:
        try:  # uvicorn would fail later with a bare "[SSL] PEM lib" (exit 1)
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                args.tls_cert, args.tls_key
            )
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"--tls-cert {args.tls_cert} / --tls-key {args.tls_key}: not a PEM certificate "
                f"and its private key ({exc}); pass the server's certificate and matching key"
            ) from exc
    try:  # the optional `server` extra
        from dranet_cloud.server.runner import ServeOptions, WebhookServer
    except ImportError as exc:
        raise ConfigError(
            f"serve needs FastAPI and uvicorn ({exc}); install them with "
            "pip install './[server]' from a clone (README, Install)"
        ) from exc
    gc, close_source = _gc_settings(args)
    options = ServeOptions(
        listen=args.listen,
        socket_mode=args.socket_mode,
        max_body_bytes=args.max_body_bytes,
        gc=gc,
        shutdown_timeout=args.shutdown_timeout,
        request_timeout=args.request_timeout,
        keep_alive_timeout=args.idle_timeout,
        max_connections=args.max_connections,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        access_log=args.access_log,
        metrics_listen=args.metrics_listen,
        api_check=_api_check(args),
    )
    server_log = logging.getLogger(ACCESS_LOGGER.rpartition(".")[0])
    if server_log.getEffectiveLevel() > logging.INFO:
        server_log.setLevel(logging.INFO)  # access lines and gc results are the server's output
    jitter = _duration("--ipam-watch-jitter", args.ipam_watch_jitter)
    args.ipam_watch = True  # cluster scope: the ranges' views are watches (host_config)
    args.ipam_watch_jitter_s = jitter.total_seconds() if jitter is not None else 0.0
    reclaimer: Any = None
    try:
        host = build_host(host_config(args), check_selectors=False)  # the server checks them
        try:
            refuse_without_role(host)
            require_roles(host, args.require_roles)
            log_start(args, host)
            reclaimer = _start_reclaimer(args, host, gc)
            server = WebhookServer(
                host,
                options,
                on_ready=lambda url, caps: _print_ready(url, caps, server.metrics_url),
                close_host=False,
            )
            code: int = server.run()
        finally:
            if reclaimer is not None:
                reclaimer.stop()
            host.close()
    finally:
        close_source()
    return code


def _api_check(args: argparse.Namespace) -> Any:
    """What needs the Kubernetes API at start (``None``: nothing): cluster scope, --gc-kubernetes.

    Checked when the server opens its store: reachability, credentials and
    the store's cluster (server/api_health.py).
    """
    cluster = args.ipam_scope == "cluster"
    gc = bool(args.gc_kubernetes and args.gc_interval)
    if not (cluster or gc):
        if args.adopt_cluster:
            raise ConfigError(
                "--adopt-cluster records the Kubernetes API's cluster as the store's; it needs "
                "--ipam-scope cluster or --gc-kubernetes"
            )
        return None
    from dranet_cloud.server.api_health import ApiCheck  # the optional `server` extra

    return ApiCheck(cluster_scope=cluster, gc_kubernetes=gc, adopt=args.adopt_cluster)


def _start_reclaimer(args: argparse.Namespace, host: ProviderHost, gc: Any) -> Any:
    """In cluster scope with --gc-kubernetes: this sidecar's candidacy for the Lease
    whose holder alone reclaims the objects of vanished nodes (ipam/cluster_reclaimer.py)."""
    if getattr(args, "ipam_scope", "node") != "cluster" or gc is None or gc.source is None:
        return None
    if not getattr(args, "gc_kubernetes", False):
        return None  # a live-claims file proves claims gone only for this node's journal
    store: Any = host.context.ipam
    api = getattr(store, "api", None)
    if api is None or not hasattr(api, "get_lease"):
        return None

    reclaimer = Reclaimer(
        api,
        gc.source,
        identity=store.node,
        namespace=lease_namespace(args.lease_namespace),
        grace=gc.grace,
        interval=max(2.0, min(gc.interval, 60.0)),
        node_jitter=getattr(args, "ipam_watch_jitter_s", 0.0),
    )
    store.reclaimer = reclaimer  # /health shows whether this node holds the lease
    return reclaimer.start()


def _gc_settings(args: argparse.Namespace) -> tuple[Any, Callable[[], None]]:
    """The collector's settings from the --gc-* flags (``None`` without --gc-interval).

    Builds the Kubernetes client now, so a bad --kubeconfig fails start-up.
    """
    if args.gc_older_than is not None:
        raise ConfigError(
            removed_older_than("--gc-older-than", "--gc-kubernetes", "--gc-unsafe-free-by-age")
        )
    interval = _duration("--gc-interval", args.gc_interval)
    grace = parse_grace("--gc-grace", args.gc_grace)
    unsafe = _duration("--gc-unsafe-free-by-age", args.gc_unsafe_free_by_age)
    asked = args.gc_kubernetes or args.gc_live_claims is not None or unsafe is not None
    if interval is None:
        if asked:
            raise ConfigError(
                "--gc-kubernetes, --gc-live-claims and --gc-unsafe-free-by-age need "
                "--gc-interval DURATION"
            )
        return None, lambda: None
    if interval.total_seconds() <= 0:
        raise ConfigError(f"--gc-interval {args.gc_interval!r} must be longer than 0s")
    node = getattr(args, "node_name", None) or os.environ.get("NODE_NAME") or ""
    if args.gc_kubernetes and not node:
        # Without the node's name the only proof for a claim known by UID is a list
        # of every claim in the cluster, every run, on every node: refused.
        raise ConfigError(
            "--gc-kubernetes needs this node's Kubernetes name to watch the node's own "
            "pods: pass --node-name NAME or set NODE_NAME (in a pod, from the downward API: "
            "fieldRef spec.nodeName)"
        )
    source, close = build_source(
        what="--gc-interval",
        kubernetes=args.gc_kubernetes,
        kubeconfig=args.kubeconfig,
        live_claims=args.gc_live_claims,
        unsafe_age=unsafe,
        flags=("--gc-kubernetes", "--gc-live-claims", "--gc-unsafe-free-by-age"),
        budget=("--gc-budget", args.gc_budget),
        node=node if args.gc_kubernetes else None,
        watch=True,
        grace=grace,
        interval=interval.total_seconds(),
    )
    if hasattr(source, "find"):
        args.node_claims = source  # cluster scope names gen1 UIDs from the same view
    if unsafe is not None:
        # A flag in a manifest is easy to forget: say in every start-up log what it does.
        logging.getLogger("dranet_cloud.server").warning(
            "--gc-unsafe-free-by-age %s: every allocation older than this is freed whether its "
            "claim still runs or not, so a long-running pod's address goes to another pod; "
            "for throw-away clusters only, use --gc-kubernetes instead",
            args.gc_unsafe_free_by_age,
        )
    settings = CollectorSettings(
        interval.total_seconds(), source=source, grace=grace, unsafe_free_by_age=unsafe
    )
    return settings, close
