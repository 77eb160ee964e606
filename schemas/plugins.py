"""``check_rollout_manager``: every finding about a RolloutManager's ``spec.plugins``.

The JSON Schema checks structure; the rules here say why a name, location or digest is
wrong in terms of what Argo Rollouts will do with it. Argo Rollouts only reads plugins
at start-up and stores each binary at ``plugin-bin/<namespace>/<name>``, so a bad entry
means a controller that crash-loops or silently runs the wrong binary: everything that
can be caught at submit time is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from schemas.compiled import PLUGINS_VALIDATOR
from schemas.constants import KIND_ROLLOUT_MANAGER
from schemas.findings import Finding, Path, sort_findings
from schemas.hosts import host_form, host_problem, host_warning, ip_address_of, netloc_host
from schemas.limits import oversized
from schemas.lookups import LookupUnavailable, RolloutManagerLookup
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.objects import meta_of
from schemas.skew import as_served
from schemas.translate import schema_findings, short

# Argo Rollouts' own pattern (utils/plugin/types): <namespace>/<name>.
PLUGIN_NAME = re.compile(r"[A-Za-z0-9-]+/[A-Za-z0-9_.-]+")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
SHA1_HINT = "this is the length of a SHA-1 digest; sha256 needs 64 hex characters"
PREFIX_HINT = 'drop the prefix: sha256 takes the 64 hex characters alone, without "sha256:"'
REMOTE_SCHEMES = frozenset({"https", "http"})
# Longer URLs are not plugin locations (and many proxies and servers refuse them).
MAX_LOCATION = 2048
# Characters that render as nothing, or reorder the text around them, so a URL can read
# as one address and fetch another: every format character (Unicode category Cf: zero
# width space/joiners, bidi marks, embeddings, overrides and isolates, BOM, soft hyphen,
# tag characters) plus the blank letters and joiners that are not Cf.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")
_VARIATION_SELECTORS = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
CLUSTER_SUFFIXES = (".svc", ".cluster.local")


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


def _invisible(ch: str) -> bool:
    code = ord(ch)
    return (
        unicodedata.category(ch) == "Cf"
        or ch in _INVISIBLE_EXTRA
        or any(low <= code <= high for low, high in _VARIATION_SELECTORS)
    )


def invisible_problem(value: str) -> str | None:
    """The first invisible formatting character in ``value``, named, or None."""
    if value.isascii():
        return None  # every invisible formatting character is outside ASCII
    for index, ch in enumerate(value):
        if _invisible(ch):
            label = unicodedata.name(ch, "invisible character")
            return (
                f"contains an invisible formatting character (U+{ord(ch):04X} {label}) at "
                f"character {index + 1}: the URL can read as one address and fetch another; "
                "retype it"
            )
    return None


def _dot_segments(path: str) -> bool:
    # Argo Rollouts reads the decoded path (Go's url.ParseRequestURI), so %2e%2e counts.
    return any(seg in (".", "..") for seg in unquote(path).split("/"))


def location_problem(location: str, *, allow_http: bool) -> str | None:
    """Why Argo Rollouts could not (or should not) fetch a plugin from ``location``."""
    if not location:
        return "must not be empty: an https:// or file:// URL of the plugin binary"
    if len(location) > MAX_LOCATION:
        return f"is {len(location)} characters long; at most {MAX_LOCATION} are accepted"
    invisible = invisible_problem(location)
    if invisible:
        return invisible
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
        return host_problem(netloc_host(parts.netloc))
    if parts.netloc:
        return (
            f"{short(location)} is not an absolute path: Argo Rollouts joins host and path, "
            f"so {short(parts.netloc)} makes it relative; use file:///<absolute path>"
        )
    if not parts.path.startswith("/"):
        return "must be an absolute path: file:///<absolute path>"
    if _dot_segments(parts.path):
        return (
            "must not contain '.' or '..' path segments: Argo Rollouts resolves them, so "
            "the file it copies is not the one the path seems to name; write the path "
            "without them"
        )
    return None


def host_concern(hostname: str, *, fetched: str | None = None) -> str | None:
    """Why a download host deserves a second look (a warning), or None.

    Argo Rollouts downloads from inside its pod, on the cluster network: a loopback
    address is that pod itself, a link-local one the node's (or the cloud metadata
    service), and a cluster-internal name whatever Service holds it in this cluster.
    Decided on ``fetched``, the ASCII form (localhost written in full-width letters
    is localhost), and worded with the host as written.
    """
    concern = _host_concern((fetched or hostname).lower().rstrip("."))
    # Quoted only for a warning: most hosts are plain public names.
    return None if concern is None else f"host {short(hostname)} {concern}"


def _host_concern(host: str) -> str | None:
    ip = ip_address_of(host.strip("[]"))
    if ip is not None:
        if ip.is_loopback or ip.is_unspecified:
            return ("is a loopback address: Argo Rollouts downloads from inside its own pod, "
                    "where no plugin server runs")
        if ip.is_link_local:
            return ("is a link-local address (169.254.169.254 is the cloud metadata service): "
                    "not a plugin server")
        return ("is an IP address: whoever holds that address serves the binary; use a DNS "
                "name, and pin the binary with sha256")
    if host == "localhost" or host.endswith(".localhost"):
        return ("is a loopback name: Argo Rollouts downloads from inside its own pod, where no "
                "plugin server runs")
    if host.endswith(CLUSTER_SUFFIXES) or "." not in host:
        return ("is a cluster-internal name: it resolves to whatever holds that name in the "
                "cluster Argo Rollouts runs in; pin the binary with sha256")
    return None


def location_warnings(location: str) -> Iterator[str]:
    """Warnings about a location that passed ``location_problem``."""
    parts = _split(location)
    if parts is None:
        return
    remote = parts.scheme.lower() in REMOTE_SCHEMES
    if remote and parts.hostname:
        written = netloc_host(parts.netloc)
        differs = host_warning(written)
        if differs:
            yield differs
        concern = host_concern(parts.hostname, fetched=host_form(written).ascii)
        if concern:
            yield concern
    if parts.query:
        if remote:
            yield (
                "has a query string: anyone who can read ConfigMap argo-rollouts-config (and "
                "the Argo Rollouts logs, which print the URL) reads it; keep tokens out of URLs"
            )
        else:
            yield "has a query string, which Argo Rollouts ignores: it copies the path only"


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
    if digest.startswith("sha256:"):
        return PREFIX_HINT
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
        else:
            for message in location_warnings(location):
                yield Finding(path=(*path, "location"), message=message, warning=True)
    digest = entry.get("sha256")
    digest_ok = False
    if isinstance(digest, str):
        problem = sha256_problem(digest)
        digest_ok = problem is None
        if problem:
            yield Finding(path=(*path, "sha256"), message=problem)
    if not location_ok:
        return
    if is_remote(location) and not normalize_sha256(digest):
        yield Finding(
            path=(*path, "sha256"),
            message="no sha256 for a remote location: Argo Rollouts will run whatever binary "
            "the URL serves; set sha256 to pin it",
            warning=True,
        )
    elif not is_remote(location) and digest_ok and normalize_sha256(digest):
        yield Finding(
            path=(*path, "sha256"),
            message="is not checked for a file:// location: Argo Rollouts (v1.9) only copies "
            "the file and verifies sha256 of downloads alone",
            warning=True,
        )


# argo-rollouts-manager (v0.0.9) adds this traffic plugin itself and refuses a
# RolloutManager that lists it (docs/plugins.md, "RolloutManager plugins").
OPERATOR_OWN_PLUGIN = "argoproj-labs/openshift"


def _indexes_named(plugins: dict[str, Any], kind: str, name: str) -> Iterator[int]:
    """The indexes of ``spec.plugins.<kind>`` entries called ``name`` (a malformed list
    has none: the schema check reports it)."""
    entries = plugins.get(kind)
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and entry.get("name") == name:
            yield index


def _operator_refuses(plugins: dict[str, Any]) -> Iterator[Finding]:
    """A warning, not a denial: without the operator the name is a legitimate plugin."""
    for index in _indexes_named(plugins, "trafficManagement", OPERATOR_OWN_PLUGIN):
        yield Finding(
            path=("spec", "plugins", "trafficManagement", index, "name"),
            message=f"argo-rollouts-manager refuses a RolloutManager that lists "
            f"{OPERATOR_OWN_PLUGIN} (it adds that plugin itself): where the operator "
            "runs, it renders nothing of this spec (an edited one keeps its previous "
            "plugins, a new one never gets its Deployment); remove the entry there",
            warning=True,
        )


def _operator_name_collision(plugins: dict[str, Any]) -> Iterator[Finding]:
    """argo-rollouts-manager (v0.0.9) refuses the name only among traffic plugins, and
    always renders its own traffic plugin of that name: a metric plugin of that name then
    shares ``plugin-bin/argoproj-labs/openshift`` with it in Argo Rollouts. A warning:
    without the operator the name is free."""
    for index in _indexes_named(plugins, "metric", OPERATOR_OWN_PLUGIN):
        yield Finding(
            path=("spec", "plugins", "metric", index, "name"),
            message=f"argo-rollouts-manager always adds its own traffic plugin "
            f"{OPERATOR_OWN_PLUGIN}: where the operator runs, this metric plugin gets "
            "the same name in the other list, and Argo Rollouts stores both binaries at "
            f"plugin-bin/{OPERATOR_OWN_PLUGIN}; rename it there",
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


def manager_age_key(rm: Mapping[str, Any]) -> tuple[str, str]:
    """Sort key for "the oldest RolloutManager in a namespace owns the plugins".

    RFC 3339 timestamps in UTC ("...Z") sort lexically in time order; the name breaks
    ties (same-second creations), so the webhook and every reconciler replica agree on
    the owner. Shared with the reconciler so the warning names the one it syncs.
    """
    meta = meta_of(rm)
    created, name = meta.get("creationTimestamp"), meta.get("name")
    return (created if isinstance(created, str) else "", name if isinstance(name, str) else "")


def _second_manager(rm: dict[str, Any], lookup: RolloutManagerLookup) -> Iterator[Finding]:
    """The warning for a RolloutManager that will not own the namespace's plugins.

    Only an older live RolloutManager makes this one "second": the owner itself (the
    oldest) is never warned, whichever of the two is being written. The object under
    review has no creationTimestamp only while it is being created, which makes it the
    newest.
    """
    metadata = meta_of(rm)
    namespace, own = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not namespace:
        return
    try:
        managers = lookup(namespace)
    except LookupUnavailable:
        return
    own_key = manager_age_key(rm) if metadata.get("creationTimestamp") else None
    older = []
    for item in managers if isinstance(managers, list) else []:
        meta = meta_of(item)
        name = meta.get("name")
        if not isinstance(name, str) or name == own or meta.get("deletionTimestamp"):
            continue
        if own_key is None or manager_age_key(item) < own_key:
            older.append(item)
    if older:
        owner = min(older, key=manager_age_key)
        yield Finding(
            path=("metadata", "name"),
            message=f"namespace {short(namespace)} already has RolloutManager "
            f"{short(meta_of(owner).get('name'))}, the oldest, which owns the plugin "
            "configuration: the plugins of this one are not synced",
            warning=True,
        )


def check_rollout_manager(
    rm: Any,
    *,
    allow_http_plugins: bool = False,
    rollout_managers: RolloutManagerLookup | None = None,
    served: bool = False,
) -> list[Finding]:
    """Errors and warnings for ``spec.plugins`` (plus the one-per-namespace warning).

    ``served``: the API server accepted ``rm``, so a field rollgate does not know is a
    newer argo-rollouts-manager's: a warning (``schemas.skew``).

    ``rollout_managers(namespace)`` enables the "second RolloutManager" warning; when it
    raises ``LookupUnavailable`` that warning is left out, and it is never asked for an
    object with errors (a denied object is not stored, so it is nobody's second).
    """
    if not isinstance(rm, dict):
        return []
    spec = rm.get("spec")
    plugins = spec.get("plugins") if isinstance(spec, dict) else None
    if isinstance(plugins, dict):
        too_big = oversized(("spec", "plugins"), plugins, PLUGIN_LISTS)
        if too_big:
            return too_big
    findings = schema_findings(PLUGINS_VALIDATOR, rm, served=served)
    if served:
        findings = as_served(findings, kind=KIND_ROLLOUT_MANAGER)
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
        findings.extend(_operator_refuses(plugins))
        findings.extend(_operator_name_collision(plugins))
    if rollout_managers is not None and not any(not f.warning for f in findings):
        findings.extend(_second_manager(rm, rollout_managers))
    return sort_findings(findings)
