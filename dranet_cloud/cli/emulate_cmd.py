"""``dranet-cloud emulate <plugin>``: run a plugin's metadata emulator.

``emulate kubernetes`` runs the core's Kubernetes API emulator instead
(ResourceClaims and Nodes, for ``ipam gc --kubernetes`` and ``serve
--gc-kubernetes``); its ready line's ``env`` holds ``KUBECONFIG``, a file it
wrote and removes when it stops.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "emulate",
        help="serve a plugin's metadata emulator (or the Kubernetes API) on loopback",
        description="Serve an emulator on loopback and print one JSON line "
        '{"url", "env"} once it answers; `env` holds the variables that point '
        "dranet-cloud at it.",
    )
    p.add_argument(
        "plugin",
        help="plugin name (gce, aws, aliyun, ...), or 'kubernetes' for the API emulator",
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
    p.set_defaults(func=run)


def build_emulator(plugin: str, fixture: str | None, listen: str, faults: str | None) -> Any:
    from ..plugins import PluginRegistry

    reg = PluginRegistry()
    name = reg.resolve(plugin, flag="emulate", allow_none=False)
    if name is None or not reg.implements(name, "emulator"):
        with_one = ", ".join(n for n in reg.names() if reg.implements(n, "emulator"))
        raise ConfigError(f"plugin {plugin!r} ships no emulator (plugins with one: {with_one})")
    path = Path(fixture) if fixture else None
    if path is not None and not path.is_file():
        raise ConfigError(f"--fixture {fixture}: no such file")
    try:
        emu = reg.call(name, "emulator", fixture=path, listen=listen, faults=faults)
    except (ValueError, OSError) as exc:
        raise ConfigError(f"emulator for {name}: {exc}") from exc
    if emu is None:
        raise ConfigError(f"plugin {name} returned no emulator")
    return emu


def build_kubernetes_emulator(fixture: str | None, listen: str, faults: str | None) -> Any:
    from ..testing.kubernetes import kubernetes_emulator

    if fixture is not None and not Path(fixture).is_file():
        raise ConfigError(f"--fixture {fixture}: no such file")
    try:
        return kubernetes_emulator(fixture, listen=listen, faults=faults)
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
    emu = build_emulator(args.plugin, args.fixture, args.listen, args.faults)
    _start(emu, args)
    sys.stdout.write(json.dumps({"url": emu.url, "env": emu.env}) + "\n")
    sys.stdout.flush()
    try:
        emu.serve_forever()
    finally:
        emu.stop()
    return 0


def _run_kubernetes(args: argparse.Namespace) -> int:
    kube = build_kubernetes_emulator(args.fixture, args.listen, args.faults)
    _start(kube, args)
    try:
        emu = kube.emulator
        sys.stdout.write(json.dumps({"url": emu.url, "env": emu.env}) + "\n")
        sys.stdout.flush()
        emu.serve_forever()
    finally:
        kube.stop()
    return 0
