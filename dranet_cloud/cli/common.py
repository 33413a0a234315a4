"""Flags every provider-using command shares, and the host configuration they stand for."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dranet_cloud.cli.argtypes import seconds_type
from dranet_cloud.cli.gc_flags import add_kubeconfig_flag
from dranet_cloud.contract.context import ProviderOptions
from dranet_cloud.host.assembly import HostConfig, IpamConfig
from dranet_cloud.kube import load_config
from dranet_cloud.node.hostroot import HOST_ROOT_ENV, HostRoot
from dranet_cloud.node.nic import resolve_nic
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.hwaddr import normalize_mac
from dranet_cloud.wire.claims import ClaimReference, resolve_claim
from dranet_cloud.wire.models import (
    DeviceIdentifiers,
    NetworkConfig,
    describe_validation_error,
    parse_user_config,
)

MAX_SECONDS = 86400.0


# For deadlines and timeouts: above 0 (nan, inf and negatives refused), at most a day.
seconds = seconds_type(MAX_SECONDS)


FLOOR_ENV = "DRANET_CLOUD_DRANET_ATTRIBUTE_FLOOR"


def _floor(text: str) -> int:
    """An argparse type for ``--dranet-attribute-floor`` (range checked by the options)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number (--dranet-attribute-floor, or {FLOOR_ENV})"
        ) from None


def add_provider_flags(p: argparse.ArgumentParser, *, ipam: bool = False) -> None:
    g = p.add_argument_group("provider selection (DRANET's flags)")
    g.add_argument(
        "--cloud-provider-hint",
        default=os.environ.get("DRANET_CLOUD_PROVIDER_HINT", ""),
        metavar="NAME",
        help=(
            "cloud plugin to use: an installed plugin's name or alias (DRANET's spellings "
            "work; see `dranet-cloud plugins`), webhook, or none; empty = auto-detect"
        ),
    )
    g.add_argument(
        "--profile-provider",
        default=os.environ.get("DRANET_CLOUD_PROFILE_PROVIDER", "cloud"),
        metavar="NAME",
        help="'cloud' (the cloud plugin's profile role), a plugin name, or 'none'",
    )
    g.add_argument(
        "--webhook-url",
        default=os.environ.get("DRANET_CLOUD_WEBHOOK_URL"),
        metavar="URL",
        help="http://, https:// or unix:///path of a BYODP webhook",
    )
    g.add_argument(
        "--host-root",
        default=None,
        metavar="DIR",
        help="read /sys and /proc under DIR (env DRANET_CLOUD_HOST_ROOT, default /)",
    )
    g.add_argument(
        "--disable-plugin",
        action="append",
        default=[],
        metavar="NAME",
        help="do not load the installed plugin NAME (its entry-point name; repeatable), "
        "as if it were not installed",
    )
    g.add_argument(
        "--probe-metadata",
        action="store_true",
        help="when DMI is unreadable, probe metadata servers anyway",
    )
    g.add_argument(
        "--metadata-deadline",
        type=seconds,
        default=15.0,
        metavar="SECONDS",
        help="how long to wait for an explicit provider's metadata (default 15)",
    )
    g.add_argument(
        "--probe-timeout",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="per-probe timeout during auto-detection (default 1)",
    )
    g.add_argument(
        "--dranet-attribute-floor",
        type=_floor,
        # A string default goes through ``type`` too, so a bad variable exits 2.
        default=os.environ.get(FLOOR_ENV, "0") or "0",
        metavar="N",
        help="assume DRANET publishes at least N attributes per device (0-32; default 0: "
        "count them from sysfs); only ever lowers what providers may add",
    )
    g.add_argument(
        "--node-name",
        default=None,
        metavar="NAME",
        help="this node's Kubernetes name, for plugins that read the Node object "
        "(default: $NODE_NAME, the downward API convention)",
    )
    if "--kubeconfig" not in p._option_string_actions:  # serve has it among its --gc-* flags
        add_kubeconfig_flag(g)
    g.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="plugin setting, e.g. aws.allow_imdsv1=true (repeatable)",
    )
    if ipam:
        add_ipam_flags(p)


def add_ipam_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("node-local IPAM")
    g.add_argument(
        "--ipam-db",
        default=None,
        metavar="PATH",
        help="SQLite file (env DRANET_CLOUD_IPAM_DB, default /var/lib/dranet-cloud/ipam.db)",
    )
    g.add_argument(
        "--ipam-db-create",
        action="store_true",
        help="start an empty store where none can be trusted: create the database's missing "
        "parent directory, and replace a database file that is empty, has no IPAM schema, or "
        "is missing although its marker or -wal file shows a store lived there (without it "
        "each is an error: a mistyped path or a lost file must not silently forget the "
        "node's allocations)",
    )
    g.add_argument(
        "--ipam-allow-static-outside-ranges",
        action="store_true",
        help="let local-ipam reserve a claim's static addresses outside every --ipam-range "
        "(default: refused with 400 naming the address and the ranges)",
    )
    g.add_argument(
        "--ipam-memory", action="store_true", help="keep allocations in memory only (lost at exit)"
    )
    g.add_argument(
        "--ipam-range",
        action="append",
        default=[],
        metavar="[SELECTOR=]RANGE",
        help="enable the built-in local-ipam profile provider with this range: CIDR or "
        "START-END for every device, or for one NIC with a selector: IFNAME=RANGE (an "
        "interface name or a DRA device name such as pci-0000-00-05-0), mac=MAC=RANGE, "
        "pci=0000:00:05.0=RANGE; one range per family each; repeatable",
    )
    add_scope_flag(g)
    g.add_argument(
        "--ipam-profile",
        default="local-ipam",
        metavar="NAME",
        help="profile name whose claims local-ipam serves (default local-ipam)",
    )


# The variable --ipam-scope defaults from.
_SCOPE_ENV = "DRANET_CLOUD_IPAM_SCOPE"


def add_scope_flag(g: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--ipam-scope",
        choices=("node", "cluster"),
        default=os.environ.get(_SCOPE_ENV) or "node",
        help="node: addresses are unique on this node only, so the range must be one no "
        "other node uses; cluster: each address is an IPAddress object on the Kubernetes "
        "API, unique across the cluster (needs --node-name or NODE_NAME and API access: "
        f"--kubeconfig, KUBECONFIG or the pod's service account) (env {_SCOPE_ENV}, "
        "default node)",
    )


def cluster_scope(args: argparse.Namespace) -> tuple[str, str | None] | None:
    """``(node name, kubeconfig)`` when ``--ipam-scope cluster``, else ``None``.

    Refuses what cluster scope cannot work without, naming the flag: a
    node name, an API configuration, a journal on disk.
    """
    if getattr(args, "ipam_scope", "node") != "cluster":
        return None
    node = getattr(args, "node_name", None) or os.environ.get("NODE_NAME") or ""
    if not node:
        raise ConfigError(
            "--ipam-scope cluster needs this node's Kubernetes name: pass --node-name NAME or "
            "set NODE_NAME (in a pod, from the downward API: fieldRef spec.nodeName)"
        )
    if getattr(args, "ipam_memory", False):
        raise ConfigError(
            "--ipam-scope cluster keeps its journal on disk (an intent must survive a crash); "
            "drop --ipam-memory"
        )
    kubeconfig = getattr(args, "kubeconfig", None)

    try:
        load_config(kubeconfig)
    except ConfigError as exc:
        raise ConfigError(f"--ipam-scope cluster needs the Kubernetes API: {exc}") from None
    return node, kubeconfig


def parse_settings(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def host_root_dir(args: argparse.Namespace) -> str | None:
    """``--host-root`` (or its variable), refused when it is not a directory.

    A mistyped root has no DMI files and no NICs, so the node would quietly
    run with provider ``none``; an error names the flag instead.
    """

    root = args.host_root or os.environ.get(HOST_ROOT_ENV) or None
    if root is not None and not os.path.isdir(root):
        source = "--host-root" if args.host_root else HOST_ROOT_ENV
        raise ConfigError(
            f"{source} {root}: no such directory; pass the directory where the node's /sys "
            "and /proc are mounted (in a pod: a hostPath mount), or leave it unset for /"
        )
    return root


def provider_options(args: argparse.Namespace) -> ProviderOptions:
    """The plugins' options from the flags (each ``--set`` is checked by the host's registry)."""

    return ProviderOptions(
        webhook_url=args.webhook_url,
        metadata_deadline=args.metadata_deadline,
        probe_timeout=args.probe_timeout,
        dranet_attribute_floor=args.dranet_attribute_floor,
        node_name=args.node_name,
        kubeconfig=getattr(args, "kubeconfig", None),
        settings=parse_settings(args.settings),
    )


def host_config(args: argparse.Namespace) -> HostConfig:
    """The host the flags describe, refusing a flag no host could start with (naming it).

    ``serve`` adds ``ipam_watch``, ``ipam_watch_jitter_s`` and ``node_claims``
    to ``args``: cluster scope's views are watches there, fed by its pods watch.
    """
    return HostConfig(  # in this order: the first flag refused is the one reported
        cloud_provider_hint=args.cloud_provider_hint,
        profile_provider=args.profile_provider,
        host_root=host_root_dir(args),
        probe_metadata=args.probe_metadata,
        options=provider_options(args),
        disabled_plugins=tuple(args.disable_plugin),
        ipam=IpamConfig(
            ranges=tuple(args.ipam_range),
            profile=args.ipam_profile,
            allow_static_outside_ranges=args.ipam_allow_static_outside_ranges,
            db=args.ipam_db,
            memory=args.ipam_memory,
            create=args.ipam_db_create,
            cluster=cluster_scope(args),  # checked now: a bad flag fails at start, not at a claim
            watch=getattr(args, "ipam_watch", False),
            watch_jitter_s=float(getattr(args, "ipam_watch_jitter_s", 0.0)),
            node_claims=getattr(args, "node_claims", None),
        )
        if hasattr(args, "ipam_db")
        else None,
    )


def parse_device(spec: str, host_root: HostRoot | None = None) -> DeviceIdentifiers:
    """``eth1``, ``pci-0000-00-05-0`` or ``name=eth1,mac=42:01:..,pci=0000:00:05.0``.

    Any subset works (``mac=..`` alone, ``pci=..`` alone): the host resolves
    the NIC by MAC, then PCI address, then name.  With ``host_root`` the
    identifiers are completed from the NIC they resolve to.
    """

    fields: dict[str, str] = {}
    if "=" not in spec:
        fields["name"] = spec
    else:
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in ("name", "mac", "pci"):
                raise ConfigError(
                    f"--device {spec!r}: expected name=IF[,mac=MAC][,pci=ADDR] or a bare name"
                )
            fields[key] = value.strip()
    name = fields.get("name", "")
    mac, pci = fields.get("mac"), fields.get("pci")
    if mac:
        try:
            mac = normalize_mac(mac)
        except ValueError as exc:
            raise ConfigError(f"--device {spec!r}: {exc}") from None
    device = DeviceIdentifiers(name=name, mac_address=mac, pci_address=pci)
    if host_root is not None:
        nic = resolve_nic(host_root, device)
        if nic.found:
            return nic.identifiers()
    return device


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse a repeated key, as DRANET's strict decoding of claim configs does."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(
                f"duplicate field {key!r} (DRANET rejects claim configs that repeat one)"
            )
        out[key] = value
    return out


def read_config(path: str | None) -> NetworkConfig | None:
    if not path:
        return None
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--config {path}: {exc}") from None
    try:
        doc = json.loads(raw, object_pairs_hook=_no_duplicate_fields)
    except ValueError as exc:
        raise ConfigError(f"--config {path}: not JSON: {exc}") from None
    try:
        return parse_user_config(doc)
    except ValidationError as exc:
        raise ConfigError(
            f"--config {path}: not a valid NetworkConfig: {describe_validation_error(exc)}"
        ) from None


MAX_CLAIM_BYTES = 1 << 20


def read_claim(args: argparse.Namespace) -> ClaimReference:
    """The claim of ``profile get|release``: ``--claim FILE|-`` and/or ``--claim-uid``.

    ``--claim`` takes a ResourceClaim as ``kubectl get resourceclaim -o json``
    prints it (what gen2 DRANET sends); ``--claim-uid`` is the gen1 form.
    Both given must name the same claim.
    """

    path = getattr(args, "claim", None)
    doc = None
    if path:
        if path == "-" and getattr(args, "config", None) == "-":
            raise ConfigError("--claim - and --config - cannot both read stdin; use a file")
        try:
            if path == "-":
                raw = sys.stdin.read(MAX_CLAIM_BYTES + 1)
            else:
                with open(path, encoding="utf-8") as f:
                    raw = f.read(MAX_CLAIM_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"--claim {path}: {exc}") from None
        if len(raw) > MAX_CLAIM_BYTES:
            raise ConfigError(f"--claim {path}: over {MAX_CLAIM_BYTES} bytes")
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"--claim {path}: not JSON: {exc}") from None
    try:
        return resolve_claim(getattr(args, "claim_uid", None), doc)
    except ValueError as exc:
        raise ConfigError(
            f"{exc} (pass --claim FILE with `kubectl get resourceclaim NAME -o json`, or "
            "--claim-uid UID)"
        ) from None
