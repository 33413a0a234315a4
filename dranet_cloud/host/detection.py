"""Local-first environment detection.

DRANET probes clouds one after another over the network with 5-second
timeouts, so a bare-metal node waits ~20 s to learn it is on no cloud.  Here
every plugin first looks at the node's own files (DMI, a configured URL);
only plugins with evidence are confirmed over the network, concurrently and
under one deadline.  With no evidence there is no network I/O at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from dranet_cloud.contract.confirm import NOT_THIS_ENVIRONMENT
from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.contract.hookspecs import CONFIGURED_EVIDENCE
from dranet_cloud.host.plugin_manager import PluginRegistry

log = logging.getLogger(__name__)

NO_PROVIDER = "none"


@dataclass
class DetectionResult:
    """What auto-detection decided, and why."""

    provider: str
    explicit: bool
    evidence: str
    elapsed_ms: float
    # plugin -> local evidence; plugin -> why it was not confirmed
    candidates: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _local_candidates(registry: PluginRegistry, context: ProviderContext) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in registry.with_role("cloud"):
        if not registry.implements(name, "local_evidence"):
            continue
        try:
            evidence = registry.call(name, "local_evidence", context=context)
        except Exception as exc:
            log.warning("plugin %s: local evidence check failed: %s", name, exc)
            continue
        if evidence:
            found[name] = str(evidence)
    return found


def _confirm(
    registry: PluginRegistry, name: str, context: ProviderContext, timeout: float
) -> str | None:
    if not registry.implements(name, "confirm_environment"):
        return "no confirmation hook; local evidence accepted"
    result = registry.call(name, "confirm_environment", context=context, timeout=timeout)
    return str(result) if result else None


def _ordered(candidates: list[str], confirmed: dict[str, str]) -> str | None:
    """The best-ranked confirmed candidate (``candidates`` is in rank order)."""
    for name in candidates:
        if name in confirmed:
            return name
    return None


def detect(
    registry: PluginRegistry, context: ProviderContext, *, probe_metadata: bool = False
) -> DetectionResult:
    """Pick the environment's cloud plugin, or ``none``."""
    start = time.perf_counter()
    candidates = _local_candidates(registry, context)
    probing_blind = False
    if not candidates and probe_metadata and not context.host_root.dmi_readable():
        probing_blind = True
        # DMI is hidden (some containers): the operator opted in to probing.
        candidates = {
            n: "DMI unreadable; probing because --probe-metadata was given"
            for n in registry.with_role("cloud")
            if registry.implements(n, "confirm_environment")
        }
    if not candidates:
        return DetectionResult(
            NO_PROVIDER,
            False,
            "no local evidence of any installed plugin",
            (time.perf_counter() - start) * 1000,
        )

    # Hardware evidence (DMI) outranks configuration (a webhook URL).
    order = sorted(candidates, key=lambda n: (candidates[n].startswith(CONFIGURED_EVIDENCE), n))
    timeout = context.options.probe_timeout
    confirmed: dict[str, str] = {}
    failures: dict[str, str] = {}

    def record(name: str, answer: Callable[[], str | None]) -> None:
        """File ``name`` under confirmed or failures by what its confirmation gave."""
        try:
            got = answer()
        except Exception as exc:
            failures[name] = str(exc)
            return
        if got:
            confirmed[name] = got
        else:
            failures[name] = NOT_THIS_ENVIRONMENT

    if len(order) == 1:
        name = order[0]
        record(name, lambda: _confirm(registry, name, context, timeout))
    else:
        # Only a node with evidence for several plugins pays for the thread pool.
        pool = ThreadPoolExecutor(max_workers=len(order), thread_name_prefix="detect")
        futures = {pool.submit(_confirm, registry, n, context, timeout): n for n in order}
        deadline = start + context.options.detect_deadline
        pending = set(futures)
        while pending:
            done, pending = wait(
                pending,
                timeout=max(0.0, deadline - time.perf_counter()),
                return_when=FIRST_COMPLETED,
            )
            if not done:
                break
            for fut in done:
                record(futures[fut], fut.result)
            # The best-ranked candidate answered: no need to wait for the rest.
            best = _ordered(order, confirmed)
            if best is not None and all(
                n in confirmed or n in failures for n in order[: order.index(best)]
            ):
                break
        best = _ordered(order, confirmed)
        for fut in pending:
            failures.setdefault(
                futures[fut],
                f"not awaited: {best} ranks higher and was confirmed"
                if best is not None
                else "no answer before the detection deadline",
            )
        pool.shutdown(wait=False, cancel_futures=True)

    chosen = _ordered(order, confirmed)
    for name, why in failures.items():
        # Evidence that goes unconfirmed is worth an operator's attention
        # (a firewalled metadata server, a webhook that is down), unless we
        # were only probing blind because DMI was unreadable, a better-ranked
        # plugin was chosen anyway, or the evidence is configuration that
        # holds on nodes elsewhere too and was answered "not this one" (a
        # Node name and API access are on every node of every cluster; a Node
        # without CKS's label is the normal answer there, on every start).
        outranked = chosen is not None and order.index(name) > order.index(chosen)
        expected_no = why == NOT_THIS_ENVIRONMENT and candidates[name].startswith(
            CONFIGURED_EVIDENCE
        )
        quiet = probing_blind or name == chosen or outranked or expected_no
        log_at = log.info if quiet else log.warning
        log_at(
            "detection: %s had local evidence (%s) but was not confirmed: %s",
            name,
            candidates[name],
            why,
        )
    elapsed = (time.perf_counter() - start) * 1000
    if chosen is None:
        reasons = "; ".join(f"{n}: {why}" for n, why in failures.items())
        return DetectionResult(
            NO_PROVIDER,
            False,
            f"local evidence found but not confirmed ({reasons})",
            elapsed,
            candidates,
            failures,
        )
    return DetectionResult(
        chosen, False, f"{candidates[chosen]}; {confirmed[chosen]}", elapsed, candidates, failures
    )
