"""Flags shared by ``ipam gc`` and ``serve --gc-*``: where proof that a claim is gone comes from.

Both read durations (``--grace``, ``--gc-interval``) with :func:`parse_duration`,
which lives here so that neither command module imports the other.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from datetime import timedelta

from dranet_cloud.ipam.node.reclaim import (
    COMPLETE_MARKER,
    DEFAULT_GRACE,
    ClaimsFile,
    ClaimSource,
    KubernetesClaims,
)
from dranet_cloud.ipam.node_claims import NodeClaims
from dranet_cloud.kube import KubeClient
from dranet_cloud.toolkit.errors import ConfigError

COMPLETE_MARKER_HELP = COMPLETE_MARKER

KUBECONFIG_HELP = (
    "kubeconfig file for the Kubernetes API (default: $KUBECONFIG, else the pod's service account)"
)
LIVE_CLAIMS_HELP = (
    "air-gapped nodes: a file proving which claims live, either `kubectl get resourceclaims "
    f"-A -o json` output or one claim UID a line ending with the line {COMPLETE_MARKER_HELP!r} "
    "('-' for stdin); an empty, truncated or unmarked file frees nothing"
)


DEFAULT_BUDGET = "60s"
MAX_START_JITTER = 30.0  # seconds: the pods informer of `serve` starts within this
FIRST_LIST_JITTER = 600.0  # seconds: the first complete list for unnamed UID-only rows

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_kubeconfig_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", default=None, help=KUBECONFIG_HELP)


def add_budget_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str) -> None:
    parser.add_argument(
        flag,
        default=DEFAULT_BUDGET,
        metavar="DURATION",
        help="time for every API call of one run, cluster check included (default "
        f"{DEFAULT_BUDGET}); claims are proven and freed in batches, so a run that runs out "
        "keeps what it freed and the next run goes on",
    )


def removed_older_than(flag: str, proof_flag: str, unsafe_flag: str) -> str:
    """The message for the old age flags, which freed running claims' addresses."""
    return (
        f"{flag} was removed: age alone frees the address of a claim that simply runs long. "
        f"Use {proof_flag} (addresses are freed only when the API proves the claim gone; "
        f"the grace period protects new claims), or, knowingly, {unsafe_flag} DURATION"
    )


def build_source(
    *,
    what: str,
    kubernetes: bool,
    kubeconfig: str | None,
    live_claims: str | None,
    unsafe_age: timedelta | None,
    flags: tuple[str, str, str] = ("--kubernetes", "--live-claims", "--unsafe-free-by-age"),
    budget: tuple[str, str] = ("--budget", DEFAULT_BUDGET),
    adopt: bool = False,
    node: str | None = None,
    watch: bool = False,
    grace: timedelta | None = None,
    interval: float | None = None,
) -> tuple[ClaimSource | None, Callable[[], None]]:
    """The claim source the flags ask for and a function that closes it.

    ``flags`` name the Kubernetes, file and age flags of the calling command,
    ``budget`` its run-budget flag and value; ``adopt`` lets the API's
    cluster replace the one the store recorded.  Exactly one source must be
    given; ``None`` is returned for age alone.

    With ``node`` (this node's Kubernetes name) the Kubernetes source is
    :class:`~dranet_cloud.ipam.node_claims.NodeClaims`, the claims of this
    node's pods: with ``watch`` (the server) a pods informer, started by the
    collector with a start-up jitter of up to ``interval`` (at most 30 s), so
    a DaemonSet rollout does not list at once; without it (``ipam gc``) one
    list of the node's pods per run.  ``grace`` is the runs' grace period.
    """
    chosen = [
        flag
        for flag, given in zip(
            flags, (kubernetes, live_claims is not None, unsafe_age is not None), strict=True
        )
        if given
    ]
    if len(chosen) > 1:
        raise ConfigError(
            f"{what}: {' and '.join(chosen)} exclude each other; pick one source of proof"
        )
    if not chosen:
        raise ConfigError(
            f"{what}: say how to prove claims gone: {flags[0]} (the Kubernetes API; "
            f"--kubeconfig FILE outside a pod) or, air-gapped, {flags[1]} FILE; an address "
            "is freed only when its claim is proven gone"
        )
    if live_claims is not None:
        return ClaimsFile(live_claims), lambda: None
    if not kubernetes:
        return None, lambda: None

    budget_flag, budget_text = budget
    seconds = parse_grace(budget_flag, budget_text).total_seconds()
    if seconds <= 0:
        raise ConfigError(f"{budget_flag} {budget_text!r} must be longer than 0s")
    client = KubeClient(kubeconfig)
    if not node:
        source = KubernetesClaims(client, run_timeout=seconds, budget_flag=budget_flag, adopt=adopt)
        return source, client.close

    spread = min(interval or 0.0, MAX_START_JITTER) if watch else 0.0
    view = NodeClaims(
        client,
        node,
        watch=watch,
        grace=DEFAULT_GRACE if grace is None else grace,
        run_timeout=seconds,
        budget_flag=budget_flag,
        adopt=adopt,
        initial_jitter=spread,
        # After a rollout every node with rows from before this version lists
        # the claims once: spread those lists over ten minutes.
        list_jitter=FIRST_LIST_JITTER if watch else 0.0,
    )

    def close() -> None:
        try:
            view.stop()
        finally:
            client.close()

    return view, close


def parse_duration(text: str) -> timedelta:
    """``30s``, ``10m``, ``2h``, ``7d`` or a sum such as ``1h30m``."""
    raw = text.strip().lower()
    pos, total = 0, 0.0
    while pos < len(raw):
        match = _DURATION_PART.match(raw, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not raw or pos != len(raw):
        raise ConfigError(
            f"ipam gc: {text!r} is not a duration; use a number and a unit s, m, h or d "
            "(30s, 10m, 2h, 7d, 1h30m)"
        )
    return timedelta(seconds=total)


def parse_grace(flag: str, text: str) -> timedelta:
    """``text`` of the duration flag ``flag``; an error names the flag."""
    try:
        return parse_duration(text)
    except ConfigError:
        raise ConfigError(
            f"{flag} {text!r}: not a duration; use a number and a unit s, m, h or d "
            "(30s, 10m, 2h, 7d, 1h30m)"
        ) from None
