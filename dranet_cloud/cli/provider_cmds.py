"""``detect``, ``describe`` and ``profile get|release``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from dranet_cloud.cli.common import (
    add_provider_flags,
    host_config,
    host_root_dir,
    parse_device,
    provider_options,
    read_claim,
    read_config,
)
from dranet_cloud.cli.helptext import add_command
from dranet_cloud.cli.output import (
    add_output_flag,
    device_key,
    emit_document,
    emit_json,
    emit_pairs,
    emit_table,
    human,
)
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.contract.settings import check_settings
from dranet_cloud.host.assembly import build_host, describe_document
from dranet_cloud.host.attribute_limits import MAX_ATTRIBUTE_VALUES, MAX_ATTRIBUTES
from dranet_cloud.host.detection import NO_PROVIDER, DetectionResult, detect
from dranet_cloud.host.plugin_manager import NONE_NAMES, PluginRegistry
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import local_nics

T = TypeVar("T")


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "detect",
        """decide which cloud plugin this node uses

        Decide which cloud plugin this node uses, as `serve` does at start-up: local
        evidence (DMI, sysfs) first, a metadata probe only when asked or named. A named or
        detected provider must load its instance, or the command fails.

        dranet-cloud detect
        dranet-cloud detect --cloud-provider-hint gce -o json
        dranet-cloud detect --host-root /host --probe-metadata
        """,
    )
    add_provider_flags(p)
    add_output_flag(p)
    p.set_defaults(func=run_detect)

    p = add_command(
        sub,
        "describe",
        """attributes and config of the node's NICs

        Show what DRANET would get for this node's NICs: the instance, and per device its
        attributes, its config (MTU, routes, neighbors) and its attribute budget.

        dranet-cloud describe
        dranet-cloud describe --cloud-provider-hint gce --device eth1 -o json
        dranet-cloud describe --device name=eth1,mac=42:01:c0:a8:01:02
        """,
    )
    add_provider_flags(p)
    add_output_flag(p)
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="SPEC",
        help="a NIC by interface or DRA device name (eth1, pci-0000-00-05-0), or "
        "name=..,mac=..,pci=.. with any of the three (repeatable); default: every NIC "
        "under <host-root>/sys/class/net and every network PCI function without a netdev",
    )
    p.set_defaults(func=run_describe)

    prof = add_command(
        sub,
        "profile",
        """run the per-claim precedence chain

        Run the per-claim precedence chain (cloud baseline, profile provider, the claim's own
        config) for one device, as DRANET does when a pod starts or stops.

        dranet-cloud profile get --device eth1 --claim-uid 7c2d --ipam-range 10.0.0.0/24
        dranet-cloud profile release --device eth1 --claim-uid 7c2d --ipam-range 10.0.0.0/24
        """,
    )
    psub = prof.add_subparsers(dest="profile_command", metavar="ACTION")
    psub.required = True
    for action, text, func in (
        (
            "get",
            """print the final NetworkConfig for a claim

            Print the final NetworkConfig DRANET would apply for a claim on a device, in gen2
            spelling; a profile provider allocates what the claim asks for (a retry gets the
            same answer).

            dranet-cloud profile get --device eth1 --claim-uid 7c2d --ipam-range 10.0.0.0/24
            dranet-cloud profile get --device pci-0000-00-05-0 --claim claim.json -o json
            dranet-cloud profile get --device mac=42:01:c0:a8:01:02 --claim - --config cfg.json
            """,
            run_profile_get,
        ),
        (
            "release",
            """release what a claim's profile allocated

            Release what a claim's profile allocated on a device (exit 5 when the provider
            could not); releasing again is a success.

            dranet-cloud profile release --device eth1 --claim-uid 7c2d --ipam-range 10.0.0.0/24
            dranet-cloud profile release --device eth1 --claim claim.json -o json
            """,
            run_profile_release,
        ),
    ):
        p = add_command(psub, action, text)
        add_provider_flags(p, ipam=True)
        add_output_flag(p)
        p.add_argument(
            "--device",
            required=True,
            metavar="SPEC",
            help="eth1, pci-0000-00-05-0, or name=..,mac=..,pci=.. with any of the three",
        )
        p.add_argument(
            "--claim-uid",
            default=None,
            metavar="UID",
            help="the claim's UID (as gen1 DRANET sends)",
        )
        p.add_argument(
            "--claim",
            default=None,
            metavar="FILE",
            help="the ResourceClaim JSON as `kubectl get resourceclaim NAME -o json` prints it "
            "(as gen2 DRANET sends), '-' for stdin; with --claim-uid both must agree",
        )
        p.add_argument(
            "--config",
            default=None,
            metavar="FILE",
            help="the claim's NetworkConfig JSON (user intent), '-' for stdin",
        )
        p.set_defaults(func=func)


def run_detect(args: argparse.Namespace) -> int:
    result = _auto_detect(args)
    if result is None or result.provider != NO_PROVIDER:
        # A provider was named or found: prove it starts (its instance loads).
        host = build_host(host_config(args), start=False)
        try:
            result = host.start(detection=result)
        finally:
            host.close()
    data = {
        "provider": result.provider,
        "explicit": result.explicit,
        "evidence": result.evidence,
        "elapsed_ms": round(result.elapsed_ms, 3),
    }
    if args.output == "json":
        emit_json(data)
    else:
        emit_pairs([(k, v) for k, v in data.items()])
        if result.failures:
            for name, why in result.failures.items():
                sys.stdout.write(f"  not {name}: {why}\n")
    return 0


def _auto_detect(args: argparse.Namespace) -> DetectionResult | None:
    """Auto-detection without a host; ``None`` when a provider was named.

    A bare-metal node is the common case of ``detect`` and needs only local
    evidence.  It is exactly the first step of ``ProviderHost.start``; when it
    picks a provider the caller hands the result to the host, which loads the
    instance, so a provider that cannot start is reported as before (``none``
    when auto-detected, exit 3 when requested) without confirming the metadata
    twice.
    """

    root = host_root_dir(args)
    hint = (args.cloud_provider_hint or "").strip()
    profile = (args.profile_provider or "cloud").strip().lower()
    if hint or profile not in ({"cloud"} | NONE_NAMES):
        return None
    registry = PluginRegistry(blocked=args.disable_plugin)
    options = provider_options(args)
    if options.settings:
        check_settings(registry, options.settings)
    context = ProviderContext(
        host_root=HostRoot.from_env(root), options=options, env=dict(os.environ)
    )
    return detect(registry, context, probe_metadata=args.probe_metadata)


def _describe_data(args: argparse.Namespace) -> dict[str, Any]:
    host = build_host(host_config(args))
    try:
        root = host.context.host_root
        if args.device:
            devices = [parse_device(s, root) for s in args.device]
        else:  # every NIC, in natural order (rdma2 before rdma10)
            nics = [nic.identifiers() for nic in local_nics(root)]
            devices = sorted(nics, key=lambda d: device_key(d.name, d.pci_address))
        return describe_document(host, devices)
    finally:
        host.close()


def run_describe(args: argparse.Namespace) -> int:
    data = _describe_data(args)
    if args.output == "json":
        emit_json(data)
        return 0
    sys.stdout.write(f"provider: {data['provider']}\n\n")
    rows = []
    for d in data["devices"]:
        dev, cfg = d["device"], d["config"] or {}
        iface = cfg.get("interface", {})
        attrs = ", ".join(
            f"{k.rpartition('/')[2]}={human(next(iter(v.values())))}"
            for k, v in d["attributes"].items()
        )
        budget = d["budget"]
        rows.append(
            (
                dev["name"] or dev.get("pci_address", ""),
                dev.get("mac_address", ""),
                iface.get("mtu", ""),
                len(cfg.get("routes", []) or []),
                len(cfg.get("neighbors", []) or []),
                f"{budget['used']}/{budget['providers']}+{budget['dranet']}"
                + (f" -{len(budget['dropped'])}" if budget["dropped"] else ""),
                f"{budget['values_used']}/{budget['provider_values']}+{budget['dranet_values']}",
                attrs,
            )
        )
    emit_table(
        ("DEVICE", "MAC", "MTU", "ROUTES", "NEIGHBORS", "BUDGET", "VALUES", "ATTRIBUTES"), rows
    )
    sys.stdout.write(
        f"\nBUDGET: provider attributes used/allowed + DRANET's own (a device carries at "
        f"most {MAX_ATTRIBUTES}); -N: dropped, lowest-ranked first. VALUES: the same for "
        f"attribute values (at most {MAX_ATTRIBUTE_VALUES}; a list counts each value)\n"
    )
    return 0


def _on_claim(args: argparse.Namespace, act: Callable[..., T]) -> tuple[Any, Any, T]:
    """``act(host, device, claim, config)`` with ``profile get|release``'s flags, then close.

    Returns the device and the claim with ``act``'s result, for the report.
    """

    host = build_host(host_config(args))
    try:
        device = parse_device(args.device, host.context.host_root)
        claim = read_claim(args)
        return device, claim, act(host, device, claim, read_config(args.config))
    finally:
        host.close()


def run_profile_get(args: argparse.Namespace) -> int:
    _, _, final = _on_claim(
        args, lambda host, dev, claim, cfg: host.network_config(dev, claim.uid, cfg, claim=claim)
    )
    if args.output == "json":
        emit_json(final.to_wire())
    else:
        emit_document(final.to_wire())
    return 0


def run_profile_release(args: argparse.Namespace) -> int:
    device, claim, ok = _on_claim(
        args, lambda host, dev, claim, cfg: host.release(dev, claim.uid, cfg, claim=claim)
    )
    data = {"device": device.to_wire(), "claim_uid": claim.uid, "released": ok}
    if args.output == "json":
        emit_json(data)
    else:
        emit_pairs([("device", device.label()), ("claim_uid", claim.uid), ("released", ok)])
    return 0 if ok else 5
