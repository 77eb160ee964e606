"""Reading objects handled as plain JSON (every object is a dict, as ``kubekit.rest``
hands it out), for every layer: a field that is missing or of the wrong type reads as
empty instead of raising, because admission input and other controllers' objects can
hold anything."""

from __future__ import annotations

from typing import Any, TypedDict, cast

Obj = dict[str, Any]


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    """``metadata`` as far as rollgate reads it (the API server's ObjectMeta)."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    managedFields: list[dict[str, Any]]


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def meta_of(obj: object) -> ObjectMeta:
    """``obj.metadata``, or {} when ``obj`` or its metadata is not an object. Typed as
    the API server writes it; the values of an object nobody validated (an admission
    request's) can still be anything, and are read with that in mind."""
    return cast(ObjectMeta, as_dict(as_dict(obj).get("metadata")))
