"""Cross-object look-ups for the validating webhook, through ``kubekit.rest``.

They only feed warnings, so they must never make admission slow or fail. Each
admission request gets one budget (``timeout``, the ``--lookup-timeout`` flag, 2 s by
default) for all of its look-ups together: :meth:`ClusterLookups.as_lookups` hands the
webhook a factory, and every request starts a fresh deadline from it. Each fetch waits
at most ``min(timeout, time left)``; once the budget is spent, or on any API error or
timeout, the look-up raises ``schemas.LookupUnavailable`` and schemas answers without
those warnings. A Stage naming many templates on a slow API server therefore still gets
its answer within about ``timeout`` seconds, well inside the webhook's
``timeoutSeconds`` (5) in manifests/webhook.

Caching, keyed by (kind, namespace, name), is for bursts (many Stages naming the same
template), and only where a stale answer is harmless:
- a template that exists is cached for ``ttl`` seconds; one asked for again after half
  of that is fetched anew in the background (one thread per worker process, started at
  the first such refresh) while the cached one still answers, so a steady flow of
  requests never waits for an expired template (docs/comparison.md "Decisions where
  upstream left a question open"); a template deleted since is dropped then;
- "not found" is never cached: ``kubectl apply -f dir/`` creates a template and the
  Stage that names it a moment apart, and a cached miss would warn about a template
  that exists;
- the RolloutManager list is never cached, for the same reason (two applied back to
  back must see each other);
- a failure is cached briefly, so an unreachable API server costs one timeout per key
  and ``failure_ttl`` instead of one per admission request.

``as_lookups(cached_only=True)`` gives look-ups that never wait: what the cache cannot
answer raises :class:`MustWait`, and the server answers that request again on a thread,
where waiting is allowed (``webhook.server.worker``: most requests are answered by the
event loop itself, without handing them to a thread).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

import schemas
from kubekit.kinds import ANALYSIS_TEMPLATE, CLUSTER_ANALYSIS_TEMPLATE, ROLLOUT_MANAGER, Resource
from kubekit.rest import Rest, status_of
from webhook import metrics
from webhook.config import Lookups, MustWait

log = logging.getLogger("rollgate.webhook.lookups")

_TEMPLATES: dict[str, Resource] = {
    r.kind: r for r in (ANALYSIS_TEMPLATE, CLUSTER_ANALYSIS_TEMPLATE)
}

CacheKey = tuple[str, str, str]
# What a miss or a refresh asks the API server: fetch(key, timeout) -> the value, None
# when it does not exist; raises on failure.
Fetch = Callable[[CacheKey, float], Any]


class _Failed:
    """Cached marker for a look-up that failed; re-raised as LookupUnavailable."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _api_error(exc: ApiException) -> str:
    """``403 Forbidden: <the API server's message>``, one line; for a transport error
    (status 0) what went wrong (``MaxRetryError: ...``)."""
    if exc.status == 0:
        return str(exc.reason)
    text = f"API error {exc.status} {exc.reason}"
    message = status_of(exc).get("message")
    if isinstance(message, str) and message:
        text += ": " + " ".join(message.split())[:300]
    return text


class TTLCache:
    """A small thread-safe TTL cache with an entry cap (oldest evicted first), because
    the webhook answers requests from several threads and the key space is
    user-controlled (template names in submitted objects)."""

    def __init__(self, *, ttl: float, max_entries: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        # key: (expires, refresh_at, value)
        self._data: OrderedDict[CacheKey, tuple[float, float, Any]] = OrderedDict()

    def get(self, key: CacheKey) -> tuple[bool, Any, bool]:
        """(found, value, due): ``due`` once the entry is past the refresh point it was
        put with."""
        # Read without the lock (one dict look-up is atomic under the GIL); writers take
        # it. A request reads the cache on every look-up, and the lock is its dearest
        # part when the CPU caches are cold.
        hit = self._data.get(key)
        if hit is None:
            return False, None, False
        expires, refresh_at, value = hit
        now = self._clock()
        if expires <= now:
            with self._lock:
                if self._data.get(key) is hit:  # not put again since
                    del self._data[key]
            return False, None, False
        return True, value, refresh_at <= now

    def put(self, key: CacheKey, value: Any, *, ttl: float | None = None,
            refresh_after: float = math.inf) -> None:
        """Keep ``value`` for ``ttl`` seconds (the cache's own by default); :meth:`get`
        says it is due for a refresh after ``refresh_after`` seconds."""
        with self._lock:
            now = self._clock()
            self._data[key] = (now + (self._ttl if ttl is None else ttl),
                               now + refresh_after, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def drop(self, key: CacheKey) -> None:
        with self._lock:
            self._data.pop(key, None)


class ClusterLookups:
    """Template and RolloutManager look-ups against the API server."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 2.0, ttl: float = 5.0,
                 failure_ttl: float | None = None, max_entries: int = 1024) -> None:
        self._rest = Rest(api_client)
        self._timeout = timeout
        self._failure_ttl = min(ttl, 2.0) if failure_ttl is None else failure_ttl
        self._refresh_after = ttl / 2
        self._cache = TTLCache(ttl=ttl, max_entries=max_entries)
        self._refreshes: queue.SimpleQueue[tuple[CacheKey, Fetch]] = queue.SimpleQueue()
        # Keys queued or being fetched; read and changed without a lock (a rare race
        # only fetches a template twice).
        self._refreshing: set[CacheKey] = set()
        self._refresher: threading.Thread | None = None
        self._refresher_lock = threading.Lock()

    def _cached(self, key: CacheKey, fetch: Fetch, *, cache_hits: bool,
                deadline: float | None, cached_only: bool = False) -> Any:
        found, value, due = self._cache.get(key)
        if found:
            failed = isinstance(value, _Failed)
            metrics.count_lookup(kind=key[0], result="error" if failed else "hit")
            if due and not failed:
                self._refresh_later(key, fetch)
        elif cached_only:
            raise MustWait(key)
        else:
            timeout = self._timeout
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    metrics.count_lookup(kind=key[0], result="skipped")
                    raise schemas.LookupUnavailable("look-up budget of this request is spent")
                timeout = min(timeout, remaining)
            # A failure after a wait cut short by the budget says nothing about the key:
            # it is not remembered, so the next request asks again with a full timeout.
            cut_short = timeout < self._timeout
            try:
                value = fetch(key, timeout)
            except ApiException as exc:
                value = None if exc.status == 404 else _Failed(_api_error(exc))
            except Exception as exc:  # timeouts, refused connections, TLS errors
                value = _Failed(f"{type(exc).__name__}: {exc}")
            result = ("error" if isinstance(value, _Failed)
                      else "not_found" if value is None else "found")
            metrics.count_lookup(kind=key[0], result=result)
            if isinstance(value, _Failed):
                # One line: what was looked up and why it failed (never the client's
                # exception text, which carries the response headers).
                log.warning("look-up of %s failed: %s", "/".join(k for k in key if k),
                            value.reason, extra={"key": "/".join(key)})
                if not cut_short:
                    self._cache.put(key, value, ttl=self._failure_ttl)
            elif value is not None and cache_hits:
                self._cache.put(key, value, refresh_after=self._refresh_after)
        if isinstance(value, _Failed):
            raise schemas.LookupUnavailable(value.reason)
        return value

    def _refresh_later(self, key: CacheKey, fetch: Fetch) -> None:
        """Have ``key`` fetched anew in the background (once, however many requests
        ask meanwhile); the request goes on with the cached value."""
        if key in self._refreshing:
            return
        self._refreshing.add(key)
        if self._refresher is None:
            # Started at the first refresh, in the process that serves: a thread
            # started before gunicorn forks its workers would not be in them.
            with self._refresher_lock:
                if self._refresher is None:
                    self._refresher = threading.Thread(
                        target=self._refresh_loop, name="lookup-refresh", daemon=True)
                    self._refresher.start()
        self._refreshes.put((key, fetch))

    def _refresh_loop(self) -> None:
        while True:
            key, fetch = self._refreshes.get()
            try:
                self._refresh(key, fetch)
            except Exception:  # a bug must not end the refreshes
                log.exception("could not refresh a cached look-up")
            finally:
                self._refreshing.discard(key)

    def _refresh(self, key: CacheKey, fetch: Fetch) -> None:
        """A template fetched anew replaces the cached one (its ``ttl`` starts again);
        one deleted since is dropped, so the next request looks it up itself and warns
        that it is missing; any other failure leaves the cached one to expire, and the
        request after that fetches it as before."""
        try:
            value = fetch(key, self._timeout)  # None: it does not exist
        except Exception:  # API errors, timeouts, refused connections: see the docstring
            metrics.count_lookup(kind=key[0], result="refresh_failed")
            return
        metrics.count_lookup(kind=key[0], result="refreshed")
        if value is None:
            self._cache.drop(key)
        else:
            self._cache.put(key, value, refresh_after=self._refresh_after)

    def template(self, kind: str, namespace: str, name: str, *,
                 deadline: float | None = None, cached_only: bool = False
                 ) -> dict[str, Any] | None:
        """The template, None when it does not exist; ``deadline`` (a
        ``time.monotonic()`` value) bounds the wait on top of the per-call timeout;
        ``cached_only``: :class:`MustWait` rather than ask the API server."""
        resource = _TEMPLATES.get(kind)
        if resource is None:
            return None
        found: dict[str, Any] | None = self._cached(
            (kind, namespace if resource.namespaced else "", name), self._get_template,
            cache_hits=True, deadline=deadline, cached_only=cached_only)
        return found

    # The fetches: methods taking the key, not closures over it, which each look-up
    # would build even when the cache answers (most of them, and with the CPU caches
    # cold every Python object built counts: docs/benchmarks.md "Inside the webhook
    # server").
    def _get_template(self, key: CacheKey, timeout: float) -> Any:
        kind, namespace, name = key
        return self._rest.get(_TEMPLATES[kind], namespace, name, timeout=timeout)

    def _list_rollout_managers(self, key: CacheKey, timeout: float) -> Any:
        listing = self._rest.list(ROLLOUT_MANAGER, key[1], timeout=timeout)
        return listing.get("items") or []

    def rollout_managers(self, namespace: str, *, deadline: float | None = None,
                         cached_only: bool = False) -> list[dict[str, Any]]:
        return list(self._cached((ROLLOUT_MANAGER.kind, namespace, ""),
                                 self._list_rollout_managers, cache_hits=False,
                                 deadline=deadline, cached_only=cached_only) or [])

    def for_request(self, *, cached_only: bool = False) -> Lookups:
        """Look-ups sharing one deadline: ``timeout`` seconds from now, for everything
        one admission request asks (``cached_only``: see the module docstring)."""
        deadline = time.monotonic() + self._timeout
        # partial, not a closure: one Python call less for every look-up.
        return Lookups(
            template=partial(self.template, deadline=deadline, cached_only=cached_only),
            rollout_managers=partial(self.rollout_managers, deadline=deadline,
                                     cached_only=cached_only),
        )

    def as_lookups(self, *, cached_only: bool = False) -> Lookups:
        """What the app holds: a factory that starts each request's budget."""
        return Lookups(per_request=partial(self.for_request, cached_only=cached_only))
