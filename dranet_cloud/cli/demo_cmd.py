"""``dranet-cloud demo``: the whole job against a built-in emulated cloud.

It starts the plugin's metadata emulator (CKS's: the Kubernetes API) on
loopback, writes a fake host root whose DMI names that cloud, detects,
describes every NIC, gets a profile for an IPVLAN claim twice and for a
second claim, releases both, and says at each step what happened.  It
checks its own results (a retry returns the same addresses, two claims
differ, release frees) and exits non-zero otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dranet_cloud.cli.emulate_cmd import build_emulator
from dranet_cloud.cli.helptext import add_command, add_listing_help
from dranet_cloud.cli.output import add_output_flag, device_key, human, natural_key
from dranet_cloud.host.assembly import HostConfig, IpamConfig, build_host
from dranet_cloud.host.attribute_budget import dranet_devices
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.wire.models import parse_user_config

DEFAULT_DEMO_PLUGIN = "gce"


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "demo",
        """run the main job against an emulated cloud on loopback

        Start a plugin's metadata emulator on loopback, write its sample node, then detect,
        describe every NIC, get and release claims' profiles, checking each step; exit 1 when a
        check fails. --help lists the plugins and variants installed.

        dranet-cloud demo                               # the emulated GCE a3-megagpu-8g
        dranet-cloud demo --plugin aws --variant trn2
        dranet-cloud demo --plugin azure -o json
        """,
        add_help=False,
    )
    add_listing_help(p, runnable_listing)
    p.add_argument(
        "--plugin",
        default=DEFAULT_DEMO_PLUGIN,
        metavar="NAME",
        help=f"which plugin's emulator and sample node to use (default {DEFAULT_DEMO_PLUGIN})",
    )
    p.add_argument(
        "--variant",
        default=None,
        metavar="NAME",
        help="sample host variant of the plugin (default: its default sample)",
    )
    add_output_flag(p)
    p.set_defaults(func=run)


def runnable(registry: Any) -> dict[str, list[str]]:
    """Plugin name -> its sample variants, for every installed plugin the demo can run.

    A plugin the demo runs ships a sample host and an emulator; its variants come from its
    ``sample_variants`` hook (``default`` first: ``--variant`` left out).
    """
    out: dict[str, list[str]] = {}
    for name in registry.names():
        if not (registry.implements(name, "sample_host") and registry.implements(name, "emulator")):
            continue
        named = []
        if registry.implements(name, "sample_variants"):
            named = [str(v) for v in registry.call(name, "sample_variants") or []]
        out[name] = ["default", *(v for v in named if v != "default")]
    return out


def runnable_listing() -> str:
    """The ``demo --help`` lines naming each runnable plugin and its variants."""

    table = runnable(PluginRegistry())
    if not table:
        return "no installed plugin ships a sample node (see `dranet-cloud plugins`)"
    width = max(len(name) for name in table)
    lines = [f"  {name.ljust(width)}  {', '.join(variants)}" for name, variants in table.items()]
    return "\n".join(["installed plugins (--plugin) and their variants (--variant):", *lines])


class _Report:
    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode
        self.steps: list[dict[str, Any]] = []
        self.failed = False

    def step(self, title: str, detail: str = "", data: Any = None, ok: bool = True) -> None:
        self.steps.append({"step": title, "ok": ok, "detail": detail, "data": data})
        self.failed |= not ok
        if not self.json_mode:
            mark = "ok " if ok else "FAIL"
            sys.stdout.write(f"[{mark}] {title}\n")
            for line in detail.splitlines():
                sys.stdout.write(f"       {line}\n")
            sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    report = _Report(args.output == "json")
    reg = PluginRegistry()
    name = reg.resolve(args.plugin, flag="--plugin", allow_none=False)
    if name is None or not reg.implements(name, "sample_host"):
        raise ConfigError(f"plugin {args.plugin!r} ships no sample host for a demo")
    with tempfile.TemporaryDirectory(prefix="dranet-cloud-demo-") as tmp:
        tmpdir = Path(tmp)
        sample = reg.call(name, "sample_host", dest=tmpdir / "host", variant=args.variant)
        if sample is None:
            which = (
                f"sample host variant {args.variant!r}" if args.variant else "default sample host"
            )
            variants = ", ".join(runnable(reg).get(name, []))
            raise ConfigError(
                f"plugin {name} has no {which} (its variants: {variants}; "
                "`dranet-cloud demo --help` lists every plugin's)"
            )
        fixture = str(sample.fixture) if sample.fixture is not None else None
        emu = build_emulator(name, fixture, "127.0.0.1:0", None)
        emu.start()
        # CKS's "metadata server" is the Kubernetes API (its Node object).
        served = "Kubernetes API" if getattr(emu, "name", "") == "kubernetes" else "metadata"
        try:
            report.step(f"started the {name} {served} emulator", f"{emu.url}  env {human(emu.env)}")
            report.step("wrote a sample node", f"{sample.description}\nhost root {sample.root}")
            ipam = IpamConfig(db=str(tmpdir / "ipam.db"))
            host = build_host(
                HostConfig(host_root=str(sample.root), env=emu.env, ipam=ipam), start=False
            )
            t0 = time.perf_counter()
            det = host.start()
            report.step(
                "detected the environment",
                f"provider {det.provider} in {det.elapsed_ms:.2f} ms ({human(det.evidence)}); "
                f"instance loaded in {(time.perf_counter() - t0) * 1000:.1f} ms, "
                f"{len(emu.log)} {served} request(s)",
                det.to_json(),
                ok=det.provider == name,
            )
            devices = sample_devices(host)
            lines, described = [], []
            dropped: dict[str, list[str]] = {}  # attribute -> devices it was dropped on
            for dev in devices:
                with _budget_said_by_the_demo():
                    attrs = host.device_attributes(dev)
                for attr in host.attribute_budget(dev)["dropped"]:
                    dropped.setdefault(str(attr), []).append(dev.name or dev.pci_address or "")
                cfg = host.device_config(dev)
                described.append(
                    {
                        "device": dev.to_wire(),
                        "attributes": {k: v.to_wire() for k, v in attrs.items()},
                        "config": cfg.to_wire() if cfg else None,
                    }
                )
                mtu = cfg.interface.mtu if cfg else None
                label = dev.name or dev.pci_address or ""
                lines.append(
                    f"{label:<12} {dev.mac_address or '':<18} mtu={human(mtu)} "
                    f"routes={len(cfg.routes or []) if cfg else 0} "
                    f"neighbors={len(cfg.neighbors or []) if cfg else 0} "
                    f"attributes={len(attrs)}"
                )
            lines += [
                f"budget: {attr} dropped on {', '.join(sorted(on, key=natural_key))} "
                "(over the room DRANET's own attributes leave; `describe` shows each NIC's budget)"
                for attr, on in dropped.items()
            ]
            report.step(
                f"described {len(devices)} NICs",
                "\n".join(lines),
                described,
                # Some device gets attributes or a config; a bond member, a NIC
                # the metadata does not know, or a cloud without device configs
                # (CKS, OCI) may rightly have no config.
                ok=bool(devices) and any(d["config"] or d["attributes"] for d in described),
            )
            claim_dev = next((d for d in devices if d.name == sample.claim_device), None)
            if sample.own_address_claim is not None:
                _own_address_claims(report, host, devices, *sample.own_address_claim)
            if sample.claim_device is None and "profile" not in reg.roles(name):
                report.step("no claims to make", f"plugin {name} has no profile role")
            elif sample.claim_device is None and sample.own_address_claim is not None:
                report.step("no IPVLAN claims to make", f"plugin {name} has no subinterface ranges")
            elif claim_dev is None:
                report.step(
                    "no NIC to claim", f"sample names {human(sample.claim_device)}", ok=False
                )
            else:
                user = parse_user_config(
                    {"profile": f"{name}-subinterface", "interface": {"type": "IPVLAN"}}
                )
                a1 = host.network_config(claim_dev, "claim-a", user).interface.addresses or []
                a2 = host.network_config(claim_dev, "claim-a", user).interface.addresses or []
                report.step(
                    f"claim-a on {claim_dev.name}: IPVLAN subinterface addresses",
                    f"first call {human(a1)}\nretry      {human(a2)} "
                    f"({'same' if a1 == a2 else 'DIFFERENT'})",
                    {"first": a1, "retry": a2},
                    ok=bool(a1) and a1 == a2,
                )
                b = host.network_config(claim_dev, "claim-b", user).interface.addresses or []
                report.step(
                    f"claim-b on {claim_dev.name}",
                    f"{human(b)} ({'distinct from' if not set(a1) & set(b) else 'SHARES WITH'} "
                    "claim-a)",
                    b,
                    ok=bool(b) and not set(a1) & set(b),
                )
                held = [f"{a.owner} {a.address}" for a in host.context.ipam.list()]
                # A webhook allocates in its own server: the node store stays empty.
                report.step(
                    "node IPAM store holds",
                    "\n".join(held) or "nothing (the provider keeps its own state)",
                    held,
                    ok=len(held) in (0, len(a1) + len(b)),
                )
                r1 = host.release(claim_dev, "claim-a")
                r2 = host.release(claim_dev, "claim-b")
                left = host.context.ipam.list()
                report.step(
                    "released both claims",
                    f"release ok: {human(r1 and r2)}; allocations left: {len(left)}",
                    ok=r1 and r2 and not left,
                )
            host.close()
            report.step(f"{served} requests served by the emulator", str(len(emu.log)))
        finally:
            emu.stop()
    if report.json_mode:
        json.dump({"ok": not report.failed, "steps": report.steps}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(
            "demo " + ("FAILED\n" if report.failed else "finished: all checks passed\n")
        )
    return 1 if report.failed else 0


def _own_address_claims(report: Any, host: Any, devices: list[Any], nic: str, profile: str) -> None:
    """Two claims of a NIC whose profile gives it its own address: the same one."""

    dev = next((d for d in devices if d.name == nic), None)
    if dev is None:
        report.step("no NIC to claim", f"sample names {nic}", ok=False)
        return
    user = parse_user_config({"profile": profile})
    a1 = host.network_config(dev, "claim-a", user).interface.addresses or []
    a2 = host.network_config(dev, "claim-a", user).interface.addresses or []
    b = host.network_config(dev, "claim-b", user).interface.addresses or []
    report.step(
        f"claims on {nic} with profile {profile}: the NIC's own address",
        f"claim-a {human(a1)}, retry {human(a2)}, claim-b {human(b)}",
        {"first": a1, "retry": a2, "other": b},
        ok=bool(a1) and a1 == a2 == b,
    )
    ok = host.release(dev, "claim-a") and host.release(dev, "claim-b")
    report.step("released both claims", f"release ok: {human(ok)}", ok=ok)


@contextmanager
def _budget_said_by_the_demo() -> Iterator[None]:
    """The attribute budget's WARNINGs held back: the describe step reports the drops.

    On a sample node a drop is expected (an InfiniBand HCA carries 23 of
    DRANET's own 32 attributes), and a WARNING per NIC in a passing demo
    reads as a failure; the step lists each dropped attribute and its NICs.
    """

    budget_log = logging.getLogger("dranet_cloud.host.attribute_budget")

    def below_warning(record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING

    budget_log.addFilter(below_warning)
    try:
        yield
    finally:
        budget_log.removeFilter(below_warning)


def sample_devices(host: Any) -> list[Any]:
    """Every device DRANET would publish on the sample node, PCI-only ones too, in natural order."""

    devs: list[Any] = dranet_devices(host.context.host_root)
    return sorted(devs, key=lambda d: device_key(d.name, d.pci_address))
