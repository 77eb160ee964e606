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
- a template that exists is cached for ``ttl`` seconds;
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
        self._data: OrderedDict[CacheKey, tuple[float, Any]] = OrderedDict()

    def get(self, key: CacheKey) -> tuple[bool, Any]:
        # Read without the lock (one dict look-up is atomic under the GIL); writers take
        # it. A request reads the cache on every look-up, and the lock is its dearest
        # part when the CPU caches are cold.
        hit = self._data.get(key)
        if hit is None:
            return False, None
        expires, value = hit
        if expires <= self._clock():
            with self._lock:
                if self._data.get(key) is hit:  # not put again since
                    del self._data[key]
            return False, None
        return True, value

    def put(self, key: CacheKey, value: Any, *, ttl: float | None = None) -> None:
        with self._lock:
            self._data[key] = (self._clock() + (self._ttl if ttl is None else ttl), value)
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)


class ClusterLookups:
    """Template and RolloutManager look-ups against the API server."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 2.0, ttl: float = 5.0,
                 failure_ttl: float | None = None, max_entries: int = 1024) -> None:
        self._rest = Rest(api_client)
        self._timeout = timeout
        self._failure_ttl = min(ttl, 2.0) if failure_ttl is None else failure_ttl
        self._cache = TTLCache(ttl=ttl, max_entries=max_entries)

    def _cached(self, key: CacheKey, fetch: Callable[[float], Any], *, cache_hits: bool,
                deadline: float | None, cached_only: bool = False) -> Any:
        found, value = self._cache.get(key)
        if found:
            metrics.count_lookup(kind=key[0],
                                 result="error" if isinstance(value, _Failed) else "hit")
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
                value = fetch(timeout)
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
                self._cache.put(key, value)
        if isinstance(value, _Failed):
            raise schemas.LookupUnavailable(value.reason)
        return value

    def template(self, kind: str, namespace: str, name: str, *,
                 deadline: float | None = None, cached_only: bool = False
                 ) -> dict[str, Any] | None:
        """The template, None when it does not exist; ``deadline`` (a
        ``time.monotonic()`` value) bounds the wait on top of the per-call timeout;
        ``cached_only``: :class:`MustWait` rather than ask the API server."""
        resource = _TEMPLATES.get(kind)
        if resource is None:
            return None
        scope_ns = namespace if resource.namespaced else ""

        def fetch(timeout: float) -> Any:
            return self._rest.get(resource, scope_ns, name, timeout=timeout)

        found: dict[str, Any] | None = self._cached(
            (kind, scope_ns, name), fetch, cache_hits=True, deadline=deadline,
            cached_only=cached_only)
        return found

    def rollout_managers(self, namespace: str, *, deadline: float | None = None,
                         cached_only: bool = False) -> list[dict[str, Any]]:
        def fetch(timeout: float) -> Any:
            listing = self._rest.list(ROLLOUT_MANAGER, namespace, timeout=timeout)
            return listing.get("items") or []

        return list(self._cached((ROLLOUT_MANAGER.kind, namespace, ""), fetch, cache_hits=False,
                                 deadline=deadline, cached_only=cached_only) or [])

    def for_request(self, *, cached_only: bool = False) -> Lookups:
        """Look-ups sharing one deadline: ``timeout`` seconds from now, for everything
        one admission request asks (``cached_only``: see the module docstring)."""
        deadline = time.monotonic() + self._timeout

        def template(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
            return self.template(kind, namespace, name, deadline=deadline,
                                 cached_only=cached_only)

        def rollout_managers(namespace: str) -> list[dict[str, Any]]:
            return self.rollout_managers(namespace, deadline=deadline, cached_only=cached_only)

        return Lookups(template=template, rollout_managers=rollout_managers)

    def as_lookups(self, *, cached_only: bool = False) -> Lookups:
        """What the app holds: a factory that starts each request's budget."""
        return Lookups(per_request=partial(self.for_request, cached_only=cached_only))
