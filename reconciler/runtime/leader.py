"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Only the holder of the Lease reconciles, so two replicas never act on the same Stage
at once. The Lease is read and written as plain JSON with optimistic concurrency (a
stale write fails with 409 and we simply retry next period). Timings follow
client-go's ratios, derived from one ``--lease-duration``: renew deadline 2/3 of it,
retry period 1/5 of it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client.exceptions import ApiException

from .rest import Rest
from .types import Obj, Resource

log = logging.getLogger("reconciler.leader")

LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")


@dataclass(frozen=True)
class Timings:
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
        self._observed_rv = ""

    # -- one attempt --------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        stamp = format_micro_time(now)
        duration = round(self.timings.lease_duration)
        lease = self.rest.get(LEASE, self.namespace, self.name)
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
                self.rest.create(LEASE, self.namespace, body)
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
            self.rest.replace(LEASE, self.namespace, self.name, lease)
        except ApiException as exc:
            if exc.status == 409:
                return False  # lost a race; look again next period
            raise
        return True

    def release(self) -> None:
        """Give the lease up at once (clear holderIdentity) so a standby need not wait."""
        if not self.is_leader.is_set():
            return
        try:
            lease = self.rest.get(LEASE, self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = lease["spec"]
            spec["holderIdentity"] = None
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = format_micro_time(dt.datetime.now(dt.UTC))
            self.rest.replace(LEASE, self.namespace, self.name, lease)
            log.info("released leader lease", extra={"lease": f"{self.namespace}/{self.name}"})
        except Exception as exc:
            log.warning("could not release leader lease: %s", exc)

    # -- loop -------------------------------------------------------------------
    def run(self) -> None:
        """Acquire, then renew until stopped or the renew deadline passes."""
        where = {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}
        log.info("waiting for leadership", extra=where)
        while not self.stop.is_set():
            if self._attempt():
                break
            self.stop.wait(self.timings.retry_period)
        if self.stop.is_set():
            return
        self.is_leader.set()
        log.info("became leader", extra=where)
        self.on_started_leading()
        last_renew = time.monotonic()
        while not self.stop.wait(self.timings.retry_period):
            if self._attempt():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self.timings.renew_deadline:
                log.error("lost leadership (renew deadline passed)", extra=where)
                self.is_leader.clear()
                self.on_stopped_leading()
                return

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except Exception as exc:
            log.warning("lease request failed: %s", exc)
            return False
