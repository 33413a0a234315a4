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
from typing import Any, TypeVar

from .context import ProviderContext
from .hookspecs import CONFIGURED_EVIDENCE
from .metadata import MetadataError, MetadataSpoofed, MetadataUnavailable
from .plugins import PluginRegistry

log = logging.getLogger(__name__)

T = TypeVar("T")

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


NOT_THIS_ENVIRONMENT = "metadata answered, but not as this environment"


class NotThisCloud(Exception):
    """Raised by a confirmation probe: the server answered, but not as this cloud's does.

    For answers that are well-formed HTTP but carry the wrong content (an
    instance id of the wrong shape, a listing without the expected entry);
    :func:`confirm_probe` logs the message and turns it into ``None``.  It
    never leaves :func:`confirm_probe`.
    """


def confirm_probe(plugin: str, probe: Callable[[], T], *, warn: bool = False) -> T | None:
    """Run a plugin's one confirmation probe under the rule every ``confirm`` shares.

    The rule, for the ``confirm_environment`` hook:

    * **Nothing answered: raise.**  ``MetadataUnavailable`` (connection
      refused, timed out, only 5xx until the deadline) propagates; its
      message names the endpoint and the override variable, and the host
      records it as the reason the plugin was not chosen.
    * **The answer proves an impostor: raise.**  ``MetadataSpoofed`` (a
      response header the genuine server always sends is missing, GCE's
      ``Metadata-Flavor``) propagates too: something answers in the metadata
      server's place, and the operator must read that in the detection result.
    * **Answered, but not this cloud: log and return None.**  Any other
      ``MetadataError`` (a 4xx, a refused token, a web page, an oversized
      body) and the probe's own :class:`NotThisCloud` (a well-formed answer
      with the wrong content) are logged, at INFO (the host already warns
      about evidence that went unconfirmed) or at WARNING with ``warn``
      (for evidence that is configuration, which the host reports quietly),
      and the probe answers ``None``: the hook's "not this environment".

    Why this rule: ``None`` and an exception mean different things to
    detection (``dranet_cloud.detection.detect``): ``None`` is a definite
    "no", an exception is "could not tell".  An HTTP 404 or a captive
    portal's page is a definite answer from something that is not this cloud;
    a silent endpoint or an impostor is not.  DRANET's probes answer a bare
    yes/no (``OnAlibaba`` in pkg/cloudprovider/alibaba/alibaba.go is "HTTP
    200 to the instance-id GET"); the "could not tell" branch is ours, so an
    operator learns why a node with a cloud's DMI was not taken for it.
    Other exceptions (a bad override URL's ``ConfigError``, a bug) propagate
    unchanged.

    ``probe`` returns the description of what answered (it names the endpoint),
    or what the plugin still has to judge before it can describe it (the
    webhook's declared capabilities, where "answered, but without the cloud
    role" is no one's fault and is logged at INFO by the plugin).
    """
    try:
        return probe()
    except (MetadataUnavailable, MetadataSpoofed):
        raise
    except (MetadataError, NotThisCloud) as exc:
        say = log.warning if warn else log.info
        say("%s: not confirmed: %s", plugin, exc)
        return None


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
