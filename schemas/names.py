"""Kubernetes name rules, as pure predicates that say what is wrong.

These mirror ``k8s.io/apimachinery/pkg/util/validation`` (IsDNS1123Subdomain,
IsQualifiedName, IsValidLabelValue), because the values end up on an AnalysisRun that
the API server validates with exactly those rules: rejecting them at submit time is the
only way the user sees the mistake next to the field that causes it.
"""

from __future__ import annotations

import re

DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
# Kubernetes' limit on the total size of an object's annotations: the sum of the UTF-8
# byte lengths of every key and value (Go strings are bytes).
K8S_ANNOTATIONS_TOTAL_MAX = 256 * 1024
# What rollgate adds to the AnalysisRun next to the user's annotations: rollgate.dev/freight
# (the freight names, up to 253 bytes each, comma-separated) and the full value of any
# label over 63 characters (kargo.akuity.io/stage: a Stage name, up to 253 bytes). 16 KiB
# covers about sixty maximum-length freight names in one collection.
ROLLGATE_ANNOTATIONS_HEADROOM = 16 * 1024
ANNOTATIONS_TOTAL_MAX = K8S_ANNOTATIONS_TOTAL_MAX - ROLLGATE_ANNOTATIONS_HEADROOM

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = _QUALIFIED_NAME

_NAME_CHARS = (
    "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
)


def dns1123_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (an object name), or None."""
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be at most {DNS1123_SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a label/annotation key (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if "/" in prefix:
        return "must be a name with at most one '/' (an optional DNS subdomain prefix)"
    if prefix:
        problem = dns1123_subdomain_problem(prefix)
        if problem:
            return f"the prefix {problem}"
    if not name:
        return "the name part must not be empty"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"the name part must be at most {QUALIFIED_NAME_MAX} characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return f"the name part may contain {_NAME_CHARS}"
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value (empty is allowed), or None."""
    if not value:
        return None
    if len(value) > LABEL_VALUE_MAX:
        return f"must be at most {LABEL_VALUE_MAX} characters"
    if not _LABEL_VALUE.fullmatch(value):
        return f"may contain {_NAME_CHARS}"
    return None
