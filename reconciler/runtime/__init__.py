"""The reconciler runtime: caches, work queues, leader election, health and metrics.

How to write a controller
-------------------------

A controller is a class instantiated with no arguments that satisfies
``types.Controller``; register it in ``reconciler/controllers/__init__.py`` as
``"name": "module:Class"`` (imported lazily, only when selected with --controllers)::

    class MyController:
        name = "my-controller"              # also the --controllers value
        primary = types.ROLLOUT_MANAGER      # the kind whose keys are queued
        watches = (types.ROLLOUT_MANAGER, types.CONFIG_MAP)  # all kinds read from cache

        def map_event(self, resource, obj):  # any change of a watched object
            # Return the primary Keys to reconcile. For the primary kind the runtime
            # already queues the object's own key; return extra keys only.
            ...

        def reconcile(self, key, ctx):       # one key at a time, never concurrently
            obj = ctx.cache.get(self.primary, key.namespace, key.name)
            if obj is None:                  # deleted (caches are synced before any
                ...                          # worker runs, so None means gone)
            rest = Rest(ctx.api)             # kubekit.rest: plain-JSON client
            rest.patch(..., content_type=APPLY_PATCH, field_manager="rollgate", force=True)
            ctx.events.emit(obj, type="Normal", reason="Synced", message="...")
            # raise Requeue(after=30) to come back later (not a failure);
            # raise anything else to retry with per-key exponential backoff.

        # Optional: extra keys to queue on every periodic resync (e.g. to find
        # leftovers of deleted primaries): def resync_keys(self, cache) -> Iterable[Key]

Rules the runtime guarantees and relies on:

- ``ctx.cache`` holds every kind in ``watches`` (+ ``primary``), filtered to
  ``--namespaces`` for namespaced kinds; objects are shared: never mutate them,
  ``copy.deepcopy`` before editing. Asking for a kind not in ``watches`` raises
  ``KeyError``. The cache lags writes: after a write, use the API response.
- Workers start only after all caches have synced; with leader election only the
  leader starts informers and workers. Losing the lease exits the process.
- ``ctx.options`` is the parsed command line by dest (``namespaces``,
  ``allow_http_plugins``, ``rollouts_deployment``, ``identity``...).
- Errors: ``kubekit.rest`` raises ``kubernetes.client.exceptions.ApiException``
  (status 0 for transport errors); ``rest.is_transient``, ``is_conflict``,
  ``is_already_exists``, ``is_not_found`` classify them.
- Logs are JSON; pass ``extra={"key": str(key), "controller": self.name}``.
- Metrics (``/metrics``): ``rollgate_reconciler_reconcile_total{controller,result}``,
  ``..._reconcile_errors_total``, ``..._reconcile_duration_seconds``,
  ``..._queue_depth``, ``..._watch_restarts_total{resource,reason}``, ``..._leader``.
"""
