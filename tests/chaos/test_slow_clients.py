"""Clients that send slowly or stop halfway: each is cut at the request deadline, and
none of them keeps a normal review from being answered meanwhile (before: 8
trickling connections used to stop the webhook answering altogether)."""

from __future__ import annotations

import socket
import threading
import time

from harness.kits.chaos import (
    NORMAL_REVIEW,
    REQUEST_TIMEOUT,
    THREADS,
    WORKERS,
    client_hello,
    closed_by_server,
    probing,
    read_response,
)

# More slow clients than the server has threads, so a thread per slow client would
# leave none for the normal review.
SLOW_CLIENTS = 2 * WORKERS * THREADS
HEAD = (b"POST /validate/stages HTTP/1.1\r\nHost: webhook\r\n"
        b"Content-Type: application/json\r\n")


def _trickle(webhook, prefix: bytes, data: bytes, every: float, stop: threading.Event,
             socks: list[socket.socket]) -> None:
    """Connect, send ``prefix``, then ``data`` one byte every ``every`` seconds until
    stopped or cut off. Each slow client connects on its own, at the same time as the
    others, as an attacker's would."""
    sock = webhook.tls()
    socks.append(sock)
    try:
        sock.sendall(prefix)
        for i in range(len(data)):
            if stop.is_set():
                return
            sock.sendall(data[i:i + 1])
            stop.wait(every)
    except OSError:
        return  # the server closed it


def _run_tricklers(webhook, attack: str, prefix: bytes, rest: bytes) -> None:
    socks: list[socket.socket] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_trickle, args=(webhook, prefix, rest, 0.25, stop, socks),
                                daemon=True) for _ in range(SLOW_CLIENTS)]
    try:
        for t in threads:
            t.start()
        with probing(webhook, attack):
            # Past the deadline: the trickling goes on while the server cuts it.
            time.sleep(REQUEST_TIMEOUT + 1.0)
        stop.set()
        for t in threads:
            t.join(5)
        assert len(socks) == SLOW_CLIENTS
        statuses: list[int | None] = []
        for sock in socks:
            try:
                statuses.append(read_response(sock)[0])
            except OSError:
                statuses.append(None)  # reset: the 408 was lost to the close, still cut
            assert closed_by_server(sock), f"{attack}: a connection outlived the deadline"
        # They are told why (a reset may swallow a few of the answers).
        assert 408 in statuses, statuses
        assert set(statuses) <= {408, None}, statuses
    finally:
        stop.set()
        for sock in socks:
            sock.close()


def test_trickling_headers_are_cut_at_the_deadline(webhook):
    _run_tricklers(webhook, "trickling headers", HEAD, b"X-Padding: " + b"a" * 200)


def test_trickling_body_is_cut_at_the_deadline(webhook):
    head = HEAD + b"Content-Length: %d\r\n\r\n" % len(NORMAL_REVIEW)
    _run_tricklers(webhook, "trickling body", head, NORMAL_REVIEW)


def test_half_finished_tls_handshakes_hold_no_thread(webhook):
    hello = client_hello()
    socks: list[socket.socket] = []
    try:
        with probing(webhook, "50 half TLS handshakes"):
            for i in range(50):
                sock = webhook.tcp()
                # Half of them stop inside the ClientHello record, half after a whole
                # ClientHello (the server answers it and waits for the client's Finished).
                sock.sendall(hello[:10] if i % 2 else hello)
                socks.append(sock)
            time.sleep(REQUEST_TIMEOUT + 0.5)
        assert all(closed_by_server(s) for s in socks)
    finally:
        for sock in socks:
            sock.close()


def test_silent_connections_are_closed_at_the_deadline(webhook):
    socks: list[socket.socket] = []
    try:
        with probing(webhook, "silent TCP connections"):
            socks = [webhook.tcp() for _ in range(SLOW_CLIENTS)]
            time.sleep(REQUEST_TIMEOUT + 0.5)
        assert all(closed_by_server(s) for s in socks)
    finally:
        for sock in socks:
            sock.close()
