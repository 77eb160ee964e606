"""The reconciler runtime: caches, work queues, leader election, health and metrics.

How to write a controller
-------------------------

A controller subclasses ``types.Controller`` and is built from its feature's typed
options (a frozen dataclass such as ``reconciler.plugins.options.PluginsOptions``, whose
fields are the feature's flags with their one default; ``reconciler.cli`` fills it
from the parsed flags). Register it in ``reconciler/controllers/__init__.py``: a
function that imports the class (lazily, only when selected with --controllers) and
builds it with its feature's field of ``ReconcilerOptions``. The runtime knows no
feature: a feature's code, options and metrics included, lives in its own package
(``reconciler/verification/``)::

    class MyController(Controller):
        name = "my-controller"              # also the --controllers value
        primary = ROLLOUT_MANAGER            # the kind whose keys are queued (kubekit.kinds)
        # Every kind read from the cache, with what an event of it queues:
        # mapper(old, new, cache) -> keys (old: the cached version before, or None).
        watches = (
            Watch(ROLLOUT_MANAGER, watches.enqueue_self),
            Watch(CONFIG_MAP, config_map_owner),  # reads the cache, never the API
        )
        # Optional (empty by default): named indexes for
        # cache.by_index(resource, name, value).
        indexes = {ANALYSIS_RUN: {"stage": lambda run: [...]}}

        def __init__(self, *, options: MyOptions):  # watches may depend on them
            ...

        def reconcile(self, key, ctx):       # one key at a time, never concurrently
            obj = ctx.cache.get(self.primary, key.namespace, key.name)
            if obj is None:                  # deleted (caches are synced before any
                ...                          # worker runs, so None means gone)
            ctx.client.patch(..., content_type=APPLY_PATCH, field_manager="rollgate",
                             force=True)     # kubekit.rest: plain-JSON client
            ctx.events.emit(obj, type="Normal", reason="Synced", message="...")
            # raise Requeue(after=30) to come back later (not a failure);
            # raise anything else to retry with per-key exponential backoff.

        # Optional (none by default): extra keys to queue on every periodic resync (e.g.
        # to find leftovers of deleted primaries): def resync_keys(self, cache) -> Iterable[Key]
        # Optional (none by default): the feature's Prometheus collectors, created with
        # registry=None; the runtime registers them with its registry and serves them on
        # /metrics.
        collectors = (MY_COUNTER,)
        # Optional (none by default): per kind, a pure function returning what the
        # cache keeps of an object (runtime.cache).
        transforms = {CONFIG_MAP: keep_data_only}

The runtime reads every member directly: ``Controller`` declares the optional ones
with their empty defaults.

Rules the runtime guarantees and relies on:

- ``ctx.cache`` holds every kind in ``watches`` (the primary must be one), filtered to
  ``--namespaces`` for namespaced kinds; objects are shared: never mutate them,
  ``copy.deepcopy`` before editing. Asking for a kind not in ``watches`` raises
  ``KeyError``. The cache lags writes: after a write, use the API response.
- A controller starts once the API server serves every kind it watches (a missing CRD
  makes it wait, not the others; ``runtime.discovery``), and its workers only after its
  caches have synced; with leader election only the leader starts informers and
  workers. Losing the lease exits the process.
- ``ctx.options`` is the runtime's ``RuntimeOptions`` (``namespaces``, ``identity``,
  ``workers``...); a feature's own flags are in the options its controller was built
  from, never in ``ctx``.
- Errors: ``kubekit.rest`` raises ``kubernetes.client.exceptions.ApiException``
  (status 0 for transport errors); ``rest.is_transient``, ``is_conflict``,
  ``is_already_exists``, ``is_not_found`` classify them.
- Logs are JSON; pass ``extra={"key": str(key), "controller": self.name}``.
- Metrics (``/metrics``): ``rollgate_reconciler_reconcile_total{controller,result}``,
  ``..._reconcile_errors_total``, ``..._reconcile_duration_seconds``,
  ``..._queue_depth``, ``..._watch_restarts_total{resource,reason}``, ``..._leader``,
  ``..._crd_waiting{controller,crd}``.
"""
