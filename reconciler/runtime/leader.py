"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Only the holder of the Lease reconciles, so two replicas never act on the same Stage
at once. The Lease is read and written as plain JSON with optimistic concurrency (a
stale write fails with 409 and we simply retry next period). Timings follow
client-go's ratios, derived from one ``--lease-duration``: renew deadline 2/3 of it,
retry period 1/5 of it.

The renew deadline is enforced by a watchdog that does not wait for any request: a
lease request that hangs (a stalled connection, a slow apiserver) must not let us keep
acting after another replica may have taken the Lease. Each lease request's timeout is
also bounded by the time left until the deadline, so a hung one is abandoned in time.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import LEASE
from kubekit.rest import DEFAULT_TIMEOUT, Rest, brief
from schemas.objects import Obj

log = logging.getLogger("reconciler.leader")



@dataclass(frozen=True)
class Timings:
    """Seconds; renew_deadline < lease_duration so we stop before others may take over."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    @classmethod
    def from_lease_duration(cls, seconds: float) -> Timings:
        seconds = max(2.0, float(seconds))
        return cls(seconds, seconds * 2 / 3, max(0.2, seconds / 5))


def format_micro_time(t: dt.datetime) -> str:
    """RFC 3339 with microseconds, the only form the API server accepts for MicroTime."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


MIN_REQUEST_TIMEOUT = 0.1  # below this a request cannot even connect; fail at once


def request_timeout(deadline: float | None, *, now: float | None = None) -> tuple[float, float]:
    """(connect, read) timeout for a lease request that must end by ``deadline``."""
    if deadline is None:
        return DEFAULT_TIMEOUT
    left = max(MIN_REQUEST_TIMEOUT, deadline - (time.monotonic() if now is None else now))
    return (min(DEFAULT_TIMEOUT[0], left), min(DEFAULT_TIMEOUT[1], left))


def lease_expired(spec: Obj, *, now: dt.datetime) -> bool:
    """Whether a lease held by someone else may be taken over at ``now``."""
    if not spec.get("holderIdentity"):
        return True
    renew = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    if renew is None:
        return True
    duration = spec.get("leaseDurationSeconds") or 0
    return now >= renew + dt.timedelta(seconds=duration)


class LeaderElector:
    def __init__(
        self,
        *,
        rest: Rest,
        namespace: str,
        name: str,
        identity: str,
        timings: Timings,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        stop: threading.Event,
    ) -> None:
        self.rest = rest
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timings = timings
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.stop = stop
        self.is_leader = threading.Event()
        # Leading-phase state shared by the renewer thread and the watchdog (run()).
        self._lock = threading.Lock()
        self._last_renew = 0.0  # monotonic time the last successful renewal was sent
        self._leading_over = threading.Event()

    # -- one attempt --------------------------------------------------------------
    def try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        """One read-modify-write of the Lease; ``deadline`` (monotonic) bounds each request."""
        now = dt.datetime.now(dt.UTC)
        stamp = format_micro_time(now)
        duration = round(self.timings.lease_duration)
        lease = self.rest.get(LEASE, self.namespace, self.name,
                              timeout=request_timeout(deadline))
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": duration,
                    "acquireTime": stamp,
                    "renewTime": stamp,
                    "leaseTransitions": 0,
                },
            }
            try:
                self.rest.create(LEASE, self.namespace, body, timeout=request_timeout(deadline))
            except ApiException as exc:
                if exc.status == 409:
                    return False  # someone else created it first
                raise
            return True
        spec = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity")
        if holder != self.identity and not lease_expired(spec, now=now):
            return False
        if holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=duration, renewTime=stamp)
        lease["spec"] = spec
        try:
            self.rest.replace(LEASE, self.namespace, self.name, lease,
                              timeout=request_timeout(deadline))
        except ApiException as exc:
            if exc.status == 409:
                return False  # lost a race; look again next period
            raise
        return True

    def release(self) -> None:
        """Give the lease up at once (clear holderIdentity) so a standby need not wait."""
        if not self.is_leader.is_set():
            return
        # Shutdown must not hang on a stalled apiserver; the lease expires anyway.
        deadline = time.monotonic() + self.timings.renew_deadline
        try:
            lease = self.rest.get(LEASE, self.namespace, self.name,
                                  timeout=request_timeout(deadline))
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = lease["spec"]
            spec["holderIdentity"] = None
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = format_micro_time(dt.datetime.now(dt.UTC))
            self.rest.replace(LEASE, self.namespace, self.name, lease,
                              timeout=request_timeout(deadline))
            log.info("released leader lease", extra={"lease": f"{self.namespace}/{self.name}"})
        except Exception as exc:
            log.warning("could not release leader lease: %s", brief(exc))

    # -- loop -------------------------------------------------------------------
    def run(self) -> None:
        """Acquire, then renew until stopped or the renew deadline passes."""
        where = {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}
        log.info("waiting for leadership", extra=where)
        while not self.stop.is_set():
            sent = time.monotonic()
            if self._attempt(sent + self.timings.renew_deadline):
                break
            self.stop.wait(self.timings.retry_period)
        if self.stop.is_set():
            return
        with self._lock:
            self._last_renew = sent  # the Lease's renewTime was stamped before sending
        self.is_leader.set()
        log.info("became leader", extra=where)
        self.on_started_leading()
        renewer = threading.Thread(target=self._renew_loop, name="lease-renew", daemon=True)
        renewer.start()
        # The watchdog: wakes at the deadline at the latest, whatever the renewer is doing.
        while not self.stop.is_set():
            with self._lock:
                left = self._last_renew + self.timings.renew_deadline - time.monotonic()
                if left <= 0:
                    self._leading_over.set()  # a renewal that completes now must not count
                    break
            self.stop.wait(min(self.timings.retry_period, left))
        else:
            self._leading_over.set()
            return  # stopped: the manager stops the workers, then releases the Lease
        log.error("lost leadership (renew deadline passed)", extra=where)
        self.is_leader.clear()
        self.on_stopped_leading()

    def _renew_loop(self) -> None:
        while not self.stop.wait(self.timings.retry_period) and not self._leading_over.is_set():
            with self._lock:
                deadline = self._last_renew + self.timings.renew_deadline
            sent = time.monotonic()
            if self._attempt(deadline):
                with self._lock:
                    if self._leading_over.is_set():
                        return
                    # From when it was sent: renewTime was stamped before the request.
                    self._last_renew = sent

    def _attempt(self, deadline: float) -> bool:
        try:
            return self.try_acquire_or_renew(deadline)
        except Exception as exc:
            log.warning("lease request failed: %s", brief(exc))
            return False
