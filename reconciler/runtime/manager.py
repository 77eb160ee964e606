"""Runs controllers: shared informers, one work queue + workers per controller,
resync, leader election, health/metrics and graceful shutdown.

Start-up order matters: caches are filled before any worker runs, so a reconcile
never mistakes "not listed yet" for "does not exist" (which for the Stage
controller would mean cleaning up Freight verifications).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kubekit.discovery import Discovery, RestDiscovery, missing_crds
from kubekit.kinds import Resource
from kubekit.rest import Rest, brief, namespace_terminating
from schemas.objects import Obj

from .backoff import Backoff
from .cache import CacheView, Store, Transform
from .events import Recorder
from .health import HealthServer, Metrics
from .informer import Handler, Informer
from .leader import LeaderElector, Timings
from .options import RuntimeOptions
from .queue import ShutDown, WorkQueue
from .status import Conflict
from .types import Cache, Context, Controller, Key, Requeue, object_key
from .watches import keys_for

log = logging.getLogger("reconciler")


class ControllerRunner:
    """One controller's queue and worker threads."""

    def __init__(self, controller: Controller, *, metrics: Metrics, workers: int) -> None:
        self.controller = controller
        self.name = controller.name
        self.queue: WorkQueue[Key] = WorkQueue(backoff=Backoff(base=0.5, cap=120.0))
        self.metrics = metrics
        self.workers = workers
        self.resources = tuple(dict.fromkeys(w.resource for w in controller.watches))
        # The CRDs it waits for (empty once all are served; None until first looked up).
        self.waiting_for: list[str] | None = None
        self.waited = False  # it has waited for a CRD: its start never gates readiness
        self.launched = threading.Event()  # its informers run; events reach its queue
        self.running = threading.Event()  # its caches synced and its workers run
        self._threads: list[threading.Thread] = []
        metrics.queue_depth.labels(self.name).set_function(lambda: len(self.queue))
        metrics.register(controller.collectors)  # the feature's metrics

    def keys_for(self, resource: Resource, old: Obj | None, new: Obj, cache: Cache) -> set[Key]:
        return keys_for(self.controller.watches, resource, old, new, cache)

    def start(self, ctx: Context) -> None:
        for i in range(self.workers):
            t = threading.Thread(
                target=self._work, args=(ctx,), name=f"{self.name}-worker-{i}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float) -> None:
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _work(self, ctx: Context) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDown:
                return
            if key is None:
                continue
            self.process(key, ctx)

    def process(self, key: Key, ctx: Context) -> None:
        where = {"controller": self.name, "key": str(key)}
        started = time.monotonic()
        result = "success"
        try:
            self.controller.reconcile(key, ctx)
            self.queue.forget(key)
        except Requeue as rq:
            result = "requeue"
            self.queue.forget(key)
            self.queue.add_after(key, rq.after)
            log.debug("requeue in %.1fs: %s", rq.after, rq, extra=where)
        except Conflict as exc:
            # The one conflict policy: our view was stale. The watch brings (or has
            # brought) the newer object; decide again from it, soon but rate limited.
            result = "conflict"
            delay = self.queue.add_rate_limited(key)
            log.debug("conflict, retrying in %.1fs: %s", delay, exc, extra=where)
        except Exception as exc:
            result = "error"
            self.metrics.errors.labels(self.name).inc()
            delay = self.queue.add_rate_limited(key)
            # A namespace being deleted refuses new content; the key goes away with it.
            level = logging.DEBUG if namespace_terminating(exc) else logging.WARNING
            log.log(
                level, "reconcile failed, retrying in %.1fs: %s", delay, brief(exc),
                extra=where, exc_info=log.isEnabledFor(logging.DEBUG),
            )
        finally:
            self.queue.done(key)
            self.metrics.reconciles.labels(self.name, result).inc()
            self.metrics.duration.labels(self.name).observe(time.monotonic() - started)


def watched_resources(controllers: Sequence[Controller]) -> list[Resource]:
    """Every resource the controllers watch, once, in order; each must watch its primary."""
    resources: list[Resource] = []
    for c in controllers:
        watched = [w.resource for w in c.watches]
        if c.primary not in watched:
            raise ValueError(f"controller {c.name} does not watch its primary resource")
        resources.extend(r for r in watched if r not in resources)
    return resources


def cache_transforms(controllers: Sequence[Controller],
                     resources: Sequence[Resource]) -> dict[Resource, Transform | None]:
    """The transform each resource's store applies: a controller's ``transforms`` entry
    when every controller watching the resource declares the same one; None (stored
    whole) otherwise, since a field one controller drops may be one another reads."""
    chosen: dict[Resource, Transform | None] = {}
    for resource in resources:
        declared = [c.transforms.get(resource)
                    for c in controllers if resource in [w.resource for w in c.watches]]
        first = declared[0] if declared else None
        chosen[resource] = first if all(t is first for t in declared) else None
    return chosen


class Manager:
    def __init__(
        self,
        *,
        api: Any,
        controllers: Sequence[Controller],
        options: RuntimeOptions,
        discovery: Discovery | None = None,
        rest: Rest | None = None,
    ) -> None:
        """``discovery``: what tells which CRDs are served (the API's by default);
        ``rest``: the client over ``api`` (``Rest(api)`` by default)."""
        self.api = api
        self.rest = rest or Rest(api)
        self.discovery: Discovery = discovery or RestDiscovery(self.rest)
        self.options = options
        self.metrics = Metrics()
        self.stop = threading.Event()
        self.runners = [
            ControllerRunner(c, metrics=self.metrics, workers=options.workers)
            for c in controllers
        ]
        resources = watched_resources(controllers)
        self.resources = resources
        transforms = cache_transforms(controllers, resources)
        self.stores = {r: Store(r, transforms[r]) for r in resources}
        self.cache = CacheView(self.stores)
        self.identity = options.identity
        for c in controllers:
            for resource, indexes in c.indexes.items():
                for index_name, func in indexes.items():
                    self.stores[resource].add_index(index_name, func)
        self.ctx = Context(
            cache=self.cache,
            client=self.rest,
            events=Recorder(self.rest, instance=self.identity,
                            busy=lambda: any(len(r.queue) for r in self.runners)),
            options=options,
            metrics=self.metrics,
        )
        namespaces = options.namespaces
        self.informers: list[Informer] = []
        for r in resources:
            scopes: Iterable[str | None] = namespaces if (r.namespaced and namespaces) else [None]
            for ns in scopes:
                self.informers.append(
                    Informer(
                        rest=self.rest, resource=r, namespace=ns, store=self.stores[r],
                        handler=self._handler_for(r), stop=self.stop,
                        on_restart=self._restart_counter(r),
                    )
                )
        self.leader_elect = options.leader_elect
        self.elector: LeaderElector | None = None
        if self.leader_elect:
            self.elector = LeaderElector(
                rest=self.rest,
                namespace=options.leader_election_namespace,
                name=options.leader_election_id,
                identity=self.identity,
                timings=Timings.from_lease_duration(options.lease_duration),
                on_started_leading=self._start_controllers,
                on_stopped_leading=self._lost_leadership,
                stop=self.stop,
            )
        self._started = threading.Event()
        self._was_ready = False
        self.health: HealthServer | None = None
        self._elector_thread: threading.Thread | None = None

    # -- wiring -------------------------------------------------------------------
    def _handler_for(self, resource: Resource) -> Handler:
        def handle(etype: str, old: Obj | None, new: Obj) -> None:
            # Only to controllers whose informers run: a waiting one reads caches that
            # are not filled, and its first resync queues every primary anyway.
            for runner in self.runners:
                if not runner.launched.is_set():
                    continue
                for key in runner.keys_for(resource, old, new, self.cache):
                    runner.queue.add(key)
        return handle

    def _restart_counter(self, resource: Resource) -> Callable[[str], None]:
        label = f"{resource.plural}.{resource.group or 'core'}"

        def count(reason: str) -> None:
            self.metrics.watch_restarts.labels(label, reason).inc()
        return count

    def ready(self) -> tuple[bool, str]:
        """Ready once every controller that can run has synced caches; a controller
        waiting for its CRD holds nothing (the message names what it waits for). Once
        Ready, a replica stays Ready: a standby that takes the lease, or a controller
        whose CRD came, fills its caches behind a 200 that says so, since nothing routes
        to a reconciler by its readiness and a flip would only read as a failure
        (docs/components.md, "Reconciler")."""
        ok, why = self._readiness()
        if ok:
            self._was_ready = True
        elif self._was_ready:
            return True, f"ok (ready before; now {why})"
        return ok, why

    def _readiness(self) -> tuple[bool, str]:
        if self.elector is not None and not self.elector.is_leader.is_set():
            return True, "standby: not the leader"
        unknown = [r.name for r in self.runners if r.waiting_for is None]
        if not self._started.is_set() or unknown:
            return False, "looking up the CRDs of: " + ", ".join(unknown or self._names())
        syncing = self._syncing()
        if syncing:
            return False, "caches not synced: " + ", ".join(syncing)
        return True, "; ".join(["ok", *self._notes()])

    def _syncing(self) -> list[str]:
        """Informers not synced yet of the controllers that gate readiness. One that
        waited for its CRD never does, not even while its caches fill once the CRD came:
        a Ready replica stays Ready."""
        names = [i.name for r in self.runners if r.launched.is_set() and not r.waited
                 for i in self._informers_of(r) if not i.synced.is_set()]
        return list(dict.fromkeys(names))

    def _notes(self) -> list[str]:
        """What a Ready reconciler adds to "ok": controllers starting after their CRD
        came, and controllers still waiting for one."""
        notes = []
        starting = [r.name for r in self.runners if r.waited and r.launched.is_set()
                    and not r.running.is_set()]
        if starting:
            notes.append("starting: " + ", ".join(starting))
        waiting = [f"{r.name} ({', '.join(r.waiting_for)})"
                   for r in self.runners if r.waiting_for]
        if waiting:
            notes.append("waiting for CRDs: " + "; ".join(waiting))
        return notes

    def _names(self) -> list[str]:
        return [r.name for r in self.runners]

    def _informers_of(self, runner: ControllerRunner) -> list[Informer]:
        return [i for i in self.informers if i.resource in runner.resources]

    # -- lifecycle ------------------------------------------------------------------
    def _start_controllers(self) -> None:
        if self._started.is_set():
            return
        self._started.set()
        self.metrics.leader.set(1)
        threading.Thread(target=self._start_when_served, name="crd-discovery",
                         daemon=True).start()
        threading.Thread(target=self._resync_loop, name="resync", daemon=True).start()

    def _start_when_served(self) -> None:
        """Start each controller once the API server serves every resource it watches;
        ask again every ``crd_poll_interval`` seconds for those still waiting, so one
        starts within seconds of its CRD being created, with no restart."""
        pending = list(self.runners)
        while pending and not self.stop.is_set():
            pending = [r for r in pending if not self._launch_if_served(r)]
            if pending:
                self.stop.wait(self.options.crd_poll_interval)

    def _launch_if_served(self, runner: ControllerRunner) -> bool:
        try:
            missing = missing_crds(self.discovery, runner.resources)
        except Exception as exc:
            log.warning("cannot look up the CRDs the controller needs: %s", brief(exc),
                        extra={"controller": runner.name})
            return False
        self._record_waiting(runner, missing)
        if missing:
            return False
        for informer in self._informers_of(runner):
            if not informer.started:
                informer.start()
        runner.launched.set()
        threading.Thread(target=self._run_when_synced, args=(runner,),
                         name=f"start-{runner.name}", daemon=True).start()
        return True

    def _record_waiting(self, runner: ControllerRunner, missing: list[str]) -> None:
        """Log each change of what ``runner`` waits for and keep the gauge current."""
        before = runner.waiting_for or []
        if missing and missing != before:
            log.warning("controller waits for its CRDs (not served by the API server); it "
                        "starts once they are", extra={"controller": runner.name,
                                                       "crds": ",".join(missing)})
        elif before and not missing:
            log.info("CRDs served, starting the controller",
                     extra={"controller": runner.name, "crds": ",".join(before)})
        for crd in dict.fromkeys([*before, *missing]):
            self.metrics.crd_waiting.labels(runner.name, crd).set(int(crd in missing))
        runner.waiting_for = missing
        runner.waited = runner.waited or bool(missing)

    def _run_when_synced(self, runner: ControllerRunner) -> None:
        """Workers start only once the controller's caches are filled, so a reconcile
        never mistakes "not listed yet" for "does not exist"."""
        informers = self._informers_of(runner)
        for inf in informers:
            while not inf.synced.wait(1.0):
                if self.stop.is_set():
                    return
        log.info("caches synced", extra={"controller": runner.name,
                                         "informers": len(informers)})
        runner.start(self.ctx)
        runner.running.set()
        # Once at start: resync_keys may find leftovers (e.g. of objects deleted while
        # no replica was running) that no watch event will ever point at.
        self._resync(runner)

    def _resync_loop(self) -> None:
        while not self.stop.wait(self.options.resync_period):
            self.resync()

    def resync(self) -> None:
        """Queue every primary object of each running controller, plus what its
        ``resync_keys`` adds."""
        for runner in self.runners:
            if runner.running.is_set():
                self._resync(runner)

    def _resync(self, runner: ControllerRunner) -> None:
        c = runner.controller
        for obj in self.cache.list(c.primary):
            runner.queue.add(object_key(obj))
        try:
            for key in c.resync_keys(self.cache):
                runner.queue.add(key)
        except Exception:
            log.exception("resync_keys failed", extra={"controller": runner.name})

    def _lost_leadership(self) -> None:
        # Another replica may already be acting: stop at once rather than finish
        # in-flight work with a stale view (the process manager restarts us).
        self.metrics.leader.set(0)
        logging.shutdown()
        os._exit(1)

    def install_signal_handlers(self) -> None:
        def on_signal(signum: int, _frame: Any) -> None:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            self.stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def start_health(self, host: str, port: int) -> HealthServer:
        self.health = HealthServer(host=host, port=port, metrics=self.metrics, ready=self.ready)
        self.health.start()
        return self.health

    def run(self) -> int:
        """Run until SIGTERM/SIGINT (or ``stop`` is set); return the exit code."""
        if self.elector is not None:
            self._elector_thread = threading.Thread(
                target=self.elector.run, name="leader-election", daemon=True
            )
            self._elector_thread.start()
        else:
            self._start_controllers()
        while not self.stop.wait(0.5):
            pass
        self.shutdown()
        return 0

    def shutdown(self, timeout: float = 10.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for runner in self.runners:
            runner.stop(max(0.0, deadline - time.monotonic()))
        # Release only after the workers stopped, so the next leader never overlaps
        # with a reconcile still in flight here.
        if self.elector is not None:
            if self._elector_thread is not None:
                self._elector_thread.join(5.0)  # no renewal racing the release
            self.elector.release()
        if self.health is not None:
            self.health.stop()
        log.info("stopped")
