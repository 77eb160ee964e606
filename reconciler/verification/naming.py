"""Identity rules: the names and labels by which Kargo and rollgate find a Stage's
runs (docs/verification.md, "Engine mode", *The run*, and "Observe mode").

Kargo's rules are copied exactly (``FreightCollection.UpdateOrPush`` for the collection
id, ``kubernetes.ShortenLabelValue`` for label values, Kargo v1.11.2), so a run
rollgate creates is found by Kargo-style selectors and a run Kargo creates is found by
rollgate. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from schemas.constants import (
    LABEL_ATTEMPT,
    LABEL_FREIGHT_COLLECTION,
    LABEL_MANAGED_BY,
    LABEL_STAGE,
    MANAGED_BY,
)

MAX_NAME = 253
MAX_LABEL_VALUE = 63
HASH_LEN = 10
# Kargo's short hash length in label values (pkg/kubernetes/naming.go).
KARGO_HASH_LEN = 8


def short_hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:HASH_LEN]


def freight_collection_id(names: Iterable[str]) -> str:
    """Kargo's freight collection id: hex SHA-1 of the sorted Freight names joined by
    ``,`` (``FreightCollection.UpdateOrPush`` in Kargo v1.11.2)."""
    return hashlib.sha1(",".join(sorted(names)).encode()).hexdigest()


def freight_annotation(names: Iterable[str]) -> str:
    return ",".join(sorted(names))


def shorten(value: str, limit: int) -> str:
    """``value`` if it fits, else a prefix + ``-`` + 10 hex of its sha256 (``limit`` long).

    Trailing ``.``/``-``/``_`` of the prefix are dropped, because a DNS name must not
    have ``.-`` in it.
    """
    if len(value) <= limit:
        return value
    prefix = value[: limit - HASH_LEN - 1].rstrip(".-_")
    return f"{prefix}-{short_hash(value)}"


def run_name(stage_name: str, collection: str, attempt: int) -> str:
    """``<stage>.<collection[:7]>.<attempt>``, the stage part shortened to fit 253."""
    suffix = f".{collection[:7]}.{attempt}"
    if len(stage_name) + len(suffix) <= MAX_NAME:
        return stage_name + suffix
    return shorten(stage_name, MAX_NAME - len(suffix)) + suffix


def label_value(value: str) -> str:
    """A label value shortened exactly as Kargo's ``kubernetes.ShortenLabelValue``
    (``strings.HashShorten(value, 63, "-", 8)``), so Kargo-style selectors such as
    ``kargo.akuity.io/stage=<value>`` find rollgate's runs too."""
    if len(value) <= MAX_LABEL_VALUE:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:KARGO_HASH_LEN]
    prefix = value[: MAX_LABEL_VALUE - KARGO_HASH_LEN - 1].rstrip("-")
    return f"{prefix}-{digest}"


def full_run_labels(stage_name: str, collection: str, attempt: int) -> dict[str, str]:
    """rollgate's run labels before shortening (their full values go into annotations)."""
    return {
        LABEL_STAGE: stage_name,
        LABEL_FREIGHT_COLLECTION: collection,
        LABEL_ATTEMPT: str(attempt),
        LABEL_MANAGED_BY: MANAGED_BY,
    }


def run_labels(stage_name: str, collection: str, attempt: int) -> dict[str, str]:
    """The labels rollgate puts on a run (what adoption compares)."""
    return {k: label_value(v) for k, v in full_run_labels(stage_name, collection, attempt).items()}
