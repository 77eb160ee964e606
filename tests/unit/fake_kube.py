"""The one in-memory fake of ``runtime.types.Client``, for unit tests of controllers.

The e2e tests run against a real kube-apiserver; this fake exists so a unit test can
make one particular request fail (a 503, a crash point) or make the cache lag the API,
which a real server cannot be told to do. It keeps just enough API semantics for the
Stage verification controller: resourceVersion checks on replace, AlreadyExists on
create, the status subresource replacing only ``status``, merge patches and JSON
patches (test/add/replace/remove) on ``metadata.annotations``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import (
    ANALYSIS_RUN,
    ANALYSIS_TEMPLATE,
    CLUSTER_ANALYSIS_TEMPLATE,
    FREIGHT,
    STAGE,
    Resource,
)
from kubekit.rest import JSON_PATCH
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.types import Context
from schemas.objects import Obj

RESOURCES = (STAGE, FREIGHT, ANALYSIS_RUN, ANALYSIS_TEMPLATE, CLUSTER_ANALYSIS_TEMPLATE)

# (verb, resource, name, body) -> the exception to raise for this request, or None
Failure = Callable[[str, Resource, str, Any], ApiException | None]


def api_error(status: int, reason: str = "") -> ApiException:
    exc = ApiException(status=status, reason=reason or "injected")
    exc.body = json.dumps({"reason": reason, "message": f"injected {status}"})
    return exc


def _merge(dst: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            dst.pop(k, None)
        elif isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)


class FakeApi:
    """Implements the ``Rest`` methods the controller calls, over in-memory stores."""

    def __init__(self) -> None:
        self.stores = {r: Store(r) for r in RESOURCES}
        self.rv = 1
        self.failures: list[Failure] = []  # each one fires at most once
        self.calls: list[str] = []  # "<verb> <plural>/<name>", successful writes only

    # -- test set-up ------------------------------------------------------------
    def put(self, resource: Resource, obj: Obj) -> Obj:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.stores[resource].upsert(obj)
        return copy.deepcopy(obj)

    def fail_once(self, failure: Failure) -> None:
        self.failures.append(failure)

    def names(self, resource: Resource) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.stores[resource].list())

    def _check(self, verb: str, resource: Resource, name: str, body: Any) -> None:
        for failure in list(self.failures):
            exc = failure(verb, resource, name, body)
            if exc is not None:
                self.failures.remove(failure)
                raise exc

    def _current(self, resource: Resource, namespace: str, name: str) -> Obj:
        cur = self.stores[resource].get(namespace, name)
        if cur is None:
            raise api_error(404, "NotFound")
        return copy.deepcopy(cur)

    # -- the Rest surface ----------------------------------------------------------
    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        self._check("get", resource, name, None)
        found = self.stores[resource].get(namespace, name)
        return copy.deepcopy(found) if found else None

    def create(self, resource: Resource, namespace: str, body: Obj) -> Obj:
        name = body["metadata"]["name"]
        self._check("create", resource, name, body)
        if self.stores[resource].get(namespace, name) is not None:
            raise api_error(409, "AlreadyExists")
        body = copy.deepcopy(body)
        body["metadata"]["namespace"] = namespace
        self.calls.append(f"create {resource.plural}/{name}")
        return self.put(resource, body)

    def replace(self, resource: Resource, namespace: str, name: str, body: Obj, *,
                subresource: str = "") -> Obj:
        self._check("replace", resource, name, body)
        cur = self._current(resource, namespace, name)
        if cur["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            raise api_error(409, "Conflict")
        if subresource == "status":
            cur["status"] = copy.deepcopy(body.get("status"))
        else:
            cur = {**copy.deepcopy(body), "status": cur.get("status")}
        self.calls.append(f"replace {resource.plural}/{name}/{subresource}")
        return self.put(resource, cur)

    def patch(self, resource: Resource, namespace: str, name: str, body: Any, *,
              content_type: str = "", subresource: str = "", **_: Any) -> Obj:
        self._check("patch", resource, name, body)
        cur = self._current(resource, namespace, name)
        if content_type == JSON_PATCH:
            for op in body:
                prefix = "/metadata/annotations/"
                assert op["path"].startswith(prefix), op  # all the controller patches
                key = op["path"][len(prefix):].replace("~1", "/").replace("~0", "~")
                ann = cur["metadata"].setdefault("annotations", {})
                if op["op"] == "test" and ann.get(key) != op["value"]:
                    raise api_error(422, "Invalid")
                if op["op"] in ("remove", "replace") and key not in ann:
                    raise api_error(422, "Invalid")
                if op["op"] == "remove":
                    ann.pop(key)
                elif op["op"] in ("add", "replace"):
                    ann[key] = op["value"]
        else:
            expected = (body.get("metadata") or {}).get("resourceVersion")
            if expected is not None and expected != cur["metadata"]["resourceVersion"]:
                raise api_error(409, "Conflict")
            body = copy.deepcopy(body)
            (body.get("metadata") or {}).pop("resourceVersion", None)
            if subresource == "status":
                body = {"status": body.get("status")}
            elif "status" in body and resource in (STAGE, FREIGHT):
                body.pop("status")  # status subresource: the main resource ignores it
            _merge(cur, body)
        self.calls.append(f"patch {resource.plural}/{name} {json.dumps(body)}")
        return self.put(resource, cur)

    def delete(self, resource: Resource, namespace: str, name: str, **_: Any) -> None:
        self._check("delete", resource, name, None)
        found = self.stores[resource].get(namespace, name)
        if found is not None:
            self.stores[resource].remove(found)
            self.calls.append(f"delete {resource.plural}/{name}")


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []  # (type, reason, message)

    def emit(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        self.emitted.append((type, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.emitted]


def context(api: FakeApi, *, cache: Any = None, controller: Any = None,
            **options: Any) -> Context:
    """A Context whose cache is the API's own stores (an up-to-date cache) by default,
    with the indexes ``controller`` declares."""
    for resource, indexes in (getattr(controller, "indexes", None) or {}).items():
        for name, func in indexes.items():
            api.stores[resource].add_index(name, func)
    return Context(cache=cache or CacheView(api.stores), client=api, events=Events(),
                   options=options)
