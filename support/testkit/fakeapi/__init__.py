"""One in-memory fake of the Kubernetes API for unit tests, with per-call fault injection.

The e2e tests run against a real kube-apiserver; this fake exists so a unit test can make
one particular request fail, hang or race with another write, which a real server
cannot be told to do on cue. The model is controller-runtime's fake client with
``interceptor.Funcs``: :class:`FakeApi` is a complete client (the ``kubekit.rest.Rest``
surface, which ``reconciler.runtime.types.Client`` is a part of), and each verb can be
overridden per test by a hook in :class:`Interceptors`, which receives the fake without
interceptors and may raise, wait, write something else first, or delegate::

    api = FakeApi()
    api.put(STAGE, stage)                                   # set-up, no hook runs
    api.fail("create", 503, when=lambda r: r.resource == ANALYSIS_RUN)   # once
    api.interceptors.get = lambda client, *a, **k: client.get(*a, **k)   # any hook
    api.interceptors.delete = never("the controller never deletes")      # a guard

What it keeps of the API's semantics (where it is simpler, it says so):

- objects by (group, plural), namespace and name; one resourceVersion counter for all
  (etcd's), bumped by every change; a write that changes nothing is not a change (no new
  resourceVersion, no watch event), as the API server skips it;
- ``create``: 409 AlreadyExists; ``generateName``; uid, creationTimestamp (from
  ``clock``), generation 1; a resourceVersion in the body is refused as the API server
  refuses it;
- ``replace`` and the merge patch: 404 NotFound; 409 Conflict on a stale
  ``metadata.resourceVersion`` (none: unconditional); the status subresource (Stage,
  Freight, RolloutManager, Deployment): ``subresource="status"`` writes only status and
  the main resource ignores it; generation bumped when anything but metadata (and
  status) changed; uid, creationTimestamp and deletionTimestamp cannot be changed;
- ``patch``: merge patches (RFC 7386), JSON patches (RFC 6902 with the product's
  applier, ``schemas.pointer``: all six ops; a failed ``test``, a missing path or an
  unknown op is 422 Invalid), and server-side apply, simplified: the
  fields a manager applied (map keys; lists are atomic) are recorded in
  ``managedFields``, a field applied before and left out now is removed unless another
  manager owns it, and a different value for a field another applier owns is 409
  Conflict unless ``force``; an apply creates a missing object. Other content types
  are 415;
- ``delete``: idempotent (a missing object is no error, as ``Rest.delete``); with
  finalizers only ``deletionTimestamp`` is set, and the object goes when the last
  finalizer is removed; a finalizer cannot be added while deleting (422);
- ``list``: ``labelSelector`` (=, ==, !=, exists, !exists, in, notin), ``fieldSelector``
  (=, ==, != on any dotted field), ``limit`` and ``continue``; a ``Resource.named`` or
  ``Resource.labelled`` applies its own selector (to watches and caches too, as an
  informer sends it on both requests); items come without apiVersion and kind, like the
  API server's lists of built-in kinds;
- ``watch``: the events after ``resource_version`` (ADDED, MODIFIED, DELETED; an object
  leaving a selector is DELETED for that watch), ``""``/``"0"`` starting with ADDED for
  every object; after :meth:`FakeApi.compact` an older resourceVersion gets an ERROR
  event with code 410. The stream then ends with a BOOKMARK at the current
  resourceVersion, at once (``follow=False``, the default: deterministic tests that run
  an informer's loop on the test's thread) or, with ``follow=True``, after waiting for
  new events until ``timeout_seconds`` pass or :meth:`FakeApi.close_watches`.

Every call made through the fake (not the calls a hook makes on the client it is
given) is recorded in :attr:`FakeApi.requests`; :meth:`FakeApi.writes` lists the
writes that succeeded. A live cache (:meth:`FakeApi.cache`) follows every change at
once, unless :meth:`FakeApi.hold` makes it lag until :meth:`FakeApi.deliver` (a
watch that has not delivered yet). :meth:`FakeApi.rest` is a real ``kubekit.rest.Rest`` answered by
this fake at the HTTP level (paths, query parameters, watch lines), for tests of what
``Rest`` sends. :class:`Events` records what a controller emits; :func:`context`
builds a controller's ``Context`` whose cache follows the fake.

By concern: ``tracker`` (the objects, resourceVersions, change log and live caches),
``server`` (each verb's behaviour), ``patches``, ``selectors``, ``watch``, ``wire`` (the
HTTP level), ``records`` (hooks, requests, Events), ``errors``, and ``api`` (the client
surface, interception and ``context``).
"""

from __future__ import annotations

from .api import FakeApi, context
from .errors import api_error
from .records import VERBS, Events, Interceptors, Request, never

__all__ = ["VERBS", "Events", "FakeApi", "Interceptors", "Request", "api_error", "context",
           "never"]
