"""Digest pre-flight: prove a plugin's sha256 before Argo Rollouts is restarted with it.

Argo Rollouts (v1.9.1, ``utils/plugin/downloader.go``) downloads every http(s) plugin at
start-up, and on a sha256 mismatch it exits (``level=fatal msg="Failed to download
plugins..."``): the controller crash-loops and no Rollout in the namespace progresses.
A well-formed wrong digest passes every static check, so the reconciler downloads the
binary itself and compares before it writes anything that would restart the controller.
``file://`` locations are not checked (Argo Rollouts does not check them either, and the
reconciler cannot see the controller's file system). The download goes where Argo
Rollouts' would: to the host's UTS #46 non-transitional ASCII form
(``schemas.hosts.fetch_url``), never where Python's IDNA 2003 codec would map it
(``straße.de`` is ``xn--strae-oqa.de`` to Go, ``strasse.de`` to Python), redirects too.

Split for testing: ``https_fetcher`` is the only I/O (a ``Fetch``: location -> hex
sha256 of the body, or ``DownloadError``); ``DigestVerifier`` adds the cache and turns
outcomes into ``DigestCheck`` values; ``preflight`` picks the entries of a spec to check.
Unit tests inject a ``Fetch`` into the verifier and test ``https_fetcher`` against a real
HTTPS server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.client
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import schemas
from schemas.hosts import HostError, fetch_url

from . import executables

Fetch = Callable[[str], str]
Outcome = Literal["verified", "mismatch", "failed", "not-executable"]

USER_AGENT = "rollgate-reconciler (plugin digest pre-flight)"
_CHUNK = 64 * 1024


class DownloadError(Exception):
    """The binary could not be downloaded; ``str()`` says why, for a condition message."""


class NotExecutable(DownloadError):
    """Downloaded whole, but not a Linux executable for the nodes (``executables``)."""


@dataclass(frozen=True, slots=True)
class DownloadLimits:
    """Bounds on one download (flags ``--plugins-max-download-bytes`` and
    ``--plugins-download-timeout``).

    ``timeout`` is the whole download, redirects included; it is checked between reads,
    and a single read (or the connect) waits at most ``read_timeout`` of it.
    """

    max_bytes: int = 256 * 1024 * 1024
    timeout: float = 120.0
    read_timeout: float = 30.0
    max_redirects: int = 10


def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """System CAs, plus ``ca_file`` when given; hostname checked; TLS 1.2 or newer."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


def check_ca_file(path: str) -> None:
    """Raise ``ValueError`` when ``path`` is not a readable PEM CA bundle (for the CLI)."""
    try:
        _tls_context(path)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load CA file {path!r}: {exc}") from None


class _HttpsRedirectsOnly(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to https: a downgrade would let anyone on the path swap
    the binary (Go's client, which Argo Rollouts uses, follows it; the digest check is
    what would catch that, and refusing is the safer answer before a restart)."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        scheme = urlsplit(newurl).scheme.lower()
        if scheme != "https":
            fp.close()
            raise DownloadError(
                f"HTTP {code} redirect to a {scheme or 'relative'}:// URL refused: "
                "redirects are followed only to https"
            )
        try:
            # urllib has percent-encoded a non-ASCII host of the Location; Go decodes
            # and maps it, and so does fetch_url.
            newurl = fetch_url(newurl)
        except HostError as exc:
            fp.close()
            raise DownloadError(f"HTTP {code} redirect refused: {exc}") from None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _https_redirects_only(max_redirects: int) -> _HttpsRedirectsOnly:
    # urllib reads the limit as a class attribute (typeshed: a ClassVar), so each
    # limit gets its own subclass.
    class Limited(_HttpsRedirectsOnly):
        max_redirections = max_redirects

    return Limited()


def _describe_url_error(exc: urllib.error.URLError) -> str:
    reason = exc.reason
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted: {reason.verify_message or reason}"
    if isinstance(reason, BaseException):
        return _describe(reason)
    return str(reason)


# The words for each kind of failure, the first match wins (a subclass before its base:
# HTTPError is a URLError, the next four are OSErrors).
_WORDS: tuple[tuple[type[BaseException], Callable[[Any], str]], ...] = (
    (urllib.error.HTTPError, lambda e: f"HTTP {e.code} {e.reason}"),
    (urllib.error.URLError, _describe_url_error),
    (TimeoutError, lambda e: "timed out"),
    (ConnectionRefusedError, lambda e: "connection refused"),
    (ssl.SSLError, lambda e: f"TLS error: {e.reason or e}"),
    (http.client.HTTPException,
     lambda e: f"bad HTTP response: {type(e).__name__} {e}".strip()),
    (OSError, lambda e: e.strerror or str(e) or type(e).__name__),
)


def _describe(exc: BaseException) -> str:
    """A short reason for a condition message (no traceback, no repr noise)."""
    for kind, words in _WORDS:
        if isinstance(exc, kind):
            return words(exc)
    return f"{type(exc).__name__}: {exc}"


def https_fetcher(
    *,
    ca_file: str | None = None,
    limits: DownloadLimits | None = None,
    allow_http: bool = False,
    arch: str | None = None,
) -> Fetch:
    """A ``Fetch`` that downloads over verified TLS and hashes as it reads.

    With ``arch`` (amd64, arm64) a body that is not a Linux executable for it raises
    ``NotExecutable`` once it is read whole (``executables.problem`` on its first bytes).

    The body is never held in memory or on disk, only hashed. Proxies come from the
    environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), as for Argo Rollouts'
    Go client. The TLS context is built per download, so a rotated ``ca_file`` is
    picked up without a restart.
    """
    limits = limits or DownloadLimits()
    schemes = {"https", "http"} if allow_http else {"https"}

    def fetch(location: str) -> str:
        scheme = urlsplit(location).scheme.lower()
        if scheme not in schemes:
            raise DownloadError(f"{scheme}:// locations are not downloaded")
        try:
            url = fetch_url(location)
        except HostError as exc:
            raise DownloadError(str(exc)) from None
        deadline = time.monotonic() + limits.timeout
        try:
            opener = urllib.request.build_opener(
                urllib.request.ProxyHandler(),
                urllib.request.HTTPSHandler(context=_tls_context(ca_file)),
                _https_redirects_only(limits.max_redirects),
            )
        except (OSError, ssl.SSLError) as exc:
            raise DownloadError(f"CA file unusable: {_describe(exc)}") from None
        request = urllib.request.Request(
            url, headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        )
        try:
            with opener.open(request, timeout=min(limits.read_timeout, limits.timeout)) as resp:
                digest, head = _hash_body(resp, limits, deadline)
        except DownloadError:
            raise
        except Exception as exc:  # every transport failure is a failed download
            raise DownloadError(_describe(exc)) from None
        why = executables.problem(head, arch=arch) if arch else None
        if why:
            raise NotExecutable(why)
        return digest

    return fetch


def _hash_body(resp: Any, limits: DownloadLimits, deadline: float) -> tuple[str, bytes]:
    """The body's sha256 and its first ``executables.HEADER_BYTES`` bytes."""
    length = resp.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > limits.max_bytes:
        raise DownloadError(
            f"the server announces {int(length)} bytes, more than the limit of "
            f"{limits.max_bytes} (--plugins-max-download-bytes)"
        )
    digest = hashlib.sha256()
    size = 0
    head = b""
    # read1: whatever has arrived (up to _CHUNK), so the caps apply as bytes come in
    # rather than after a full buffer.
    while chunk := resp.read1(_CHUNK):
        size += len(chunk)
        if size > limits.max_bytes:
            raise DownloadError(
                f"more than {limits.max_bytes} bytes (--plugins-max-download-bytes)"
            )
        if time.monotonic() > deadline:
            raise DownloadError(
                f"not complete after {limits.timeout:g}s (--plugins-download-timeout)"
            )
        digest.update(chunk)
        if len(head) < executables.HEADER_BYTES:
            head += chunk[:executables.HEADER_BYTES - len(head)]
    return digest.hexdigest(), head


@dataclass(frozen=True, slots=True)
class DigestCheck:
    """The outcome for one (location, expected sha256) pair."""

    location: str
    expected: str
    outcome: Outcome
    actual: str = ""  # the digest of what was downloaded ("" when the download failed)
    reason: str = ""  # why the download failed
    cached: bool = False  # answered from the cache, no download

    @property
    def ok(self) -> bool:
        return self.outcome == "verified"


class DigestVerifier:
    """Checks digests through ``fetch`` and remembers the answers for a while.

    Verified pairs are kept ``verified_ttl`` seconds, so a namespace that re-renders the
    same plugins costs no download and a binary replaced upstream is noticed later;
    a mismatch is kept ``mismatch_ttl`` and a failed download ``failure_ttl`` (short: the
    server may be back), so a burst of events does not become a burst of downloads. At
    most ``max_entries`` pairs are kept, least recently used first out. Concurrent checks
    of one pair wait for a single download.
    """

    def __init__(
        self,
        fetch: Fetch,
        *,
        max_entries: int = 256,
        verified_ttl: float = 3600.0,
        mismatch_ttl: float = 300.0,
        failure_ttl: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max = max_entries
        self._ttl: dict[Outcome, float] = {
            "verified": verified_ttl, "mismatch": mismatch_ttl, "failed": failure_ttl,
            "not-executable": mismatch_ttl,
        }
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], tuple[float, DigestCheck]] = OrderedDict()
        self._inflight: dict[tuple[str, str], threading.Lock] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _cached(self, key: tuple[str, str]) -> DigestCheck | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            expires, check = hit
            if expires <= self._clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return DigestCheck(check.location, check.expected, check.outcome,
                               check.actual, check.reason, cached=True)

    def _remember(self, key: tuple[str, str], check: DigestCheck) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + self._ttl[check.outcome], check)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def check(self, location: str, expected: str) -> DigestCheck:
        key = (location, expected)
        hit = self._cached(key)
        if hit is not None:
            return hit
        with self._lock:
            gate = self._inflight.setdefault(key, threading.Lock())
        with gate:
            hit = self._cached(key)  # another worker may have just downloaded it
            if hit is not None:
                return hit
            try:
                actual = self._fetch(location)
            except NotExecutable as exc:
                check = DigestCheck(location, expected, "not-executable", reason=str(exc))
            except DownloadError as exc:
                check = DigestCheck(location, expected, "failed", reason=str(exc))
            else:
                outcome: Outcome = "verified" if actual == expected else "mismatch"
                check = DigestCheck(location, expected, outcome, actual=actual)
            self._remember(key, check)
        with self._lock:
            self._inflight.pop(key, None)
        return check


@dataclass(frozen=True, slots=True)
class PluginDigest:
    """A pre-flight result for one entry of ``spec.plugins``."""

    path: str  # "spec.plugins.metric[0]"
    name: str
    check: DigestCheck

    def describe(self) -> str:
        """One line for a condition message or an event, with both digests."""
        c = self.check
        where = _fetched_as(c.location)
        if c.outcome == "mismatch":
            return (
                f"{self.path}.sha256: plugin {self.name}: the binary at {where} has sha256 "
                f"{c.actual}, expected {c.expected}"
            )
        if c.outcome == "not-executable":
            return (
                f"{self.path}.location: plugin {self.name}: the file at {where} is "
                f"{c.reason}; Argo Rollouts could not run it"
            )
        if c.outcome == "failed":
            return (
                f"{self.path}.location: plugin {self.name}: download of {where} failed: "
                f"{c.reason} (expected sha256 {c.expected}, actual unknown)"
            )
        return f"{self.path}: plugin {self.name}: sha256 {c.expected} verified"


def _fetched_as(location: str) -> str:
    """``location``, and the URL downloaded when that is another string."""
    try:
        url = fetch_url(location)
    except HostError:
        return location
    return location if url == location else f"{location} (fetched as {url})"


def checked_entries(rm: object, *, allow_http: bool) -> Iterator[tuple[str, str, str, str]]:
    """(path, name, location, sha256) of each entry the pre-flight covers: https with a
    sha256, and http with one when http plugins are allowed."""
    schemes = ("https://", "http://") if allow_http else ("https://",)
    plugins = schemas.normalize_plugins(rm)
    lists = (("trafficManagement", plugins["trafficManagement"]), ("metric", plugins["metric"]))
    for list_name, entries in lists:
        for index, entry in enumerate(entries):
            location, digest = entry.get("location"), entry.get("sha256")
            if (isinstance(location, str) and digest
                    and location.lower().startswith(schemes)):
                yield f"spec.plugins.{list_name}[{index}]", entry["name"], location, digest


def preflight(rm: object, verifier: DigestVerifier, *, allow_http: bool) -> list[PluginDigest]:
    """Check every covered entry of ``rm``'s spec; entries in spec order."""
    return [
        PluginDigest(path, name, verifier.check(location, digest))
        for path, name, location, digest in checked_entries(rm, allow_http=allow_http)
    ]


def problems(results: list[PluginDigest]) -> list[PluginDigest]:
    return [r for r in results if not r.check.ok]
