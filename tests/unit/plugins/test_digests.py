"""Digest pre-flight (reconciler/plugins/digests.py).

The download tests run against a real HTTPS server on 127.0.0.1 with a CA made by the
test (support/testkit/plugin_server.py): the fetcher trusts it only through ``ca_file``, exactly
as the reconciler trusts a mirror through ``--plugins-ca-file``.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict, Unpack

import pytest

from reconciler.plugins.digests import (
    DigestVerifier,
    DownloadError,
    DownloadLimits,
    checked_entries,
    https_fetcher,
    preflight,
    problems,
)
from testkit import objects
from testkit.plugin_server import PluginServer, elf_stand_in, sha256

BINARY = elf_stand_in("rollgate test plugin", copies=1000)
DIGEST = sha256(BINARY)
WRONG = "0" * 64


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PluginServer]:
    with PluginServer(tmp_path / "https") as srv:
        yield srv


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[PluginServer]:
    with PluginServer(tmp_path / "http", tls=False) as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetcher honours proxy variables: the tests decide which are set."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                 "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


class Limits(TypedDict, total=False):
    """Keyword arguments of ``DownloadLimits``."""

    max_bytes: int
    timeout: float
    read_timeout: float
    max_redirects: int


def verifier_for(server: PluginServer, **limits: Unpack[Limits]) -> DigestVerifier:
    fetch = https_fetcher(ca_file=str(server.ca_file), limits=DownloadLimits(**limits))
    return DigestVerifier(fetch)


# --- downloads against a real HTTPS server --------------------------------------------------


def test_correct_digest_is_verified(server: PluginServer) -> None:
    url = server.serve("/plugin", BINARY)
    check = verifier_for(server).check(url, DIGEST)
    assert check.outcome == "verified"
    assert check.actual == DIGEST
    assert check.ok


def test_wrong_digest_is_a_mismatch_naming_both_digests(server: PluginServer) -> None:
    url = server.serve("/plugin", BINARY)
    check = verifier_for(server).check(url, WRONG)
    assert check.outcome == "mismatch"
    assert (check.expected, check.actual) == (WRONG, DIGEST)


def test_server_down_is_a_failed_download(server: PluginServer) -> None:
    url = server.serve("/plugin", BINARY)
    server.stop()
    check = verifier_for(server).check(url, DIGEST)
    assert check.outcome == "failed"
    assert check.reason == "connection refused"
    assert check.actual == ""


def test_http_error_status_is_a_failed_download(server: PluginServer) -> None:
    check = verifier_for(server).check(server.url("/nothing-here"), DIGEST)
    assert (check.outcome, check.reason) == ("failed", "HTTP 404 Not Found")


def test_a_server_the_ca_does_not_vouch_for_is_refused(server: PluginServer) -> None:
    """Without the test CA only the system CAs count, and they do not know this server."""
    url = server.serve("/plugin", BINARY)
    check = DigestVerifier(https_fetcher()).check(url, DIGEST)
    assert check.outcome == "failed"
    assert check.reason.startswith("TLS certificate not trusted")
    assert server.requests == [], "no request is sent over an unverified connection"


def test_redirect_to_https_is_followed(server: PluginServer) -> None:
    server.serve("/releases/v1/plugin", BINARY)
    url = server.redirect("/latest", server.url("/releases/v1/plugin"))
    assert verifier_for(server).check(url, DIGEST).outcome == "verified"
    assert server.requests == ["/latest", "/releases/v1/plugin"]


def test_redirect_to_http_is_refused(server: PluginServer, plain: PluginServer) -> None:
    target = plain.serve("/plugin", BINARY)
    url = server.redirect("/plugin", target, code=301)
    check = verifier_for(server).check(url, DIGEST)
    assert check.outcome == "failed"
    assert "redirects are followed only to https" in check.reason
    assert plain.requests == [], "the http URL is never fetched"


def test_redirect_loops_end(server: PluginServer) -> None:
    url = server.redirect("/a", server.url("/a"))
    check = verifier_for(server, max_redirects=3).check(url, DIGEST)
    assert check.outcome == "failed"
    assert "redirect" in check.reason


def test_oversize_announced_by_content_length_is_not_read(server: PluginServer) -> None:
    url = server.serve("/plugin", BINARY)
    check = verifier_for(server, max_bytes=len(BINARY) - 1).check(url, DIGEST)
    assert check.outcome == "failed"
    assert f"announces {len(BINARY)} bytes" in check.reason


def test_oversize_without_content_length_stops_at_the_cap(server: PluginServer) -> None:
    url = server.stall("/plugin", first=b"y" * 5000, seconds=5)
    started = time.monotonic()
    check = verifier_for(server, max_bytes=4096).check(url, DIGEST)
    assert check.outcome == "failed"
    assert "more than 4096 bytes" in check.reason
    assert time.monotonic() - started < 4, "stopped at the cap, not at the end of the body"


def test_a_stalled_download_times_out(server: PluginServer) -> None:
    url = server.stall("/plugin", seconds=10)
    started = time.monotonic()
    check = verifier_for(server, timeout=1.0, read_timeout=1.0).check(url, DIGEST)
    assert check.outcome == "failed"
    assert check.reason == "timed out"
    assert time.monotonic() - started < 5


def test_http_is_downloaded_only_when_allowed(plain: PluginServer) -> None:
    url = plain.serve("/plugin", BINARY)
    with pytest.raises(DownloadError, match="not downloaded"):
        https_fetcher()(url)
    assert plain.requests == []
    assert https_fetcher(allow_http=True)(url) == DIGEST


def test_file_locations_are_never_fetched(tmp_path: Path) -> None:
    local = tmp_path / "plugin"
    local.write_bytes(BINARY)
    with pytest.raises(DownloadError):
        https_fetcher(allow_http=True)(local.as_uri())


class ConnectProxy:
    """A minimal HTTP CONNECT proxy that records the targets it tunnels to; a host in
    ``resolve`` is reached at the address given there (a DNS of its own)."""

    def __init__(self, resolve: dict[str, str] | None = None) -> None:
        self.resolve = resolve or {}
        self.targets: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        target = head.split(b" ")[1].decode()
        self.targets.append(target)
        host, port = target.rsplit(":", 1)
        if host not in self.resolve and host != "127.0.0.1":
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection((self.resolve.get(host, host), int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pair = {client: upstream, upstream: client}
        while True:
            ready, _, _ = select.select(list(pair), [], [], 5)
            if not ready:
                break
            for s in ready:
                data = s.recv(65536)
                if not data:
                    client.close()
                    upstream.close()
                    return
                pair[s].sendall(data)

    def close(self) -> None:
        self.sock.close()


def test_proxy_from_the_environment_is_used(
    server: PluginServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        url = server.serve("/plugin", BINARY)
        assert verifier_for(server).check(url, DIGEST).outcome == "verified"
        assert proxy.targets == [f"127.0.0.1:{server.port}"]

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert https_fetcher(ca_file=str(server.ca_file))(url) == DIGEST
        assert len(proxy.targets) == 1, "NO_PROXY bypasses the proxy"
    finally:
        proxy.close()


# --- the host Argo Rollouts fetches from: UTS #46 non-transitional ----------------------------

# (as written, as Go's net/http dials it). Python's own IDNA 2003 codec, which socket,
# ssl and http.client apply to a str host, makes the first strasse.de: another host.
IDN_HOSTS = [
    ("straße.de", "xn--strae-oqa.de"),
    ("ｐｌｕｇｉｎｓ．example。com", "plugins.example.com"),  # full-width letters, stops
]


@pytest.mark.parametrize(("written", "fetched"), IDN_HOSTS)
def test_an_internationalised_host_is_fetched_by_its_ascii_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str, fetched: str
) -> None:
    """Connection (the proxy's CONNECT), TLS name and Host header are all the ASCII
    form."""
    with PluginServer(tmp_path / "idn", names=(fetched,)) as server:
        server.serve("/plugin", BINARY)
        proxy = ConnectProxy(resolve={fetched: "127.0.0.1"})
        try:
            monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
            check = verifier_for(server).check(f"https://{written}:{server.port}/plugin",
                                               DIGEST)
            assert (check.outcome, check.reason) == ("verified", "")
            assert proxy.targets == [f"{fetched}:{server.port}"]
            assert server.hosts == [f"{fetched}:{server.port}"]
        finally:
            proxy.close()


def test_a_non_ascii_path_is_sent_percent_encoded(server: PluginServer) -> None:
    """As Go sends it (http.client would refuse to send it at all)."""
    server.serve("/plugins/gr%C3%B6%C3%9Fe", BINARY)
    check = verifier_for(server).check(server.url("/plugins/größe"), DIGEST)
    assert (check.outcome, check.reason) == ("verified", "")
    assert server.requests == ["/plugins/gr%C3%B6%C3%9Fe"]


def test_a_redirect_to_an_internationalised_host_goes_to_its_ascii_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Location header carries the host in UTF-8; urllib percent-encodes it, Go
    decodes and maps it: the redirect goes where Argo Rollouts' would."""
    with PluginServer(tmp_path / "idn", names=("xn--strae-oqa.de",)) as server:
        server.serve("/plugin", BINARY)
        target = f"https://straße.de:{server.port}/plugin"
        # http.server writes header values as latin-1: these are the UTF-8 bytes.
        url = server.redirect("/old", target.encode().decode("latin-1"))
        proxy = ConnectProxy(resolve={"xn--strae-oqa.de": "127.0.0.1"})
        try:
            monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
            check = verifier_for(server).check(url, DIGEST)
            assert (check.outcome, check.reason) == ("verified", "")
            assert proxy.targets == [f"127.0.0.1:{server.port}",
                                     f"xn--strae-oqa.de:{server.port}"]
        finally:
            proxy.close()


def test_a_host_that_cannot_be_fetched_fails_without_a_connection() -> None:
    with pytest.raises(DownloadError) as raised:
        https_fetcher()("https://plugins..example.com/p")
    assert str(raised.value) == ('host "plugins..example.com" cannot be fetched: it has an '
                                 "empty label (two dots in a row, or a dot first)")


# --- the cache ------------------------------------------------------------------------------


class CountingFetch:
    def __init__(self, digests: dict[str, str], *, delay: float = 0.0) -> None:
        self.digests = digests
        self.delay = delay
        self.calls: list[str] = []

    def __call__(self, location: str) -> str:
        self.calls.append(location)
        time.sleep(self.delay)
        if location not in self.digests:
            raise DownloadError("connection refused")
        return self.digests[location]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_verified_pair_is_downloaded_once_until_it_expires() -> None:
    fetch, clock = CountingFetch({"https://x/p": DIGEST}), Clock()
    verifier = DigestVerifier(fetch, verified_ttl=60, clock=clock)
    assert verifier.check("https://x/p", DIGEST).cached is False
    second = verifier.check("https://x/p", DIGEST)
    assert (second.outcome, second.cached) == ("verified", True)
    assert len(fetch.calls) == 1
    clock.now += 61
    assert verifier.check("https://x/p", DIGEST).cached is False
    assert len(fetch.calls) == 2


def test_the_pair_is_the_key_not_the_location() -> None:
    """A fixed digest for the same URL is a new question."""
    fetch = CountingFetch({"https://x/p": DIGEST})
    verifier = DigestVerifier(fetch)
    assert verifier.check("https://x/p", WRONG).outcome == "mismatch"
    assert verifier.check("https://x/p", DIGEST).outcome == "verified"
    assert len(fetch.calls) == 2


def test_failures_are_remembered_briefly() -> None:
    fetch, clock = CountingFetch({}), Clock()
    verifier = DigestVerifier(fetch, failure_ttl=30, clock=clock)
    assert verifier.check("https://x/p", DIGEST).outcome == "failed"
    assert verifier.check("https://x/p", DIGEST).cached
    clock.now += 31
    fetch.digests["https://x/p"] = DIGEST  # the server is back
    assert verifier.check("https://x/p", DIGEST).outcome == "verified"
    assert len(fetch.calls) == 2


def test_the_cache_is_bounded_least_recently_used_first_out() -> None:
    digests = {f"https://x/{i}": DIGEST for i in range(5)}
    fetch = CountingFetch(digests)
    verifier = DigestVerifier(fetch, max_entries=3)
    for i in range(4):
        verifier.check(f"https://x/{i}", DIGEST)
    assert len(verifier) == 3
    verifier.check("https://x/1", DIGEST)  # still cached
    assert len(fetch.calls) == 4
    verifier.check("https://x/0", DIGEST)  # was evicted first
    assert len(fetch.calls) == 5


def test_concurrent_checks_of_one_pair_share_one_download() -> None:
    fetch = CountingFetch({"https://x/p": DIGEST}, delay=0.3)
    verifier = DigestVerifier(fetch)
    results = []
    threads = [threading.Thread(target=lambda: results.append(verifier.check("https://x/p",
                                                                             DIGEST)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fetch.calls) == 1
    assert [r.outcome for r in results] == ["verified"] * 4


# --- which entries are checked --------------------------------------------------------------


def rm(plugins: dict[str, object]) -> dict[str, object]:
    return objects.rollout_manager("r", namespace="ns", plugins=plugins)


def test_only_remote_entries_with_a_digest_are_checked() -> None:
    obj = rm({
        "trafficManagement": [
            {"name": "a/gw", "location": "https://x/gw", "sha256": " " + DIGEST.upper()},
            {"name": "a/nodigest", "location": "https://x/n"},
        ],
        "metric": [
            {"name": "a/file", "location": "file:///p", "sha256": DIGEST},
            {"name": "a/http", "location": "http://x/h", "sha256": DIGEST},
            {"name": "a/upper", "location": "HTTPS://x/u", "sha256": DIGEST},
        ],
    })
    assert list(checked_entries(obj, allow_http=False)) == [
        ("spec.plugins.trafficManagement[0]", "a/gw", "https://x/gw", DIGEST),
        ("spec.plugins.metric[2]", "a/upper", "HTTPS://x/u", DIGEST),
    ]
    assert [p for p, *_ in checked_entries(obj, allow_http=True)] == [
        "spec.plugins.trafficManagement[0]", "spec.plugins.metric[1]", "spec.plugins.metric[2]",
    ]


def test_a_problem_names_the_url_fetched_when_it_is_another() -> None:
    obj = rm({"metric": [{"name": "a/m", "location": "https://straße.de/m", "sha256": DIGEST},
                         {"name": "a/n", "location": "HTTPS://x/n", "sha256": DIGEST}]})
    found = problems(preflight(obj, DigestVerifier(CountingFetch({})), allow_http=False))
    assert [p.describe() for p in found] == [
        "spec.plugins.metric[0].location: plugin a/m: download of https://straße.de/m (fetched as "
        f"https://xn--strae-oqa.de/m) failed: connection refused (expected sha256 {DIGEST}, "
        "actual unknown)",
        "spec.plugins.metric[1].location: plugin a/n: download of HTTPS://x/n failed: connection "
        f"refused (expected sha256 {DIGEST}, actual unknown)",
    ]


def test_preflight_describes_each_problem_with_both_digests() -> None:
    fetch = CountingFetch({"https://x/gw": DIGEST})
    obj = rm({"trafficManagement": [{"name": "a/gw", "location": "https://x/gw",
                                     "sha256": WRONG}],
              "metric": [{"name": "a/m", "location": "https://down/m", "sha256": DIGEST}]})
    found = problems(preflight(obj, DigestVerifier(fetch), allow_http=False))
    assert [p.describe() for p in found] == [
        f"spec.plugins.trafficManagement[0].sha256: plugin a/gw: the binary at https://x/gw "
        f"has sha256 {DIGEST}, expected {WRONG}",
        f"spec.plugins.metric[0].location: plugin a/m: download of https://down/m failed: "
        f"connection refused (expected sha256 {DIGEST}, actual unknown)",
    ]

