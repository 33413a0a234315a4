"""``dranet-cloud emulate <plugin>``: run a plugin's metadata emulator.

``emulate kubernetes`` runs the core's Kubernetes API emulator instead
(ResourceClaims and Nodes for ``ipam gc --kubernetes`` and ``serve
--gc-kubernetes``, IPAddress objects for the cluster address scope, the
``kube-system`` Namespace whose UID names the cluster); its ready line's
``env`` holds ``KUBECONFIG``, a file it wrote and removes when it stops.
``--latency S`` adds S seconds to every request (any emulator);
``--api-faults SPEC`` plans the Kubernetes emulator's own faults
(``cut-watches=3`` among them); ``--bookmark-interval S`` is how often its
watches get a BOOKMARK.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dranet_cloud.cli.argtypes import seconds_type
from dranet_cloud.cli.helptext import add_command, add_listing_help
from dranet_cloud.contract.hookspecs import Emulator
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.testing.kubernetes import kubernetes_emulator
from dranet_cloud.toolkit.errors import ConfigError


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "emulate",
        """serve a plugin's metadata emulator (or the Kubernetes API) on loopback

        Serve an emulator on loopback and print one JSON line {"url", "env"} once it answers;
        `env` holds the variables that point dranet-cloud at it.

        dranet-cloud emulate gce                          # a random loopback port
        dranet-cloud emulate aws --listen 127.0.0.1:8080 --faults unavailable-for=3
        dranet-cloud emulate kubernetes --latency 0.002   # the Kubernetes API emulator
        """,
        add_help=False,
    )
    add_listing_help(p, emulator_listing)
    p.add_argument(
        "plugin",
        help="an installed plugin with an emulator (listed below), or 'kubernetes' for the API "
        "emulator",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="ADDR",
        help="127.0.0.1:PORT, [::1]:PORT or unix:///path (default 127.0.0.1:0)",
    )
    p.add_argument(
        "--fixture",
        default=None,
        metavar="FILE",
        help="JSON metadata tree replacing the built-in sample instance; for kubernetes, "
        "a `kubectl get resourceclaims,nodes -A -o json` List",
    )
    p.add_argument(
        "--faults",
        default=None,
        metavar="SPEC",
        help="fault injection, e.g. 'unavailable-for=3' or 'status=503,503,200'",
    )
    p.add_argument(
        "--latency",
        type=seconds_type(60, zero=True),
        default=0.0,
        metavar="SECONDS",
        help="add this many seconds to every request (e.g. 0.002 for a 2 ms API round trip)",
    )
    p.add_argument(
        "--api-faults",
        default=None,
        metavar="SPEC",
        help="kubernetes only: 'fail=create:503x3;fail=list:429;lose-reply=create:2;"
        "cut-watches=3' (planned Status failures per verb; creates committed whose reply is "
        "lost; every open watch cut every 3 s)",
    )
    p.add_argument(
        "--bookmark-interval",
        type=seconds_type(3600),
        default=None,
        metavar="SECONDS",
        help="kubernetes only: how often a watch that allows bookmarks gets a BOOKMARK "
        "event (default 60)",
    )
    p.add_argument(
        "--cluster-uid",
        default=None,
        metavar="UID",
        help="kubernetes only: the kube-system Namespace's UID (the cluster's identity); "
        "default a new random one",
    )
    p.set_defaults(func=run)


def with_emulator(registry: Any) -> list[str]:
    """The installed plugins that ship a metadata emulator."""
    return [n for n in registry.names() if registry.implements(n, "emulator")]


def emulator_listing() -> str:
    """The ``emulate --help`` line naming every emulator this installation can serve."""
    names = with_emulator(PluginRegistry())
    return (
        f"installed emulators (PLUGIN): {', '.join(names) or 'none'}; "
        "and kubernetes (the Kubernetes API emulator, part of the core)"
    )


def build_emulator(plugin: str, fixture: str | None, listen: str, faults: str | None) -> Emulator:
    reg = PluginRegistry()
    name = reg.resolve(plugin, flag="emulate", allow_none=False)
    if name is None or not reg.implements(name, "emulator"):
        with_one = ", ".join(with_emulator(reg))
        raise ConfigError(f"plugin {plugin!r} ships no emulator (plugins with one: {with_one})")
    path = Path(fixture) if fixture else None
    if path is not None and not path.is_file():
        raise ConfigError(f"--fixture {fixture}: no such file")
    try:
        emu: Emulator | None = reg.call(
            name, "emulator", fixture=path, listen=listen, faults=faults
        )
    except (ValueError, OSError) as exc:
        raise ConfigError(f"emulator for {name}: {exc}") from exc
    if emu is None:
        raise ConfigError(f"plugin {name} returned no emulator")
    return emu


def build_kubernetes_emulator(
    fixture: str | None,
    listen: str,
    faults: str | None,
    *,
    latency: float = 0.0,
    api_faults: str | None = None,
    cluster_uid: str | None = None,
    bookmark_interval: float | None = None,
) -> Any:
    if fixture is not None and not Path(fixture).is_file():
        raise ConfigError(f"--fixture {fixture}: no such file")
    try:
        return kubernetes_emulator(
            fixture,
            listen=listen,
            faults=faults,
            latency=latency,
            api_faults=api_faults,
            cluster_uid=cluster_uid,
            bookmark_interval=60.0 if bookmark_interval is None else bookmark_interval,
        )
    except (ValueError, OSError) as exc:
        raise ConfigError(f"emulator for kubernetes: {exc}") from exc


def _start(emu: Any, args: argparse.Namespace) -> None:
    try:
        emu.start()
    except OSError as exc:
        # Most often a port another process holds: say which and how to pick one.
        raise ConfigError(
            f"emulate {args.plugin}: cannot listen on {args.listen} ({exc.strerror or exc}); "
            "stop what uses it or pick a free address, e.g. --listen 127.0.0.1:0"
        ) from None


def run(args: argparse.Namespace) -> int:
    if args.plugin == "kubernetes":
        return _run_kubernetes(args)
    for flag, value in (
        ("--api-faults", args.api_faults),
        ("--cluster-uid", args.cluster_uid),
        ("--bookmark-interval", args.bookmark_interval),
    ):
        if value is not None:
            raise ConfigError(f"{flag} is for `emulate kubernetes` only")
    emu = build_emulator(args.plugin, args.fixture, args.listen, args.faults)
    if args.latency:
        emu.faults.delay = args.latency
    _start(emu, args)
    sys.stdout.write(json.dumps({"url": emu.url, "env": emu.env}) + "\n")
    sys.stdout.flush()
    try:
        emu.serve_forever()
    finally:
        emu.stop()
    return 0


def _run_kubernetes(args: argparse.Namespace) -> int:
    kube = build_kubernetes_emulator(
        args.fixture,
        args.listen,
        args.faults,
        latency=args.latency,
        api_faults=args.api_faults,
        cluster_uid=args.cluster_uid,
        bookmark_interval=args.bookmark_interval,
    )
    _start(kube, args)
    try:
        emu = kube.emulator
        sys.stdout.write(json.dumps({"url": emu.url, "env": emu.env}) + "\n")
        sys.stdout.flush()
        emu.serve_forever()
    finally:
        kube.stop()
    return 0
