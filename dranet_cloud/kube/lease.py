"""One owner for work no node owns: a ``coordination.k8s.io/v1`` Lease, as client-go elects.

Why: some work belongs to no node (reclaiming cluster-scope leaks); done by
every node its cost would grow with the nodes.  As client-go's leader election:

* The Lease's ``spec.holderIdentity`` names the holder; ``renewTime`` (a
  MicroTime) plus ``leaseDurationSeconds`` says until when.  Taking and
  renewing are updates carrying the ``metadata.resourceVersion`` read, so of
  two candidates only one wins; the other gets 409 Conflict.
* The holder renews every ``retry_period`` (from the version its last update
  returned: no GET) and steps down (``on_stopped``) when it could not renew
  within ``renew_deadline``, which is shorter than the lease: it has stopped
  before anyone else may take over.
* A candidate takes a lease that has expired: ``renewTime + leaseDurationSeconds``
  before the local clock minus a 5 s skew margin, or the record unchanged for
  a whole lease duration of local observation (which needs no synchronised
  clocks).  A released lease (``holderIdentity`` empty) is taken at once.

What differs: candidates do not poll every ``retry_period`` (30 GETs a minute
per node of thousands, for nothing) but every ``candidate_poll`` seconds,
else 0.6 s per candidate the holder counts in :data:`CANDIDATES_ANNOTATION`,
clamped to 10-120 s and jittered: at most once a minute per node from 100
candidates on, while someone still sees an expired lease within seconds.
:meth:`LeaseElector.stop` releases a held lease so a successor need not wait
a lease duration plus one poll.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from dranet_cloud.kube.client import KubeClient, KubeConflict, KubeError, KubeNotFound
from dranet_cloud.toolkit.logsafe import safe

__all__ = ["CANDIDATES_ANNOTATION", "LeaseElector", "micro_time", "parse_micro_time"]

log = logging.getLogger(__name__)

CANDIDATES_ANNOTATION = "dranet-cloud.dra.net/candidates"
SKEW_MARGIN = 5.0  # seconds another node's clock may be off from ours
POLL_PER_CANDIDATE = 0.6
POLL_MIN, POLL_MAX = 10.0, 120.0
JOIN_TIMEOUT = 5.0  # beyond the one call that may be in flight


def micro_time(when: float | None = None) -> str:
    """A Kubernetes MicroTime (``2006-01-02T15:04:05.000000Z``) of ``when`` (default now)."""
    moment = datetime.fromtimestamp(time.time() if when is None else when, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: Any) -> float | None:
    """Seconds since the epoch of a MicroTime or RFC 3339 time; ``None`` when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


class LeaseElector:
    """Take part in electing the holder of the Lease ``namespace/name`` as ``identity``.

    ``on_started``/``on_stopped`` run on the elector's thread when this
    elector becomes or stops being the holder (stepping down, losing the
    lease, :meth:`stop`); they should be quick.  ``candidates``, when given,
    is asked by the holder for the number of candidates to write in the
    Lease (the others' poll interval follows it).  ``stats`` counts the
    requests sent (``gets``, ``creates``, ``updates``), the 409s
    (``conflicts``) and the times this elector took the lease (``transitions``).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        candidate_poll: float | None = None,
        candidates: Callable[[], int] | None = None,
    ) -> None:
        if not identity:
            raise ValueError("lease elector: the identity must not be empty")
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError(
                f"lease {namespace}/{name}: need 0 < retry_period ({retry_period:g}) < "
                f"renew_deadline ({renew_deadline:g}) < lease_duration ({lease_duration:g}), "
                "or the holder could not step down before another takes over"
            )
        if candidate_poll is not None and candidate_poll <= 0:
            raise ValueError(f"lease {namespace}/{name}: candidate_poll must be positive")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.candidate_poll = candidate_poll
        self.candidates = candidates
        self.stats: dict[str, int] = dict.fromkeys(
            ("gets", "creates", "updates", "conflicts", "transitions"), 0
        )
        self.last_error: str | None = None
        self._record: dict[str, Any] | None = None  # the Lease last read or written
        self._observed_rv = ""
        self._observed_at = 0.0  # monotonic: when the record last changed, as seen here
        self._leader = False
        self._renewed_at = 0.0  # monotonic: when the last successful renew was sent
        self._release = True
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"LeaseElector({self.namespace}/{self.name} as {self.identity!r})"

    # --- the public state ------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether this elector holds the lease and renewed it within the renew deadline."""
        return self._leader and time.monotonic() - self._renewed_at < self.renew_deadline

    @property
    def holder(self) -> str | None:
        """The holder named by the Lease last seen (``None``: none, or not read yet)."""
        record = self._record
        spec = record.get("spec") if isinstance(record, Mapping) else None
        holder = spec.get("holderIdentity") if isinstance(spec, Mapping) else None
        return holder if isinstance(holder, str) and holder else None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> LeaseElector:
        if self._thread is not None:
            raise RuntimeError(f"{self!r}: already started")
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{self.name}-{self.identity}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, *, release: bool = True) -> None:
        """Stop taking part; a held lease is released (unless ``release=False``, which leaves
        it to expire as a crash would) and ``on_stopped`` runs before this returns."""
        self._release = release
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.client.timeout + JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("kubernetes: %r did not stop in time (a call is in flight)", self)

    def __enter__(self) -> LeaseElector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._leader:
                    self._hold()
                elif not self._try_acquire():
                    self._stopping.wait(self._poll_interval())
        except Exception:  # a bug must not leave a leader that thinks it leads
            log.exception("kubernetes: %r failed unexpectedly", self)
        finally:
            if self._leader:
                self._step_down("stopping")
                if self._release:
                    self._give_back()

    def _hold(self) -> None:
        """Renew every retry period until the lease is lost, the deadline passes, or stop."""
        while not self._stopping.wait(self.retry_period):
            left = self.renew_deadline - (time.monotonic() - self._renewed_at)
            if left <= 0:
                self._step_down(f"could not renew within {self.renew_deadline:g} s")
                return
            sent = time.monotonic()
            try:
                self._record = self._update(self._renewed(self._held()), left)
                self._renewed_at = sent
                self._observe(self._record)
            except KubeConflict:
                # Someone wrote the Lease: still ours (an annotation) or taken?
                try:
                    self._record = self._get(max(0.1, left))
                    self._observe(self._record)
                except KubeError as exc:
                    self._note(exc)
                    continue
                if self.holder != self.identity:
                    self._step_down(f"the lease is now held by {safe(self.holder, 80)}")
                    return
            except KubeError as exc:
                self._note(exc)

    def _try_acquire(self) -> bool:
        """One look at the Lease; take it when absent, released or expired. True: we lead."""
        try:
            record = self._get(self.client.timeout)
        except KubeNotFound:
            return self._create()
        except KubeError as exc:
            self._note(exc)
            return False
        self._record = record
        self._observe(record)
        holder = self.holder
        if holder not in (None, self.identity) and not self._expired(record):
            return False
        spec = dict(record.get("spec") or {})
        now = micro_time()
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        if holder != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = transitions + 1
        spec["holderIdentity"] = self.identity
        body = copy.deepcopy(record)
        body["spec"] = spec
        sent = time.monotonic()
        try:
            self._record = self._update(self._renewed(body), self.client.timeout)
        except KubeError as exc:
            if not isinstance(exc, KubeConflict):
                self._note(exc)
            return False
        self._become_leader(sent, f"took it from {safe(holder, 80)}" if holder else "took it")
        return True

    def _create(self) -> bool:
        now = micro_time()
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._duration_seconds(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        self._annotate(body)
        sent = time.monotonic()
        self.stats["creates"] += 1
        try:
            self._record = self.client.create_lease(self.namespace, body)
        except KubeConflict:
            self.stats["conflicts"] += 1  # another candidate created it first
            return False
        except KubeError as exc:
            self._note(exc)
            return False
        self._become_leader(sent, "created it")
        return True

    def _give_back(self) -> None:
        """Release the held lease: no holder, so a candidate takes it on its next look."""
        try:
            body = self._held()
            spec = body["spec"]
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = micro_time(time.time() - self.lease_duration - SKEW_MARGIN)
            self._record = self._update(body, self.client.timeout)
            log.info("kubernetes: %r released the lease", self)
        except KubeError as exc:
            self._note(exc)
            log.warning(
                "kubernetes: %r could not release the lease; a successor takes it once it "
                "expires (within %g s)",
                self,
                self.lease_duration,
            )

    # --- pieces ----------------------------------------------------------------------

    def _get(self, deadline: float) -> dict[str, Any]:
        self.stats["gets"] += 1
        record: dict[str, Any] = self.client.get_lease(self.namespace, self.name, deadline=deadline)
        return record

    def _update(self, body: dict[str, Any], deadline: float) -> dict[str, Any]:
        self.stats["updates"] += 1
        try:
            answer: dict[str, Any] = self.client.update_lease(
                self.namespace, self.name, body, deadline=deadline
            )
        except KubeConflict:
            self.stats["conflicts"] += 1
            raise
        return answer

    def _held(self) -> dict[str, Any]:
        """A copy of the Lease as this holder last wrote it (carrying its resourceVersion)."""
        return copy.deepcopy(self._record or {})

    def _renewed(self, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.setdefault("spec", {})
        spec["renewTime"] = micro_time()
        spec["leaseDurationSeconds"] = self._duration_seconds()
        self._annotate(body)
        return body

    def _annotate(self, body: dict[str, Any]) -> None:
        if self.candidates is None:
            return
        try:
            count = int(self.candidates())
        except Exception:
            log.exception("kubernetes: %r: the candidates callable failed", self)
            return
        meta = body.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        annotations[CANDIDATES_ANNOTATION] = str(max(0, count))
        meta["annotations"] = annotations

    def _duration_seconds(self) -> int:
        return max(1, math.ceil(self.lease_duration))

    def _observe(self, record: Mapping[str, Any]) -> None:
        meta = record.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        rv = rv if isinstance(rv, str) else ""
        if rv != self._observed_rv or not self._observed_at:
            self._observed_rv = rv
            self._observed_at = time.monotonic()

    def _expired(self, record: Mapping[str, Any]) -> bool:
        spec = record.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        if time.monotonic() - self._observed_at >= self.lease_duration:
            return True  # unchanged for a whole lease duration, by our own clock
        renewed = parse_micro_time(spec.get("renewTime")) or parse_micro_time(
            spec.get("acquireTime")
        )
        if renewed is None:
            return False
        duration = spec.get("leaseDurationSeconds")
        duration = duration if isinstance(duration, (int, float)) else self.lease_duration
        return renewed + duration < time.time() - SKEW_MARGIN

    def _poll_interval(self) -> float:
        if self.candidate_poll is not None:
            return self.candidate_poll * random.uniform(0.9, 1.1)
        count = 0
        record = self._record
        meta = record.get("metadata") if isinstance(record, Mapping) else None
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if isinstance(annotations, Mapping):
            text = annotations.get(CANDIDATES_ANNOTATION)
            if isinstance(text, str) and text.isdigit() and len(text) < 10:
                count = int(text)
        base = min(POLL_MAX, max(POLL_MIN, POLL_PER_CANDIDATE * count))
        return base * random.uniform(0.8, 1.2)

    def _become_leader(self, sent: float, how: str) -> None:
        self._leader = True
        self._renewed_at = sent
        self._observe(self._record or {})
        self.stats["transitions"] += 1
        log.info("kubernetes: %r leads now (%s)", self, how)
        self._hook(self.on_started, "on_started")

    def _step_down(self, why: str) -> None:
        self._leader = False
        log.info("kubernetes: %r stepped down: %s", self, why)
        self._hook(self.on_stopped, "on_stopped")

    def _hook(self, hook: Callable[[], None] | None, name: str) -> None:
        if hook is not None:
            try:
                hook()
            except Exception:
                log.exception("kubernetes: %r: %s failed", self, name)

    def _note(self, exc: KubeError) -> None:
        self.last_error = safe(str(exc), 600)
        if not self._stopping.is_set():
            log.warning("%s", self.last_error)
