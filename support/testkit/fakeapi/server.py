"""The fake's own behaviour for each verb, as the API server behaves (where it is simpler,
the package docstring says so): create, replace, the three patch types, delete with
finalizers, list with selectors and pages, and the watch (``watch``)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

from kubekit import kinds
from kubekit.kinds import Resource
from kubekit.rest import APPLY_PATCH, JSON_PATCH, MERGE_PATCH

from . import watch
from .errors import api_error, bad_request, conflict, group_resource, invalid, not_found
from .patches import Apply, PatchFailed, apply_fields, json_patch, merge_patch
from .selectors import fields_match, labels_match
from .tracker import Tracker, key_of, stamp

Obj = dict[str, Any]

# Kinds without metadata.generation.
NO_GENERATION = frozenset(key_of(r) for r in (kinds.CONFIG_MAP, kinds.EVENT, kinds.LEASE))
# Fields of metadata only the server sets: a write keeps the stored values.
SERVER_SET = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
              "deletionGracePeriodSeconds", "generation")


class Server(Tracker):
    """The verbs (``_<verb>_verb``) over what the :class:`Tracker` holds."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._serial = 0

    # ------------------------------------------------------------ reads

    def _get_verb(self, resource: Resource, namespace: str, name: str, *,
                  timeout: Any = None) -> Obj | None:
        with self._lock:
            found = self._get(self.register(resource), namespace, name)
            return copy.deepcopy(found) if found is not None else None

    def _list_verb(self, resource: Resource, namespace: str | None = None, *,
                   timeout: Any = None, **query: Any) -> Obj:
        canonical = self.register(resource)
        selector = query.get("fieldSelector") or resource.field_selector
        labels = query.get("labelSelector") or resource.label_selector
        offset = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0)
        with self._lock:
            items = [o for o in self._scope(canonical, namespace)
                     if fields_match(selector, o) and labels_match(labels, o)]
            page = items[offset:offset + limit] if limit else items[offset:]
            meta: Obj = {"resourceVersion": str(self._rv)}
            if limit and offset + limit < len(items):
                meta["continue"] = str(offset + limit)
            # Like the API server's lists of built-in kinds: items without their type.
            out = [{k: copy.deepcopy(v) for k, v in obj.items() if k not in ("apiVersion", "kind")}
                   for obj in page]
        return {"apiVersion": canonical.api_version, "kind": f"{canonical.kind}List",
                "metadata": meta, "items": out}

    def _watch_verb(self, resource: Resource, namespace: str | None, *,
                    resource_version: str, timeout_seconds: int) -> Iterator[Obj]:
        return watch.watch(self, resource, namespace, resource_version=resource_version,
                           timeout_seconds=timeout_seconds)

    # ------------------------------------------------------------ writes

    def _create_verb(self, resource: Resource, namespace: str, body: Obj, *,
                     timeout: Any = None) -> Obj:
        resource = self.register(resource)
        with self._lock:
            obj = self._prepare_create(resource, namespace, body)
            self._store(resource, old=None, new=obj)
            return copy.deepcopy(obj)

    def _replace_verb(self, resource: Resource, namespace: str, name: str, body: Obj, *,
                      subresource: str = "", timeout: Any = None) -> Obj:
        resource = self.register(resource)
        with self._lock:
            current = self._existing(resource, namespace, name, subresource=subresource)
            if (body.get("metadata") or {}).get("name", name) != name:
                raise bad_request("the name of the object does not match the name on the URL")
            self._precondition(resource, current=current, body=body)
            return self._update(resource, current=current, new=copy.deepcopy(body),
                                subresource=subresource)

    def _patch_verb(self, resource: Resource, namespace: str, name: str, body: Any, *,
                    content_type: str = MERGE_PATCH, subresource: str = "",
                    field_manager: str | None = None, force: bool | None = None) -> Obj:
        resource = self.register(resource)
        if content_type == APPLY_PATCH:
            return self._apply(resource, namespace, name, body, subresource=subresource,
                               field_manager=field_manager, force=bool(force))
        if content_type not in (MERGE_PATCH, JSON_PATCH):
            raise api_error(415, "UnsupportedMediaType",
                            f"the body of the request was in an unknown format: {content_type}")
        with self._lock:
            current = self._existing(resource, namespace, name, subresource=subresource)
            if content_type == JSON_PATCH:
                try:
                    patched = json_patch(current, body)
                except PatchFailed as exc:
                    raise invalid(resource, name, f"patch: {exc}") from None
            else:
                if not isinstance(body, dict):
                    raise bad_request("a merge patch must be an object")
                self._precondition(resource, current=current, body=body)
                patched = merge_patch(current, body)
            return self._update(resource, current=current, new=patched, subresource=subresource)

    def _delete_verb(self, resource: Resource, namespace: str, name: str,
                     **query: Any) -> None:
        resource = self.register(resource)
        with self._lock:
            current = self._get(resource, namespace, name)
            if current is None:
                return
            if not current["metadata"].get("finalizers"):
                self._store(resource, old=current, new=None)
            elif not current["metadata"].get("deletionTimestamp"):
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = stamp(self.clock())
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                self._store(resource, old=current, new=marked)

    # ------------------------------------------------------------ the rules of writes

    def _prepare_create(self, resource: Resource, namespace: str, body: Obj) -> Obj:
        """``body`` as the API server would store it on create (lock held), or raise."""
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        meta = obj.setdefault("metadata", {})
        if meta.get("resourceVersion"):
            raise api_error(500, "InternalError",
                            "resourceVersion should not be set on objects to be created")
        meta["name"] = self._name_of(resource, meta)
        if resource.namespaced:
            meta["namespace"] = namespace
        if self._get(resource, namespace if resource.namespaced else "",
                     meta["name"]) is not None:
            raise api_error(409, "AlreadyExists",
                            f'{group_resource(resource)} "{meta["name"]}" already exists')
        self._serial += 1
        meta["uid"] = str(uuid.UUID(int=self._serial))
        meta["creationTimestamp"] = stamp(self.clock())
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_set, None)
        if key_of(resource) not in NO_GENERATION:
            meta["generation"] = 1
        if key_of(resource) in self._status:
            obj.pop("status", None)
        return obj

    def _name_of(self, resource: Resource, meta: Obj) -> str:
        """The name of an object to create: its own, or one made from ``generateName``."""
        if meta.get("name"):
            return str(meta["name"])
        if not meta.get("generateName"):
            raise invalid(resource, "", "metadata.name: Required value")
        self._serial += 1
        return f"{meta['generateName']}{self._serial:05x}"

    def _existing(self, resource: Resource, namespace: str, name: str, *,
                  subresource: str) -> Obj:
        if subresource and (subresource != "status" or key_of(resource) not in self._status):
            raise api_error(404, "NotFound", f"the server could not find the requested "
                            f"resource ({resource.plural}/{subresource})")
        current = self._get(resource, namespace, name)
        if current is None:
            raise not_found(resource, name)
        return current

    def _precondition(self, resource: Resource, *, current: Obj, body: Obj) -> None:
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected and expected != current["metadata"].get("resourceVersion"):
            raise conflict(resource, current["metadata"]["name"])

    def _update(self, resource: Resource, *, current: Obj, new: Obj, subresource: str,
                managed_fields: Any = None) -> Obj:
        """Store ``new`` in place of ``current`` as the API server would take it (lock
        held); ``managed_fields``: set by an apply, also to the status subresource."""
        new = self._with_status_rules(resource, current=current, new=new,
                                      subresource=subresource, managed_fields=managed_fields)
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        for fixed in SERVER_SET:
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        new["apiVersion"], new["kind"] = resource.api_version, resource.kind
        if old_meta.get("deletionTimestamp") and not set(meta.get("finalizers") or ()) <= set(
                old_meta.get("finalizers") or ()):
            raise invalid(resource, meta["name"], "metadata.finalizers: Forbidden: no new "
                          "finalizers can be added if the object is being deleted")
        if new == current:
            return copy.deepcopy(current)  # nothing changed: no write, no event
        if self._spec_changed(resource, current=current, new=new):
            meta["generation"] = old_meta["generation"] + 1
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._store(resource, old=current, new=None, last=new)  # the last finalizer is gone
        else:
            self._store(resource, old=current, new=new)
        return copy.deepcopy(new)

    def _with_status_rules(self, resource: Resource, *, current: Obj, new: Obj,
                           subresource: str, managed_fields: Any) -> Obj:
        """For a kind with a status subresource: a write to ``status`` changes only the
        status (and an apply's managedFields), a write to the object all but it."""
        if key_of(resource) not in self._status:
            return new
        if subresource != "status":
            new.pop("status", None)
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            return new
        status = new.get("status")
        new = copy.deepcopy(current)
        new.pop("status", None)
        if status is not None:
            new["status"] = status
        if managed_fields is not None:
            new["metadata"]["managedFields"] = managed_fields
        return new

    def _spec_changed(self, resource: Resource, *, current: Obj, new: Obj) -> bool:
        """Whether ``new`` bumps the generation: anything but metadata (and a status
        subresource's status) changed, for a kind that has one."""
        key = key_of(resource)
        if key in NO_GENERATION or "generation" not in current["metadata"]:
            return False

        def spec(obj: Obj) -> Obj:
            return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")
                    and not (key in self._status and k == "status")}

        return spec(new) != spec(current)

    def _apply(self, resource: Resource, namespace: str, name: str, body: Any, *,
               subresource: str, field_manager: str | None, force: bool) -> Obj:
        if not field_manager:
            raise bad_request("PATCH requests of type apply must set the fieldManager parameter")
        if not isinstance(body, dict):
            raise bad_request("an apply patch must be an object")
        request = Apply(body, field_manager, subresource, force,
                        status_part=key_of(resource) in self._status)
        with self._lock:
            current = self._get(resource, namespace, name)
            if current is None:
                if subresource:
                    raise not_found(resource, name)
                # Created by the apply, in one write: the object with its managedFields.
                base = self._prepare_create(resource, namespace, {"metadata": {"name": name}})
                new = apply_fields(base, request, api_version=resource.api_version,
                                   time=stamp(self.clock()))
                self._store(resource, old=None, new=new)
                return copy.deepcopy(new)
            self._existing(resource, namespace, name, subresource=subresource)
            new = apply_fields(current, request, api_version=resource.api_version,
                               time=stamp(self.clock()))
            # Like a replace (status rules, generation), without the resourceVersion check.
            return self._update(resource, current=current, new=new, subresource=subresource,
                                managed_fields=new["metadata"].get("managedFields"))
