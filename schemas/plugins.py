"""``check_rollout_manager``: every finding about a RolloutManager's ``spec.plugins``.

The JSON Schema checks structure; the rules here say why a name, location or digest is
wrong in terms of what Argo Rollouts will do with it. Argo Rollouts only reads plugins
at start-up and stores each binary at ``plugin-bin/<namespace>/<name>``, so a bad entry
means a controller that crash-loops or silently runs the wrong binary: everything that
can be caught at submit time is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import SplitResult, urlsplit

from schemas.compiled import PLUGINS_VALIDATOR
from schemas.findings import Finding, Path, sort_findings
from schemas.limits import oversized
from schemas.lookups import LookupUnavailable, RolloutManagerLookup
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.translate import schema_findings, short

# Argo Rollouts' own pattern (utils/plugin/types): <namespace>/<name>.
PLUGIN_NAME = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9_.-]+")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
SHA1_HINT = "this is the length of a SHA-1 digest; sha256 needs 64 hex characters"
REMOTE_SCHEMES = frozenset({"https", "http"})


def plugin_name_problem(name: str) -> str | None:
    """Why ``name`` is not a usable ``<namespace>/<name>`` plugin name, or None."""
    if not name:
        return "must not be empty: <namespace>/<name>, e.g. argoproj-labs/gatewayAPI"
    if "/" not in name:
        return (
            f"invalid plugin name {short(name)}: must be <namespace>/<name>, e.g. "
            "argoproj-labs/gatewayAPI (Argo Rollouts stores the binary at "
            "plugin-bin/<namespace>/<name>)"
        )
    if not PLUGIN_NAME.fullmatch(name):
        return (
            f"invalid plugin name {short(name)}: must be <namespace>/<name> where the "
            "namespace has letters, digits and '-', and the name letters, digits, '_', '.' "
            "and '-'"
        )
    if name.split("/", 1)[1] in (".", ".."):
        return (
            f"invalid plugin name {short(name)}: the name part must not be '.' or '..' "
            "(the binary would be stored outside plugin-bin/)"
        )
    return None


def _split(location: str) -> SplitResult | None:
    try:
        parts = urlsplit(location)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    return parts


def location_problem(location: str, *, allow_http: bool) -> str | None:
    """Why Argo Rollouts could not (or should not) fetch a plugin from ``location``."""
    if not location:
        return "must not be empty: an https:// or file:// URL of the plugin binary"
    if _UNSAFE.search(location):
        return "must not contain whitespace or control characters"
    parts = _split(location)
    if parts is None:
        return f"invalid URL {short(location)}"
    scheme = parts.scheme.lower()
    # Argo Rollouts matches on the literal "<scheme>://" prefix, so "file:/x" is not a
    # file URL to it even though it is one to urllib.
    has_slashes = location[len(parts.scheme) : len(parts.scheme) + 3] == "://"
    if scheme not in ("https", "http", "file") or not has_slashes:
        return "must be an https:// or file:// URL"
    if scheme == "http" and not allow_http:
        return (
            "http:// is not allowed: the binary would be downloaded without TLS; use "
            "https:// (http:// is accepted only when rollgate runs with --allow-http-plugins)"
        )
    if "@" in parts.netloc:
        return (
            "must not contain user credentials: the location is stored in clear text in the "
            "argo-rollouts-config ConfigMap"
        )
    if scheme in REMOTE_SCHEMES:
        if not parts.hostname:
            return f"needs a host: {scheme}://<host>/<path>"
        return None
    if parts.netloc:
        return (
            f"{short(location)} is not an absolute path: Argo Rollouts joins host and path, "
            f"so {short(parts.netloc)} makes it relative; use file:///<absolute path>"
        )
    if not parts.path.startswith("/"):
        return "must be an absolute path: file:///<absolute path>"
    return None


def is_remote(location: object) -> bool:
    if not isinstance(location, str):
        return False
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in REMOTE_SCHEMES


def sha256_problem(value: str) -> str | None:
    """Why ``value`` (trimmed, lower-cased; "" = absent) is not a SHA-256 digest."""
    digest = normalize_sha256(value)
    if not digest or _HEX64.fullmatch(digest):
        return None
    if _HEX40.fullmatch(digest):
        return SHA1_HINT
    if len(digest) == 64:
        return "must be 64 hex characters (0-9, a-f)"
    return f"must be 64 hex characters (a SHA-256 digest), not {len(digest)} characters"


def _entry_rules(path: Path, entry: dict[str, Any], *, allow_http: bool) -> Iterator[Finding]:
    name = entry.get("name")
    if isinstance(name, str):
        problem = plugin_name_problem(name)
        if problem:
            yield Finding(path=(*path, "name"), message=problem)
    location = entry.get("location")
    location_ok = False
    if isinstance(location, str):
        problem = location_problem(location, allow_http=allow_http)
        location_ok = problem is None
        if problem:
            yield Finding(path=(*path, "location"), message=problem)
    digest = entry.get("sha256")
    if isinstance(digest, str):
        problem = sha256_problem(digest)
        if problem:
            yield Finding(path=(*path, "sha256"), message=problem)
    if location_ok and is_remote(location) and not normalize_sha256(digest):
        yield Finding(
            path=(*path, "sha256"),
            message="no sha256 for a remote location: Argo Rollouts will run whatever binary "
            "the URL serves; set sha256 to pin it",
            warning=True,
        )


def _duplicate_names(plugins: dict[str, Any]) -> Iterator[Finding]:
    first: dict[str, tuple[str, int]] = {}
    for list_name in PLUGIN_LISTS:
        entries = plugins.get(list_name)
        if not isinstance(entries, list):
            continue
        list_path = ("spec", "plugins", list_name)
        for index, entry in enumerate(entries):
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str) or plugin_name_problem(name):
                continue
            if name not in first:
                first[name] = (list_name, index)
                continue
            other_list, other_index = first[name]
            if other_list == list_name:
                yield Finding(
                    path=(*list_path, index, "name"),
                    message=f"duplicate plugin name {short(name)}: already listed at "
                    f"{list_name}[{other_index}]",
                    compare=(list_path,),
                )
            else:
                yield Finding(
                    path=(*list_path, index, "name"),
                    message=f"plugin {short(name)} is also listed at "
                    f"{other_list}[{other_index}]: Argo Rollouts stores every plugin binary at "
                    "plugin-bin/<namespace>/<name>, so a name can be used only once",
                    compare=(("spec", "plugins", other_list), list_path),
                )


def _second_manager(rm: dict[str, Any], lookup: RolloutManagerLookup) -> Iterator[Finding]:
    metadata = rm.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace, own = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not namespace:
        return
    try:
        managers = lookup(namespace)
    except LookupUnavailable:
        return
    others = []
    for item in managers if isinstance(managers, list) else []:
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and name != own:
            others.append(name)
    if others:
        listed = ", ".join(short(n) for n in sorted(others))
        yield Finding(
            path=("metadata", "name"),
            message=f"namespace {short(namespace)} already has a RolloutManager ({listed}); "
            "only the oldest RolloutManager in a namespace has its plugins synced",
            warning=True,
        )


def check_rollout_manager(
    rm: Any,
    *,
    allow_http_plugins: bool = False,
    rollout_managers: RolloutManagerLookup | None = None,
) -> list[Finding]:
    """Errors and warnings for ``spec.plugins`` (plus the one-per-namespace warning).

    ``rollout_managers(namespace)`` enables the "second RolloutManager" warning; when it
    raises ``LookupUnavailable`` that warning is left out.
    """
    if not isinstance(rm, dict):
        return []
    spec = rm.get("spec")
    plugins = spec.get("plugins") if isinstance(spec, dict) else None
    if isinstance(plugins, dict):
        too_big = oversized(("spec", "plugins"), plugins, PLUGIN_LISTS)
        if too_big:
            return too_big
    findings = schema_findings(PLUGINS_VALIDATOR, rm)
    if isinstance(plugins, dict):
        for list_name in PLUGIN_LISTS:
            entries = plugins.get(list_name)
            if not isinstance(entries, list):
                continue
            for index, entry in enumerate(entries):
                if isinstance(entry, dict):
                    findings.extend(
                        _entry_rules(
                            ("spec", "plugins", list_name, index),
                            entry,
                            allow_http=allow_http_plugins,
                        )
                    )
        findings.extend(_duplicate_names(plugins))
    if rollout_managers is not None:
        findings.extend(_second_manager(rm, rollout_managers))
    return sort_findings(findings)
