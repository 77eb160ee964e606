"""What a test sets on the fake and reads back: the per-verb hooks, the record of each
call, and the Events a controller emits."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubekit.kinds import Resource

Hook = Callable[..., Any]
VERBS = ("get", "list", "create", "replace", "patch", "delete", "watch")
WRITES = ("create", "replace", "patch", "delete")


@dataclass
class Interceptors:
    """Per-verb hooks, each ``hook(client, *args, **kwargs)`` with the verb's own
    arguments (``kubekit.rest.Rest``'s signatures); ``client`` is the fake without
    interceptors (``FakeApi.direct``), so a hook delegates with e.g.
    ``client.get(*args, **kwargs)``, and may also call other verbs or set-up methods on
    it (a concurrent write). A hook for ``watch`` returns an iterator of events. None:
    the fake's own behaviour."""

    get: Hook | None = None
    list: Hook | None = None
    create: Hook | None = None
    replace: Hook | None = None
    patch: Hook | None = None
    delete: Hook | None = None
    watch: Hook | None = None


def never(why: str) -> Hook:
    """A hook for a verb the code under test must never call: the call fails the test
    with ``why`` (an ``AssertionError``, which no ``except ApiException`` swallows)."""

    def hook(client: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(why)

    return hook


@dataclass
class Request:
    """One call made through the fake: the verb, its target and body, and the keyword
    arguments as passed (``timeout``, ``subresource``, ``content_type``, query
    parameters...); ``error`` is what it raised, if it did."""

    verb: str
    resource: Resource
    namespace: str | None
    name: str | None = None
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def __str__(self) -> str:
        """``verb plural[/name][/subresource]``, e.g. ``patch stages/prod/status``."""
        text = f"{self.verb} {self.resource.plural}"
        if self.name:
            text += f"/{self.name}"
        subresource = self.options.get("subresource")
        return text + f"/{subresource}" if subresource else text


def request_of(verb: str, *, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request:
    """The :class:`Request` of a call of ``verb`` with ``Rest``'s positional arguments."""
    resource, namespace, *rest = args
    name = body = None
    if verb == "create":
        body = rest[0]
        name = (body.get("metadata") or {}).get("name") if isinstance(body, dict) else None
    elif verb in ("replace", "patch"):
        name, body = rest[0], rest[1]
    elif verb in ("get", "delete"):
        name = rest[0]
    return Request(verb, resource, namespace, name, copy.deepcopy(body), dict(kwargs))


class Events:
    """``types.EventRecorder`` that records: ``emitted`` as (type, reason, message),
    ``objects`` the objects they were about, in the same order."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []
        self.objects: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def emit(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        with self._lock:
            self.emitted.append((type, reason, message))
            self.objects.append(obj)

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.emitted]
