"""The real server: ``python -m webhook`` (gunicorn, gthread, TLS) with certificates
from ``certs.generate``, reached over HTTPS on loopback as the API server would."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import signal
import socket
import ssl
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

import certs
from testkit import reviews
from testkit.waits import wait_for
from testkit.webhook_server import WebhookServer, serve


def _der(pem_path: Path) -> bytes:
    return x509.load_pem_x509_certificate(pem_path.read_bytes()).public_bytes(Encoding.DER)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[WebhookServer, certs.CertPaths]]:
    with serve(tmp_path, workers=2, threads=2) as running:
        yield running


AEAD_TLS12 = ("ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256",
              "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-AES256-GCM-SHA384",
              "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305")


def _tls12_client(ciphers: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_ciphers(ciphers + ":@SECLEVEL=0")
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


def test_real_gunicorn_over_tls(server):
    """One server, as the API server meets it: reviews on kept-alive connections, the
    TLS versions and suites it accepts, and a certificate rotated under it."""
    srv, paths = server
    _reviews_on_one_connection(srv)
    _old_tls_refused(srv)
    _aead_suites_only(srv)
    _rotation(srv, paths)


def _reviews_on_one_connection(srv: WebhookServer) -> None:
    """A review over HTTPS, verified against the generated CA; two on one kept-alive
    connection, as the API server sends them; a body over the limit is a 413."""
    conn = srv.connect()
    body = json.dumps(reviews.review(reviews.invalid_rollout_manager(), uid="tls-1"))
    conn.request("POST", "/validate/rolloutmanagers", body=body,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    answer = json.loads(resp.read())["response"]
    assert answer["uid"] == "tls-1"
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    first_socket = conn.sock
    conn.request("POST", "/mutate/stages",
                 body=json.dumps(reviews.review(reviews.valid_stage(), uid="tls-2")),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert json.loads(resp.read())["response"] == {"uid": "tls-2", "allowed": True}
    assert conn.sock is first_socket, "connection was not kept alive"
    # gunicorn hands Flask a chunked body cut at the limit instead of refusing it; the
    # answer must still be 413, not a 400 about truncated JSON.
    big = (b'{"x": "' + b"a" * (8 * 1024 * 1024) + b'"}',)
    conn.request("POST", "/validate/stages", body=iter(big), encode_chunked=True,
                 headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 413
    conn.close()
    conn = srv.connect()
    conn.request("GET", "/metrics")
    metrics = conn.getresponse().read().decode()
    assert 'endpoint="/validate/rolloutmanagers",result="denied"' in metrics
    conn.close()


def _old_tls_refused(srv: WebhookServer) -> None:
    """TLS 1.1 is refused by the server. The client is allowed everything down to
    TLS 1.0 (security level 0), so the refusal cannot come from the client side."""
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():  # the point of this client is to be deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(ssl.SSLError), socket.create_connection(
            ("127.0.0.1", srv.port), timeout=10) as raw:
        old.wrap_socket(raw).close()
    modern = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    modern.check_hostname = False
    modern.verify_mode = ssl.CERT_NONE
    modern.set_ciphers("DEFAULT:@SECLEVEL=0")
    modern.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw, \
            modern.wrap_socket(raw) as tls:
        assert tls.version() == "TLSv1.2"
        cipher = tls.cipher()
        assert cipher is not None and cipher[0] in AEAD_TLS12  # the server picks AEAD


def _aead_suites_only(srv: WebhookServer) -> None:
    """TLS 1.2 with CBC suites only (what OpenSSL's defaults used to add) is refused;
    each AEAD suite on its own is accepted."""
    cbc = _tls12_client("ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA384:"
                        "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA")
    with pytest.raises(ssl.SSLError), socket.create_connection(
            ("127.0.0.1", srv.port), timeout=10) as raw:
        cbc.wrap_socket(raw).close()
    for suite in AEAD_TLS12:
        if "RSA" in suite:
            continue  # the test certificate is ECDSA
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw, \
                _tls12_client(suite).wrap_socket(raw) as tls:
            cipher = tls.cipher()
            assert cipher is not None and cipher[0] == suite


def _rotation(srv: WebhookServer, paths: certs.CertPaths) -> None:
    """New files on disk, and new connections get the new certificate."""
    assert srv.served_cert() == _der(paths.tls_cert)
    old_der = _der(paths.tls_cert)
    assert _validity_gauges(srv) == _validity(paths.tls_cert)
    certs.generate(paths.out_dir, reuse_ca=True, lifetime=dt.timedelta(days=30))
    new_der = _der(paths.tls_cert)
    assert new_der != old_der
    # each worker process reloads on its next connection; try enough connections to
    # reach both workers
    served = {srv.served_cert() for _ in range(6)}
    assert served == {new_der}, "a connection was served the old certificate"
    assert "certificate reloaded" in srv.log.read_text()
    # /metrics shows the earliest notBefore and notAfter among the workers: every one
    # serves the new, so both are the new certificate's (the renewal-overdue alert
    # places the renewal point from the two).
    assert _validity_gauges(srv) == _validity(paths.tls_cert)


def _validity(path: Path) -> tuple[float, float]:
    """notBefore and notAfter of the certificate in ``path``."""
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()


def _validity_gauges(srv: WebhookServer) -> tuple[float, float]:
    """rollgate_webhook_certificate_not_{before,after}_timestamp_seconds as /metrics
    shows them."""
    conn = srv.connect()
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    values = []
    for name in ("not_before", "not_after"):
        [value] = [float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(f"rollgate_webhook_certificate_{name}_timestamp_seconds")]
        values.append(value)
    return values[0], values[1]


def _review(conn: http.client.HTTPSConnection, uid: str) -> http.client.HTTPResponse:
    conn.request("POST", "/validate/stages",
                 body=json.dumps(reviews.review(reviews.valid_stage(), uid=uid)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return resp


def test_a_worker_records_its_answers_metrics_without_being_scraped(tmp_path: Path) -> None:
    """The metrics are recorded after the answer is written, by the worker that wrote
    it, not only when /metrics is asked (which records its own worker's queue first):
    read from the workers' metrics files, with no scrape made."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()

    def allowed() -> float:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(metrics_dir))
        value = registry.get_sample_value("rollgate_webhook_requests_total",
                                          {"endpoint": "/validate/stages", "result": "allowed"})
        return value or 0.0

    with serve(tmp_path, workers=2, threads=2,
               env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}) as (srv, _paths):
        conn = srv.connect()
        for uid in ("m-1", "m-2", "m-3"):
            assert _review(conn, uid).status == 200
        conn.close()
        wait_for("the three answers counted in the metrics files",
                 lambda: allowed() == 3.0, timeout=10)


def test_a_stopping_server_answers_kept_alive_connections_then_closes_them(
        tmp_path: Path) -> None:
    """After SIGTERM (the pod is being replaced) the API server still sends reviews on
    the connections it pooled: each is answered, with ``Connection: close``, for longer
    than gunicorn's own 2 s; a connection the client never uses again is closed by the
    server only after that, and the server exits inside its graceful timeout."""
    with serve(tmp_path, workers=1, threads=2) as (srv, _paths):
        used, idle = srv.connect(), srv.connect()
        assert _review(used, "before").getheader("Connection") != "close"
        assert _review(idle, "idle").status == 200
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(4)  # past gunicorn's 2 s, inside the worker's stop linger
        late = _review(used, "late")
        assert late.status == 200
        assert late.getheader("Connection") == "close"
        assert idle.sock is not None
        assert idle.sock.recv(1) == b"", "the idle connection was not closed by the server"
        assert srv.proc.wait(timeout=15) == 0


def test_silent_and_stalled_connections_do_not_starve_the_server(tmp_path):
    """Connections that never finish the TLS handshake must not hold the worker's
    threads: 16 that send nothing and 4 that stop after the first byte of a
    ClientHello, against one worker with 4 threads. /healthz answers while they are
    held, and the server closes them once the request deadline is over."""
    with serve(tmp_path, workers=1, threads=4,
               args=("--request-timeout", "2")) as (srv, _paths):
        idle = []
        try:
            for _ in range(16):
                idle.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
            for _ in range(4):
                stalled = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                stalled.sendall(b"\x16")  # a TLS record header, cut short
                idle.append(stalled)
            time.sleep(0.5)
            conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=10,
                                               context=srv.context())
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 200
            conn.close()
            # The stalled ones are cut by the server (EOF), not left open forever.
            for s in idle:
                assert s.recv(1) == b""
            log = srv.log.read_text()
            assert "Traceback" not in log
        finally:
            for s in idle:
                s.close()
